"""The DPU float format: exact rounding, checked against the IEEE formats numpy has."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from aipusim.arch import load_arch
from aipusim.isa.float18 import FloatFormat, to_int8

FINITE = st.floats(min_value=-1e30, max_value=1e30, allow_nan=False, allow_infinity=False)


@settings(max_examples=examples(300), deadline=None)
@given(FINITE)
def test_e8m23_is_float32_and_e5m10_is_float16_for_normal_numbers(x: float) -> None:
    # Round-to-nearest-even on the fraction: the same as numpy's IEEE casts wherever those
    # give a normal number (the format has no subnormals by definition).
    f32 = np.float32(x)
    if abs(f32) >= np.finfo(np.float32).tiny:
        assert FloatFormat(8, 23).round(np.float64(x)) == np.float64(f32)
    with np.errstate(over="ignore"):
        f16 = np.float16(x)
    if np.isfinite(f16) and abs(f16) >= np.finfo(np.float16).tiny:
        assert FloatFormat(5, 10).round(np.float64(x)) == np.float64(f16)


@settings(max_examples=examples(200), deadline=None)
@given(FINITE, FINITE)
def test_rounding_is_idempotent_monotonic_and_keeps_ten_bits(a: float, b: float) -> None:
    fmt = FloatFormat(8, 9)
    ra, rb = fmt.round(np.float64(a)), fmt.round(np.float64(b))
    assert fmt.round(ra) == ra
    if a <= b:
        assert ra <= rb
    if ra != 0 and np.isfinite(ra):
        mant = np.frexp(ra)[0] * 2**10  # 10 significant bits: an integer
        assert mant == np.rint(mant)
        assert abs(ra - a) <= abs(ra) * 2.0**-10


def test_edges_flush_saturate_and_keep_nan() -> None:
    fmt = FloatFormat(8, 9)
    assert fmt.round(np.float64(2.0**-127)) == 0.0 and np.signbit(fmt.round(-(2.0**-127)))
    assert fmt.round(np.float64(fmt.min_normal)) == fmt.min_normal
    assert fmt.round(np.float64(3.5e38)) == np.inf
    assert np.isnan(fmt.round(np.float64(np.nan)))
    assert fmt.max_finite == (2 - 2**-9) * 2.0**127
    # ties go to the even neighbour: 1 + 2**-10 -> 1, 1 + 3 * 2**-10 -> 1 + 2**-8
    assert fmt.round(np.float64(1 + 2**-10)) == 1.0
    assert fmt.round(np.float64(1 + 3 * 2**-10)) == 1 + 2**-8


def test_to_int8_rounds_half_to_even_and_saturates() -> None:
    v = np.array([0.5, 1.5, -0.5, 300.0, -np.inf, np.nan, 2.5])
    assert to_int8(v, 0).tolist() == [0, 2, 0, 127, -128, 0, 2]
    assert to_int8(np.array([np.nan]), -5).tolist() == [-5]


def test_the_metis_format_comes_from_the_arch() -> None:
    fmt = FloatFormat.of(load_arch())
    assert (fmt.exponent_bits, fmt.fraction_bits) == (8, 9)
    assert 1 + fmt.exponent_bits + fmt.fraction_bits == load_arch().dpu.float_bits == 18


@pytest.mark.parametrize("fmt", [FloatFormat(8, 9), FloatFormat(5, 12), FloatFormat(11, 6)])
def test_encode_decode_round_trip_every_kind_of_value(fmt: FloatFormat) -> None:
    rng = np.random.default_rng(5)
    values = fmt.round(rng.normal(size=5000) * 10.0 ** rng.integers(-30, 30, 5000))
    edge = [0.0, -0.0, np.inf, -np.inf, np.nan, fmt.min_normal, -fmt.max_finite]
    values = np.concatenate([values, edge])
    bits = fmt.encode(values)
    assert bits.dtype == np.uint32 and int(bits.max()) < 1 << fmt.bits
    back = fmt.decode(bits)
    assert np.array_equal(back, values, equal_nan=True)
    assert np.array_equal(np.signbit(back), np.signbit(values))


def test_encode_refuses_values_the_format_cannot_hold() -> None:
    fmt = FloatFormat(8, 9)
    with pytest.raises(ValueError, match=r"must be values of the format, not 1\.0009765625"):
        fmt.encode([1.0, 1.0 + 2**-10])
