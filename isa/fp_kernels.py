"""int8 kernels of the DPU that step through its short float (`float18.FloatFormat`).

Each function below is the definition of what the DPU computes for one op, given int8
inputs and the op's compile-time parameters (floats in the params are already values of
the format): the int8 reference runs them, and so does the functional simulator, reading
the parameters from the program's parameter blocks (`aipusim.isa.params`).

LayerNormalization (``layernorm``), per row of N normalised elements, x = q - zp_in:
    S1 = sum x, S2 = sum x*x                        (exact integers: int32 on the DPU)
    var = fp((N*S2 - S1**2) / N**2)                  (exact integers, one rounding)
    rstd = fp(1 / fp(sqrt(fp(var + eps_q))))          eps_q = fp(eps / s_in**2)
    k = fp(rstd / N)
    per element: t = fp(fp(N*x - S1) * k), u = fp(t * G), v = fp(u + B)
    q_out = sat(zp_out + rint(v))                   G = fp(gamma / s_out), B = fp(beta / s_out)

Division of two tensors (``div_fp``), a = qa - za, b = qb - zb:
    q_out = sat(zp_out + rint(fp(fp(a / b) * M)))   M = fp(s_a / (s_b * s_out));
    x/0 saturates with the sign of x, 0/0 gives zp_out.

Power of two tensors (``pow_fp``), from two compile-time tables: L[qa] = fp(log2 |a_real|)
(-inf for 0) and the 257-entry E[k] = fp(2**(k/256)):
    y = fp(fp(b * S_b) * L[qa])                       S_b = fp(s_b): the exponent's value
    n = floor(y), k = floor((y - n) * 256 + 1/2): m = fp(E[k] * 2**n)   (piecewise exp2)
    negative bases: an integer exponent gives ±m (odd: -), any other NaN -> zp_out;
    0**b is 0 for b > 0, inf for b < 0, and 1 for b = 0
    q_out = sat(zp_out + rint(fp(m * M)))            M = fp(1 / s_out)

>>> fmt = FloatFormat(8, 9)
>>> q = np.array([[-100, 0, 100]], np.int8)
>>> p = layer_norm_params(fmt, 3, s_in=0.05, eps=1e-5, gamma=np.ones(3), beta=np.zeros(3),
...                       s_out=0.02)
>>> layer_norm_int(q, 0, p, 0, fmt).tolist()
[[-61, 0, 61]]
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from aipusim.isa.float18 import FloatFormat, to_int8

Array = np.ndarray
#: Entries per octave of the exp2 table of ``pow_fp`` (257 entries: 2**(k/256), k=0..256).
EXP2_STEPS = 256


# ----------------------------------------------------------------------- LayerNorm


def layer_norm_params(
    fmt: FloatFormat,
    n: int,
    *,
    s_in: float,
    eps: float,
    gamma: Array,
    beta: Array | None,
    s_out: float,
) -> dict[str, Any]:
    """Compile-time parameters of `layer_norm_int` (gamma/beta over the normalised axes)."""
    beta = np.zeros_like(gamma) if beta is None else beta
    return {
        "n": np.int64(n),
        "eps_q": fmt.round(eps / (s_in * s_in)),
        "gain": fmt.round(np.asarray(gamma, np.float64) / s_out),
        "shift": fmt.round(np.asarray(beta, np.float64) / s_out),
    }


def layer_norm_int(
    q: Array, zp_in: int, params: Mapping[str, Any], zp_out: int, fmt: FloatFormat
) -> Array:
    """LayerNorm of int8 ``q`` over its trailing ``gain.ndim`` axes (module docstring)."""
    gain, shift = np.asarray(params["gain"]), np.asarray(params["shift"])
    n = int(params["n"])
    axes = tuple(range(q.ndim - gain.ndim, q.ndim))
    x = q.astype(np.int64) - zp_in
    s1 = x.sum(axis=axes, keepdims=True)
    s2 = (x * x).sum(axis=axes, keepdims=True)
    var = fmt.round((n * s2 - s1 * s1) / float(n * n))
    rstd = fmt.div(1.0, fmt.sqrt(fmt.add(var, params["eps_q"])))
    k = fmt.div(rstd, float(n))
    t = fmt.mul(fmt.round((n * x - s1).astype(np.float64)), k)
    v = fmt.add(fmt.mul(t, gain), shift)
    return to_int8(v, zp_out)


# ----------------------------------------------------------------------- Div


def div_params(fmt: FloatFormat, s_a: float, s_b: float, s_out: float) -> dict[str, Any]:
    return {"scale": fmt.round(s_a / (s_b * s_out))}


def div_int(
    qa: Array, za: int, qb: Array, zb: int, params: Mapping[str, Any], zp_out: int,
    fmt: FloatFormat,
) -> Array:  # fmt: skip
    """Element-wise a / b of two int8 tensors (numpy broadcasting; module docstring)."""
    a = (qa.astype(np.int64) - za).astype(np.float64)
    b = (qb.astype(np.int64) - zb).astype(np.float64)
    return to_int8(fmt.mul(fmt.div(a, b), params["scale"]), zp_out)


# ----------------------------------------------------------------------- Pow


def pow_params(fmt: FloatFormat, s_a: float, z_a: int, s_b: float, s_out: float) -> dict[str, Any]:
    """The log2 table of the base's 256 int8 values, the exp2 table, and the scales."""
    base = s_a * (np.arange(-128, 128, dtype=np.float64) - z_a)
    with np.errstate(divide="ignore"):
        log2 = np.log2(np.abs(base))
    k = np.arange(EXP2_STEPS + 1, dtype=np.float64)
    return {
        "log2": fmt.round(log2),
        "exp2": fmt.round(np.exp2(k / EXP2_STEPS)),
        "b_scale": fmt.round(s_b),
        "out_scale": fmt.round(1.0 / s_out),
    }


def pow_int(
    qa: Array, za: int, qb: Array, zb: int, params: Mapping[str, Any], zp_out: int,
    fmt: FloatFormat,
) -> Array:  # fmt: skip
    """Element-wise a ** b of two int8 tensors (module docstring)."""
    qa, qb = np.broadcast_arrays(qa, qb)
    a = qa.astype(np.int64) - za
    b = fmt.mul((qb.astype(np.int64) - zb).astype(np.float64), params["b_scale"])
    with np.errstate(all="ignore"):
        y = fmt.mul(b, np.asarray(params["log2"])[qa.astype(np.int64) + 128])
        finite = np.isfinite(y)
        yf = np.where(finite, y, 0.0)
        n = np.clip(np.floor(yf), -4096, 4096)  # beyond: 0 or inf after rounding
        k = np.floor((yf - n) * EXP2_STEPS + 0.5).astype(np.int64)
        m = fmt.round(np.ldexp(np.asarray(params["exp2"])[k], n.astype(np.int64)))
        m = np.where(finite, m, np.where(y > 0, np.inf, 0.0))
        whole = b == np.floor(b)
        odd = whole & (np.abs(np.fmod(b, 2.0)) == 1.0)
        m = np.where(a < 0, np.where(whole, np.where(odd, -m, m), np.nan), m)
        m = np.where((a == 0) & (b == 0), 1.0, m)
    return to_int8(fmt.mul(m, params["out_scale"]), zp_out)


def exp2_relative_error() -> float:
    """Largest relative error of the piecewise exp2 (half a table step): about 0.14 %."""
    return math.expm1(math.log(2.0) / (2 * EXP2_STEPS))


__all__ = [
    "EXP2_STEPS",
    "div_int",
    "div_params",
    "exp2_relative_error",
    "layer_norm_int",
    "layer_norm_params",
    "pow_int",
    "pow_params",
]
