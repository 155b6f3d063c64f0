"""The DPU float kernels of the int8 reference: close to the float ops, exact at the edges."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from aipusim.compiler.quant.float_exec import layer_norm
from aipusim.isa import fp_kernels as FK
from aipusim.isa.float18 import FloatFormat

FMT = FloatFormat(8, 9)
RNG = np.random.default_rng(11)


def _q(x: np.ndarray, scale: float, zp: int = 0) -> np.ndarray:
    return np.clip(np.rint(x / scale) + zp, -128, 127).astype(np.int8)


@pytest.mark.parametrize("n", [8, 192, 768])
def test_layer_norm_is_within_one_output_step_of_float(n: int) -> None:
    x = RNG.normal(0.3, 2.0, (6, n))
    s_in, zp_in = 12.0 / 255, -10
    q = _q(x, s_in, zp_in)
    xr = s_in * (q.astype(np.float64) - zp_in)  # the float LN of the int8 input itself
    gamma, beta = RNG.normal(1, 0.2, n), RNG.normal(0, 0.2, n)
    ref = layer_norm(xr, gamma, beta, -1, 1e-5)
    s_out, zp_out = 9.0 / 255, 3
    p = FK.layer_norm_params(FMT, n, s_in=s_in, eps=1e-5, gamma=gamma, beta=beta, s_out=s_out)
    got = s_out * (FK.layer_norm_int(q, zp_in, p, zp_out, FMT).astype(np.float64) - zp_out)
    assert np.abs(got - np.clip(ref, -128 * s_out, 127 * s_out)).max() <= 1.01 * s_out


def test_layer_norm_of_a_constant_row_is_the_shift_and_negation_is_symmetric() -> None:
    n = 16
    gamma, beta = np.ones(n), np.linspace(-1, 1, n)
    p = FK.layer_norm_params(FMT, n, s_in=0.1, eps=1e-5, gamma=gamma, beta=beta, s_out=0.05)
    const = FK.layer_norm_int(np.full((1, n), 7, np.int8), 0, p, 0, FMT)
    assert const.tolist() == [np.rint(beta / 0.05).astype(int).tolist()]
    p0 = FK.layer_norm_params(FMT, n, s_in=0.1, eps=1e-5, gamma=gamma, beta=None, s_out=0.05)
    q = RNG.integers(-100, 100, (3, n)).astype(np.int8)
    assert np.array_equal(
        FK.layer_norm_int(-q, 0, p0, 0, FMT), -FK.layer_norm_int(q, 0, p0, 0, FMT)
    )


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(-128, 127), st.integers(-128, 127))
def test_div_is_the_rounded_quotient(qa: int, qb: int) -> None:
    s_a, s_b, s_out = 0.02, 0.03, 0.05
    p = FK.div_params(FMT, s_a, s_b, s_out)
    got = int(FK.div_int(np.array([qa], np.int8), 1, np.array([qb], np.int8), -2, p, 0, FMT)[0])
    a, b = qa - 1, qb + 2
    if b == 0:
        assert got == (0 if a == 0 else (127 if a > 0 else -128))
        return
    want = a * s_a / (b * s_b) / s_out
    # two float18 roundings (2**-10 relative each) before the final rounding to int8
    assert abs(got - np.clip(want, -128, 127)) <= 0.5 + abs(want) * 2.0**-9 + 1e-9


def test_pow_follows_the_float_power_and_its_edge_cases() -> None:
    s_a, s_b = 3 / 127, 2 / 127
    base = RNG.uniform(0.1, 3, 2000)
    expo = RNG.uniform(-2, 2, 2000)
    qa, qb = _q(base, s_a), _q(expo, s_b)
    want = (s_a * qa.astype(np.float64)) ** (s_b * qb.astype(np.float64))
    s_out = 40 / 255
    p = FK.pow_params(FMT, s_a, 0, s_b, s_out)
    got = FK.pow_int(qa, 0, qb, 0, p, 0, FMT).astype(np.float64)
    bound = 0.5 + np.abs(want / s_out) * (FK.exp2_relative_error() + 3 * 2.0**-10) + 1e-6
    assert np.all(np.abs(got - np.clip(want / s_out, -128, 127)) <= bound)
    # base -1 (q -50 at scale 0.02) and 0, exponents 1, 0.5, 0, -1 (q 126, 63, 0, -126)
    p = FK.pow_params(FMT, 0.02, 0, 1 / 126, 0.5)
    a = np.array([-50, -50, -50, 0, 0, 0], np.int8)
    b = np.array([126, 63, 0, 126, 0, -126], np.int8)
    # (-1)^1 = -1, (-1)^0.5 = NaN -> 0, (-1)^0 = 1, 0^1 = 0, 0^0 = 1, 0^-1 = inf (saturates)
    assert FK.pow_int(a, 0, b, 0, p, 0, FMT).tolist() == [-2, 0, 2, 0, 2, 127]
