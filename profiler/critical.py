"""The critical path through a trace: what each task waited on, and what each layer sample
waited on, walked back across units, cores and links.

**What a task waited on.** The simulator starts a task at the latest of: its unit being
free (the previous task of the same queue ends), its tokens (a task on the same core, or
on another core of the same instance for a global token, ended ``token_latency_cycles``
earlier), and its dispatch by the control core. Times are exact integers, so the trace
shows which one it was:

1. the queue: the previous task of the same core and unit ended the cycle this one began;
2. else a token: a task of the same instance ended ``token_latency_cycles`` before this
   one began (one on the same core first; among several, the one that began last);
3. else the control core released it (dispatch after a frame start, a ``ctrl`` task such
   as a barrier, a tasklist chunk, or token polling): it has no predecessor.

This is read from timings, so a task that happens to end at exactly that cycle without
signalling a token can be taken for the producer; the trace's token lines are not
needed.

**What a task stands for.** Its *resource*: the unit of a compute task (``mvm``,
``dpu``, ``dwpu``, ``wload``); for a transfer, the slowest link it crosses (``ddr`` if it
reads or writes DDR, else ``l2`` for L2, else its DMA channel); ``pcie`` for the host link.

**The critical unit of a layer sample** (one layer on one core for one frame): start
from the sample's last-ending task and follow the predecessors back to the sample's
first start. Each task on that chain adds the part of its run inside the sample's span to
its resource (the token hand-over gap to the predecessor's), and the time before a task
with no predecessor adds to ``dispatch``. The resource with the most time is the unit or
link the layer waited on.

>>> from collections.abc import Sequence

import numpy as np
>>> pred = predecessors(core=np.array([0, 0, 0]), unit=np.array([0, 1, 1]),
...                     start=np.array([0, 12, 20]), end=np.array([10, 20, 25]),
...                     instance=np.array([0, 0, 0]), token_latency=2)
>>> pred.tolist()
[-1, 0, 1]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from aipusim.profiler.grouping import sort_rows
from aipusim.profiler.native import NATIVE

#: Resource of the time before a task that no other task released.
DISPATCH = "dispatch"


def resource_of(unit: str, src: str = "", dst: str = "") -> str:
    """The unit or link a task stands for on the critical path (see the module doc).

    >>> resource_of("mvm"), resource_of("dma0", "ddr", "l1"), resource_of("dma1", "l1", "l2")
    ('mvm', 'ddr', 'l2')
    """
    if unit.startswith("pcie"):
        return "pcie"
    if "ddr" in (src, dst):
        return "ddr"
    if "l2" in (src, dst):
        return "l2"
    return unit


def _match(key_task: np.ndarray, order_key: np.ndarray, key_query: np.ndarray) -> np.ndarray:
    """For each query, the task whose key equals it (the one with the largest
    ``order_key`` among several, then the largest index), or -1. The compiled kernel
    (`aipusim.profiler.native`, when built) looks the keys up in a hash table instead."""
    if NATIVE is not None:
        found = NATIVE.match(
            *(np.ascontiguousarray(a, dtype=np.int64) for a in (key_task, order_key, key_query))
        )
        return np.frombuffer(found, dtype=np.int64)
    order = np.lexsort((order_key, key_task))
    sorted_keys = key_task[order]
    pos = np.searchsorted(sorted_keys, key_query, side="right") - 1
    hit = (pos >= 0) & (sorted_keys[np.maximum(pos, 0)] == key_query)
    return np.where(hit, order[np.maximum(pos, 0)], -1)


def predecessors(
    core: np.ndarray,
    unit: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    instance: np.ndarray,
    token_latency: int,
) -> np.ndarray:
    """Index of the task each task waited on last (see the module doc), or -1."""
    n = len(start)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    core = np.asarray(core, dtype=np.int64)
    unit = np.asarray(unit, dtype=np.int64)
    instance = np.asarray(instance, dtype=np.int64)
    pred = np.full(n, -1, dtype=np.int64)
    # 1. the queue: previous task of the same core and unit, ending when this one began
    order = sort_rows(core, unit, start)
    same = np.zeros(n, dtype=bool)
    same[1:] = (core[order][1:] == core[order][:-1]) & (unit[order][1:] == unit[order][:-1])
    prev = np.full(n, -1, dtype=np.int64)
    prev[order[1:]] = np.where(same[1:], order[:-1], -1)
    queued = (prev >= 0) & (end[np.maximum(prev, 0)] == start)
    pred[queued] = prev[queued]
    # 2. a token: a task of the same core, else of the same instance, ending L cycles before
    span = int(max(end.max(), start.max())) + token_latency + 1
    ready = end + token_latency
    # One instance per core: the instance's search would find what the core's did.
    groups = (core,) if np.array_equal(instance, core) else (core, instance)
    for group in groups:
        # only the tasks still without a predecessor ask, in (core, unit, start) order: the
        # searches then come in ascending runs, kind to the caches
        left = order[pred[order] < 0]
        found = _match(group * span + ready, start, group[left] * span + start[left])
        found[found == left] = -1
        take = found >= 0
        pred[left[take]] = found[take]
    return pred


def critical_resources(
    pred: Sequence[int],
    resource: Sequence[str],
    start: Sequence[int],
    end: Sequence[int],
    last: int,
    lo: int,
) -> dict[str, float]:
    """Cycles per resource on the chain that ends with task ``last``, inside [lo, end of
    ``last``) (see the module doc). Lists or arrays, one entry per task."""
    found: dict[str, float] = {}
    j = int(last)
    hi = int(end[j])
    for _ in range(len(pred) + 1):  # the chain moves back in time; the bound is a guard
        s, e = int(start[j]), int(end[j])
        a, b = max(s, lo), min(e, hi)
        if b > a:
            found[resource[j]] = found.get(resource[j], 0.0) + (b - a)
        if s <= lo:
            break
        p = int(pred[j])
        if p < 0:
            found[DISPATCH] = found.get(DISPATCH, 0.0) + (s - lo)
            break
        gap_lo = max(int(end[p]), lo)
        if s > gap_lo:
            found[resource[p]] = found.get(resource[p], 0.0) + (s - gap_lo)
        hi = min(int(end[p]), s)
        j = p
    return found


def critical_cycles(
    pred: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    last: np.ndarray,
    lo: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`critical_resources` of many chains at once, walked back one step per round for all
    of them together (rounds: the longest chain). Chain ``i`` ends with task ``last[i]``
    inside [``lo[i]``, ...). Returns (chain, task, cycles) of every piece in walk order per
    chain; ``task`` is whose resource the cycles go to, -1 for `DISPATCH`.

    >>> chain, task, cycles = critical_cycles(np.array([-1, 0]), np.array([0, 12]),
    ...     np.array([10, 20]), last=np.array([1]), lo=np.array([0]))
    >>> chain.tolist(), task.tolist(), cycles.tolist()
    ([0, 0, 0], [1, 0, 0], [8, 2, 10])
    """
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    pred = np.asarray(pred, dtype=np.int64)
    chain = np.arange(len(last))
    j = np.asarray(last, dtype=np.int64)
    lo = np.asarray(lo, dtype=np.int64)
    hi = end[j]
    pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def add(where: np.ndarray, task: np.ndarray, cycles: np.ndarray) -> None:
        if where.any():
            pieces.append((chain[where], task[where], cycles[where]))

    for _ in range(len(pred) + 1):  # the chains move back in time; the bound is a guard
        if not len(j):
            break
        s = start[j]
        run = np.minimum(end[j], hi) - np.maximum(s, lo)
        add(run > 0, j, run)
        on = s > lo
        chain, j, lo, s = chain[on], j[on], lo[on], s[on]
        p = pred[j]
        add(p < 0, np.full(len(p), -1), s - lo)
        on = p >= 0
        chain, lo, s, p = chain[on], lo[on], s[on], p[on]
        gap = s - np.maximum(end[p], lo)
        add(gap > 0, p, gap)
        hi = np.minimum(end[p], s)
        j = p
    if not pieces:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    chain, task, cycles = (np.concatenate(x) for x in zip(*pieces, strict=True))
    order = np.argsort(chain, kind="stable")  # walk order within each chain
    return chain[order], task[order], cycles[order]


__all__ = ["DISPATCH", "critical_cycles", "critical_resources", "predecessors", "resource_of"]
