"""Exclusive time: each instant of a core counted once, for one task.

At an instant when several tasks run on one core (on its different units), the instant
goes to the *earliest-issued* of them: the lowest (frame, task) pair, i.e. the one that
comes first in the core's tasklist stream (INIT, frame -1, before frame 0). Every cycle
in which a core runs anything therefore belongs to exactly one task, so the exclusive
cycles of a core's tasks add up to the cycles it is busy, and those of one frame's tasks
to at most that frame's time on the core.

>>> import numpy as np
>>> exclusive_cycles(core=np.array([0, 0, 0]), unit=np.array([0, 1, 1]),
...                  priority=np.array([0, 1, 2]), start=np.array([0, 5, 12]),
...                  end=np.array([10, 12, 20])).tolist()
[10.0, 2.0, 8.0]
"""

from __future__ import annotations

import numpy as np

from aipusim.base.arrays import unique_sorted
from aipusim.profiler.grouping import sort_rows
from aipusim.profiler.native import NATIVE


def exclusive_cycles(
    core: np.ndarray,
    unit: np.ndarray,
    priority: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
) -> np.ndarray:
    """Cycles each task holds alone on its core (see the module doc).

    ``unit`` is any integer code of the unit queue (tasks of one queue never overlap);
    ``priority`` orders the tasks of a core by issue (lower first; among equal priorities
    the lower ``unit``).

    How: the task of a queue that runs through an instant is the queue's latest-started
    task that started by then, if it has not ended; so each task holds the instants from
    its start to its end or the next start in its queue, whichever is first. The cuts
    (every start and end of a core) split time into segments; each task paints the
    segments it holds, and each segment goes to its lowest (priority, unit) paint. The
    work grows with the tasks and the segments they cover, not with queues x segments.
    The compiled kernel (`aipusim.profiler.native`, when built) sweeps each core's queues
    together instead, with the same result.
    """
    n = len(start)
    if n == 0:
        return np.zeros(0)
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    core = np.asarray(core, dtype=np.int64)
    priority = np.asarray(priority, dtype=np.int64)
    units = unique_sorted(np.asarray(unit, dtype=np.int64))
    unit = np.searchsorted(units, unit)  # 0..U-1, in the order of the codes
    lo_p, hi_p = int(priority.min()), int(priority.max())
    if (hi_p - lo_p + 1) * len(units) >= _WIDE:  # a dense rank keeps the order
        priority = np.searchsorted(unique_sorted(priority), priority)
        lo_p = 0
    rank = (priority - lo_p) * len(units) + unit
    if NATIVE is not None:
        order = sort_rows(core, unit, start)
        held = NATIVE.exclusive(order, core, np.ascontiguousarray(unit), rank, start, end)
        return np.frombuffer(held, dtype=np.float64)
    t0 = int(min(start.min(), end.min()))
    span = int(max(start.max(), end.max())) - t0 + 1
    c0, cores = int(core.min()), int(core.max()) - int(core.min()) + 1
    if cores * span < _WIDE:
        return _held(core - c0, unit, rank, start - t0, end - t0, span)
    out = np.zeros(n)  # times too wide to key all cores at once: one core at a time
    for c in unique_sorted(core):
        mine = np.flatnonzero(core == c)
        out[mine] = _held(
            np.zeros(len(mine), np.int64),
            unit[mine],
            rank[mine],
            start[mine] - t0,
            end[mine] - t0,
            span,
        )
    return out


#: Keys stay below this (int64 with room for the sums).
_WIDE = 1 << 62


def _held(
    core: np.ndarray,
    unit: np.ndarray,
    rank: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    span: int,
) -> np.ndarray:
    """`exclusive_cycles` with cores from 0, times in [0, span) and ``rank`` the
    (priority, unit) order of the tasks; ``core * span`` fits int64."""
    n = len(start)
    # Each task holds [start, min(end, next start in its queue)): in queue order from here
    # on (which also keeps the searches below in ascending runs, kind to the caches).
    order = sort_rows(core, unit, start)
    base = core[order] * span
    begin = base + start[order]
    held = base + end[order]
    same = (core[order][1:] == core[order][:-1]) & (unit[order][1:] == unit[order][:-1])
    held[:-1] = np.where(same, np.minimum(held[:-1], begin[1:]), held[:-1])
    # The segments between consecutive cuts of a core; a task covers cuts[a:b].
    cuts = unique_sorted(np.concatenate([begin, base + end[order]]))
    a = np.searchsorted(cuts, begin)
    b = np.searchsorted(cuts, np.maximum(held, begin))
    lengths = b - a
    painted = np.flatnonzero(lengths > 0)
    if not len(painted):
        return np.zeros(n)
    lengths = lengths[painted]
    first = np.cumsum(lengths) - lengths
    segment = np.arange(int(lengths.sum())) - np.repeat(first - a[painted], lengths)
    task = np.repeat(order[painted], lengths)
    best = np.full(len(cuts), np.iinfo(np.int64).max)
    np.minimum.at(best, segment, rank[task])
    win = rank[task] == best[segment]
    width = np.diff(cuts).astype(np.float64)
    return np.bincount(task[win], weights=width[segment[win]], minlength=n)


__all__ = ["exclusive_cycles"]
