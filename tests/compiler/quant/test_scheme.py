"""Quantization parameter arithmetic of the schemes."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from aipusim.compiler.ir import Node, Op
from aipusim.compiler.quant.observers import HistogramObserver, MinMaxObserver
from aipusim.compiler.quant.quantize import saturate_bias
from aipusim.compiler.quant.scheme import (
    Scheme,
    activation_qparams,
    dequantize_values,
    make_observer,
    quantize_values,
    quantize_weights,
    snap_range,
    weight_scales,
)


def test_zero_is_exactly_representable() -> None:
    for lo, hi in [(-1.0, 3.0), (0.2, 5.0), (-7.0, -0.5), (-0.3, 0.01)]:
        scale, zp = activation_qparams(lo, hi)
        q0 = quantize_values(np.zeros(1), scale, zp)
        assert dequantize_values(q0, scale, zp)[0] == 0.0


def test_activation_grid_covers_the_range() -> None:
    scale, zp = activation_qparams(-2.0, 6.0)
    q = quantize_values(np.array([-2.0, 6.0]), scale, zp)
    back = dequantize_values(q, scale, zp)
    assert np.allclose(back, [-2.0, 6.0], atol=float(scale) / 2 + 1e-6)


def test_per_channel_activation_params() -> None:
    scale, zp = activation_qparams(np.array([-1.0, 0.0]), np.array([1.0, 4.0]))
    assert scale.shape == (2,) and zp.shape == (2,) and int(zp[1]) == -128


def test_weights_symmetric_per_channel_error_bound() -> None:
    w = np.random.default_rng(0).normal(0, [[1.0], [0.01]], (2, 50))
    s = weight_scales(np.abs(w).max(axis=1))
    q = quantize_weights(w, s, axis=0)
    assert q.min() >= -127 and q.max() <= 127
    err = np.abs(q * s[:, None].astype(np.float64) - w)
    assert np.all(err <= s[:, None] / 2 + 1e-9)


def test_bias_int32_uses_input_times_weight_scale() -> None:
    b = np.array([0.5, -0.25])
    node = Node("c", Op.CONV, ("x", "w", "b"), ("y",))
    q = saturate_bias(node, b, np.array([0.01 * 0.02, 0.01 * 0.05]), np.zeros(2, np.int64), 0)
    assert q.dtype == np.int32 and q.tolist() == [2500, -500]


def test_observers_of_each_scheme() -> None:
    assert isinstance(make_observer(Scheme.PER_TENSOR_HISTOGRAM, False), HistogramObserver)
    assert isinstance(make_observer(Scheme.PER_TENSOR_MIN_MAX, False), MinMaxObserver)
    hybrid = make_observer(Scheme.HYBRID_PER_TENSOR_PER_CHANNEL, True)
    assert isinstance(hybrid, MinMaxObserver) and hybrid.axis == 1


@given(st.floats(-1e6, 0.0, allow_subnormal=False), st.floats(0.0, 1e6, allow_subnormal=False))
def test_snapped_range_contains_the_range_and_is_at_most_one_step_wider(
    lo: float, hi: float
) -> None:
    slo, shi = (float(v) for v in snap_range(lo, hi))
    assert slo <= lo and hi <= shi
    # 8 significant bits: a step is at most 2**-7 of the value
    assert lo - slo <= abs(lo) * 2**-7 and shi - hi <= hi * 2**-7
    # on the grid already: unchanged
    assert tuple(float(v) for v in snap_range(slo, shi)) == (slo, shi)


def test_snap_range_is_per_channel_and_keeps_exact_bounds() -> None:
    lo, hi = snap_range(np.array([-1.0, 0.0]), np.array([6.0, 3.0000001]))
    assert lo.tolist() == [-1.0, 0.0] and hi.tolist() == [6.0, 3.015625]


def test_the_config_picks_the_histogram_range_method(cnn) -> None:
    """histogram_range_method/histogram_percentile reach every histogram observer: a low
    percentile clips the input range; min-max schemes have no histogram to choose from."""
    from aipusim.compiler.config import CompilerConfig
    from aipusim.compiler.quant import calibrate_and_quantize, random_calibration

    data = random_calibration({"input": (1, 3, 16, 16)}, samples=4)

    def input_scale(**props: object) -> float:
        q = calibrate_and_quantize(cnn, CompilerConfig(**props), data)
        return float(q.qparams("input").scale)

    mse = input_scale()
    assert input_scale(histogram_range_method="percentile", histogram_percentile=90) < mse / 2
    assert input_scale(histogram_range_method="entropy") != mse
    minmax = {"quantization_scheme": "per_tensor_min_max"}
    assert input_scale(**minmax, histogram_range_method="percentile") == input_scale(**minmax)
