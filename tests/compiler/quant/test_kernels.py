"""The integer kernels against slow, obviously-correct references of the same integer math."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from aipusim.compiler.quant import kernels as K


@pytest.mark.parametrize(
    ("c_in", "c_out", "k", "stride", "pads", "dil", "group"),
    [
        (3, 4, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),
        (4, 6, 3, (2, 1), (0, 1, 2, 0), (1, 2), 2),
        (5, 5, 3, (2, 2), (1, 1, 1, 1), (1, 1), 5),  # depthwise
        (4, 8, 3, (1, 1), (1, 1, 1, 1), (1, 1), 4),  # depthwise, multiplier 2
        (6, 7, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),  # pointwise fast path
        (3, 2, 5, (3, 2), (2, 2, 2, 2), (1, 1), 1),
    ],
)
def test_conv_accumulate_is_exact(c_in, c_out, k, stride, pads, dil, group) -> None:
    rng = np.random.default_rng(c_in * 7 + c_out)
    x = rng.integers(-128, 128, (2, c_in, 9, 11)).astype(np.int8)
    w = rng.integers(-127, 128, (c_out, c_in // group, k, k)).astype(np.int8)
    xc = x.astype(np.int64) - 17
    ref = K.conv_acc_reference(xc, w, stride, pads, dil, group)
    got = K.conv_accumulate(
        xc.astype(np.float64),
        w,
        strides=stride,
        pads=pads,
        dilations=dil,
        group=group,
        out_hw=ref.shape[2:],
        acc_dtype=np.float64,
    )
    assert np.array_equal(np.rint(got).astype(np.int64), ref)


def test_conv_accumulate_stays_exact_at_the_int32_worst_case() -> None:
    # 3x3x512 taps of (255 * 127): the largest sums a layer of a zoo model can reach.
    x = np.full((1, 512, 3, 3), 255.0)
    w = np.full((1, 512, 3, 3), 127, np.int8)
    got = K.conv_accumulate(
        x,
        w,
        strides=(1, 1),
        pads=(0, 0, 0, 0),
        dilations=(1, 1),
        group=1,
        out_hw=(1, 1),
        acc_dtype=np.float64,
    )
    assert int(got[0, 0, 0, 0]) == 512 * 9 * 255 * 127


def _requant_exact(acc: int, bias: int, m: int, n: int, zp: int) -> int:
    """round-half-up((acc + bias) * m / 2**n) + zp, saturated (exact rational arithmetic)."""
    v = Fraction((acc + bias) * m, 2**n) + Fraction(1, 2)
    q = v.numerator // v.denominator + zp
    return max(-128, min(127, q))


@settings(max_examples=examples(200), deadline=None)
@given(
    acc=st.integers(-(2**24), 2**24),
    bias=st.integers(-(2**20), 2**20),
    real=st.floats(1e-6, 0.9),
    zp=st.integers(-128, 127),
)
def test_requantize_rounds_half_up_exactly(acc: int, bias: int, real: float, zp: int) -> None:
    m, n = K.quantize_multiplier(real)
    got = K.requantize(np.array([[[acc]]]), np.array([bias]), m, n, np.array([zp], np.int64))
    assert int(got[0, 0, 0]) == _requant_exact(acc, bias, int(m[0]), int(n[0]), zp)


@settings(max_examples=examples(200), deadline=None)
@given(real=st.floats(1e-12, 1e6))
def test_quantize_multiplier_precision(real: float) -> None:
    m, n = K.quantize_multiplier(real)
    approx = int(m[0]) * 2.0 ** -int(n[0])
    if n[0] < K.MAX_SHIFT:
        assert 2**30 <= m[0] < 2**31
        assert abs(approx - real) <= real * 2.0**-30
    else:
        assert abs(approx - real) <= 2.0**-K.MAX_SHIFT


def test_requantize_clamps_to_the_given_bounds() -> None:
    m, n = K.quantize_multiplier(1.0 / 4)
    out = K.requantize(
        np.array([[[-1000, 40, 1000]]]),
        np.zeros(1, np.int64),
        m,
        n,
        np.array([-128]),
        lo=-128,
        hi=100,
    )
    assert out.tolist() == [[[-128, -118, 100]]]


def test_rounding_shift_is_round_half_up() -> None:
    v = np.array([-6, -5, -4, -3, 3, 4, 5, 6])
    assert K.rounding_shift(v, 1).tolist() == [-3, -2, -2, -1, 2, 2, 3, 3]


def test_lut_matches_the_quantized_function() -> None:
    lut = K.build_lut(np.tanh, 0.05, 10, 1 / 128, 0)
    q = np.arange(-128, 128)
    want = np.clip(np.rint(np.tanh(0.05 * (q - 10)) * 128), -128, 127)
    assert np.array_equal(K.apply_lut(q.astype(np.int8), lut), want.astype(np.int8))


def test_lut_saturates_infinities() -> None:
    lut = K.build_lut(lambda v: 1.0 / v, 0.1, 0, 0.1, 0)
    assert lut[128] == 127  # 1/0 -> +inf -> saturated


def test_max_pool_matches_numpy() -> None:
    x = np.random.default_rng(3).integers(-128, 128, (1, 2, 6, 6)).astype(np.int8)
    got = K.max_pool(x, (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), (3, 3))
    want = x.reshape(1, 2, 3, 2, 3, 2).max(axis=(3, 5))
    assert np.array_equal(got, want)


def test_pool_sum_counts_exclude_padding() -> None:
    x = np.ones((1, 1, 4, 4), np.int64)
    sums, count = K.pool_sum(
        x, (3, 3), (1, 1), (1, 1, 1, 1), (4, 4), count_include_pad=False, acc_dtype=np.int64
    )
    assert count[0, 0] == 4 and count[1, 1] == 9
    assert np.array_equal(sums[0, 0], count)


def test_rescale_sum_adds_in_fixed_point() -> None:
    a = np.array([10, -20], np.int8)
    b = np.array([3, 5], np.int8)
    # 0.1*(a-0) + 0.2*(b-1) in units of 0.05 -> 2a + 4(b-1)
    out = K.rescale_sum([(a, 0, 0.1), (b, 1, 0.2)], 0.05, 0, (2,))
    assert out.tolist() == [28, -24]


def test_softmax_int_is_close_to_float() -> None:
    rng = np.random.default_rng(4)
    x = rng.integers(-128, 128, (3, 10)).astype(np.int8)
    s_in = 0.05
    got = (K.softmax_int(x, 1, s_in, 1 / 256, -128).astype(np.float64) + 128) / 256
    xi = x.astype(np.int64)
    e = np.exp(s_in * (xi - xi.max(axis=1, keepdims=True)))
    want = e / e.sum(axis=1, keepdims=True)
    assert np.abs(got - want).max() <= 1.5 / 256


def test_resize_linear_int_weights() -> None:
    x = np.array([[0, 100]], np.int64)
    i0, i1, frac = np.array([0, 0, 1]), np.array([1, 1, 1]), np.array([0.0, 0.25, 0.0])
    v = K.resize_linear_int(x, [(i0, i1, frac)])
    assert (v / 2**K.RESIZE_WEIGHT_BITS).tolist() == [[0.0, 25.0, 100.0]]
