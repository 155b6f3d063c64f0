"""`SimResult` of the Python API: the simulator's figures plus its trace, profiled on demand.

The simulator's own result (``aipusim.simulator.SimResult``) carries the figures; this
wrapper answers every attribute it does not define from it (``fps``, ``latency_us_p50``,
``energy_mj_per_frame``, ...) and adds the profiler's views of the trace the run wrote.
The simulator never imports the profiler; this module is where the two meet.

>>> import aipusim, numpy as np
>>> m = aipusim.compile("tiny_cnn")
>>> r = m.simulate(frames=2)
>>> r.fps > 0, r.latency_us_p50 > 0
(True, True)
>>> list(r.profile().columns[:3])
['layer', 'op', 'samples']
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from enum import StrEnum
from pathlib import Path
from typing import Any

import pandas as pd

from aipusim.base.errors import ConfigError


class ProfileTable(StrEnum):
    """Which profiler table `SimResult.profile` returns."""

    LAYERS = "layers"
    UNITS = "units"
    FRAMES = "frames"
    CORES = "cores"


class SimResult:
    """One simulation: figures as attributes, the trace as tables, plots and Chrome JSON.

    ``trace_path`` is the text trace the run wrote; when the result owns a temporary
    folder for it, the folder goes away with the result.
    """

    def __init__(self, sim: Any, trace_path: Path, *, owned_dir: Path | None = None) -> None:
        self._sim = sim
        self.trace_path = Path(trace_path)
        self._trace: Any = None
        if owned_dir is not None:
            weakref.finalize(self, shutil.rmtree, owned_dir, True)

    @property
    def sim(self) -> Any:
        """The simulator's result (``aipusim.simulator.SimResult``)."""
        return self._sim

    def __getattr__(self, name: str) -> Any:
        # Only reached for names this class does not define: the simulator's figures.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._sim, name)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(dir(self._sim)))

    @property
    def trace(self) -> Any:
        """The parsed trace (``aipusim.profiler.Trace``), read once."""
        if self._trace is None:
            from aipusim.profiler import load_trace

            self._trace = load_trace(self.trace_path)
        return self._trace

    def profile(
        self, drop_percentile: float = 0.0, by: str = "value", table: str = "layers"
    ) -> pd.DataFrame:
        """A profiler table of the run.

        ``table``: ``layers`` (per layer latency statistics and unit shares), ``units``,
        ``frames`` or ``cores``. ``drop_percentile`` p in [0, 50) drops outliers: with
        ``by="value"`` the lowest and highest p% of each group's samples, with
        ``by="time"`` the first and last p% of the run's frames (warm-up and drain).
        """
        from aipusim import profiler

        try:
            which = ProfileTable(table)
        except ValueError:
            valid = ", ".join(t.value for t in ProfileTable)
            raise ConfigError(f"table must be one of {valid}, not {table!r}") from None
        drop_by = _drop_by(by)
        reduce = {
            ProfileTable.LAYERS: profiler.layer_table,
            ProfileTable.UNITS: profiler.unit_table,
            ProfileTable.FRAMES: profiler.frame_table,
            ProfileTable.CORES: profiler.core_table,
        }[which]
        return reduce(self.trace, drop_percentile, drop_by)

    def plot_layers(
        self, path: str | Path | None = None, drop_percentile: float = 0.0, by: str = "value"
    ) -> Path:
        """Stacked bars of each layer's mean latency by unit; returns the PNG written
        (``layers.png`` beside the trace unless ``path`` is given)."""
        from aipusim.profiler import plot_layer_bars

        target = Path(path) if path is not None else self.trace_path.with_name("layers.png")
        return plot_layer_bars(self.trace, target, drop_percentile, _drop_by(by))

    def plot_timeline(
        self,
        path: str | Path | None = None,
        start_us: float | None = None,
        end_us: float | None = None,
    ) -> Path:
        """Gantt chart of the tasks, one row per core and unit; returns the PNG written
        (``timeline.png`` beside the trace unless ``path`` is given)."""
        from aipusim.profiler import plot_gantt

        target = Path(path) if path is not None else self.trace_path.with_name("timeline.png")
        return plot_gantt(self.trace, target, start_us, end_us)

    def to_chrome_trace(self, path: str | Path) -> Path:
        """Write the run as Chrome/Perfetto JSON (open in ui.perfetto.dev); returns ``path``."""
        from aipusim.profiler import write_chrome_trace

        target = Path(path)
        write_chrome_trace(self.trace, target)
        return target

    def __repr__(self) -> str:
        s = self._sim
        return (
            f"SimResult(frames={s.frames}, fps={s.fps:.1f}, "
            f"latency_us_p50={s.latency_us_p50:.1f}, "
            f"energy_mj_per_frame={s.energy_mj_per_frame_total:.3f})"
        )


def _drop_by(by: str) -> str:
    from aipusim.profiler import DropBy

    try:
        return DropBy(by).value
    except ValueError:
        valid = ", ".join(d.value for d in DropBy)
        raise ConfigError(f"by must be one of {valid}, not {by!r}") from None


def temporary_trace_dir() -> Path:
    """A fresh folder for a run's trace (owned by the `SimResult` made from it)."""
    return Path(tempfile.mkdtemp(prefix="aipusim-sim-"))


__all__ = ["ProfileTable", "SimResult", "temporary_trace_dir"]
