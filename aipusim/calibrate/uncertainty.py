"""Bands on a result: how far FPS, energy per frame and average power move over the inferred
(I) hardware numbers, sampled jointly within their ranges.

Every (I) number of the arch file has a plausible range (``[ranges]`` of
``arch/metis.toml``). A point estimate such as "2588.4 FPS" holds only at the file's values;
`bands` draws ``n`` joint samples of all of them (a Latin hypercube, `scipy.stats.qmc`:
every range is cut into ``n`` strata and each stratum is used once, so a few dozen samples
cover every number's range), recompiles the model's back end for each sample (tiling,
mapping, the memory plan and the schedule plan with the cost model of the arch they are
given) and simulates it. The band is the 5th to 95th percentile of the samples that compiled.

A sample that does not compile is a finding, not noise: it is kept with its numbers and the
error (``failed``), and the band says how many samples it rests on.

>>> import aipusim, tempfile, pathlib
>>> out = pathlib.Path(tempfile.mkdtemp()) / "t"
>>> _ = aipusim.compile("tiny_cnn", output_dir=out)
>>> b = bands(out, 4, frames=2, progress=False)
>>> b.samples, b.fps.p5 <= b.fps.p50 <= b.fps.p95
(4, True)
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aipusim.api.overrides import check_overrides
from aipusim.api.retarget import Retargeter
from aipusim.arch import load_arch
from aipusim.arch.loader import arch_value
from aipusim.base.errors import AipuSimError, ConfigError

#: The percentiles of a band.
LOW_PERCENTILE, HIGH_PERCENTILE = 5, 95
#: At most this many samples (each recompiles the back end and simulates).
MAX_SAMPLES = 4096


@dataclass(frozen=True)
class Band:
    """The 5th, 50th and 95th percentile of one figure over the samples."""

    p5: float
    p50: float
    p95: float

    @classmethod
    def of(cls, values: list[float]) -> Band:
        lo, mid, hi = np.percentile(values, [LOW_PERCENTILE, 50, HIGH_PERCENTILE])
        return cls(float(lo), float(mid), float(hi))

    def pair(self) -> list[float]:
        """``[p5, p95]``, as the ``*_band`` keys of ``--json`` give it."""
        return [self.p5, self.p95]


@dataclass(frozen=True)
class Bands:
    """FPS, energy per frame (mJ) and average power (W) over ``samples`` joint samples."""

    samples: int
    fps: Band
    energy_mj_per_frame: Band
    avg_power_w: Band
    #: Samples that did not compile or run: their overrides and the error.
    failed: list[dict[str, Any]] = field(default_factory=list)
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The keys `simulate --uncertainty --json` adds."""
        return {
            "fps_band": self.fps.pair(),
            "energy_mj_per_frame_band": self.energy_mj_per_frame.pair(),
            "avg_power_w_band": self.avg_power_w.pair(),
            "uncertainty": {
                "samples": self.samples,
                "failed": self.failed,
                "seed": self.seed,
                "percentiles": [LOW_PERCENTILE, HIGH_PERCENTILE],
                "design": "Latin hypercube over every (I) number with a range",
            },
        }

    def failure_line(self) -> str:
        """What the samples that did not compile or run say (``--json`` lists them)."""
        return (
            f"  {len(self.failed)} sample(s) of the inferred hardware numbers did not compile "
            f"or run (--json 'uncertainty.failed' lists them); the first: "
            f"{self.failed[0]['error']}"
        )


def check_samples(n: int, flag: str = "--uncertainty") -> None:
    """``n`` must be a sample count `bands` takes."""
    if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= MAX_SAMPLES:
        raise ConfigError(f"{flag} must be an integer 2-{MAX_SAMPLES} (samples), not {n!r}")


def sample_overrides(arch: Any, n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` joint samples of every (I) number of ``arch`` with a range wider than one value,
    as dotted overrides (integers stay integers; V-f supplies kept in order).

    >>> from aipusim.arch import load_arch
    >>> s = sample_overrides(load_arch(), 3)
    >>> len(s), isinstance(s[0]["dpu.lanes"], int)
    (3, True)
    """
    # lazy: loads scipy, not otherwise loaded here
    from scipy.stats import qmc

    check_samples(n, "samples")
    moved = [r for r in arch.ranges if r.low < r.high]
    units = qmc.LatinHypercube(d=len(moved), seed=seed).random(n)
    samples = []
    for row in units:
        values: dict[str, Any] = {}
        for r, u in zip(moved, row, strict=True):
            value = r.low + float(u) * (r.high - r.low)
            values[r.key] = round(value) if isinstance(arch_value(arch, r.key), int) else value
        samples.append(_monotone_supplies(arch, values))
    return samples


def _monotone_supplies(arch: Any, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with each V-f point's supply capped at the next faster point's: a lower
    clock never needs more voltage (the arch file refuses a table that does). Each cap stays
    in the capped point's range, as the ranges of slower points start lower."""
    points = arch.clock.vf_points
    fastest_first = sorted(range(len(points)), key=lambda i: -points[i].max_hz)
    out = dict(values)
    for fast, slow in itertools.pairwise(fastest_first):
        fast_key, slow_key = (f"clock.vf_points[{i}].voltage_v" for i in (fast, slow))
        fast_v = out.get(fast_key, points[fast].voltage_v)
        slow_v = out.get(slow_key, points[slow].voltage_v)
        if slow_v > fast_v:
            out[slow_key] = fast_v
    return out


def run_samples(
    front: Any,
    samples: list[dict[str, Any]],
    *,
    frames: int = 8,
    arch_path: str | os.PathLike[str] | None = None,
    levels: list[str] | None = None,
    on_sample: Callable[[int], None] | None = None,
    **overrides: Any,
) -> list[dict[str, Any]]:
    """Compile the back end of ``front`` (a `aipusim.api.retarget.Retargeter`: the front end ran
    once) at each of ``samples`` (dotted overrides of the arch file ``arch_path``) and
    simulate it. One row per sample: ``overrides``, ``fps``, ``energy`` (mJ per frame),
    ``power`` (W) and ``error`` (empty if it compiled and ran; else the figures are NaN).
    ``on_sample(i)`` is called after sample ``i``."""
    # lazy: aipusim.simulator loads simpy, not otherwise loaded here
    from aipusim.simulator import simulate

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="aipusim-uncertainty-") as tmp:
        for i, sample in enumerate(samples):
            row: dict[str, Any] = {"overrides": sample, "error": ""}
            try:
                moved = load_arch(arch_path, overrides=sample)
                out = Path(tmp) / f"s{i}"
                front.compile(moved, out)
                compiled_dir = out / "compiled_model"
                knobs = check_overrides(overrides, compiled_dir)
                res = simulate(
                    compiled_dir, arch=moved, frames=frames, levels=levels or [], overrides=knobs
                )
                row.update(fps=res.fps, energy=res.energy_mj_per_frame_total, power=res.avg_power_w)
            except AipuSimError as exc:
                row.update(fps=np.nan, energy=np.nan, power=np.nan)
                row["error"] = f"{type(exc).__name__}: {exc}"
            rows.append(row)
            if on_sample is not None:
                on_sample(i)
    return rows


def bands(
    compiled: str | os.PathLike[str],
    n: int,
    *,
    frames: int = 8,
    arch_path: str | os.PathLike[str] | None = None,
    seed: int = 0,
    progress: bool = True,
    on_sample: Callable[[int], None] | None = None,
    **overrides: Any,
) -> Bands:
    """Recompile and simulate the compile folder ``compiled`` (an output folder of
    `aipusim compile`, or its ``compiled_model/``) at ``n`` joint samples of the (I) numbers
    of the arch file ``arch_path`` (default: the bundled one). ``overrides`` are the runtime knobs
    `aipusim.simulate` takes (frequency, voltage, ...). ``on_sample(1)`` is called after
    each sample (a progress bar's step; else ``progress`` prints a line per sample)."""
    check_samples(n)
    base = load_arch(arch_path)
    front = Retargeter.from_compiled(compiled, arch=base)
    started = time.perf_counter()

    def step(i: int) -> None:
        if on_sample is not None:
            on_sample(1)
        elif progress:
            print(
                f"uncertainty: {i + 1}/{n} samples ({time.perf_counter() - started:.0f} s)",
                file=sys.stderr,
                flush=True,
            )

    done = run_samples(
        front,
        sample_overrides(base, n, seed),
        frames=frames,
        arch_path=arch_path,
        on_sample=step,
        **overrides,
    )
    rows = [(r["fps"], r["energy"], r["power"]) for r in done if not r["error"]]
    failed = [{"overrides": r["overrides"], "error": r["error"]} for r in done if r["error"]]
    if len(rows) < 2:
        first = failed[0]["error"] if failed else "none ran"
        raise ConfigError(
            f"--uncertainty needs at least 2 samples that compile, not {len(rows)} of {n} "
            f"(first failure: {first})"
        )
    fps, energy, power = (list(c) for c in zip(*rows, strict=True))
    return Bands(len(rows), Band.of(fps), Band.of(energy), Band.of(power), failed, seed)


__all__ = ["Band", "Bands", "bands", "check_samples", "run_samples", "sample_overrides"]
