"""Group-by in numpy, for reductions that must not load pandas (`aipusim.profiler.lean`)
and the steps the pandas reductions share with them.

`Groups` numbers the distinct keys of an integer array in order of first appearance, as
pandas' ``groupby(sort=False)`` does, and reduces columns per group with ``reduceat`` over
one stable sort of the key.

>>> g = Groups(np.array([7, 3, 7, 5, 3]))
>>> g.ids.tolist(), g.sum(np.array([1, 2, 3, 4, 5])).tolist(), g.size.tolist()
([0, 1, 0, 2, 1], [4, 7, 4], [2, 2, 1])
"""

from __future__ import annotations

import math

import numpy as np

from aipusim.base.arrays import unique_sorted


class Groups:
    """The groups of equal ``key`` (int64), numbered 0..n-1 by first appearance."""

    def __init__(self, key: np.ndarray) -> None:
        key = np.asarray(key, dtype=np.int64)
        self.order = np.argsort(key, kind="stable")
        ordered = key[self.order]
        new = np.ones(len(key), dtype=bool)
        if len(key):
            np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
        self.starts = np.flatnonzero(new)
        self.n = len(self.starts)
        # The sort is stable, so each run's first element is the group's first row.
        first = self.order[self.starts]
        #: key-order run of each group (first appearance order), and the inverse
        self._run = np.argsort(first, kind="stable")
        self._id_of_run = np.empty(self.n, dtype=np.int64)
        self._id_of_run[self._run] = np.arange(self.n)
        self.first_row = first[self._run]
        self.ids = np.empty(len(key), dtype=np.int64)
        runs = np.cumsum(new) - 1
        self.ids[self.order] = self._id_of_run[runs]
        self.size = np.diff(np.append(self.starts, len(key)))[self._run]

    def _reduce(self, ufunc: np.ufunc, values: np.ndarray) -> np.ndarray:
        if not self.n:
            return np.zeros(0, dtype=np.asarray(values).dtype)
        return ufunc.reduceat(np.asarray(values)[self.order], self.starts)[self._run]

    def sum(self, values: np.ndarray) -> np.ndarray:
        return self._reduce(np.add, values)

    def min(self, values: np.ndarray) -> np.ndarray:
        return self._reduce(np.minimum, values)

    def max(self, values: np.ndarray) -> np.ndarray:
        return self._reduce(np.maximum, values)

    def first(self, values: np.ndarray) -> np.ndarray:
        return np.asarray(values)[self.first_row]

    def rank_first(self, values: np.ndarray) -> np.ndarray:
        """Each row's 1-based rank by ``values`` within its group, ties by row order
        (pandas' ``rank(method="first")``)."""
        n = len(self.ids)
        order = sort_rows(self.ids, values, np.arange(n))
        sorted_ids = self.ids[order]
        run_start = np.searchsorted(sorted_ids, np.arange(self.n))
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n) - run_start[sorted_ids] + 1
        return rank

    def quantile(self, values: np.ndarray, q: float) -> np.ndarray:
        """Per group, the ``q`` quantile of ``values`` with linear interpolation, computed
        as pandas' ``groupby().quantile`` does (``v[i] + (v[i + 1] - v[i]) * frac``)."""
        n = len(self.ids)
        order = sort_rows(self.ids, values)
        v = np.asarray(values, dtype=np.float64)[order]
        start = np.searchsorted(self.ids[order], np.arange(self.n))
        pos = q * (self.size - 1).astype(np.float64)
        lo = np.floor(pos).astype(np.int64)
        frac = pos - lo
        hi = np.minimum(lo + 1, self.size - 1)
        a, b = v[start + lo], v[np.minimum(start + hi, max(n - 1, 0))]
        return np.where(frac > 0, a + (b - a) * frac, a)


def combine(*keys: np.ndarray) -> np.ndarray:
    """One int64 key per row, equal exactly when all ``keys`` are and ordered as the rows'
    tuples of keys are. Each key is taken from its minimum; when the product of their
    ranges would pass 62 bits, by its rank among its distinct values instead.

    >>> combine(np.array([1, 0, 1]), np.array([5, 9, 4])).tolist()
    [7, 5, 6]
    """
    keys = tuple(np.asarray(k, dtype=np.int64) for k in keys)
    if not len(keys[0]):
        return np.zeros(0, dtype=np.int64)
    spans = [int(k.max()) - int(k.min()) + 1 for k in keys]
    if math.prod(spans) >= 1 << 62:
        keys = tuple(np.searchsorted(unique_sorted(k), k) for k in keys)
        spans = [int(k.max()) + 1 for k in keys]
    out = np.zeros(len(keys[0]), dtype=np.int64)
    for key, width in zip(keys, spans, strict=True):
        out = out * width + (key - key.min())
    return out


def sort_rows(*keys: np.ndarray) -> np.ndarray:
    """The stable order of the rows by their tuples of ``keys`` (the first key first), as
    ``np.lexsort(keys[::-1])`` gives it. Integer keys whose ranges multiply to under 62
    bits are `combine`d and sorted once (a stable argsort, 3-4 times faster than lexsort).

    >>> sort_rows(np.array([1, 0, 1, 0]), np.array([2, 9, 1, 9])).tolist()
    [1, 3, 2, 0]
    """
    keys = tuple(np.asarray(k) for k in keys)
    if not len(keys[0]):
        return np.zeros(0, dtype=np.int64)
    if all(k.dtype.kind in "iu" for k in keys):
        spans = [int(k.max()) - int(k.min()) + 1 for k in keys]
        if math.prod(spans) < 1 << 62:
            return np.argsort(combine(*keys), kind="stable")
    return np.lexsort(keys[::-1])


def first_seen(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, uniques) of ``values`` with uniques in order of first appearance, as
    ``pandas.factorize`` gives them."""
    g = Groups(values)
    return g.ids, g.first(values)


def first_task_after(
    core: np.ndarray,
    frame: np.ndarray,
    start: np.ndarray,
    task: np.ndarray,
    at_core: np.ndarray,
    at_frame: np.ndarray,
    at_start: np.ndarray,
) -> np.ndarray:
    """For each query (``at_*``: a layer sample with no task of its own, a [PB]/[PE] pair
    only), a stand-in for its place in the tasklist: the lowest task index among the tasks
    (``core``, ``frame``, ``start``, ``task``) of the same core and frame starting at or
    after it (+inf when none does)."""
    if not len(start) or not len(at_start):
        return np.full(len(at_start), np.inf)
    span = int(max(start.max(), at_start.max())) + 1
    frames = int(max(frame.max(), at_frame.max())) + 2  # frames from -1

    def key(c: np.ndarray, f: np.ndarray, s: np.ndarray) -> np.ndarray:
        return (c * frames + f + 1) * span + s

    keys = key(core, frame, start)
    order = np.argsort(keys, kind="stable")
    keys, index = keys[order], task[order].astype(np.float64)
    group = keys // span
    # the lowest task index from each position to the end of its (core, frame) group
    suffix = np.empty_like(index)
    ends = np.r_[np.flatnonzero(np.diff(group)) + 1, len(group)]
    for lo, hi in zip(np.r_[0, ends[:-1]], ends, strict=True):
        suffix[lo:hi] = np.minimum.accumulate(index[lo:hi][::-1])[::-1]
    want = key(at_core, at_frame, at_start)
    pos = np.searchsorted(keys, want, side="left")
    ok = (pos < len(keys)) & (group[np.minimum(pos, len(keys) - 1)] == want // span)
    return np.where(ok, suffix[np.minimum(pos, len(keys) - 1)], np.inf)


def last_rows(
    group: np.ndarray, task: np.ndarray, end: np.ndarray, rows: np.ndarray, groups: int
) -> np.ndarray:
    """Per sample (``group``: each task's sample, 0..groups-1), the row (``rows``: each
    task's label) of its last task, where its critical path starts: the latest end, then
    the highest task index, then the later row."""
    out = np.empty(groups, dtype=np.int64)
    if not len(group):
        return out
    # the sort is stable: among equal (group, end, task) the later row sorts last
    order = sort_rows(group, end, task)
    last = np.flatnonzero(np.r_[group[order][1:] != group[order][:-1], True])
    out[group[order][last]] = rows[order[last]]
    return out


def critical_units(
    sample: np.ndarray,
    resource: np.ndarray,
    cycles: np.ndarray,
    names: list[str],
    at: np.ndarray,
    group: np.ndarray,
    n: int,
    total: np.ndarray,
) -> tuple[list[str], np.ndarray]:
    """Per layer, from the critical paths' cycles per (``sample``, ``resource``: an index
    into ``names``), with ``group`` each kept sample's layer (0..n-1) and ``at`` each
    sample's row among the kept (-1 if dropped): the resource with the most cycles over its
    kept samples (ties: the greatest name; ``-`` when none), and the share of the layer's
    summed span ``total`` it explains (%)."""
    row = at[sample]
    sel = row >= 0
    found_cycles = np.zeros((n, len(names)))
    np.add.at(found_cycles, (group[row[sel]], resource[sel]), cycles[sel])
    most = found_cycles.max(axis=1) if len(names) else np.zeros(n)
    rank = np.argsort(np.argsort(np.array(names, dtype=object)))
    tied = (found_cycles == most[:, None]) & (found_cycles > 0)
    best = np.where(tied, rank, -1).argmax(axis=1)
    found = tied.any(axis=1)
    units = [names[b] if f else "-" for b, f in zip(best.tolist(), found.tolist(), strict=True)]
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(found & (total > 0), 100.0 * most / total, np.nan)
    return units, pct


__all__ = [
    "Groups",
    "combine",
    "critical_units",
    "first_seen",
    "first_task_after",
    "last_rows",
    "sort_rows",
]
