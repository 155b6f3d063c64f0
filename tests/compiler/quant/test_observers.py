"""Observers: min-max ranges, histogram bookkeeping and the MSE range search."""

from __future__ import annotations

import numpy as np
import pytest

from aipusim.base.errors import QuantizationError
from aipusim.compiler.quant import observers
from aipusim.compiler.quant.observers import (
    HistogramObserver,
    MinMaxObserver,
    mse_optimal_range,
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
