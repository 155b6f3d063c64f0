"""Per-layer comparison of two traces (e.g. before and after a compiler knob change).

>>> import tempfile, pathlib
>>> from aipusim.profiler.synth import write_synthetic_trace
>>> from aipusim.profiler.trace import load_trace
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = write_synthetic_trace(d / "a.trace", frames=4, seed=1)
>>> _ = write_synthetic_trace(d / "b.trace", frames=4, seed=2)
>>> compare_layers(load_trace(d / "a.trace"), load_trace(d / "b.trace")).columns[:4].tolist()
['layer', 'busy_us_a', 'busy_us_b', 'delta_busy_us']
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from aipusim.profiler.drop import DropBy
from aipusim.profiler.layers import layer_table
from aipusim.profiler.trace import Trace

_STATS = ("busy_us", "span_us", "wait_us")


def compare_layers(
    a: Trace, b: Trace, drop_percentile: float = 0.0, drop_by: DropBy | str = DropBy.VALUE
) -> pd.DataFrame:
    """Per layer: ``<stat>_a``, ``<stat>_b``, ``delta_<stat>`` (b - a) and
    ``delta_<stat>_pct`` (relative to a) for the mean busy, span and wait time
    (`aipusim.profiler.layers`), plus the samples of each. Layers found in only one trace
    have NaN for the other; order: a's layers, then b's new ones."""
    ta = layer_table(a, drop_percentile, drop_by).set_index("layer")
    tb = layer_table(b, drop_percentile, drop_by).set_index("layer")
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
    out["samples_a"] = ta["samples"].to_numpy(float)
    out["samples_b"] = tb["samples"].to_numpy(float)
    return out
