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


def exclusive_cycles(
    core: np.ndarray,
    unit: np.ndarray,
    priority: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
) -> np.ndarray:
    """Cycles each task holds alone on its core (see the module doc).

    ``unit`` is any integer code of the unit queue (tasks of one queue never overlap);
    ``priority`` orders the tasks of a core by issue (lower first).
    """
    n = len(start)
    out = np.zeros(n)
    if n == 0:
        return out
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    for c in unique_sorted(np.asarray(core)):
        on_core = np.flatnonzero(core == c)
        s, e = start[on_core], end[on_core]
        cuts = unique_sorted(np.concatenate([s, e]))
        lo, width = cuts[:-1], np.diff(cuts)
        best = np.full(len(lo), np.iinfo(np.int64).max)
        owner = np.full(len(lo), -1)
        for u in unique_sorted(unit[on_core]):
            mine = on_core[unit[on_core] == u]
            mine = mine[np.argsort(start[mine], kind="stable")]
            su, eu = start[mine], end[mine]
            # The task of this queue that runs through each elementary segment, if any.
            k = np.searchsorted(su, lo, side="right") - 1
            runs = (k >= 0) & (eu[np.maximum(k, 0)] > lo)
            cand = np.where(runs, priority[mine[np.maximum(k, 0)]], np.iinfo(np.int64).max)
            better = cand < best
            best = np.where(better, cand, best)
            owner = np.where(better, mine[np.maximum(k, 0)], owner)
        held = owner >= 0
        out += np.bincount(owner[held], weights=width[held], minlength=n)
    return out


__all__ = ["exclusive_cycles"]
