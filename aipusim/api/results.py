"""`SimResult`: the result of the API's simulations, the simulator's result (every figure
as an attribute) with the profiler's views of its trace.

``aipusim.SimResult`` is this class, the one `aipusim.simulate` and
`CompiledModel.simulate` return: a subclass of the simulator's own
(`aipusim.simulator.SimResult`) that adds the views that need the profiler: `profile`
tables, `plot_layers`, `plot_timeline`, `to_chrome_trace`. The simulator never imports
the profiler; this module is where the two meet.

>>> import aipusim, numpy as np
>>> m = aipusim.compile("tiny_cnn")
>>> r = m.simulate(frames=2)
>>> type(r) is aipusim.SimResult, r.fps > 0, r.latency_us_p50 > 0
(True, True, True)
>>> list(r.profile().columns[:3])
['layer', 'op', 'samples']
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from dataclasses import dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from aipusim.api.arguments import path_argument
from aipusim.base.errors import ConfigError
from aipusim.simulator.result import SimResult as SimulatorResult

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class ProfileTable(StrEnum):
    """Which profiler table `SimResult.profile` returns."""

    LAYERS = "layers"
    UNITS = "units"
    FRAMES = "frames"
    CORES = "cores"


@dataclass(repr=False)
class SimResult(SimulatorResult):
    """The simulator's result with its trace as tables, plots and Chrome JSON.

    When the result owns a temporary folder for the trace, the folder goes away with it.
    """

    _trace: Any = field(default=None, repr=False)

    @classmethod
    def of(cls, result: SimulatorResult, owned_dir: Path | None = None) -> SimResult:
        """``result`` (which wrote a trace) as a `SimResult`; ``owned_dir`` is removed
        when the new object is."""
        if result.trace_path is None:
            raise ConfigError("a traced result needs a run that wrote a trace, not none")
        out = cls(**{f.name: getattr(result, f.name) for f in fields(result) if f.init})
        if owned_dir is not None:
            weakref.finalize(out, shutil.rmtree, owned_dir, True)
        return out

    @property
    def trace(self) -> Any:
        """The parsed trace (``aipusim.profiler.Trace``), read once."""
        if self._trace is None:
            # lazy: aipusim.profiler loads numba, pyarrow, tqdm, not otherwise loaded here
            from aipusim.profiler import load_trace

            self._trace = load_trace(self._path)
        return self._trace

    @property
    def _path(self) -> Path:
        assert self.trace_path is not None  # `of` only makes results that wrote one
        return self.trace_path

    def profile(
        self, drop_percentile: float = 0.0, by: str = "value", table: str = "layers"
    ) -> pd.DataFrame:
        """A profiler table of the run.

        ``table``: ``layers`` (per layer busy, span and wait time, critical unit, unit
        shares), ``units``, ``frames`` or ``cores``. ``drop_percentile`` p in [0, 50)
        drops outliers: with ``by="value"`` the lowest and highest p% of each group's
        samples, with ``by="time"`` the first and last p% of the run's frames.
        """
        # lazy: aipusim.profiler loads numba, pyarrow, tqdm, not otherwise loaded here
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
    ) -> Figure:
        """Stacked bars of each layer's span by unit and waiting; returns the matplotlib
        figure, written to ``path`` too when one is given (format by suffix)."""
        # lazy: aipusim.profiler loads numba, pyarrow, tqdm, not otherwise loaded here
        from aipusim.profiler import layer_bars_figure

        target = path_argument(path, "path") if path is not None else None
        return _written(layer_bars_figure(self.trace, drop_percentile, _drop_by(by)), target)

    def plot_timeline(
        self,
        path: str | Path | None = None,
        start_us: float | None = None,
        end_us: float | None = None,
    ) -> Figure:
        """Gantt chart of the tasks, one row per core and unit; returns the matplotlib
        figure, written to ``path`` too when one is given (format by suffix)."""
        # lazy: aipusim.profiler loads numba, pyarrow, tqdm, not otherwise loaded here
        from aipusim.profiler import gantt_figure

        target = path_argument(path, "path") if path is not None else None
        return _written(gantt_figure(self.trace, start_us, end_us), target)

    def to_chrome_trace(self, path: str | Path) -> Path:
        """Write the run as Chrome/Perfetto JSON (open in ui.perfetto.dev); returns ``path``."""
        # lazy: aipusim.profiler loads numba, pyarrow, tqdm, not otherwise loaded here
        from aipusim.profiler import write_chrome_trace

        target = path_argument(path, "path")
        write_chrome_trace(self.trace, target)
        return target


def _written(fig: Figure, path: Path | None) -> Figure:
    """``fig``, after writing it to ``path`` (when given)."""
    if path is not None:
        # lazy: aipusim.profiler loads numba, pyarrow, tqdm, not otherwise loaded here
        from aipusim.profiler import save_figure

        save_figure(fig, path)
    return fig


def _drop_by(by: str) -> str:
    # lazy: aipusim.profiler loads numba, pyarrow, tqdm, not otherwise loaded here
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
