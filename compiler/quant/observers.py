"""Range observers: they watch float tensors during calibration and pick a clipping range.

Two observers, as the `QuantizationScheme` enum of the config reference names them (the
histogram one with several ways, `HistogramRangeMethod`, of choosing its range):

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

The same histogram serves the other range choosers of `HistogramRangeMethod` (the aipusim
extension property ``histogram_range_method``; ``mse`` above is the default):

- ``percentile``: the two-sided percentile range: lo is the (100 - p) % quantile, hi the p %
  quantile of the histogram (p = ``histogram_percentile``, 99.99 by default), read off the
  cumulative count with linear interpolation inside a bin. It clips a fixed share of each
  tail whatever the step costs.
- ``entropy``: the TensorRT-style KL-divergence search, made asymmetric. For a candidate
  [lo, hi] (bin edges, lo <= 0 <= hi, at least 256 bins wide) the reference distribution P
  is the histogram inside it with the clipped tails added to its end bins; Q merges P into
  256 equal groups (the int8 levels) and spreads each group's count evenly over its
  non-empty bins. The candidate with the smallest KL(P || Q) wins. The two ends are searched
  in turn (hi with lo fixed, then lo, then hi again: three 1-D searches on every
  `SEARCH_STRIDE`-th edge, then on every edge near the best one), so a one-sided tensor
  (after a Relu) is TensorRT's 1-D search exactly.

`range_cost` estimates the int8 MSE of any range from the histogram, and
`estimated_sqnr_db` turns it into an SQNR, so the choosers can be compared tensor by tensor.

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

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from aipusim.base.errors import QuantizationError
from aipusim.compiler.config.enums import HistogramRangeMethod

#: Bins of the histogram observer.
HISTOGRAM_BINS = 2048
#: Candidate range edges are taken every this many bins (257 edges over 2048 bins).
SEARCH_STRIDE = 8
#: Levels of an int8 grid minus one (the step of a range [lo, hi] is (hi - lo) / 255).
INT8_STEPS = 255
#: Levels of an int8 grid (the groups the entropy search merges the histogram into).
INT8_LEVELS = INT8_STEPS + 1
#: Default of the ``histogram_percentile`` property (two-sided: 0.01 % clipped per tail).
DEFAULT_PERCENTILE = 99.99


@dataclass(frozen=True)
class HistogramRange:
    """The range chooser of histogram observers: a `HistogramRangeMethod` and its percentile.

    >>> HistogramRange("percentile", 99.9).method
    <HistogramRangeMethod.PERCENTILE: 'percentile'>
    >>> HistogramRange("percentile", 40.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    aipusim.base.errors.QuantizationError: histogram percentile must be ... not 40.0
    """

    method: HistogramRangeMethod = HistogramRangeMethod.MSE
    #: Percent of the values kept inside the range on each side (``percentile`` only).
    percentile: float = DEFAULT_PERCENTILE

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "method", HistogramRangeMethod(self.method))
        except ValueError:
            valid = ", ".join(m.value for m in HistogramRangeMethod)
            raise QuantizationError(
                f"histogram range method must be one of {valid}, not {self.method!r}"
            ) from None
        if not 50.0 < float(self.percentile) <= 100.0:
            raise QuantizationError(
                f"histogram percentile must be a number in (50, 100], not {self.percentile!r}"
            )

    def choose(self, counts: np.ndarray, edges: np.ndarray) -> tuple[float, float]:
        """The range this chooser picks for a histogram."""
        if self.method is HistogramRangeMethod.PERCENTILE:
            return percentile_range(counts, edges, self.percentile)
        if self.method is HistogramRangeMethod.ENTROPY:
            return entropy_range(counts, edges)
        return mse_optimal_range(counts, edges)


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
    """2048-bin histogram; its clipping range is chosen by ``chooser`` (default: MSE-optimal;
    see the module docstring)."""

    def __init__(self, bins: int = HISTOGRAM_BINS, chooser: HistogramRange | None = None) -> None:
        self.bins = bins
        self.chooser = chooser or HistogramRange()
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
        return self.chooser.choose(self.counts, self.edges())

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


def estimated_sqnr_db(counts: np.ndarray, edges: np.ndarray, lo: float, hi: float) -> float:
    """SQNR (dB) of int8 quantization on [lo, hi] as the histogram predicts it: the signal
    power over `range_cost` (bin centres stand for their values).

    >>> x = np.random.default_rng(0).standard_normal(100_000)
    >>> counts, edges = np.histogram(x, bins=2048)
    >>> round(estimated_sqnr_db(counts.astype(float), edges, -4.0, 4.0))
    40
    """
    centres = (edges[:-1] + edges[1:]) / 2
    signal = float((np.asarray(counts, np.float64) * centres * centres).sum())
    noise = range_cost(counts, edges, lo, hi)
    if noise <= 0:
        return float("inf")
    return 10.0 * float(np.log10(signal / noise)) if signal > 0 else float("-inf")


def percentile_range(
    counts: np.ndarray, edges: np.ndarray, percentile: float = DEFAULT_PERCENTILE
) -> tuple[float, float]:
    """The two-sided ``percentile`` range of a histogram: (100 - p) % of the values lie
    below lo and as many above hi (linear inside a bin).

    >>> counts, edges = np.ones(100), np.linspace(0.0, 100.0, 101)
    >>> percentile_range(counts, edges, 99.0)
    (1.0, 99.0)
    """
    cdf = np.concatenate([[0.0], np.cumsum(np.asarray(counts, np.float64))])
    total = cdf[-1]
    tail = total * (100.0 - float(percentile)) / 100.0
    # np.interp needs increasing x: an empty bin repeats a cdf value, so only the edges
    # that start or end a non-empty bin are kept
    rising = np.diff(cdf) > 0
    keep = np.concatenate([rising, [False]]) | np.concatenate([[False], rising])
    lo = float(np.interp(tail, cdf[keep], edges[keep]))
    hi = float(np.interp(total - tail, cdf[keep], edges[keep]))
    return lo, hi


def entropy_range(counts: np.ndarray, edges: np.ndarray) -> tuple[float, float]:
    """The [lo, hi] (lo <= 0 <= hi, bin edges) whose int8 quantization loses the least
    information: the smallest KL(P || Q) (see the module docstring).

    >>> x = np.random.default_rng(0).standard_normal(200_000)
    >>> counts, edges = np.histogram(x, bins=2048)
    >>> lo, hi = entropy_range(counts.astype(float), edges)
    >>> bool(x.min() < lo < -2 and 2 < hi < x.max())
    True
    """
    counts = np.asarray(counts, np.float64)
    n = counts.size
    if n < INT8_LEVELS:
        # too few bins to tell a clipped range from the full one
        return float(min(edges[0], 0.0)), float(max(edges[-1], 0.0))
    zero = int(np.clip(np.searchsorted(edges, 0.0), 0, n))
    zero_bin = int(np.clip(np.searchsorted(edges, 0.0, side="right") - 1, 0, n - 1))
    a, b = 0, n  # the bins of the range: [a, b)
    for side in ("hi", "lo", "hi"):
        a, b = _entropy_search(counts, a, b, (zero, zero_bin), side)
    return float(min(edges[a], 0.0)), float(max(edges[b], 0.0))


def _entropy_search(
    counts: np.ndarray, a: int, b: int, zero: tuple[int, int], side: str
) -> tuple[int, int]:
    """Best end ``side`` of the bin range [a, b) with the other end fixed: every
    `SEARCH_STRIDE`-th candidate, then every one near the best. ``zero``: the first edge
    >= 0 (hi ends at or after it, lo starts at or before it) and the bin holding 0."""
    n = counts.size
    zero_edge, zero_bin = zero

    def ends(lo_i: int, hi_i: int, stride: int) -> np.ndarray:
        if side == "hi":
            return np.arange(max(lo_i, zero_edge, a + INT8_LEVELS), min(hi_i, n) + 1, stride)
        return np.arange(max(lo_i, 0), min(hi_i, zero_edge, b - INT8_LEVELS) + 1, stride)

    def best(cand: np.ndarray) -> int | None:
        if cand.size == 0:
            return None
        starts = np.full(cand.size, a) if side == "hi" else cand
        stops = cand if side == "hi" else np.full(cand.size, b)
        return int(cand[int(np.argmin(_kl_divergences(counts, starts, stops, zero_bin)))])

    coarse = best(ends(0, n, SEARCH_STRIDE))
    if coarse is None:
        return a, b
    fine = best(ends(coarse - SEARCH_STRIDE, coarse + SEARCH_STRIDE, 1))
    end = coarse if fine is None else fine
    return (a, end) if side == "hi" else (end, b)


def _kl_divergences(
    counts: np.ndarray, starts: np.ndarray, stops: np.ndarray, zero_bin: int
) -> np.ndarray:
    """KL(P || Q) of the histogram clipped to bins [start, stop) for each candidate (see
    the module docstring; ``zero_bin`` is the bin holding 0). One row per candidate."""
    n = counts.size
    k = starts.size
    j = np.arange(n)[None, :]
    a, b = starts[:, None], stops[:, None]
    inside_mask = (j >= a) & (j < b)
    inside = np.where(inside_mask, counts[None, :], 0.0)
    cdf = np.concatenate([[0.0], np.cumsum(counts)])
    p = inside.copy()
    rows = np.arange(k)
    p[rows, starts] += cdf[starts]  # values left of the range land on its first bin
    p[rows, stops - 1] += cdf[-1] - cdf[stops]  # and those right of it on its last
    # bin -> int8 level; 0 is a level of every grid, so the bin holding it (the spike after
    # a Relu, the padding) is a group of its own (INT8_LEVELS) instead of being spread
    # over its neighbours; bins outside the range go to a discarded group
    group = ((j - a) * INT8_LEVELS) // (b - a)
    group = np.where(j == zero_bin, INT8_LEVELS, group)
    group = np.where(inside_mask, group, INT8_LEVELS + 1)
    nonzero = p > 0
    flat = (rows[:, None] * (INT8_LEVELS + 2) + group).ravel()
    size = k * (INT8_LEVELS + 2)
    # Q is built from the values inside the range only: what clipping loses shows up as
    # P's heavier end bins
    group_sum = np.bincount(flat, weights=inside.ravel(), minlength=size)
    group_n = np.bincount(flat, weights=nonzero.ravel(), minlength=size)
    q = np.where(nonzero, (group_sum / np.maximum(group_n, 1))[flat].reshape(k, n), 0.0)
    pn = p / p.sum(axis=1, keepdims=True)
    qn = q / np.maximum(q.sum(axis=1, keepdims=True), 1e-300)
    # a bin with P > 0 but no Q (an end bin holding only clipped values) costs as if it
    # held a tiny share: the usual smoothing of this search
    terms = np.where(nonzero, pn * np.log(np.maximum(pn, 1e-300) / np.maximum(qn, 1e-12)), 0.0)
    return terms.sum(axis=1)


#: Bytes of temporaries a weight is worked on in at once (`weight_ranges_per_channel`,
#: `aipusim.compiler.quant.scheme.weight_blocks`).
BLOCK_BYTES = 64 << 20


def weight_ranges_per_channel(w: np.ndarray, axis: int = 0) -> np.ndarray:
    """Max |w| of each slice along `axis` (weights are symmetric: zero point 0).

    >>> weight_ranges_per_channel(np.array([[1.0, -3.0], [0.5, 0.25]]))
    array([3. , 0.5])
    """
    moved = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
    amax = np.empty(moved.shape[0], np.float64)
    # block by block: |w| of a whole weight is a copy of it (max and |.| are exact in any
    # float type, so the block sizes do not change the result)
    rows = max(1, BLOCK_BYTES // max(1, moved.shape[1] * moved.itemsize))
    for i in range(0, moved.shape[0], rows):
        amax[i : i + rows] = np.abs(moved[i : i + rows]).max(axis=1)
    _check_finite(0.0, float(amax.max()) if amax.size else 0.0)
    return amax
