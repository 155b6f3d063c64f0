"""Range observers: they watch float tensors during calibration and pick a clipping range.

Two observers, as the `QuantizationScheme` enum of the config reference names them:

- `MinMaxObserver`: the range is the smallest and largest value ever seen (per tensor, or per
  channel along an axis). Nothing is clipped; one outlier widens the step for everyone.
- `HistogramObserver`: a 2048-bin histogram of every value seen, then an **MSE-optimal
  range search**. For each candidate range [lo, hi] (lo on a grid of bin edges <= 0, hi on a
  grid of bin edges >= 0, 0 always representable) the expected squared error of int8
  quantization is estimated from the histogram as

      cost(lo, hi) = N_inside * step**2 / 12                  (uniform rounding noise)
                   + sum_{c < lo} n_c * (lo - c)**2           (clipping, left tail)
                   + sum_{c > hi} n_c * (c - hi)**2           (clipping, right tail)

  with step = (hi - lo) / 255 and c the bin centres. Prefix sums of n, n*c and n*c**2 make
  each candidate O(1), so a 2-D grid (every 8th edge: up to 257 x 257 candidates, then every
  edge near the best one) is searched exhaustively; the range with the lowest cost wins.
  Being an MSE criterion, it clips long tails with real mass but keeps a lone far outlier
  (its squared clipping error outweighs the rounding noise of 256 levels).

When a later batch falls outside the current histogram range, the range widens and the old
counts are redistributed into the new bins in proportion to overlap (the cumulative count is
linearly interpolated).

Example:
    >>> import numpy as np
    >>> obs = MinMaxObserver()
    >>> obs.update(np.array([-1.0, 0.5, 2.0], dtype=np.float32))
    >>> obs.range()
    (-1.0, 2.0)
    >>> h = HistogramObserver()
    >>> h.update(np.random.default_rng(0).standard_normal(100_000).astype(np.float32))
    >>> lo, hi = h.range()
    >>> 2.5 < -lo < 4.5 and 2.5 < hi < 4.5
    True
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from aipusim.base.errors import QuantizationError

#: Bins of the histogram observer.
HISTOGRAM_BINS = 2048
#: Candidate range edges are taken every this many bins (257 edges over 2048 bins).
SEARCH_STRIDE = 8
#: Levels of an int8 grid minus one (the step of a range [lo, hi] is (hi - lo) / 255).
INT8_STEPS = 255


class Observer(Protocol):
    """What calibration needs from an observer."""

    def update(self, x: np.ndarray) -> None:
        """Account for the values of one batch of a tensor."""

    def range(self) -> tuple[float, float]:
        """The chosen clipping range (lo <= 0 <= hi is not required here)."""


def _finite_minmax(flat: np.ndarray) -> tuple[float, float]:
    # numpy's vectorised min/max; a NaN makes both NaN, which `_check_finite` rejects
    return float(flat.min()), float(flat.max())


#: Values binned per step of `_accumulate` (its scratch arrays stay in the CPU's cache).
ACCUMULATE_CHUNK = 1 << 18


def _accumulate(flat: np.ndarray, lo: float, hi: float, counts: np.ndarray) -> None:
    """Add the values of ``flat`` (all in [lo, hi]) to the bins of ``counts``.

    A value's bin is ``int(float32(v - lo) * float32(nbins / (hi - lo)))``, the last bin
    taking the values that land on or just past ``hi``:

    >>> counts = np.zeros(4)
    >>> _accumulate(np.array([0.0, 0.3, 0.5, 1.0], np.float32), 0.0, 1.0, counts)
    >>> counts.tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    nbins = counts.shape[0]
    # float32 arithmetic: half the memory traffic of float64 on tensors of millions of
    # values; lo is a float32 value of the data, so v - lo >= 0 exactly.
    lo32, per_unit = np.float32(lo), np.float32(nbins / (hi - lo))
    step = max(min(flat.size, ACCUMULATE_CHUNK), 1)
    pos = np.empty(step, np.float32)
    index = np.empty(step, np.intp)
    total = np.zeros(nbins + 1, np.int64)
    for start in range(0, flat.size, step):
        part = flat[start : start + step]
        n = part.size
        np.subtract(part, lo32, out=pos[:n], dtype=np.float32)
        # the product is rounded to float32, then truncated into the index (one pass)
        np.multiply(pos[:n], per_unit, out=index[:n], dtype=np.float32, casting="unsafe")
        found = np.bincount(index[:n], minlength=nbins)
        total[:nbins] += found[:nbins]
        total[nbins] += found[nbins:].sum()  # rounding put them on (or past) hi
    total[nbins - 1] += total[nbins]
    counts += total[:nbins]


def _check_finite(lo: float, hi: float) -> None:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        # Calibration data or weights produced inf/nan: no int8 grid can represent that.
        raise QuantizationError(f"tensor values must be finite, not in [{lo}, {hi}]")


class MinMaxObserver:
    """Running min and max, over the whole tensor or per channel of `axis`."""

    def __init__(self, axis: int | None = None) -> None:
        self.axis = axis
        self.lo: np.ndarray | float = np.inf
        self.hi: np.ndarray | float = -np.inf

    def update(self, x: np.ndarray) -> None:
        if self.axis is None:
            lo, hi = _finite_minmax(np.ascontiguousarray(x).reshape(-1))
            _check_finite(lo, hi)
            self.lo = min(float(self.lo), lo)
            self.hi = max(float(self.hi), hi)
            return
        moved = np.moveaxis(x, self.axis, 0).reshape(x.shape[self.axis], -1)
        lo_c, hi_c = moved.min(axis=1).astype(np.float64), moved.max(axis=1).astype(np.float64)
        _check_finite(float(lo_c.min()), float(hi_c.max()))
        self.lo = np.minimum(self.lo, lo_c)
        self.hi = np.maximum(self.hi, hi_c)

    def range(self) -> tuple[float, float]:
        """Per-tensor range; see `channel_ranges` for a per-channel observer."""
        assert self.axis is None, "per-channel observer: use channel_ranges()"
        return float(self.lo), float(self.hi)

    def channel_ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-channel (lo, hi) arrays of a per-channel observer."""
        assert self.axis is not None
        return np.asarray(self.lo, dtype=np.float64), np.asarray(self.hi, dtype=np.float64)


class HistogramObserver:
    """2048-bin histogram with an MSE-optimal clipping range (see the module docstring)."""

    def __init__(self, bins: int = HISTOGRAM_BINS) -> None:
        self.bins = bins
        self.counts = np.zeros(bins, dtype=np.float64)
        self.lo = np.inf
        self.hi = -np.inf

    def update(self, x: np.ndarray) -> None:
        flat = np.ascontiguousarray(x).reshape(-1)
        if flat.size == 0:
            return
        lo, hi = _finite_minmax(flat)
        _check_finite(lo, hi)
        if self.counts.sum() == 0:
            self.lo, self.hi = lo, hi
            if hi <= lo:
                self.hi = lo + max(abs(lo), 1.0) * 1e-6
        elif lo < self.lo or hi > self.hi:
            self._widen(min(lo, self.lo), max(hi, self.hi))
        _accumulate(flat, self.lo, self.hi, self.counts)

    def _widen(self, lo: float, hi: float) -> None:
        old_edges = np.linspace(self.lo, self.hi, self.bins + 1)
        new_edges = np.linspace(lo, hi, self.bins + 1)
        cdf = np.concatenate([[0.0], np.cumsum(self.counts)])
        # Old counts are spread uniformly within their old bins: interpolate the cumulative.
        self.counts = np.diff(np.interp(new_edges, old_edges, cdf))
        self.lo, self.hi = lo, hi

    def range(self) -> tuple[float, float]:
        if self.counts.sum() == 0:
            return 0.0, 0.0
        return mse_optimal_range(self.counts, self.edges())

    def edges(self) -> np.ndarray:
        """The bin edges of the histogram."""
        return np.linspace(self.lo, self.hi, self.bins + 1)


def mse_optimal_range(counts: np.ndarray, edges: np.ndarray) -> tuple[float, float]:
    """The [lo, hi] (lo <= 0 <= hi) that minimises the estimated int8 MSE of a histogram.

    A coarse search over every `SEARCH_STRIDE`-th bin edge, then a fine one over every
    edge within one stride of the coarse optimum.

    >>> x = np.random.default_rng(0).laplace(size=200_000)   # a long tail
    >>> counts, edges = np.histogram(x, bins=2048)
    >>> lo, hi = mse_optimal_range(counts.astype(float), edges)
    >>> bool(x.min() < lo and hi < x.max())   # the sparse tail is clipped
    True
    """
    centres = (edges[:-1] + edges[1:]) / 2
    prefix = _Prefix(counts, centres)
    n = len(edges) - 1
    coarse = np.unique(np.append(np.arange(0, n + 1, SEARCH_STRIDE), n))
    lo, hi = _best(prefix, edges[coarse], edges[coarse])
    ia = int(np.searchsorted(edges, lo))
    ib = int(np.searchsorted(edges, hi))
    fine_lo = edges[max(ia - SEARCH_STRIDE, 0) : ia + SEARCH_STRIDE + 1]
    fine_hi = edges[max(ib - SEARCH_STRIDE, 0) : ib + SEARCH_STRIDE + 1]
    return _best(prefix, fine_lo, fine_hi)


class _Prefix:
    """Prefix sums of count, count*c and count*c**2 over bins (c: bin centre)."""

    def __init__(self, counts: np.ndarray, centres: np.ndarray) -> None:
        self.centres = centres
        self.n0 = np.concatenate([[0.0], np.cumsum(counts)])
        self.n1 = np.concatenate([[0.0], np.cumsum(counts * centres)])
        self.n2 = np.concatenate([[0.0], np.cumsum(counts * centres * centres)])


def range_cost(counts: np.ndarray, edges: np.ndarray, lo: float, hi: float) -> float:
    """The estimated int8 MSE (times the count) of a histogram quantized on [lo, hi], as
    `mse_optimal_range` minimises it.

    >>> counts, edges = np.ones(4), np.linspace(-2.0, 2.0, 5)
    >>> range_cost(counts, edges, -2.0, 2.0) < range_cost(counts, edges, -1.0, 1.0)
    True
    """
    centres = (edges[:-1] + edges[1:]) / 2
    return float(_cost(_Prefix(counts, centres), np.array([lo]), np.array([hi]))[0, 0])


def _best(p: _Prefix, lo_grid: np.ndarray, hi_grid: np.ndarray) -> tuple[float, float]:
    lo_cand = np.unique(np.append(lo_grid[lo_grid <= 0], 0.0))
    hi_cand = np.unique(np.append(hi_grid[hi_grid >= 0], 0.0))
    cost = _cost(p, lo_cand, hi_cand)
    a, b = np.unravel_index(int(np.argmin(cost)), cost.shape)
    return float(lo_cand[a]), float(hi_cand[b])


def _cost(p: _Prefix, lo_cand: np.ndarray, hi_cand: np.ndarray) -> np.ndarray:
    """Cost of every (lo, hi) pair of the candidates (rows: lo, columns: hi)."""
    total = p.n0[-1]
    il = np.searchsorted(p.centres, lo_cand, side="left")  # bins with centre < lo
    ih = np.searchsorted(p.centres, hi_cand, side="right")  # bins with centre <= hi
    lo_v = lo_cand[:, None]
    hi_v = hi_cand[None, :]
    left = lo_v**2 * p.n0[il][:, None] - 2 * lo_v * p.n1[il][:, None] + p.n2[il][:, None]
    n_right = total - p.n0[ih]
    s1_right = p.n1[-1] - p.n1[ih]
    s2_right = p.n2[-1] - p.n2[ih]
    right = s2_right[None, :] - 2 * hi_v * s1_right[None, :] + hi_v**2 * n_right[None, :]
    inside = total - p.n0[il][:, None] - n_right[None, :]
    step = (hi_v - lo_v) / INT8_STEPS
    cost = np.maximum(left, 0) + np.maximum(right, 0) + inside * step**2 / 12
    return np.where(hi_v > lo_v, cost, np.inf)


def weight_ranges_per_channel(w: np.ndarray, axis: int = 0) -> np.ndarray:
    """Max |w| of each slice along `axis` (weights are symmetric: zero point 0).

    >>> weight_ranges_per_channel(np.array([[1.0, -3.0], [0.5, 0.25]]))
    array([3. , 0.5])
    """
    moved = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
    amax = np.abs(moved).max(axis=1).astype(np.float64)
    _check_finite(0.0, float(amax.max()) if amax.size else 0.0)
    return amax
