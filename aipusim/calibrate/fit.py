"""`aipusim calibrate`: fit the inferred (I) numbers of an arch file to measured runs.

For the user with a board: a few measured runs (a CSV, one row per run) move the (I)
numbers that the rows can identify, each within its range, and the report says how well
the result predicts runs it was not fitted to.

The CSV has a header and these columns (only ``model`` and one figure are required):

=============== ================================================================
``model``       a zoo name or an ONNX file (relative to the CSV's folder)
``conf``        a compiler config file (.json/.toml), as ``--conf``
``set``         config changes as ``key=value`` pairs separated by ``;``, as ``--set``
``clock_mhz``   the clock of the run; empty: not stated, then the clock is solved so
                that the simulated FPS equals the row's ``fps`` (which then fixes the
                clock and is not a residual)
``frames``      frames simulated per instance (default `FRAMES`)
``fps``         measured frames per second
``fps_per_w``   measured FPS per watt
``avg_power_w`` measured average power (W)
``latency_us``  measured unloaded latency (µs)
``source``      where the figures come from (free text)
=============== ================================================================

The fit (`calibrate`) minimises the squared relative errors of every measured figure of
the fitted rows plus `PRIOR_WEIGHT` times the squared move of each number from its prior
(the arch file's value), in units of its range, by a compass search (`compass_search`). A
number that moves no fitted figure by more than ``min_effect`` (default `MIN_EFFECT`)
across its whole range is reported as unidentifiable and left at its prior, never fitted.
Leave-one-out residuals (each row predicted by a fit to the others) are the honest error;
``holdout`` rows are never fitted to.

>>> rows = read_measurements(DEFAULT_MEASUREMENTS)
>>> [(r.model, r.clock_mhz, r.figures) for r in rows][:1]
[('resnet50', 800.0, {'fps': 2502.0, 'fps_per_w': 354.0})]
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
import tempfile
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

import aipusim
from aipusim.api.retarget import Retargeter
from aipusim.arch import load_arch
from aipusim.arch.loader import DEFAULT_ARCH_PATH, arch_value
from aipusim.base.errors import ConfigError
from aipusim.base.fileio import check_output
from aipusim.cli.options import build_config
from aipusim.compiler.config import load_config
from aipusim.run.progress import stderr_lines
from aipusim.sweep.evaluate import SIMULATOR_ONLY_ARCH_TABLES

#: The measurements `aipusim calibrate` uses by default: the two published ResNet-50 points.
DEFAULT_MEASUREMENTS = DEFAULT_ARCH_PATH.parent / "metis_measured.csv"
#: The figures a row may give (column -> what).
FIGURES = {
    "fps": "frames per second",
    "fps_per_w": "FPS per watt",
    "avg_power_w": "average power (W)",
    "latency_us": "unloaded latency (µs)",
}
COLUMNS = ("model", "conf", "set", "clock_mhz", "frames", *FIGURES, "source")
#: Frames simulated per instance unless a row says otherwise (several steady starts).
FRAMES = 16
#: The inferred numbers fitted by default (and by `aipusim.studies.validation`): of those
#: that move ResNet-50's figures in the sensitivity study (reports/sensitivity), the four
#: that can raise its FPS (the L1 port width, the NoC, the weight-load path, the DPU's
#: lanes), the largest term of its power (the clocked-idle power of a core), the chip's
#: clock distribution network (clock power the units' gates cannot stop), the supplies
#: of the two V-f points the published clocks run at (800 MHz, and the point that covers
#: the lower clock), and the numbers of activity-based clock gating (``[clock_gating]``,
#: issue 28) that decide how much of that clock power a run burns.
FIT_KEYS = (
    "l1.port_bytes_per_cycle",
    "noc.bw_bytes_per_cycle",
    "mvm.weight_load_bw_bytes_per_cycle",
    "dpu.lanes",
    "static_power.core_clocked_idle_w",
    "static_power.clock_network_w",
    "clock.vf_points[0].voltage_v",
    "clock.vf_points[1].voltage_v",
    "clock_gating.gating_latency_cycles",
    "clock_gating.always_on_fraction",
    "clock_gating.gated_residual_fraction",
    "clock_gating.mvm_idle_share",
    "clock_gating.wload_idle_share",
    "clock_gating.dpu_idle_share",
    "clock_gating.dwpu_idle_share",
    "clock_gating.dma0_idle_share",
    "clock_gating.dma1_idle_share",
)
#: The step each fitted number takes (a port or path is a whole number of 32-byte words;
#: lanes come in 16s; a supply is set in 5 mV steps; powers in 10 mW; shares and
#: fractions of the clock in hundredths; the gating latency in whole cycles).
GRID = {
    "l1.port_bytes_per_cycle": 32,
    "noc.bw_bytes_per_cycle": 8,
    "mvm.weight_load_bw_bytes_per_cycle": 32,
    "dpu.lanes": 16,
    "static_power.core_clocked_idle_w": 0.01,
    "static_power.clock_network_w": 0.01,
    "clock.vf_points[0].voltage_v": 0.005,
    "clock.vf_points[1].voltage_v": 0.005,
    **{k: 0.01 for k in FIT_KEYS if k.startswith("clock_gating.") and not k.endswith("cycles")},
}
#: Weight of the pull of each number towards its prior (per number, in units of its range).
PRIOR_WEIGHT = 0.01
#: What `calibrate` minimises, in words (recorded with each fit).
OBJECTIVE = (
    "sum over the fitted rows of the squared relative errors of every measured figure (a "
    "row whose clock is not stated has its clock solved from its FPS, which then is no "
    f"residual), plus {PRIOR_WEIGHT:g} times the squared move of each fitted number from its "
    "prior (the arch file's value) in units of its range"
)
#: Compass search: first step and last step (shares of each range), evaluations at most.
FIRST_STEP, LAST_STEP, MAX_EVALS = 0.25, 1 / 64, 160
#: A number is identifiable when moving it across its whole range moves some measured
#: figure of a fitted row by more than this share: a number whose effect is below a board
#: measurement's typical error (a few %) cannot be told from noise.
MIN_EFFECT = 0.02


@dataclass(frozen=True)
class Measurement:
    """One measured run (a CSV row)."""

    row: int  # 1-based data row of the CSV
    model: str
    conf: str | None
    sets: tuple[tuple[str, str], ...]
    clock_mhz: float | None
    frames: int
    figures: dict[str, float]
    source: str = ""

    @property
    def label(self) -> str:
        clock = f"{self.clock_mhz:g} MHz" if self.clock_mhz else "clock solved"
        sets = "".join(f" {k}={v}" for k, v in self.sets)
        return f"row {self.row}: {Path(self.model).name}{sets} @ {clock}"

    def run_key(self) -> tuple[str, str | None, tuple[tuple[str, str], ...]]:
        """Rows with the same key share a compile (they differ in clock or frames only)."""
        return (self.model, self.conf, self.sets)


def read_measurements(path: str | Path) -> list[Measurement]:
    """The rows of a measurement CSV, checked (see the module doc for the columns)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"measurements {str(path)!r} must be a readable CSV file, not: {exc}"
        ) from None
    reader = csv.DictReader(text.splitlines())
    header = reader.fieldnames or []
    unknown = [c for c in header if c not in COLUMNS]
    if unknown or "model" not in header:
        raise ConfigError(
            f"{path.name}: the columns must be among {', '.join(COLUMNS)} (with model), not "
            f"{', '.join(header) or 'none'}"
        )
    rows = []
    for i, raw in enumerate(reader, start=1):
        where = f"{path.name} row {i}"
        cell = {k: (v or "").strip() for k, v in raw.items() if k is not None}
        if not cell.get("model"):
            raise ConfigError(f"{where}: model must name a zoo model or an ONNX file, not empty")
        model = cell["model"]
        if model.endswith(".onnx") and not Path(model).is_absolute():
            model = str(path.parent / model)
        figures = {k: _number(cell.get(k, ""), f"{where}: {k}") for k in FIGURES}
        figures = {k: v for k, v in figures.items() if v is not None}
        if not figures:
            raise ConfigError(f"{where}: must give at least one of {', '.join(FIGURES)}, not none")
        clock = _number(cell.get("clock_mhz", ""), f"{where}: clock_mhz")
        if clock is None and "fps" not in figures:
            raise ConfigError(f"{where}: clock_mhz may be empty only when fps is given (it is "
                              "solved from fps), not without fps")  # fmt: skip
        frames = _number(cell.get("frames", ""), f"{where}: frames")
        if frames is not None and (frames != int(frames) or frames < 2):
            raise ConfigError(f"{where}: frames must be an integer >= 2, not {frames:g}")
        rows.append(
            Measurement(
                row=i,
                model=model,
                conf=cell.get("conf") or None,
                sets=_sets(cell.get("set", ""), where),
                clock_mhz=clock,
                frames=int(frames) if frames is not None else FRAMES,
                figures=figures,
                source=cell.get("source", ""),
            )
        )
    if not rows:
        raise ConfigError(f"{path.name} must hold at least one measured run, not none")
    return rows


def _number(text: str, what: str) -> float | None:
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{what} must be a positive number, not {text!r}")
    return value


def _sets(text: str, where: str) -> tuple[tuple[str, str], ...]:
    out = []
    for item in filter(None, (p.strip() for p in text.split(";"))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                f"{where}: set must be key=value pairs separated by ';', not {item!r}"
            )
        out.append((key.strip(), value.strip()))
    return tuple(out)


def compiler_reads(key: str) -> bool:
    """Whether the back end reads the arch number ``key``: not the tables only the simulator
    reads (energy, static power, clock gating) nor a supply voltage (the compiler plans in
    cycles at the clock, never at its voltage).

    >>> compiler_reads("l1.port_bytes_per_cycle"), compiler_reads("clock.vf_points[1].voltage_v")
    (True, False)
    """
    return key.split(".")[0] not in SIMULATOR_ONLY_ARCH_TABLES and not key.endswith("voltage_v")


class Predictor:
    """The simulated figures of every row for a set of (I) numbers: each run's front end
    once, its back end per set of numbers, a simulation per row (memoised by the numbers)."""

    def __init__(self, rows: Sequence[Measurement], arch_path: str | Path | None = None) -> None:
        self.rows = list(rows)
        self.arch_path = arch_path
        self.base = load_arch(arch_path)
        self._fronts: dict[Any, Any] = {}
        self._seen: dict[tuple, dict[int, dict[str, float]]] = {}
        self._compiled: dict[tuple, Path] = {}
        self._tmp = tempfile.TemporaryDirectory(prefix="aipusim-calibrate-")
        self.evaluations = 0

    def _front(self, m: Measurement) -> Any:
        key = m.run_key()
        if key not in self._fronts:
            # lazy: loads pandas, yaml, not otherwise loaded here
            from aipusim.compiler.modelcard import builtin_configs
            from aipusim.run.job import resolve_model

            source = resolve_model(m.model, None)
            builtin = builtin_configs().get(source.name) if source.path is None else None
            base = load_config(builtin) if builtin is not None else None
            conf = Path(m.conf) if m.conf else None
            config = build_config(conf, tuple(f"{k}={v}" for k, v in m.sets), base)
            self._fronts[key] = Retargeter(m.model, config, arch=self.base)
        return self._fronts[key]

    def predict(self, values: Mapping[str, Any]) -> dict[int, dict[str, float]]:
        """Row number -> simulated figure -> value, with the (I) numbers ``values``."""
        key = tuple(sorted(values.items()))
        if key in self._seen:
            return self._seen[key]
        arch = load_arch(self.arch_path, overrides=dict(values))
        self.evaluations += 1
        out: dict[int, dict[str, float]] = {}
        # numbers only the simulator reads leave the program as it is: the back end runs
        # again only when a number it reads moves
        program = tuple((k, v) for k, v in key if compiler_reads(k))
        for m in self.rows:
            where = (program, m.run_key())
            if where not in self._compiled:
                folder = Path(self._tmp.name) / f"e{self.evaluations}-{len(self._compiled)}"
                self._front(m).compile(arch, folder)
                self._compiled[where] = folder
            folder = self._compiled[where]

            def run(freq: int, folder: Path = folder, m: Measurement = m) -> Any:
                levels = list(self._front(m).config.profiling_levels)
                return aipusim.simulate(folder, m.frames, levels=levels, arch=arch, frequency=freq)

            if m.clock_mhz is not None:
                freq = round(m.clock_mhz * 1e6)
                res = run(freq)
            else:
                freq, res = solve_clock(run, arch, m.figures["fps"])
            out[m.row] = {
                "fps": res.fps,
                "fps_per_w": res.fps / res.avg_power_w,
                "avg_power_w": res.avg_power_w,
                "latency_us": res.latency_us_unloaded,
                "clock_mhz": freq / 1e6,
            }
        self._seen[key] = out
        return out


def solve_clock(
    run: Callable[[int], Any], arch: Any, fps: float, guess_hz: float | None = None
) -> tuple[int, Any]:
    """The clock (whole MHz) at which ``run`` makes ``fps``, and that run: FPS follows the
    clock nearly in proportion, so a few corrections from the guess (default: the arch's
    default clock) land on it."""
    lo, hi = arch.clock.min_hz, arch.clock.max_hz
    freq = int(min(hi, max(lo, guess_hz if guess_hz is not None else arch.clock.default_hz)))
    best: tuple[float, int, Any] | None = None
    for _ in range(6):
        freq = round(freq / 1e6) * 1_000_000
        res = run(freq)
        miss = abs(res.fps / fps - 1)
        if best is None or miss < best[0]:
            best = (miss, freq, res)
        if miss < 1e-3:
            break
        freq = int(min(hi, max(lo, freq * fps / res.fps)))
    assert best is not None
    return best[1], best[2]


def residuals(m: Measurement, predicted: Mapping[str, float]) -> dict[str, float]:
    """Relative error of each measured figure of ``m`` (simulated / measured - 1); a row
    whose clock is solved from its FPS has no FPS residual."""
    return {
        k: predicted[k] / v - 1
        for k, v in m.figures.items()
        if not (k == "fps" and m.clock_mhz is None)
    }


def compass_search(
    objective: Callable[[dict[str, Any]], float],
    start: Mapping[str, Any],
    ranges: Mapping[str, tuple[float, float]],
    grid: Mapping[str, float] | None = None,
    log: Callable[[str], None] = lambda _: None,
    max_evals: int = MAX_EVALS,
    last_step: float = LAST_STEP,
) -> tuple[dict[str, Any], float, int]:
    """Minimise ``objective`` over the numbers of ``ranges`` (the others stay at ``start``),
    in units of their ranges: try each number one step up and down, keep a move that lowers
    the objective, halve the step when none does. Values are rounded to their ``grid`` step
    (integers to whole numbers) and stay in their ranges; the search ends when the step
    falls below ``last_step`` or after ``max_evals`` evaluations. Returns (best values, its
    objective, evaluations).

    >>> best, obj, _ = compass_search(lambda v: (v["x"] - 0.3) ** 2, {"x": 1.0}, {"x": (0, 1)})
    >>> round(best["x"], 2), obj < 1e-3
    (0.3, True)
    """
    grid = grid or {}
    keys = list(ranges)

    def to_unit(key: str, value: float) -> float:
        lo, hi = ranges[key]
        return (value - lo) / (hi - lo)

    def from_unit(key: str, u: float) -> Any:
        lo, hi = ranges[key]
        value = lo + min(1.0, max(0.0, u)) * (hi - lo)
        step = grid.get(key, 1 if isinstance(start[key], int) else 0)
        if step:
            value = min(hi, max(lo, round(value / step) * step))
        return round(value) if isinstance(start[key], int) else round(value, 6)

    seen: dict[tuple, float] = {}

    def value_of(values: dict[str, Any]) -> float:
        key = tuple(values[k] for k in keys)
        if key not in seen:
            seen[key] = objective(values)
        return seen[key]

    best = dict(start)
    best_obj = value_of(best)
    step = FIRST_STEP
    while step >= last_step and len(seen) < max_evals:
        moved = False
        for key in keys:
            for sign in (1, -1):
                trial = dict(best)
                trial[key] = from_unit(key, to_unit(key, best[key]) + sign * step)
                if trial[key] == best[key]:
                    continue
                obj = value_of(trial)
                if obj < best_obj - 1e-12:
                    best, best_obj, moved = trial, obj, True
                    log(f"fit: {key} = {trial[key]} -> objective {obj:.5f}")
                    break
        if not moved:
            step /= 2
    return best, best_obj, len(seen)


@dataclass
class Calibration:
    """What `calibrate` found: the fitted numbers and the residuals that judge them."""

    measurements: str
    keys: list[str]
    ranges: dict[str, tuple[float, float]]
    prior: dict[str, Any]
    fitted: dict[str, Any]
    identifiable: dict[str, float]  # key -> largest relative move of a fitted row's figure
    unidentifiable: list[str]
    fitted_rows: list[int]
    holdout_rows: list[int]
    labels: dict[int, str]
    models: dict[int, str]
    solved_clock_rows: list[int]  # rows whose clock is solved from their FPS
    measured: dict[int, dict[str, float]]
    predicted_prior: dict[int, dict[str, float]]
    predicted_fitted: dict[int, dict[str, float]]
    in_sample: dict[int, dict[str, float]]
    leave_one_out: dict[int, dict[str, float]]
    holdout: dict[int, dict[str, float]]
    objective_prior: float
    objective_fitted: float
    evaluations: int
    seconds: float
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def calibrate(
    measurements: str | Path,
    *,
    arch_path: str | Path | None = None,
    keys: Sequence[str] | None = None,
    holdout: Sequence[int] = (),
    leave_one_out: bool = True,
    grid: Mapping[str, float] | None = None,
    min_effect: float = MIN_EFFECT,
    progress: bool = True,
    last_step: float = LAST_STEP,
) -> Calibration:
    """Fit the (I) numbers ``keys`` (default: the ones `aipusim.studies.validation` fits) of
    the arch file ``arch_path`` to the rows of ``measurements`` except ``holdout`` (1-based
    data rows), and judge the fit (module doc). ``last_step``: the compass search's finest
    step (share of each range; coarser is fewer evaluations)."""
    started = time.perf_counter()
    log = stderr_lines(progress)
    rows = read_measurements(measurements)
    by_row = {m.row: m for m in rows}
    bad = [r for r in holdout if r not in by_row]
    if bad:
        raise ConfigError(f"--holdout must name data rows 1-{len(rows)}, not {bad}")
    fitted_rows = [m.row for m in rows if m.row not in set(holdout)]
    if not fitted_rows:
        raise ConfigError("--holdout must leave at least one row to fit, not every row")
    base = load_arch(arch_path)
    known = {r.key: (r.low, r.high) for r in base.ranges if r.low < r.high}
    keys = list(keys) if keys is not None else list(FIT_KEYS)
    missing = [k for k in keys if k not in known]
    if missing:
        raise ConfigError(
            f"--keys must name (I) numbers with a range of the arch file, not {', '.join(missing)}"
        )
    grid = dict(GRID) if grid is None else dict(grid)
    prior = {k: arch_value(base, k) for k in keys}
    predictor = Predictor(rows, arch_path)

    def objective_on(fit_on: Sequence[int]) -> Callable[[dict[str, Any]], float]:
        def objective(values: dict[str, Any]) -> float:
            predicted = predictor.predict(with_followers(base, values))
            err = sum(e * e for r in fit_on for e in residuals(by_row[r], predicted[r]).values())
            pull = sum(((values[k] - prior[k]) / (known[k][1] - known[k][0])) ** 2 for k in keys)
            return err + PRIOR_WEIGHT * pull

        return objective

    log(f"calibrate: {len(rows)} row(s), {len(fitted_rows)} fitted; checking {len(keys)} numbers")
    at_prior = predictor.predict(with_followers(base, prior))
    compared = [(r, k) for r in fitted_rows for k in residuals(by_row[r], at_prior[r])]
    moves: dict[str, float] = {}
    for key in keys:
        low, high = (
            predictor.predict(with_followers(base, {**prior, key: _end(prior[key], end)}))
            for end in known[key]
        )
        moves[key] = max(
            (abs(high[r][k] - low[r][k]) / by_row[r].figures[k] for r, k in compared),
            default=0.0,
        )
        log(f"calibrate: {key} moves the fitted figures by up to {moves[key] * 100:.2f} %")
    free = [k for k in keys if moves[k] > min_effect]
    fixed = [k for k in keys if k not in free]

    def fit_on(rows_used: Sequence[int]) -> tuple[dict[str, Any], float]:
        if not free:
            return dict(prior), objective_on(rows_used)(dict(prior))
        best, obj, _ = compass_search(
            objective_on(rows_used),
            prior,
            {k: known[k] for k in free},
            grid,
            log=log,
            last_step=last_step,
        )
        return best, obj

    fitted, obj_fitted = fit_on(fitted_rows)
    predicted = predictor.predict(with_followers(base, fitted))
    loo: dict[int, dict[str, float]] = {}
    if leave_one_out and len(fitted_rows) > 1:
        for r in fitted_rows:
            log(f"calibrate: leave-one-out, row {r} predicted by a fit to the others")
            others, _ = fit_on([x for x in fitted_rows if x != r])
            loo[r] = residuals(by_row[r], predictor.predict(with_followers(base, others))[r])
    notes = []
    if len(fitted_rows) < 2:
        notes.append("one fitted row: no leave-one-out residuals")
    return Calibration(
        measurements=str(measurements),
        keys=keys,
        ranges={k: known[k] for k in keys},
        prior=prior,
        fitted=fitted,
        identifiable={k: moves[k] for k in free},
        unidentifiable=fixed,
        fitted_rows=fitted_rows,
        holdout_rows=list(holdout),
        labels={m.row: m.label for m in rows},
        models={m.row: m.model for m in rows},
        solved_clock_rows=[m.row for m in rows if m.clock_mhz is None],
        measured={m.row: dict(m.figures) for m in rows},
        predicted_prior=at_prior,
        predicted_fitted=predicted,
        in_sample={r: residuals(by_row[r], predicted[r]) for r in fitted_rows},
        leave_one_out=loo,
        holdout={r: residuals(by_row[r], predicted[r]) for r in holdout},
        objective_prior=objective_on(fitted_rows)(dict(prior)),
        objective_fitted=obj_fitted,
        evaluations=predictor.evaluations,
        seconds=round(time.perf_counter() - started, 1),
        notes=notes,
    )


def _end(current: Any, value: float) -> Any:
    return int(value) if isinstance(current, int) else float(value)


def with_followers(base: Any, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` plus the V-f supplies that must follow them (no more voltage for a lower
    clock)."""
    # lazy: aipusim.studies.common loads pandas, not otherwise loaded here
    from aipusim.studies.common import consistent_overrides

    return consistent_overrides(base, values)


def write_outputs(
    result: Calibration, out: Path, arch_path: str | Path | None = None
) -> list[Path]:
    """``out/arch.toml`` (the arch file with the fitted numbers), ``out/report.md`` and
    ``out/calibration.json``; returns the paths."""
    check_output(out, folder=True)
    out.mkdir(parents=True, exist_ok=True)
    arch_file = out / "arch.toml"
    arch_file.write_text(fitted_arch_text(result, arch_path))
    (out / "calibration.json").write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    (out / "report.md").write_text(report_text(result))
    return [out / "report.md", arch_file, out / "calibration.json"]


def fitted_arch_text(result: Calibration, arch_path: str | Path | None = None) -> str:
    """The arch file with the fitted numbers set (and the supplies that follow them), as
    TOML; the header says where the numbers come from."""
    source = Path(arch_path) if arch_path is not None else DEFAULT_ARCH_PATH
    raw = tomllib.loads(source.read_text(encoding="utf-8"))

    changed = with_followers(load_arch(arch_path), result.fitted)
    for key, value in changed.items():
        _set_dotted(raw, key, value)
    digest = hashlib.sha256(Path(result.measurements).read_bytes()).hexdigest()[:16]
    header = (
        f"# {source.name} with the (I) numbers fitted by `aipusim calibrate` to "
        f"{Path(result.measurements).name} (sha256 {digest}...): "
        + ", ".join(f"{k} = {v}" for k, v in changed.items())
        + ".\n# See report.md beside this file for the residuals.\n"
    )
    return header + tomli_w.dumps(raw)


def _set_dotted(raw: dict[str, Any], dotted: str, value: Any) -> None:
    node: Any = raw
    parts = dotted.split(".")
    for part in parts[:-1]:
        name, index = re.fullmatch(r"(\w+)(?:\[(\d+)\])?", part).groups()  # type: ignore[union-attr]
        node = node[name] if index is None else node[name][int(index)]
    node[parts[-1]] = value


def report_text(result: Calibration, level: int = 1) -> str:
    """The calibration report: fitted numbers, identifiability, residuals; its title is a
    heading of ``level`` (the validation page embeds it one level down)."""
    h = "#" * level

    def pct(v: float) -> str:
        return f"{v * 100:+.1f} %"

    lines = [
        f"{h} Calibration of the inferred hardware numbers",
        "",
        f"Measurements: `{result.measurements}`; fitted rows {result.fitted_rows}"
        + (f", held out {result.holdout_rows}" if result.holdout_rows else "")
        + f". {result.evaluations} evaluations in {result.seconds:g} s. Objective (squared "
        f"relative errors plus {PRIOR_WEIGHT:g} x squared moves in units of the ranges) "
        f"{result.objective_prior:.5f} at the prior, {result.objective_fitted:.5f} fitted.",
        "",
        f"{h}# Numbers",
        "",
        "| number | range | prior | fitted | largest move of a fitted figure across the range |",
        "|:--|:--|--:|--:|--:|",
    ]
    for k in result.keys:
        lo, hi = result.ranges[k]
        move = result.identifiable.get(k)
        state = f"{move * 100:.2f} %" if move is not None else "unidentifiable (kept at prior)"
        lines.append(f"| `{k}` | {lo:g} - {hi:g} | {result.prior[k]:g} | "
                     f"{result.fitted[k]:g} | {state} |")  # fmt: skip
    lines += [
        "",
        f"{h}# Residuals (simulated / measured - 1)",
        "",
        "| row | figure | measured | prior | fitted | in-sample | leave-one-out | held out |",
        "|:--|:--|--:|--:|--:|--:|--:|--:|",
    ]
    for row, label in result.labels.items():
        for k, v in result.measured[row].items():
            cells = [
                "-" if x is None else pct(x)
                for x in (
                    result.in_sample.get(row, {}).get(k),
                    result.leave_one_out.get(row, {}).get(k),
                    result.holdout.get(row, {}).get(k),
                )
            ]
            if cells[0] == cells[2] == "-":
                cells[0] = "fixes the clock"  # a solved clock's FPS is matched by construction
            lines.append(
                f"| {label} | {k} | {v:g} | {result.predicted_prior[row][k]:.4g} | "
                f"{result.predicted_fitted[row][k]:.4g} | " + " | ".join(cells) + " |"
            )
    lines += ["", *[f"- {n}" for n in result.notes]] if result.notes else []
    return "\n".join(lines) + "\n"


def check_keys(text: str | None) -> list[str] | None:
    """``--keys a,b`` as a list (None: the default set)."""
    if text is None:
        return None
    keys = [k.strip() for k in text.split(",") if k.strip()]
    if not keys:
        raise ConfigError("--keys must name at least one (I) number, not none")
    return keys


__all__ = [
    "DEFAULT_MEASUREMENTS",
    "Calibration",
    "Measurement",
    "Predictor",
    "calibrate",
    "compass_search",
    "read_measurements",
    "residuals",
    "solve_clock",
    "with_followers",
    "write_outputs",
]
