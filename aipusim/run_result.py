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

    def slowest_layers(self, n: int = 10) -> pd.DataFrame:
        """The ``n`` layers with the largest mean latency, with the unit that dominates."""
        return slowest_layers(self.layers, n)


def slowest_layers(layers: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """Top ``n`` rows of a profiler layer table by mean latency, plus its dominant unit."""
    from aipusim.profiler import UNIT_CLASSES

    shares = layers[[f"share_{c}" for c in UNIT_CLASSES]]
    top = layers.assign(unit=shares.idxmax(axis=1).str.removeprefix("share_"))
    top.loc[shares.max(axis=1) <= 0, "unit"] = "-"
    cols = ["layer", "op", "unit", "mean_us", "p50_us", "p99_us", "macs"]
    return top.nlargest(n, "mean_us")[cols].reset_index(drop=True)


__all__ = ["RunResult", "slowest_layers"]
