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

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from aipusim.base.errors import TraceFormatError
from aipusim.isa.trace_schema import COLUMNS, Tag, TraceHeader

if TYPE_CHECKING:
    import pandas as pd  # the lean `aipusim profile` route (`lean`) checks without pandas

#: Frame of the tasks of the init phase (constants to L2, weights to the IMC).
INIT_FRAME = -1


#: The columns the checks read (integers), where a tag has them.
CHECKED_COLUMNS = ("core", "t", "start", "end", "frame")


def _event_text(tag: Tag, row: pd.Series) -> str:
    fields = " ".join(f"{name}={row[name]}" for name, _ in COLUMNS[tag] if name in row.index)
    return f"[{tag.value}] {fields}"


def _reasons(
    header: TraceHeader, tag: Tag, cols: Mapping[str, np.ndarray], n: int, frames: np.ndarray | None
) -> list[tuple[str, np.ndarray]]:
    """(reason, bad-row mask) of every check that applies to ``tag``'s table of ``n`` rows,
    whose `CHECKED_COLUMNS` are ``cols`` (int64 arrays)."""
    out = []
    if "core" in cols:
        core = cols["core"]
        out.append(
            (
                f"a core beyond the header (cores={header.cores})",
                (core < 0) | (core >= header.cores),
            )
        )
    negative = np.zeros(n, bool)
    for name in ("t", "start", "end"):
        if name in cols:
            negative |= cols[name] < 0
    out.append(("a negative time", negative))
    if "start" in cols and "end" in cols:
        ends_early = cols["end"] < cols["start"]
        out.append(("an end before its start", ends_early & ~negative))
    if "frame" in cols and tag is not Tag.B:
        frame = cols["frame"]
        if frames is None:
            unknown = frame < INIT_FRAME
        else:
            unknown = (frame != INIT_FRAME) & ~np.isin(frame, frames)
        out.append(("a frame that no [B] event has", unknown))
    elif tag is Tag.B:
        out.append(("a frame that no [B] event has", cols["frame"] < 0))
    return out


def consistent_rows(
    header: TraceHeader,
    tag: Tag,
    cols: Mapping[str, np.ndarray],
    n: int,
    frames: np.ndarray | None,
    counts: dict[str, int],
    strict: str | None = None,
    event_text: Callable[[int], str] | None = None,
) -> np.ndarray:
    """The mask of ``tag``'s ``n`` rows (`CHECKED_COLUMNS` in ``cols``) that contradict
    nothing; adds the others to ``counts`` per reason (the first that applies). ``frames``:
    the frames of the [B] events (None: the trace has none). With ``strict`` (the trace's
    name), the first such row is a `TraceFormatError` quoting ``event_text(row)``."""
    keep = np.ones(n, bool)
    for reason, bad in _reasons(header, tag, cols, n, frames):
        bad &= keep
        if not bad.any():
            continue
        if strict is not None:
            assert event_text is not None, "strict needs the rows' text"
            raise TraceFormatError(
                f"{strict}: {event_text(int(np.flatnonzero(bad)[0]))} has {reason}; "
                "without --strict such events are left out and counted"
            )
        counts[reason] = counts.get(reason, 0) + int(bad.sum())
        keep &= ~bad
    return keep


def b_frames(b_frame: np.ndarray | None) -> np.ndarray | None:
    """The frames the [B] events name (``b_frame``: their ``frame`` column), or None when the
    trace has none."""
    if b_frame is None or not len(b_frame):
        return None
    return b_frame[b_frame >= 0]


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
    frames = b_frames(b["frame"].to_numpy(np.int64) if b is not None else None)
    counts: dict[str, int] = {}
    out: dict[Tag, pd.DataFrame] = {}
    for tag, df in tables.items():
        if not len(df):
            out[tag] = df
            continue
        cols = {c: df[c].to_numpy(np.int64) for c in CHECKED_COLUMNS if c in df.columns}
        keep = consistent_rows(
            header,
            tag,
            cols,
            len(df),
            frames,
            counts,
            source if strict else None,
            lambda i, tag=tag, df=df: _event_text(tag, df.iloc[i]),
        )
        out[tag] = df if keep.all() else df[keep].reset_index(drop=True)
    return out, counts


def describe_dropped(source: str, counts: Mapping[str, int]) -> str:
    """One line saying how many events were left out and why."""
    total = sum(counts.values())
    parts = ", ".join(f"{n} with {reason}" for reason, n in counts.items())
    return f"{source}: {total} event(s) left out that contradict the trace: {parts}"


__all__ = [
    "CHECKED_COLUMNS",
    "INIT_FRAME",
    "b_frames",
    "consistent_rows",
    "describe_dropped",
    "drop_inconsistent",
]
