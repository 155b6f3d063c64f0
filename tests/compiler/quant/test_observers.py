"""Observers: min-max ranges, histogram bookkeeping and the MSE range search."""

from __future__ import annotations

import numpy as np
import pytest

from aipusim.base.errors import QuantizationError
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
