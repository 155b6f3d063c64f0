"""``profiling_drop_percentile``: trim the extremes before statistics.

Two ways, both with ``p`` in percent (0.25 means 0.25 %):

* by value: within each group (a layer, a unit, ...), sort the samples and drop the
  ``floor(n * p / 100)`` smallest and as many largest;
* by time: sort the frames by start and drop the first and last ``floor(N * p / 100)`` of
  them, with all their events (warm-up and cool-down).

>>> import pandas as pd
>>> df = pd.DataFrame({"g": ["a"] * 10, "v": range(10)})
>>> drop_by_value(df, "v", ["g"], 10.0)["v"].tolist()
[1, 2, 3, 4, 5, 6, 7, 8]
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import TYPE_CHECKING

import numpy as np

from aipusim.base.errors import ConfigError
from aipusim.isa.trace_schema import Tag

if TYPE_CHECKING:
    import pandas as pd

    from aipusim.profiler.trace import Trace
# pandas is imported where frames are made: `check_percent` and `drop_count` serve the lean
# ``aipusim profile`` route (`aipusim.profiler.lean`), which never loads it.


class DropBy(enum.StrEnum):
    VALUE = "value"
    TIME = "time"


def check_percent(percent: float) -> float:
    """Validate a drop percentage: a number in [0, 50)."""
    if isinstance(percent, bool) or not isinstance(percent, int | float):
        raise ConfigError(f"drop percentile must be a number in [0, 50), not {percent!r}")
    if not (0.0 <= float(percent) < 50.0) or math.isnan(percent):
        raise ConfigError(f"drop percentile must be a number in [0, 50), not {percent}")
    return float(percent)


def drop_count(n: int | np.ndarray, percent: float) -> int | np.ndarray:
    """Samples dropped at each end of a group of ``n``: ``floor(n * percent / 100)``."""
    # The small epsilon keeps 1000 * 0.1 / 100 at 1 despite binary rounding.
    return np.floor(np.asarray(n) * percent / 100.0 + 1e-9).astype(np.int64)


def drop_by_value(df: pd.DataFrame, value: str, groups: list[str], percent: float) -> pd.DataFrame:
    """Rows of ``df`` left after dropping each group's top and bottom ``percent`` % by
    ``value`` (ties broken by row order)."""
    percent = check_percent(percent)
    if percent == 0.0 or df.empty:
        return df
    # No groups: the whole frame is one group.
    keys = groups or np.zeros(len(df), dtype=np.int8)
    grouped = df.groupby(keys, observed=True, sort=False)[value]
    rank = grouped.rank(method="first").to_numpy(dtype=np.float64)
    size = grouped.transform("size").to_numpy(dtype=np.int64)
    k = drop_count(size, percent)
    keep = (rank > k) & (rank <= size - k)
    return df[keep]


def _frame_spans(trace: Trace) -> pd.DataFrame:
    """Start and end cycle of every frame: from [B] when present, else from its events."""
    import pandas as pd

    b = trace[Tag.B]
    if len(b):
        return (
            pd.DataFrame(
                {
                    "frame": b["frame"].to_numpy(np.int64),
                    "start": b["start"].to_numpy(np.int64),
                    "end": b["end"].to_numpy(np.int64),
                }
            )
            .groupby("frame", as_index=False)
            .agg(start=("start", "min"), end=("end", "max"))
        )
    parts = []
    for tag, lo, hi in (
        (Tag.K, "start", "end"),
        (Tag.M, "start", "end"),
        (Tag.PB, "t", "t"),
        (Tag.PE, "t", "t"),
    ):
        df = trace[tag]
        if len(df):
            parts.append(
                pd.DataFrame(
                    {
                        "frame": df["frame"].to_numpy(np.int64),
                        "start": df[lo].to_numpy(np.int64),
                        "end": df[hi].to_numpy(np.int64),
                    }
                )
            )
    if not parts:
        return pd.DataFrame({"frame": [], "start": [], "end": []}, dtype=np.int64)
    return (
        pd.concat(parts)
        .groupby("frame", as_index=False)
        .agg(start=("start", "min"), end=("end", "max"))
    )


def kept_frames(trace: Trace, percent: float) -> np.ndarray:
    """Frame ids left after dropping the first and last ``percent`` % of frames by start."""
    percent = check_percent(percent)
    spans = _frame_spans(trace).sort_values(["start", "frame"], kind="stable")
    k = int(drop_count(len(spans), percent))
    return spans["frame"].to_numpy(np.int64)[k : len(spans) - k]


def drop_frames(trace: Trace, percent: float) -> Trace:
    """A copy of ``trace`` without the first and last ``percent`` % of frames.

    Events with a ``frame`` column are filtered by frame; [T] events and the power
    timeline, which have none, are kept when they fall inside the kept frames' span.
    """
    if check_percent(percent) == 0.0:
        return trace
    keep = kept_frames(trace, percent)
    spans = _frame_spans(trace)
    spans = spans[spans["frame"].isin(keep)]
    lo = spans["start"].min() if len(spans) else 0
    hi = spans["end"].max() if len(spans) else -1
    tables = {}
    for tag, df in trace.tables.items():
        if "frame" in df.columns:
            tables[tag] = df[df["frame"].isin(keep).to_numpy(dtype=bool)]
        else:
            t = df["t"].to_numpy(np.int64)
            tables[tag] = df[(t >= lo) & (t <= hi)]
    power = trace.power
    if power is not None:
        power = power[(power["t_end"] > lo) & (power["t_start"] < hi)]
    return dataclasses.replace(trace, tables=tables, power=power)
