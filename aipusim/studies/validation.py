"""``docs/validation.md``: `aipusim calibrate`'s report on the published silicon figures.

The only measured figures are the ones the arch file's calibration data states
(``arch/metis_measured.csv``, `aipusim.calibrate.fit.DEFAULT_MEASUREMENTS`): Metis at ISSCC 2024
(beta silicon with the vendor's experimental compiler) ran ResNet-50 at 2502 FPS and
354 FPS/W at 800 MHz, and at an unstated lower clock at 1430 FPS and 512 FPS/W; the paper's
peak throughput and D-IMC efficiency are (C) inputs of the arch file. No other number is a
target.

The page is the calibration `aipusim calibrate` runs on that file (the same function,
`aipusim.calibrate.fit.calibrate`): the figures at the arch file's (I) numbers, which numbers
the two points can identify, the fit they would give today, and its in-sample and
leave-one-out residuals. The arch file's (I) numbers are frozen (`aipusim.arch.frozen`):
they change only through a fit recorded in ``validation.json`` (``--fit --reason``), so
when the compiler improves the page shows the residuals move instead of the hardware
numbers absorbing the change.

Example: ``run_validation(Path("docs"))`` rewrites ``docs/validation.md``; ``fit=True``
also records the fit in ``docs/validation.json`` (and says which arch lines to set).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from aipusim.arch import load_arch
from aipusim.arch.frozen import inferred_values
from aipusim.base.errors import ConfigError
from aipusim.calibrate.fit import (
    DEFAULT_MEASUREMENTS,
    FIGURES,
    FIT_KEYS,
    OBJECTIVE,
    Calibration,
    calibrate,
    report_text,
    with_followers,
)
from aipusim.isa.cost import C, CostModel, dynamic_scale, mvm_clock_pj_per_mac
from aipusim.isa.tasks import Mvm, Unit
from aipusim.isa.trace_schema import Component
from aipusim.studies.common import StudyResult, md_table, source_state

STUDY = "validation"
PAGE = "validation.md"
RECORD = "validation.json"
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
#: The supply the D-IMC efficiency is published at.
DIMC_VOLTAGE_V = 0.68
#: A residual that moved by less than this since the recorded fit has not moved.
MOVED = 5e-4


@dataclass(frozen=True)
class Input:
    """A published figure the arch file takes as a (C) input."""

    key: str
    what: str
    value: float
    unit: str


INPUTS = (
    Input("peak_tops", "Peak int8 throughput, 4 cores at 800 MHz", 209.7, "TOPS"),
    Input("dimc_tops_w", "D-IMC energy efficiency at 0.68 V", 15.0, "TOPS/W"),
)


def dimc_tops_per_w(arch: Any) -> float:
    """TOPS/W of the D-IMC's own MAC energy at `DIMC_VOLTAGE_V` (what the paper's figure
    measures): two operations per MAC over the energy the cost model charges it, with the
    array's clock that the simulator charges per busy cycle (at full use, its clock per MAC:
    `aipusim.isa.cost.mvm_clock_pj_per_mac`)."""
    mvm = Mvm(unit=Unit.MVM, weight_set=0, in_addr=0, out_addr=0, vectors=1000, rows_used=512,
              cols_used=512)  # fmt: skip
    cost = CostModel(arch).task(mvm)
    pj = cost.energy_pj[C[Component.MVM]] + cost.macs * mvm_clock_pj_per_mac(arch)
    return 2 * cost.macs / (pj * dynamic_scale(arch, DIMC_VOLTAGE_V)[C[Component.MVM]])


def _num(value: float, unit: str) -> str:
    return f"{value:.2f}" if unit in ("TOPS", "TOPS/W") else f"{value:.1f}"


def _unit(figure: str) -> str:
    return {"fps": "FPS", "fps_per_w": "FPS/W", "avg_power_w": "W", "latency_us": "µs"}[figure]


def table(result: Calibration, arch: Any) -> pd.DataFrame:
    """Published against simulated at the arch file's (I) numbers, with the error and the
    use of each figure."""
    rows = []
    inputs = {"peak_tops": arch.peak_tops, "dimc_tops_w": dimc_tops_per_w(arch)}
    for p in INPUTS:
        use = "input: a (C) number of the arch file; matches by construction"
        rows.append(_row(p.what, p.value, inputs[p.key], p.unit, use))
    for row, measured in result.measured.items():
        predicted = result.predicted_prior[row]
        for figure, value in measured.items():
            solved = figure == "fps" and row in result.solved_clock_rows
            clock = f"{predicted['clock_mhz']:.0f} MHz" + (" (solved)" if solved else "")
            use = "fixes the unstated clock" if solved else (
                "fitted" if row in result.fitted_rows else "held out")  # fmt: skip
            what = f"row {row}: {Path(result.models[row]).name} {FIGURES[figure]} at {clock}"
            rows.append(_row(what, value, predicted[figure], _unit(figure), use))
    return pd.DataFrame(rows)


def _row(what: str, published: float, simulated: float, unit: str, use: str) -> dict[str, str]:
    return {
        "figure": what,
        "published": f"{_num(published, unit)} {unit}",
        "simulated": f"{_num(simulated, unit)} {unit}",
        "error": f"{100 * (simulated / published - 1):+.1f} %",
        "use": use,
    }


def page(
    result: Calibration,
    arch: Any,
    record: dict[str, Any] | None,
    uncertainty: dict[str, Any] | None = None,
) -> str:
    """The Markdown of ``docs/validation.md``; ``record`` is the recorded fit the arch file
    holds, ``uncertainty`` the uncertainty study's ``study.json`` if there is one."""
    revision, dirty = source_state()
    solved = [(row, result.predicted_prior[row]["clock_mhz"]) for row in result.solved_clock_rows]
    lines = [
        "# Validation against the published silicon",
        "",
        "Generated by `aipusim report validation -o docs` (`aipusim/studies/validation.py`) "
        f"at commit `{revision}`{' with uncommitted source changes' if dirty else ''}: "
        f"`aipusim calibrate`'s report on its default measurement file "
        f"(`{_rel(result.measurements)}`). Do not edit by hand.",
        "",
        "The measured figures are the ones that file states; no other number is a target of "
        "the model. The calibration moves only inferred (I) numbers of `arch/metis.toml`, "
        "each within its plausible range (`[ranges]` of the file); no published (C) number "
        "is changed. The arch file's (I) numbers are frozen between recorded fits: a compiler "
        "change never re-fits them, so the residuals below are the truth about the compiler.",
        "",
        "## Configuration compared",
        "",
        WHY_BATCH,
        "",
    ]
    for row, mhz in solved:
        lines += [
            f"The clock of row {row} is not published. For the model it is the clock at which "
            f"the simulated run makes the row's FPS: {mhz:.0f} MHz, at the arch file's supply "
            f"for it ({arch.clock.voltage_at(round(mhz * 1e6)):.3f} V, the lowest V-f point "
            "reaching that clock). The compiled tasklists are the same at every clock (the "
            "runtime sets the clock).",
            "",
        ]
    lines += [
        "## Published against simulated",
        "",
        "At the arch file's (I) numbers:",
        "",
        md_table(table(result, arch)),
        "",
    ]
    power = [
        f"{result.predicted_prior[r]['avg_power_w']:.3f} W at "
        f"{result.predicted_prior[r]['clock_mhz']:.0f} MHz" for r in result.measured
    ]  # fmt: skip
    lines += [f"Simulated average power: {', '.join(power)}.", ""]
    lines += report_text(result, level=2).splitlines()
    lines += ["", *record_section(result, record)]
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


def _rel(path: str | Path) -> str:
    root = Path(__file__).resolve().parents[2]
    try:
        return str(Path(path).resolve().relative_to(root))
    except ValueError:
        return str(path)


def record_section(result: Calibration, record: dict[str, Any] | None) -> list[str]:
    """What the arch file holds (the recorded fit), whether today's fit would move it, and
    how the residuals moved since the record (the compiler's or simulator's doing)."""
    lines = ["## The recorded fit", ""]
    if record is None:
        return [*lines, "No fit recorded (run with `--fit --reason ...`).", ""]
    lines += [
        f"The arch file holds the fit recorded in `docs/{RECORD}` (commit "
        f"`{record.get('commit', '?')}`): {record.get('reason', '')}",
        "",
    ]
    stale = {k: v for k, v in record["fitted"].items() if result.prior.get(k, v) != v}
    if stale:
        lines += [
            "**The arch file no longer holds the recorded values** ("
            + ", ".join(f"`{k}`" for k in stale)
            + "): undo the change or record a fit with `--fit --reason`.",
            "",
        ]
    moves = {k: v for k, v in result.fitted.items() if v != result.prior[k]}
    if moves:
        lines += [
            "A fit today would move "
            + ", ".join(f"`{k}` {result.prior[k]:g} -> {v:g}" for k, v in moves.items())
            + " (tables above). It is not applied: the (I) numbers change only through a "
            "recorded fit, when the calibration data or the model of a unit changes.",
            "",
        ]
    else:
        lines += ["A fit today leaves every number where the record has it.", ""]
    then = {
        (int(r), k): v for r, figs in record.get("in_sample", {}).items() for k, v in figs.items()
    }
    now = {
        (r, k): result.predicted_prior[r][k] / v - 1
        for r, figs in result.measured.items()
        for k, v in figs.items()
        if (r, k) in then
    }
    moved = {rk: (then[rk], now[rk]) for rk in now if abs(now[rk] - then[rk]) >= MOVED}
    if moved and not stale:
        lines += [
            "The model has changed since the fit (the compiler or the simulator; the arch "
            "file holds the recorded values): residuals then -> now: "
            + ", ".join(
                f"row {r} {k} {100 * a:+.1f} % -> {100 * b:+.1f} %"
                for (r, k), (a, b) in moved.items()
            )
            + ".",
            "",
        ]
    elif not stale:
        lines += ["The residuals at the arch file's numbers are those recorded with the fit.", ""]
    return lines


def fit_record(result: Calibration, reason: str) -> dict[str, Any]:
    """The record of a fit: why, at which commit, the measured data, the objective, every
    (I) number after it (``inferred``, which `aipusim.arch.frozen` holds the arch file to)
    and the whole calibration."""
    revision, dirty = source_state()
    fitted = with_followers(load_arch(), result.fitted)
    with open(result.measurements, encoding="utf-8", newline="") as f:
        data = list(csv.DictReader(f))
    return {
        "reason": reason,
        "commit": revision + (" (with uncommitted changes)" if dirty else ""),
        "measurements": _rel(result.measurements),
        "data": data,
        "objective": OBJECTIVE,
        "inferred": {**inferred_values(load_arch()), **fitted},
        **json.loads(json.dumps(result.to_dict())),
    }


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


def run_validation(
    out: Path,
    *,
    fit_first: bool = False,
    reason: str = "",
    progress: bool = True,
    command: str = "aipusim report validation",
    **_: Any,
) -> StudyResult:
    """Write ``out/validation.md`` (and with ``fit_first`` the fit record
    ``out/validation.json``); other files in ``out`` are left alone."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"-o must be a folder, not the file {str(out)!r}")
    out.mkdir(parents=True, exist_ok=True)
    arch = load_arch()
    missing = [k for k in FIT_KEYS if k not in {r.key for r in arch.ranges}]
    if missing:
        raise ConfigError(f"the arch file must give a range to the fitted numbers {missing}")
    result = calibrate(DEFAULT_MEASUREMENTS, progress=progress)
    record_path = out / RECORD
    record = json.loads(record_path.read_text()) if record_path.is_file() else None
    found = []
    if fit_first:
        record = fit_record(result, reason)
        record_path.write_text(json.dumps(record, indent=2) + "\n")
        moves = {k: v for k, v in result.fitted.items() if v != result.prior[k]}
        found.append(
            "fit recorded; set in arch/metis.toml: "
            + (", ".join(f"{k} = {v}" for k, v in moves.items()) or "nothing (no number moved)")
        )
    study = json.loads(UNCERTAINTY_RECORD.read_text()) if UNCERTAINTY_RECORD.exists() else None
    # the page names the measurement file as the repository does, not by this checkout's path
    text = page(replace(result, measurements=_rel(result.measurements)), arch, record, study)
    (out / PAGE).write_text(text + ("\n" if not text.endswith("\n") else ""))
    shown = table(result, arch)
    found += [f"{r.figure}: published {r.published}, simulated {r.simulated} ({r.error})"
              for r in shown.itertuples()]  # fmt: skip
    files = [out / PAGE] + ([record_path] if record_path.is_file() else [])
    return StudyResult(STUDY, out, shown, found, files)


__all__ = [
    "INPUTS",
    "dimc_tops_per_w",
    "fit_record",
    "page",
    "record_section",
    "run_validation",
    "table",
]
