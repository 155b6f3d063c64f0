"""``report.md`` of an `aipusim run`: what was run, the headline figures, where time and
energy go, and the plots. Every number in it is computed from the run it describes."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from aipusim.base import __version__
from aipusim.run.config_text import changes_text
from aipusim.run.figures import headline

if TYPE_CHECKING:
    from aipusim.arch import Arch
    from aipusim.run.result import RunResult


#: What the per-layer columns mean (`aipusim.profiler.layers`), said under every layer table.
LAYER_DEFINITIONS = (
    "Ranked by `busy_us`: the layer's exclusive time, each instant of a core counted once "
    "(for the earliest-issued task running then), mean per sample (one layer on one core "
    "for one frame); `span_us` runs from its first task's start to its last task's end; "
    "`wait_us` = span - busy; `critical_unit` is the unit or link on the critical path "
    "through its span; `unit` the unit class holding most of its busy time; `macs` the "
    "network's MACs per frame, `array_macs` what the arrays ran (padded)."
)


def source_revision() -> str:
    """The git commit of the aipusim checkout this code runs from, or ``unknown``."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def _md(df: pd.DataFrame, floatfmt: str = ".2f") -> str:
    return df.to_markdown(index=False, floatfmt=floatfmt)


#: What each unit, link and critical-path name in report.md means (the report's glossary).
GLOSSARY: dict[str, str] = {
    "mvm": "the matrix-vector multiply arrays (in-memory compute): convolutions, matmuls",
    "wload": "weight loading: writing a layer's weights from L1 into the MVM arrays",
    "dpu": "the data processing unit: element-wise operations, activations, requantization",
    "dwpu": "the depthwise processing unit: depthwise convolutions, pooling, resize",
    "dma0 / dma1": "a core's two DMA channels (DDR <-> L2 <-> L1 transfers); `dma` in the "
    "energy table is both, with the system DMA",
    "sysdma": "the system DMA, shared by the cores",
    "ctrl": "the control tasks of a tasklist (barriers, host handshakes) as a queue of their "
    "own; a layer of op `ctrl` (the input) is such a task",
    "control": "the control core's busy time: dispatching every task, writing trace lines, "
    "polling the host (the ctrl tasks included)",
    "dispatch": "as `critical_unit`: the layer waited for its tasks to be dispatched (by the "
    "control core), not for a unit or link",
    "l1 / l2 / ddr": "the core-local memory, the shared on-chip memory, the external DRAM",
    "pcie": "the host link (the trace's `host` end of a transfer)",
    "static": "static power over the frame period: leakage, the always-on clock and the chip's "
    "clock network, the DDR PHY, the "
    "DRAM devices' standby power and PCIe L0, and the units' clock (busy, idle ungated, then "
    "gated: `[clock_gating]`)",
}


def glossary_lines(names: Sequence[str]) -> list[str]:
    """The glossary entries of the unit and link names in ``names``, each once."""
    wanted = set(names)
    lines = []
    for key, text in GLOSSARY.items():
        parts = [part.strip() for part in key.split("/")]
        if wanted & set(parts):
            lines.append(f"- {' / '.join(f'`{p}`' for p in parts)}: {text}")
    return lines


def share_text(percent: float) -> str:
    """A share as report.md prints it: one decimal, ``<0.1`` for a trace, ``0`` for none.

    >>> share_text(79.32471), share_text(0.0006), share_text(0.0)
    ('79.3', '<0.1', '0')
    """
    if percent == 0:
        return "0"
    if abs(percent) < 0.05:
        return "<0.1"
    return f"{percent:.1f}"


def verdict(result: RunResult, peak_tops: float) -> str:
    """The report's first line: throughput, the unit or link busiest over the run (what
    limits it) and the achieved share of the chip's peak compute."""
    sim = result.sim
    busy = {**sim.utilization, **sim.link_utilization}
    # the control core serves every unit: it is named only when busier than all of them
    busy.pop("control", None)
    top = max(busy, key=lambda k: busy[k]) if busy else "-"
    control = sim.utilization.get("control", 0.0)
    share = share_text(100 * busy.get(top, 0.0))
    limit = f"`{top}`, the busiest unit or link ({share} % of the run, INIT included)"
    if control > busy.get(top, 0.0):
        limit = f"the control core ({share_text(100 * control)} % busy: dispatch)"
    macs = pd.to_numeric(result.layers.get("macs"), errors="coerce").fillna(0).sum()
    per_start = max(1, sim.frames_per_start)
    # the layer table's macs are one frame's network MACs (per sample: a frame of a layer)
    tops = 2.0 * float(macs) * sim.fps / 1e12 if macs else 0.0
    share = (
        f"{tops:.2f} TOPS, {share_text(100 * tops / peak_tops)} % of the {peak_tops:.1f} TOPS peak"
    )
    steady = "steady state" if sim.steady else "no steady state (run more frames)"
    batch = f", batches of {per_start}" if per_start > 1 else ""
    return f"**Verdict**: {sim.fps:.1f} FPS ({steady}{batch}), limited by {limit}; {share}."


def informative(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` without the columns that carry nothing: all empty, one value in every row,
    or a copy of an earlier column; empty cells as ``-``."""
    keep: list[str] = []
    for column in table.columns:
        values = table[column]
        if column == "layer":
            keep.append(column)
            continue
        if values.isna().all() or values.nunique(dropna=False) <= 1:
            continue
        if any(values.equals(table[k]) for k in keep):
            continue
        keep.append(column)
    return table[keep].astype(object).where(table[keep].notna(), "-")


def headline_table(sim: Any) -> pd.DataFrame:
    """The figures users come for, one row each, with what each one means."""
    rows = [
        *headline(sim),
        ("simulated cycles", f"{sim.total_cycles:,}", f"{sim.frames} frames"),
        ("clock / voltage", f"{sim.frequency_hz / 1e6:g} MHz / {sim.voltage_v:.2f} V", ""),
        ("replicas x cores", f"{sim.replicas} x {sim.active_cores}", ""),
    ]
    return pd.DataFrame(rows, columns=["figure", "value", "definition"])


def _functional_lines(result: RunResult) -> list[str]:
    """The functional check of ``run --check``: bit-exact, or the mismatch."""
    check = result.check
    if check is None:
        return []
    return ["## Functional check", "", f"- {check.text()}", ""]


def write_run_report(
    result: RunResult, path: Path, *, config: Any, arch: Arch, levels: Sequence[str]
) -> Path:
    """Write the Markdown report of ``result`` to ``path``."""
    sim = result.sim
    energy = pd.DataFrame(
        {
            "component": list(sim.energy_mj_per_frame),
            "mJ per frame (steady state)": list(sim.energy_mj_per_frame.values()),
        }
    )
    total = energy["mJ per frame (steady state)"].sum()
    energy["share %"] = [
        share_text(v) for v in 100 * energy["mJ per frame (steady state)"] / (total or 1.0)
    ]
    by_unit = pd.DataFrame(
        [
            {"unit": unit, **{f"{k.replace('_', ' ')} (W)": v for k, v in parts.items()}}
            for unit, parts in sim.unit_power_w.items()
        ]
    )
    busy = pd.DataFrame(
        {
            "unit": list(sim.utilization),
            "busy % of the run": [share_text(100 * v) for v in sim.utilization.values()],
        }
    )
    names = [*sim.utilization, *sim.link_utilization, *energy["component"]]
    names += [str(u) for u in result.layers.get("critical_unit", [])]
    plots = "\n".join(
        f"![{p.stem}]({p.relative_to(result.output_dir).as_posix()})" for p in result.plots
    )
    lines = [
        f"# aipusim run: {result.model}",
        "",
        verdict(result, arch.peak_tops),
        "",
        f"- model: `{result.model}`; mode `{sim.multicore_mode}`; {sim.frames} frames "
        f"on {sim.replicas} replica(s)",
        f"- config: starts from {result.config_base}; the effective config's changes from "
        f"the defaults: `{changes_text(result.config_changes)}`",
        f"- chip: `{arch.chip.name}`, {arch.chip.cores} cores, peak {arch.peak_tops:.1f} TOPS",
        f"- trace levels: {','.join(levels)} (each line costs "
        f"{arch.control.trace_line_cycles} control-core cycles)",
        f"- aipusim {__version__}, commit `{source_revision()}`; compile "
        f"{result.compile_seconds:.1f} s, simulation {result.simulate_seconds:.1f} s (wall)",
        "",
        "## Summary",
        "",
        _md(headline_table(sim)),
        "",
        *_functional_lines(result),
        "## Names of units and links",
        "",
        *glossary_lines(names),
        "",
        "## Energy per frame by component",
        "",
        _md(energy, ".4f"),
        "",
        "## Power by unit",
        "",
        "The whole run's average (INIT included), W: what each unit's actions cost (dynamic), "
        "its clock while busy (clocked busy) and while idle before the clock gate closes "
        "(clocked idle; for `control` the always-on clock and the chip's clock network, for "
        "`ddr` and `pcie` the PHY and the link in L0), its gated floor (gated idle) and its "
        "leakage.",
        "",
        _md(by_unit, ".4f"),
        "",
        "## Unit utilisation",
        "",
        _md(busy, ".1f"),
        "",
        f"## {result.slowest_heading()[0].upper()}{result.slowest_heading()[1:]}",
        "",
        LAYER_DEFINITIONS,
        "",
        _md(result.slowest_layers(), ".1f"),
        "",
        "## Plots",
        "",
        plots,
        "",
        "## All layers",
        "",
        "In topological order; the columns as above, without those that carry nothing here "
        "(empty, the same in every row, or a copy of another); layers.csv has them all.",
        "",
        _md(informative(result.layers), ".2f"),
        "",
    ]
    path.write_text("\n".join(lines))
    return path
