"""Observers: min-max ranges, histogram bookkeeping and the range choosers (MSE, percentile,
entropy)."""

from __future__ import annotations

import numpy as np
import pytest

from aipusim.base.errors import QuantizationError
from aipusim.compiler.quant import observers
from aipusim.compiler.quant.observers import (
    HistogramObserver,
    HistogramRange,
    MinMaxObserver,
    estimated_sqnr_db,
    mse_optimal_range,
    percentile_range,
    range_cost,
    weight_ranges_per_channel,
)


def test_minmax_tracks_extremes_over_batches() -> None:
    obs = MinMaxObserver()
    obs.update(np.array([0.5, -2.0], np.float32))
    obs.update(np.array([3.0, 1.0], np.float32))
    assert obs.range() == (-2.0, 3.0)


def test_minmax_per_channel() -> None:
    obs = MinMaxObserver(axis=1)
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    obs.update(x)
    lo, hi = obs.channel_ranges()
    assert lo.tolist() == [0, 4, 8] and hi.tolist() == [15, 19, 23]


def test_non_finite_values_are_a_quantization_error() -> None:
    with pytest.raises(QuantizationError, match="must be finite"):
        MinMaxObserver().update(np.array([1.0, np.inf], np.float32))
    with pytest.raises(QuantizationError, match="must be finite"):
        HistogramObserver().update(np.array([np.nan], np.float32))


def test_histogram_widening_keeps_every_count() -> None:
    rng = np.random.default_rng(0)
    obs = HistogramObserver()
    obs.update(rng.uniform(-1, 1, 10_000).astype(np.float32))
    obs.update(rng.uniform(-5, 3, 10_000).astype(np.float32))
    assert obs.counts.sum() == pytest.approx(20_000)
    assert obs.lo < -4.9 and obs.hi > 2.9


def test_histogram_range_of_gaussian_clips_less_than_minmax() -> None:
    x = np.random.default_rng(1).standard_normal(200_000).astype(np.float32)
    obs = HistogramObserver()
    obs.update(x)
    lo, hi = obs.range()
    assert x.min() <= lo < 0 < hi <= x.max()
    # Nearly all the mass stays inside the chosen range.
    assert np.mean((x >= lo) & (x <= hi)) > 0.999


def test_mse_range_beats_the_full_range_on_a_long_tail() -> None:
    x = np.random.default_rng(2).laplace(size=100_000)
    counts, edges = np.histogram(x, bins=2048)
    lo, hi = mse_optimal_range(counts.astype(float), edges)

    def mse(a: float, b: float) -> float:
        step = (b - a) / 255
        q = np.clip(np.round((x - a) / step), 0, 255) * step + a
        return float(((q - x) ** 2).mean())

    assert mse(lo, hi) < mse(float(x.min()), float(x.max()))


def test_weight_ranges_per_channel() -> None:
    w = np.array([[[1.0, -4.0]], [[0.5, 0.25]]])
    assert weight_ranges_per_channel(w, axis=0).tolist() == [4.0, 0.5]
    assert weight_ranges_per_channel(w, axis=2).tolist() == [1.0, 4.0]


def test_range_cost_is_lowest_at_the_chosen_range() -> None:
    x = np.random.default_rng(1).laplace(size=50_000)
    counts, edges = np.histogram(x, bins=2048)
    counts = counts.astype(float)
    lo, hi = mse_optimal_range(counts, edges)
    best = range_cost(counts, edges, lo, hi)
    for other in ((lo * 1.1, hi), (lo, hi * 0.9), (float(x.min()), float(x.max()))):
        assert range_cost(counts, edges, *other) > best


def _bins_oracle(flat: np.ndarray, lo: float, hi: float, nbins: int) -> np.ndarray:
    """The bin counts written plainly: float32 (v - lo) times float32 nbins / (hi - lo),
    truncated, the index clipped into the last bin."""
    pos = np.subtract(flat, np.float32(lo), dtype=np.float32)
    pos *= np.float32(nbins / (hi - lo))
    return np.bincount(np.minimum(pos.astype(np.intp), nbins - 1), minlength=nbins)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_accumulate_counts_exactly_as_the_plain_formula(
    dtype: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunked, fused binning: the same counts to the last value, across chunk borders,
    for values on hi itself and float64 input (binned in float32 like float32 input)."""
    monkeypatch.setattr(observers, "ACCUMULATE_CHUNK", 1000)
    rng = np.random.default_rng(3)
    normal = rng.standard_normal(4321).astype(dtype)
    relu = np.maximum(normal, 0)  # many zeros: lo itself
    cases = [(x, float(x.min()), float(x.max())) for x in (normal, relu)]
    for x, a, b in [*cases, (np.full(7, 1.5, dtype), 1.5, 1.5 + 1.5e-6)]:
        counts = np.zeros(2048)
        observers._accumulate(x, a, b, counts)
        np.testing.assert_array_equal(counts, _bins_oracle(x, a, b, 2048))
    assert _bins_oracle(relu, 0.0, float(relu.max()), 2048)[-1] > 0  # the maximum is on hi


def test_histogram_observer_over_widening_batches_matches_the_plain_formula() -> None:
    rng = np.random.default_rng(4)
    batches = [rng.normal(0, s, 5000).astype(np.float32) for s in (1.0, 3.0, 0.5, 4.0)]
    obs = HistogramObserver()
    want = np.zeros(obs.bins)
    lo = hi = None
    for x in batches:
        obs.update(x)
        if lo is None:
            lo, hi = float(x.min()), float(x.max())
        elif x.min() < lo or x.max() > hi:
            new_lo, new_hi = min(lo, float(x.min())), max(hi, float(x.max()))
            old_edges = np.linspace(lo, hi, obs.bins + 1)
            cdf = np.concatenate([[0.0], np.cumsum(want)])
            want = np.diff(np.interp(np.linspace(new_lo, new_hi, obs.bins + 1), old_edges, cdf))
            lo, hi = new_lo, new_hi
        want += _bins_oracle(x, lo, hi, obs.bins)
    assert (obs.lo, obs.hi) == (lo, hi)
    np.testing.assert_array_equal(obs.counts, want)


def _quant_mse(x: np.ndarray, lo: float, hi: float) -> float:
    """The true int8 MSE of ``x`` on the asymmetric grid [lo, hi] (clipped outside)."""
    step = (hi - lo) / 255
    q = np.clip(np.round((x - lo) / step), 0, 255) * step + lo
    return float(((q - x) ** 2).mean())


def _observed(x: np.ndarray, method: str, percentile: float = 99.99) -> HistogramObserver:
    obs = HistogramObserver(chooser=HistogramRange(method, percentile))
    obs.update(x.astype(np.float32))
    return obs


def test_percentile_clips_a_laplacian_tail_at_the_quantiles() -> None:
    x = np.random.default_rng(5).laplace(size=400_000)
    lo, hi = _observed(x, "percentile", 99.9).range()
    # each tail keeps 0.1 % of the values outside (within a bin of the histogram)
    assert np.mean(x < lo) == pytest.approx(0.001, abs=2e-4)
    assert np.mean(x > hi) == pytest.approx(0.001, abs=2e-4)
    assert x.min() < lo < 0 < hi < x.max()
    # a higher percentile clips less
    lo2, hi2 = _observed(x, "percentile", 99.999).range()
    assert lo2 < lo and hi2 > hi
    assert _observed(x, "percentile", 100.0).range() == pytest.approx((x.min(), x.max()))


def test_percentile_range_reads_quantiles_inside_bins() -> None:
    counts = np.array([0.0, 10.0, 0.0, 10.0, 0.0])
    edges = np.linspace(0.0, 5.0, 6)
    assert percentile_range(counts, edges, 75.0) == pytest.approx((1.5, 3.5))


def test_entropy_on_a_gaussian_is_a_sane_range() -> None:
    x = np.random.default_rng(6).standard_normal(400_000)
    lo, hi = _observed(x, "entropy").range()
    # KL clips a little of the Gaussian's tails, never to less than 3 sigma
    assert x.min() <= lo <= -3.0 and 3.0 <= hi <= x.max()
    assert max(-lo, hi) < x.max() - x.min()


def test_entropy_keeps_the_relu_range_despite_the_spike_at_zero() -> None:
    """Half the values are exactly 0 (a Relu); 0 is on every grid, so the spike must not
    pull the range in."""
    x = np.maximum(np.random.default_rng(7).standard_normal(400_000), 0.0)
    lo, hi = _observed(x, "entropy").range()
    assert lo == 0.0 and 3.0 < hi <= x.max()


def test_entropy_clips_a_lone_outlier_that_mse_keeps() -> None:
    x = np.append(np.random.default_rng(8).standard_normal(100_000), 60.0)
    assert _observed(x, "mse").range()[1] > 30  # MSE pays for the outlier's squared error
    assert _observed(x, "entropy").range()[1] < 6


@pytest.mark.parametrize("method", ["mse", "percentile", "entropy"])
def test_estimated_error_matches_the_true_int8_error(method: str) -> None:
    """`range_cost` (the error estimate every chooser can be compared by) is within 10 % of
    the real int8 MSE, and MSE's range has the lowest estimate."""
    x = np.random.default_rng(9).laplace(size=200_000)
    obs = _observed(x, method)
    counts, edges = obs.counts, obs.edges()
    lo, hi = obs.range()
    estimate = range_cost(counts, edges, lo, hi) / x.size
    assert estimate == pytest.approx(_quant_mse(x, lo, hi), rel=0.1)
    mse_lo, mse_hi = mse_optimal_range(counts, edges)
    assert range_cost(counts, edges, mse_lo, mse_hi) <= range_cost(counts, edges, lo, hi)
    sqnr = estimated_sqnr_db(counts, edges, lo, hi)
    true_sqnr = 10 * np.log10((x**2).mean() / _quant_mse(x, lo, hi))
    assert sqnr == pytest.approx(true_sqnr, abs=0.5)


def test_bad_range_method_and_percentile_are_one_line_errors() -> None:
    valid = "must be one of mse, percentile, entropy, not 'kl'"
    with pytest.raises(QuantizationError, match=valid):
        HistogramRange("kl")
    with pytest.raises(QuantizationError, match=r"must be a number in \(50, 100\], not 101"):
        HistogramRange("percentile", 101)
