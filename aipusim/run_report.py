"""``report.md`` of an `aipusim run`: what was run, the headline figures, where time and
energy go, and the plots. Every number in it is computed from the run it describes."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from aipusim.base import __version__
from aipusim.sources import changes_text

if TYPE_CHECKING:
    from aipusim.arch import Arch
    from aipusim.run_result import RunResult


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


def headline_table(sim: Any) -> pd.DataFrame:
    """The figures users come for, one row each, with what each one means."""
    from aipusim.figures import headline

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
    energy["share %"] = 100 * energy["mJ per frame (steady state)"] / (total or 1.0)
    busy = pd.DataFrame(
        {"unit": list(sim.utilization), "busy %": [100 * v for v in sim.utilization.values()]}
    )
    plots = "\n".join(
        f"![{p.stem}]({p.relative_to(result.output_dir).as_posix()})" for p in result.plots
    )
    lines = [
        f"# aipusim run: {result.model}",
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
        "## Energy per frame by component",
        "",
        _md(energy, ".4f"),
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
        "In topological order; the columns as above.",
        "",
        _md(result.layers, ".3f"),
        "",
    ]
    path.write_text("\n".join(lines))
    return path
