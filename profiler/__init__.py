"""aipusim.profiler: traces (text or Parquet) -> typed tables -> reports, plots, Chrome JSON.

>>> import tempfile, pathlib
>>> from aipusim.profiler import load_trace, layer_table, write_synthetic_trace
>>> p = pathlib.Path(tempfile.mkdtemp()) / "run.trace"
>>> _ = write_synthetic_trace(p, frames=4)
>>> int(layer_table(load_trace(p))["samples"].iloc[0])
4
"""

from aipusim.base.lazy import lazy_names

#: Every name is imported on first use: pandas costs about half a second of a process and
#: matplotlib (plots) about 0.7 s, and the lean ``aipusim profile`` route
#: (`aipusim.profiler.lean`) needs neither; importing a submodule runs this file first.
_LAZY = {
    "compare_layers": "aipusim.profiler.compare",
    **dict.fromkeys(
        ("DropBy", "drop_by_value", "drop_frames", "kept_frames"), "aipusim.profiler.drop"
    ),
    **dict.fromkeys(
        (
            "PARTS",
            "LayerSort",
            "layer_breakdown",
            "layer_samples",
            "layer_table",
            "ranked_layers",
            "slowest_layers",
        ),
        "aipusim.profiler.layers",
    ),
    **dict.fromkeys(
        (
            "UNIT_CLASSES",
            "bandwidth_table",
            "core_table",
            "cores_that_ran",
            "frame_summary",
            "frame_table",
            "power_table",
            "tasks",
            "unit_table",
            "utilisation",
        ),
        "aipusim.profiler.reduce",
    ),
    **dict.fromkeys(("write_synthetic_power", "write_synthetic_trace"), "aipusim.profiler.synth"),
    **dict.fromkeys(("to_markdown", "to_records", "write_table"), "aipusim.profiler.tables"),
    **dict.fromkeys(("Trace", "load_power_timeline", "load_trace"), "aipusim.profiler.trace"),
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


__all__ = [*_LAZY]
