"""`RunResult`: what `aipusim.run.job.run_model` produced, and its slowest layers.

Its own module so that the run and its report (`aipusim.run.report`) both import it
without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd


@dataclass
class RunResult:
    """What `run_model` produced; the files are under ``output_dir``."""

    model: str
    output_dir: Path
    compile_seconds: float
    simulate_seconds: float
    sim: Any  # aipusim.simulator.SimResult
    layers: pd.DataFrame
    units: pd.DataFrame
    plots: list[Path] = field(default_factory=list)
    #: ``run --check``: the functional run against the int8 reference
    #: (`aipusim.api.functional_check.FunctionalCheck`), else None.
    check: Any = None
    #: ``run --top N --sort busy|span``: how many layers the slowest-layers table shows
    #: and what ranks them.
    top: int = 10
    sort: str = "busy"
    #: Where the config started (`aipusim.api.sources.base_label`), and the effective config's
    #: changes from the defaults (`aipusim.api.sources.config_changes`).
    config_base: str = "the defaults"
    config_changes: dict[str, str] = field(default_factory=dict)
    #: Seconds of the run's other parts: its imports and the model's preparation before the
    #: compile, the profile (tables and plots), writing the report and the folder.
    prepare_seconds: float = 0.0
    profile_seconds: float = 0.0
    write_seconds: float = 0.0
    #: The trace levels the simulation recorded (``--levels``).
    levels: list[str] = field(default_factory=list)

    def slowest_layers(self, n: int | None = None) -> pd.DataFrame:
        """The ``n`` (default: ``top``) layers with the most busy time or span, as ``sort``
        says (`slowest_layers`)."""
        return slowest_layers(self.layers, self.top if n is None else n, self.sort)

    def slowest_heading(self) -> str:
        """What the slowest-layers table shows, e.g. ``the 10 slowest layers by busy time``."""
        by = {
            "busy": "busy time (exclusive: each instant of a core once)",
            "span": "span (first task's start to last task's end, waits included)",
        }[self.sort]
        return f"the {self.top} slowest layers by {by}"


#: Columns of the slowest-layers table (printout, report.md, ``run --json``).
SLOWEST_COLUMNS = [
    "layer",
    "op",
    "unit",
    "busy_us",
    "span_us",
    "wait_us",
    "critical_unit",
    "macs",
    "array_macs",
]


def slowest_layers(layers: pd.DataFrame, n: int = 10, sort: str = "busy") -> pd.DataFrame:
    """Top ``n`` rows of a profiler layer table by busy time (exclusive: each instant of a
    core counted once) or by span (``sort``), with the unit class that holds most of it and
    the unit or link the layer waited on (`aipusim.profiler.layers`)."""
    # lazy: aipusim.profiler loads numba, pyarrow, tqdm, not otherwise loaded here
    from aipusim.profiler import slowest_layers as ranked

    return ranked(layers, n, sort)[SLOWEST_COLUMNS]


__all__ = ["SLOWEST_COLUMNS", "RunResult", "slowest_layers"]
