"""Vectorised interval arithmetic used by the reductions (no per-interval Python loop).

>>> import numpy as np
>>> covered(np.array([0, 5, 20]), np.array([10, 15, 30]), np.array([0, 0, 0]), 1,
...         np.array([0]), np.array([25]))
array([20.])
>>> binned_overlap(np.array([0]), np.array([10]), np.array([2.0]), np.array([0, 5, 10]))
array([10., 10.])
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def covered(
    start: np.ndarray,
    end: np.ndarray,
    group: np.ndarray,
    n_groups: int,
    lo: np.ndarray,
    hi: np.ndarray,
) -> np.ndarray:
    """Length of the union of intervals ``[start, end)`` of each group, clipped to the
    group's window ``[lo[g], hi[g])``; overlapping intervals count once."""
    if len(start) == 0:
        return np.zeros(n_groups)
    s = np.maximum(start, lo[group]).astype(np.int64)
    e = np.minimum(end, hi[group]).astype(np.int64)
    live = e > s
    s, e, g = s[live], e[live], group[live]
    order = np.lexsort((s, g))
    s, e, g = s[order], e[order], g[order]
    # Each interval adds the part beyond the furthest end seen so far in its group.
    reach = pd.Series(e).groupby(g).cummax().to_numpy()
    prev = np.empty_like(reach)
    prev[1:] = reach[:-1]
    first = np.ones(len(g), dtype=bool)
    first[1:] = g[1:] != g[:-1]
    prev[first] = np.iinfo(np.int64).min
    gain = np.maximum(0, e - np.maximum(s, prev))
    return np.bincount(g, weights=gain, minlength=n_groups)


def binned_overlap(
    start: np.ndarray, end: np.ndarray, rate: np.ndarray, edges: np.ndarray
) -> np.ndarray:
    """Sum over intervals of ``rate * overlap(interval, bin)`` for each bin of ``edges``.

    Exact for piecewise-constant rates: the running integral F(t) = Σ rate·|[s,e) ∩ [0,t)|
    is evaluated at the edges from prefix sums over the sorted starts and ends.
    """
    edges = np.asarray(edges, dtype=np.float64)
    if len(start) == 0:
        return np.zeros(len(edges) - 1)
    s = np.asarray(start, dtype=np.float64)
    e = np.asarray(end, dtype=np.float64)
    r = np.asarray(rate, dtype=np.float64)

    def integral(points: np.ndarray, times: np.ndarray, sign: float) -> np.ndarray:
        order = np.argsort(points, kind="stable")
        p, w = points[order], r[order]
        cw = np.concatenate([[0.0], np.cumsum(w)])
        cwp = np.concatenate([[0.0], np.cumsum(w * p)])
        n = np.searchsorted(p, times, side="right")
        return sign * (times * cw[n] - cwp[n])

    total = integral(s, edges, 1.0) + integral(e, edges, -1.0)
    return np.diff(total)
