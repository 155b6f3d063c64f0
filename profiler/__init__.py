"""aipusim.profiler: traces (text or Parquet) -> typed tables -> reports, plots, Chrome JSON.

>>> import tempfile, pathlib
>>> from aipusim.profiler import load_trace, layer_table, write_synthetic_trace
>>> p = pathlib.Path(tempfile.mkdtemp()) / "run.trace"
>>> _ = write_synthetic_trace(p, frames=4)
>>> int(layer_table(load_trace(p))["samples"].iloc[0])
4
"""

from aipusim.base.lazy import lazy_names
from aipusim.profiler.compare import compare_layers
from aipusim.profiler.drop import DropBy, drop_by_value, drop_frames, kept_frames
from aipusim.profiler.layers import (
    PARTS,
    LayerSort,
    layer_breakdown,
    layer_samples,
    layer_table,
    ranked_layers,
    slowest_layers,
)
from aipusim.profiler.reduce import (
    UNIT_CLASSES,
    bandwidth_table,
    core_table,
    cores_that_ran,
    frame_summary,
    frame_table,
    power_table,
    tasks,
    unit_table,
    utilisation,
)
from aipusim.profiler.synth import write_synthetic_power, write_synthetic_trace
from aipusim.profiler.tables import to_markdown, to_records, write_table
from aipusim.profiler.trace import Trace, load_power_timeline, load_trace

#: Names imported on first use: matplotlib (plots) costs about 0.7 s per process, which a
#: run that only reads and reduces a trace (``aipusim profile`` without ``--plot``) skips.
_LAZY = {
    "write_chrome_trace": "aipusim.profiler.chrome",
    **dict.fromkeys(
        (
            "LINK_NAMES",
            "gantt_figure",
            "init_window_us",
            "link_name",
            "mark_init",
            "layer_bars_figure",
            "plot_all",
            "plot_bandwidth",
            "plot_gantt",
            "plot_layer_bars",
            "plot_power",
            "plot_roofline",
            "plot_utilisation",
            "save_figure",
        ),
        "aipusim.profiler.plots",
    ),
}


__getattr__ = lazy_names(__name__, _LAZY, globals())


__all__ = [
    "PARTS",
    "UNIT_CLASSES",
    "DropBy",
    "LayerSort",
    "Trace",
    "bandwidth_table",
    "compare_layers",
    "core_table",
    "cores_that_ran",
    "drop_by_value",
    "drop_frames",
    "frame_summary",
    "frame_table",
    "kept_frames",
    "layer_breakdown",
    "layer_samples",
    "layer_table",
    "load_power_timeline",
    "load_trace",
    "power_table",
    "ranked_layers",
    "slowest_layers",
    "tasks",
    "to_markdown",
    "to_records",
    "unit_table",
    "utilisation",
    "write_synthetic_power",
    "write_synthetic_trace",
    "write_table",
    *_LAZY,
]
