"""``docs/validation.md``: the model against the published silicon figures, and its fit.

The only figures used are the ones issue 16 states: Metis at ISSCC 2024 (beta silicon with
the vendor's experimental compiler) ran ResNet-50 at 2502 FPS and 354 FPS/W, and at a lower
clock at 1430 FPS and 512 FPS/W; and the paper's peak throughput and D-IMC efficiency,
which the arch file takes as (C) inputs. No other number is a target.

The calibration moves only inferred (I) numbers of the arch file (`FIT_KEYS`), each within
its plausible range (``[ranges]``), never a (C) one. The lower clock is not stated: for
any set of arch numbers it is the clock at which the simulated ResNet-50 makes 1430 FPS, so
that figure fixes the clock and the three others are fitted: the relative errors of FPS and
FPS/W at 800 MHz and of FPS/W at the lower clock, plus a small pull of each number towards
the value the file had before the fit (the fit is under-determined: more numbers than
figures), minimised by a compass search over the ranges (`fit`).

Example: ``run_validation(Path("docs"))`` rewrites ``docs/validation.md`` from the current
arch file; ``fit=True`` first runs the calibration and records it in
``docs/validation.json``.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from aipusim.base.errors import ConfigError
from aipusim.calibrate import FIRST_STEP, FIT_KEYS, GRID, LAST_STEP, compass_search, solve_clock
from aipusim.studies.common import StudyResult, consistent_overrides, md_table, source_state

STUDY = "validation"
PAGE = "validation.md"
RECORD = "validation.json"
#: The model and config the published ResNet-50 figures are compared with (see `WHY_BATCH`).
MODEL = "resnet50"
#: Frames per instance: four starts of a 4-frame batch, three of them steady.
FRAMES = 16
SOURCE = "Metis ISSCC 2024 (beta silicon, the vendor's experimental compiler)"
WHY_BATCH = (
    "The published ResNet-50 figures are the chip's throughput, so they are compared with "
    "the configuration that gives ResNet-50 its highest throughput on the four cores: the "
    "zoo's built-in ResNet-50 config, one instance in `batch` mode over all four cores "
    "(four frames at once, every layer's weights fetched once per batch and multicast to "
    "the cores). ResNet-50's 25 MB of int8 weights do not fit a quarter of L2, so four "
    "single-core instances (`4 x Batch-1`) each stream all weights from DDR every frame, "
    "and `cooperative` and `pipeline` trade throughput for latency; the multicore study "
    "(`reports/multicore`) shows batch ahead of the other modes. The host link is "
    "included (FPS counts results back on the host), as on a card."
)


@dataclass(frozen=True)
class Published:
    """A published figure: what it is, its value, and how this page uses it."""

    key: str
    what: str
    value: float
    unit: str
    use: str  # "input" | "calibration" | "clock"

    @property
    def use_text(self) -> str:
        return {
            "input": "input: a (C) number of the arch file; matches by construction",
            "calibration": "used for calibration",
            "clock": "used for calibration: fixes the unstated lower clock",
        }[self.use]


PUBLISHED = (
    Published("peak_tops", "Peak int8 throughput, 4 cores at 800 MHz", 209.7, "TOPS", "input"),
    Published("dimc_tops_w", "D-IMC energy efficiency at 0.68 V", 15.0, "TOPS/W", "input"),
    Published("fps", "ResNet-50 throughput at 800 MHz", 2502.0, "FPS", "calibration"),
    Published("fps_w", "ResNet-50 efficiency at 800 MHz", 354.0, "FPS/W", "calibration"),
    Published("fps_low", "ResNet-50 throughput at a lower clock", 1430.0, "FPS", "clock"),
    Published("fps_w_low", "ResNet-50 efficiency at that clock", 512.0, "FPS/W", "calibration"),
)
BY_KEY = {p.key: p for p in PUBLISHED}
#: The published figures the fit minimises the relative error of.
TARGETS = ("fps", "fps_w", "fps_w_low")
#: Weight of the pull towards the pre-fit values (per number, in units of its range).
PRIOR_WEIGHT = 0.01
#: What `fit` minimises, in words (recorded with each fit).
OBJECTIVE = (
    "sum of the squared relative errors of ResNet-50's FPS and FPS/W at 800 MHz and of its "
    "FPS/W at the lower clock (the clock at which it makes 1430 FPS), plus "
    f"{PRIOR_WEIGHT:g} times the squared move of each fitted number from its pre-fit value "
    "in units of its range"
)
#: Compass search (`aipusim.calibrate.compass_search`): evaluations at most.
MAX_EVALS = 160
#: The supply the D-IMC efficiency is published at.
DIMC_VOLTAGE_V = 0.68


class Evaluator:
    """The model's figures for a set of arch numbers: ResNet-50's front end once, its back
    end and simulation per set."""

    def __init__(self, progress: bool = True) -> None:
        from aipusim.retarget import Retargeter

        self.front = Retargeter(MODEL)
        self.levels = list(self.front.config.profiling_levels)
        self.progress = progress
        self.evaluations = 0
        self._tmp = tempfile.TemporaryDirectory(prefix="aipusim-validation-")

    def arch(self, values: dict[str, Any]) -> Any:
        """The arch file with ``values`` (and the V-f points that must follow them)."""
        from aipusim.arch import load_arch

        return load_arch(overrides=consistent_overrides(load_arch(), values))

    def figures(self, values: dict[str, Any]) -> dict[str, float]:
        """Every compared figure with the arch numbers ``values`` (dotted key -> value)."""
        import aipusim

        arch = self.arch(values)
        self.evaluations += 1
        out = Path(self._tmp.name) / f"e{self.evaluations}"
        self.front.compile(arch, out)

        def run(freq: int) -> Any:
            return aipusim.simulate(out, FRAMES, levels=self.levels, arch=arch, frequency=freq)

        full = run(arch.clock.default_hz)
        low_hz, low = self.low_clock(run, arch, full.fps)
        return {
            "peak_tops": arch.peak_tops,
            "dimc_tops_w": dimc_tops_per_w(arch),
            "fps": full.fps,
            "fps_w": full.fps / full.avg_power_w,
            "fps_low": low.fps,
            "fps_w_low": low.fps / low.avg_power_w,
            "low_clock_mhz": low_hz / 1e6,
            "low_voltage_v": low.voltage_v,
            "avg_power_w": full.avg_power_w,
            "avg_power_w_low": low.avg_power_w,
            "energy_mj_per_frame": full.energy_mj_per_frame_total,
        }

    @staticmethod
    def low_clock(run: Callable[[int], Any], arch: Any, fps_full: float) -> tuple[int, Any]:
        """The clock (whole MHz) at which ResNet-50 makes the published lower-clock FPS,
        and that run: FPS follows the clock nearly in proportion, so a few corrections
        from the proportional guess land on it."""
        target = BY_KEY["fps_low"].value
        return solve_clock(run, arch, target, arch.clock.default_hz * target / fps_full)


def dimc_tops_per_w(arch: Any) -> float:
    """TOPS/W of the D-IMC's own MAC energy at `DIMC_VOLTAGE_V` (what the paper's figure
    measures): two operations per MAC over the energy the cost model charges it."""
    from aipusim.isa.cost import C, CostModel, dynamic_scale
    from aipusim.isa.tasks import Mvm, Unit
    from aipusim.isa.trace_schema import Component

    mvm = Mvm(unit=Unit.MVM, weight_set=0, in_addr=0, out_addr=0, vectors=1000, rows_used=512,
              cols_used=512)  # fmt: skip
    cost = CostModel(arch).task(mvm)
    pj = cost.energy_pj[C[Component.MVM]] * dynamic_scale(arch, DIMC_VOLTAGE_V)[C[Component.MVM]]
    return 2 * cost.macs / pj


def residuals(figures: dict[str, float]) -> dict[str, float]:
    """Relative error of each target, simulated against published."""
    return {k: figures[k] / BY_KEY[k].value - 1 for k in TARGETS}


def fit(
    evaluator: Evaluator,
    start: dict[str, Any],
    ranges: dict[str, tuple[float, float]],
    log: Callable[[str], None] = print,
    reason: str = "",
) -> dict[str, Any]:
    """Compass search over `FIT_KEYS` in units of their ranges: from ``start``, try each
    number one step up and down, keep a move that lowers the objective (squared relative
    errors of `TARGETS` plus `PRIOR_WEIGHT` times the squared moves from ``start``), halve
    the step when none does. Values are rounded to their `GRID` step (integers to whole
    numbers); every value stays in its range. The V-f supplies not fitted follow the fitted
    ones (`consistent_overrides`). The record also holds every (I) number after the fit
    (``"inferred"``, which `aipusim.arch.frozen` holds the arch file to), the measured
    figures fitted to, the objective, the commit and ``reason``."""
    from aipusim.arch import load_arch
    from aipusim.arch.frozen import inferred_values

    spans = {k: ranges[k][1] - ranges[k][0] for k in FIT_KEYS}
    seen: dict[tuple, tuple[float, dict[str, float]]] = {}

    def objective(values: dict[str, Any]) -> float:
        figs = evaluator.figures(values)
        err = residuals(figs)
        prior = sum(((values[k] - start[k]) / spans[k]) ** 2 for k in FIT_KEYS)
        obj = sum(e * e for e in err.values()) + PRIOR_WEIGHT * prior
        seen[tuple(values[k] for k in FIT_KEYS)] = (obj, figs)
        return obj

    started = time.perf_counter()
    best, best_obj, evaluations = compass_search(
        objective, start, {k: ranges[k] for k in FIT_KEYS}, GRID, log=log, max_evals=MAX_EVALS
    )
    first = seen[tuple(start[k] for k in FIT_KEYS)]
    best_figs = seen[tuple(best[k] for k in FIT_KEYS)][1]
    revision, dirty = source_state()
    return {
        "reason": reason,
        "commit": revision + (" (with uncommitted changes)" if dirty else ""),
        "data": [
            {"key": p.key, "what": p.what, "value": p.value, "unit": p.unit, "source": SOURCE}
            for p in PUBLISHED
            if p.use != "input"
        ],
        "objective": OBJECTIVE,
        "inferred": {**inferred_values(load_arch()), **_followers(best), **best},
        "keys": list(FIT_KEYS),
        "ranges": {k: list(ranges[k]) for k in FIT_KEYS},
        "start": {k: start[k] for k in FIT_KEYS},
        "fitted": {k: best[k] for k in FIT_KEYS},
        "followers": _followers(best),
        "objective_start": first[0],
        "objective_fitted": best_obj,
        "figures_start": first[1],
        "figures_fitted": best_figs,
        "residuals_start": residuals(first[1]),
        "residuals_fitted": residuals(best_figs),
        "evaluations": evaluations,
        "seconds": round(time.perf_counter() - started, 1),
        "prior_weight": PRIOR_WEIGHT,
        "method": f"compass search, steps {FIRST_STEP:g} to {LAST_STEP:g} of each range, "
        "values rounded to "
        + ", ".join(f"{g:g} for `{k}`" for k, g in GRID.items() if k in FIT_KEYS),
    }


def _followers(values: dict[str, Any]) -> dict[str, Any]:
    """The numbers not fitted that follow ``values`` (V-f points kept in order)."""
    from aipusim.arch import load_arch

    return {k: v for k, v in consistent_overrides(load_arch(), values).items() if k not in values}


def _num(value: float, unit: str) -> str:
    return f"{value:.2f}" if unit in ("TOPS", "TOPS/W") else f"{value:.1f}"


def table(figures: dict[str, float]) -> pd.DataFrame:
    """Published against simulated, with the error and the use of each figure."""
    rows = []
    for p in PUBLISHED:
        sim = figures[p.key]
        rows.append(
            {
                "figure": p.what,
                "published": f"{_num(p.value, p.unit)} {p.unit}",
                "simulated": f"{_num(sim, p.unit)} {p.unit}",
                "error": f"{100 * (sim / p.value - 1):+.1f} %",
                "use": p.use_text,
            }
        )
    return pd.DataFrame(rows)


def page(
    figures: dict[str, float],
    record: dict[str, Any] | None,
    current: dict[str, Any],
    uncertainty: dict[str, Any] | None = None,
) -> str:
    """The Markdown of ``docs/validation.md``; ``uncertainty`` is the uncertainty study's
    ``study.json`` if there is one (its bands and drivers get a section)."""
    revision, dirty = source_state()
    lines = [
        "# Validation against the published silicon",
        "",
        "Generated by `aipusim report validation -o docs` (`aipusim/studies/validation.py`) "
        f"at commit `{revision}`{' with uncommitted source changes' if dirty else ''}; "
        "`--fit` also re-runs the calibration. Do not edit by hand.",
        "",
        f"Every published figure the model can be compared with: the ones issue 16 states, "
        f"from {SOURCE}. No other number is a target of the model. The calibration moves "
        "only inferred (I) numbers of `arch/metis.toml`, each within its plausible range "
        "(`[ranges]` of the file); no published (C) number is changed.",
        "",
        "## Configuration compared",
        "",
        WHY_BATCH,
        "",
        f"The lower clock of the second ResNet-50 figure is not published. For the model it "
        f"is the clock at which the simulated ResNet-50 makes 1430 FPS: "
        f"{figures['low_clock_mhz']:.0f} MHz, at the arch file's supply for it "
        f"({figures['low_voltage_v']:.3f} V, the lowest V-f point reaching that clock). The "
        "compiled tasklists are the same at both clocks (the runtime sets the clock); "
        f"simulations of {FRAMES} frames per instance, the first batch left out as warm-up.",
        "",
        "## Published against simulated",
        "",
        md_table(table(figures)),
        "",
        f"Simulated average power: {figures['avg_power_w']:.3f} W at 800 MHz, "
        f"{figures['avg_power_w_low']:.3f} W at {figures['low_clock_mhz']:.0f} MHz "
        f"(published figures imply {BY_KEY['fps'].value / BY_KEY['fps_w'].value:.2f} W and "
        f"{BY_KEY['fps_low'].value / BY_KEY['fps_w_low'].value:.2f} W).",
        "",
    ]
    lines += _fit_section(record, current, figures)
    lines += uncertainty_section(uncertainty)
    lines += [
        "## Not compared",
        "",
        "- A sustained DDR bandwidth of 24 GB/s, given as a third-party measurement in an "
        "earlier arch file, is not a published figure of this chip and has no source: it is "
        "neither a target nor a check. The DDR bandwidth now follows from the LPDDR4x timing "
        "model (`isa/cost.py`, `ddr_burst_ns`).",
        "",
    ]
    return "\n".join(lines)


#: The uncertainty study's record, when the study has been run into the repository.
UNCERTAINTY_RECORD = Path(__file__).resolve().parents[2] / "reports" / "uncertainty" / "study.json"


def uncertainty_section(study: dict[str, Any] | None) -> list[str]:
    """How wide the bands from the inferred numbers are and which numbers would narrow them
    most, from the uncertainty study's ``study.json`` (nothing without one)."""
    if not study or not study.get("bands"):
        return []
    bands = pd.DataFrame(study["bands"]).dropna(subset=["width %"])
    ranked = pd.DataFrame(study.get("drivers", []))
    lines = [
        "## Uncertainty from the inferred numbers",
        "",
        f"From [the uncertainty study](../reports/uncertainty/README.md): {study['samples']} "
        "joint Latin-hypercube samples of every (I) number within its range, per model "
        "(p5-p95 width as a share of p50):",
        "",
    ]
    labels = {"fps": "FPS", "energy": "energy per frame", "power": "average power"}
    for name, label in labels.items():
        part = bands[bands["figure"] == name]
        if part.empty:
            continue
        widest = part.loc[part["width %"].idxmax()]
        line = (
            f"- {label}: {part['width %'].min():.0f}-{part['width %'].max():.0f} % "
            f"(widest `{widest['model']}`)"
        )
        if not ranked.empty:
            part = ranked[ranked["figure"] == name]
            mean = part.groupby("parameter")["S1"].mean()
            # Only indices above the noise floor (same samples, figure shuffled) rank.
            floor = float(part["noise"].mean()) if "noise" in part else 0.0
            top = mean[mean >= floor].sort_values(ascending=False).head(3)
            if not top.empty:
                line += "; measuring " + ", ".join(f"`{k}` (S1 {v:.2f})" for k, v in top.items())
                line += f" would narrow it most (noise floor {floor:.2f})"
        lines.append(line + ".")
    return [*lines, ""]


def _fit_section(
    record: dict[str, Any] | None, current: dict[str, Any], figures: dict[str, float]
) -> list[str]:
    if record is None:
        return ["## Calibration", "", "No fit recorded (run with `--fit`).", ""]
    stale = {k: v for k, v in record["fitted"].items() if current.get(k) != v}
    rows = pd.DataFrame(
        {
            "number": [f"`{k}`" for k in record["keys"]],
            "range": [f"{lo:g} - {hi:g}" for lo, hi in record["ranges"].values()],
            "before the fit": [f"{record['start'][k]:g}" for k in record["keys"]],
            "fitted": [f"{record['fitted'][k]:g}" for k in record["keys"]],
        }
    )
    res = pd.DataFrame(
        {
            "figure": [BY_KEY[k].what for k in TARGETS],
            "published": [f"{_num(BY_KEY[k].value, BY_KEY[k].unit)}" for k in TARGETS],
            "before the fit": [f"{_num(record['figures_start'][k], '')}" for k in TARGETS],
            "residual before": [f"{100 * record['residuals_start'][k]:+.1f} %" for k in TARGETS],
            "after the fit": [f"{_num(record['figures_fitted'][k], '')}" for k in TARGETS],
            "residual after": [f"{100 * record['residuals_fitted'][k]:+.1f} %" for k in TARGETS],
        }
    )
    lines = [
        "## Calibration",
        "",
        "Fitted: the relative errors of the three targets (the lower-clock FPS fixes the "
        f"clock), squared and summed, plus {record['prior_weight']:g} x the squared move of "
        "each number from its value before the fit in units of its range (more numbers than "
        f"figures: the pull keeps the moves small); {record['method']}; "
        f"{record['evaluations']} evaluations in {record['seconds']:.0f} s. The numbers "
        "moved are, of those that move ResNet-50's figures in the sensitivity study "
        "(`reports/sensitivity`), the four that can raise its FPS, the largest term of its "
        "power, and the supplies of the V-f points the two clocks run at.",
        "",
        md_table(rows),
        "",
        "Residuals (simulated / published - 1):",
        "",
        md_table(res),
        "",
        f"Objective: {record['objective_start']:.5f} before, "
        f"{record['objective_fitted']:.5f} after.",
        "",
    ]
    now = residuals(figures)
    moved = {k for k in TARGETS if abs(now[k] - record["residuals_fitted"][k]) >= 5e-4}
    if moved and not stale:
        # Same arch values, other figures: the compiler or simulator changed since the fit.
        lines += [
            "The model has changed since the fit (the compiler or the simulator; the arch "
            "file holds the fitted values): today's residuals are "
            + ", ".join(f"{100 * now[k]:+.1f} %" for k in TARGETS)
            + " (table above), against "
            + ", ".join(f"{100 * record['residuals_fitted'][k]:+.1f} %" for k in TARGETS)
            + " when it ran; `--fit` re-runs it.",
            "",
        ]
    if stale:
        lines += [
            "**The arch file no longer holds the fitted values** ("
            + ", ".join(f"`{k}`" for k in stale)
            + "): the table above shows the file's values; re-run with `--fit`.",
            "",
        ]
    return lines


def run_validation(
    out: Path,
    *,
    fit_first: bool = False,
    reason: str = "",
    progress: bool = True,
    command: str = "aipusim report validation",
    **_: Any,
) -> StudyResult:
    """Write ``out/validation.md`` (and with ``fit_first`` the calibration record
    ``out/validation.json``); other files in ``out`` are left alone."""
    from aipusim.arch import load_arch
    from aipusim.arch.loader import arch_value

    if out.exists() and not out.is_dir():
        raise ConfigError(f"-o must be a folder, not the file {str(out)!r}")
    out.mkdir(parents=True, exist_ok=True)
    arch = load_arch()
    ranges = {r.key: (r.low, r.high) for r in arch.ranges}
    missing = [k for k in FIT_KEYS if k not in ranges]
    if missing:
        raise ConfigError(f"the arch file must give a range to the fitted numbers {missing}")
    current = {k: arch_value(arch, k) for k in FIT_KEYS}
    evaluator = Evaluator(progress)
    record_path = out / RECORD
    record = json.loads(record_path.read_text()) if record_path.is_file() else None
    if fit_first:
        record = fit(evaluator, current, ranges, log=_printer(progress), reason=reason)
        record_path.write_text(json.dumps(record, indent=2) + "\n")
        values = record["fitted"]
    else:
        values = current
    figures = evaluator.figures(values)
    study = json.loads(UNCERTAINTY_RECORD.read_text()) if UNCERTAINTY_RECORD.exists() else None
    text = page(figures, record, current if not fit_first else record["fitted"], study)
    (out / PAGE).write_text(text + ("\n" if not text.endswith("\n") else ""))
    found = [
        f"{p.what}: published {_num(p.value, p.unit)} {p.unit}, simulated "
        f"{_num(figures[p.key], p.unit)} {p.unit} ({100 * (figures[p.key] / p.value - 1):+.1f} %)"
        for p in PUBLISHED
    ]
    files = [out / PAGE] + ([record_path] if record_path.is_file() else [])
    return StudyResult(STUDY, out, table(figures), found, files)


def _printer(progress: bool) -> Callable[[str], None]:
    import sys

    def log(line: str) -> None:
        if progress:
            print(line, file=sys.stderr, flush=True)

    return log


def arch_changes(record: dict[str, Any]) -> list[str]:
    """The fitted values as dotted ``key = value`` lines (to write into the arch file)."""
    return [f"{k} = {v}" for k, v in record["fitted"].items()]


__all__ = [
    "FIT_KEYS",
    "PUBLISHED",
    "Evaluator",
    "dimc_tops_per_w",
    "fit",
    "residuals",
    "run_validation",
]
