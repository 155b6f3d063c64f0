"""`RunResult`: what `aipusim.run.run_model` produced, and its slowest layers.

Its own module so that the run and its report (`aipusim.run_report`) both import it
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
    #: (`aipusim.functional_check.FunctionalCheck`), else None.
    check: Any = None

    def slowest_layers(self, n: int = 10) -> pd.DataFrame:
        """The ``n`` layers with the most busy time (`slowest_layers`)."""
        return slowest_layers(self.layers, n)


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


def slowest_layers(layers: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """Top ``n`` rows of a profiler layer table by busy time (exclusive: each instant of a
    core counted once), with the unit class that holds most of it and the unit or link the
    layer waited on (`aipusim.profiler.layers`)."""
    from aipusim.profiler import slowest_layers as ranked

    return ranked(layers, n)[SLOWEST_COLUMNS]


__all__ = ["SLOWEST_COLUMNS", "RunResult", "slowest_layers"]
