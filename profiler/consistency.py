"""Events that are well formed but contradict the trace: a core beyond the header's count,
a negative time, an end before the start, a frame that no ``[B]`` event has.

The readers check each line's form; this checks what the lines say against the header and
each other. Such events are left out and counted (``Trace.inconsistent``, one stderr line
in ``aipusim profile``); with ``strict`` the first one is a `TraceFormatError`.

>>> import pandas as pd
>>> from aipusim.isa.trace_schema import Tag, TraceHeader
>>> k = pd.DataFrame({"core": [0, 7], "frame": [0, 0], "start": [0, 5], "end": [4, 9]})
>>> b = pd.DataFrame({"frame": [0], "inst": [0], "start": [0], "end": [9]})
>>> tables, counts = drop_inconsistent(TraceHeader(10**6, 4, "m", ()), {Tag.K: k, Tag.B: b})
>>> len(tables[Tag.K]), counts
(1, {'a core beyond the header (cores=4)': 1})
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from aipusim.base.errors import TraceFormatError
from aipusim.isa.trace_schema import COLUMNS, Tag, TraceHeader

#: Frame of the tasks of the init phase (constants to L2, weights to the IMC).
INIT_FRAME = -1


def _event_text(tag: Tag, row: pd.Series) -> str:
    fields = " ".join(f"{name}={row[name]}" for name, _ in COLUMNS[tag] if name in row.index)
    return f"[{tag.value}] {fields}"


def _reasons(
    header: TraceHeader, tag: Tag, df: pd.DataFrame, frames: np.ndarray | None
) -> list[tuple[str, np.ndarray]]:
    """(reason, bad-row mask) of every check that applies to ``tag``'s table."""
    out = []
    if "core" in df.columns:
        core = df["core"].to_numpy(np.int64)
        out.append(
            (
                f"a core beyond the header (cores={header.cores})",
                (core < 0) | (core >= header.cores),
            )
        )
    negative = np.zeros(len(df), bool)
    for name in ("t", "start", "end"):
        if name in df.columns:
            negative |= df[name].to_numpy(np.int64) < 0
    out.append(("a negative time", negative))
    if "start" in df.columns and "end" in df.columns:
        ends_early = df["end"].to_numpy(np.int64) < df["start"].to_numpy(np.int64)
        out.append(("an end before its start", ends_early & ~negative))
    if "frame" in df.columns and tag is not Tag.B:
        frame = df["frame"].to_numpy(np.int64)
        if frames is None:
            unknown = frame < INIT_FRAME
        else:
            unknown = (frame != INIT_FRAME) & ~np.isin(frame, frames)
        out.append(("a frame that no [B] event has", unknown))
    elif tag is Tag.B:
        out.append(("a frame that no [B] event has", df["frame"].to_numpy(np.int64) < 0))
    return out


def drop_inconsistent(
    header: TraceHeader,
    tables: Mapping[Tag, pd.DataFrame],
    source: str = "trace",
    strict: bool = False,
) -> tuple[dict[Tag, pd.DataFrame], dict[str, int]]:
    """``tables`` without the events that contradict the header or the frames, and how
    many were left out per reason (the first reason that applies). With ``strict``, the
    first such event is a `TraceFormatError`."""
    b = tables.get(Tag.B)
    frames = None
    if b is not None and len(b):
        frames = b["frame"].to_numpy(np.int64)
        frames = frames[frames >= 0]
    counts: dict[str, int] = {}
    out: dict[Tag, pd.DataFrame] = {}
    for tag, df in tables.items():
        if not len(df):
            out[tag] = df
            continue
        keep = np.ones(len(df), bool)
        for reason, bad in _reasons(header, tag, df, frames):
            bad &= keep
            if not bad.any():
                continue
            if strict:
                row = df.iloc[int(np.flatnonzero(bad)[0])]
                raise TraceFormatError(
                    f"{source}: {_event_text(tag, row)} has {reason}; "
                    "without --strict such events are left out and counted"
                )
            counts[reason] = counts.get(reason, 0) + int(bad.sum())
            keep &= ~bad
        out[tag] = df if keep.all() else df[keep].reset_index(drop=True)
    return out, counts


def describe_dropped(source: str, counts: Mapping[str, int]) -> str:
    """One line saying how many events were left out and why."""
    total = sum(counts.values())
    parts = ", ".join(f"{n} with {reason}" for reason, n in counts.items())
    return f"{source}: {total} event(s) left out that contradict the trace: {parts}"


__all__ = ["INIT_FRAME", "describe_dropped", "drop_inconsistent"]
