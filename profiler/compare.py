"""Per-layer comparison of two traces (e.g. before and after a compiler knob change).

>>> import tempfile, pathlib
>>> from aipusim.profiler.synth import write_synthetic_trace
>>> from aipusim.profiler.trace import load_trace
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = write_synthetic_trace(d / "a.trace", frames=4, seed=1)
>>> _ = write_synthetic_trace(d / "b.trace", frames=4, seed=2)
>>> compare_layers(load_trace(d / "a.trace"), load_trace(d / "b.trace")).columns[:4].tolist()
['layer', 'busy_us_a', 'busy_us_b', 'delta_busy_us']

Figures are per frame: a layer's mean per sample times its samples per frame. Two runs
need not sample a layer alike (a batch of 4 frames is one sample on a core; a cooperative
layer is one sample per core), so per-sample means would compare unlike things.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from aipusim.profiler.drop import DropBy
from aipusim.profiler.layers import layer_table
from aipusim.profiler.reduce import frame_summary, frame_table
from aipusim.profiler.trace import Trace

_STATS = ("busy_us", "span_us", "wait_us")


def _per_frame(trace: Trace, drop_percentile: float, drop_by: DropBy | str) -> pd.DataFrame:
    """`layer_table` with each stat per frame, and ``samples_per_frame`` (all samples of
    the layer over all frames of the trace; dropping outliers changes the means only)."""
    table = layer_table(trace, drop_percentile, drop_by).set_index("layer")
    frames = len(frame_table(trace))
    every = layer_table(trace).set_index("layer")["samples"].reindex(table.index)
    per_frame = every.to_numpy(float) / frames if frames else np.full(len(table), np.nan)
    out = pd.DataFrame({"samples_per_frame": per_frame}, index=table.index)
    for stat in _STATS:
        out[stat] = table[stat].to_numpy(float) * per_frame
    return out


def compare_layers(
    a: Trace, b: Trace, drop_percentile: float = 0.0, drop_by: DropBy | str = DropBy.VALUE
) -> pd.DataFrame:
    """Per layer: ``<stat>_a``, ``<stat>_b``, ``delta_<stat>`` (b - a) and
    ``delta_<stat>_pct`` (relative to a) for the busy, span and wait time per frame
    (core-µs: mean per sample, `aipusim.profiler.layers`, times samples per frame), plus
    ``samples_per_frame`` of each. Layers found in only one trace have NaN for the other;
    order: a's layers, then b's new ones."""
    ta = _per_frame(a, drop_percentile, drop_by)
    tb = _per_frame(b, drop_percentile, drop_by)
    layers = list(ta.index) + [x for x in tb.index if x not in ta.index]
    ta, tb = ta.reindex(layers), tb.reindex(layers)
    out = pd.DataFrame({"layer": layers})
    for stat in _STATS:
        va, vb = ta[stat].to_numpy(float), tb[stat].to_numpy(float)
        out[f"{stat}_a"] = va
        out[f"{stat}_b"] = vb
        name = stat.removesuffix("_us")
        out[f"delta_{name}_us"] = vb - va
        with np.errstate(divide="ignore", invalid="ignore"):
            out[f"delta_{name}_pct"] = np.where(va > 0, 100.0 * (vb - va) / va, np.nan)
    out["samples_per_frame_a"] = ta["samples_per_frame"].to_numpy(float)
    out["samples_per_frame_b"] = tb["samples_per_frame"].to_numpy(float)
    return out


def run_line(
    trace: Trace, drop_percentile: float = 0.0, drop_by: DropBy | str = DropBy.VALUE
) -> str:
    """One line of a trace's run figures for a comparison's header: frames, steady FPS,
    queued latency p50, and the average power of its power timeline when it has one."""
    s = frame_summary(trace, drop_percentile, drop_by)
    power = "power: no timeline"
    p = trace.power
    if p is not None and len(p):
        seconds = (p["t_end_us"] - p["t_start_us"]).to_numpy(float)
        if seconds.sum() > 0:
            watts = float((p["total_w"].to_numpy(float) * seconds).sum() / seconds.sum())
            power = f"average power {watts:.3f} W (whole run)"
    return (
        f"{trace.source}: {s['frames']} frames, {s['fps']:.1f} fps (steady state), "
        f"latency p50 {s['p50_us']:.1f} µs, {power}"
    )


__all__ = ["compare_layers", "run_line"]
