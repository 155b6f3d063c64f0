"""Fixed-point arithmetic shared by the quantizer and the int8 reference (no numba).

The quantizer derives requantize multipliers and lookup tables here while building the
quantized graph; `kernels` (the numba-jitted int8 reference) uses the same definitions.
Keeping them apart lets a compile run without importing numba's compiler.

>>> m, n = quantize_multiplier(0.5)
>>> int(m[0]), int(n[0])
(1073741824, 31)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from aipusim.base.errors import QuantizationError

QMIN = -128
QMAX = 127
#: Bits of the fixed-point requantize multiplier (a Q31 mantissa).
MULT_BITS = 31
#: Largest right shift the requantize unit applies (the int64 product keeps 63 bits).
MAX_SHIFT = 62
#: Largest multiplier kept as it is. Requantize multiplies integers (sums, products): from
#: 2**16 up, every nonzero one leaves even the 16-bit grid and saturates, so a larger
#: multiplier (an output range far below the input's steps, e.g. a channel clamped by its
#: Relu next to ones of 1e-20) gives the same outputs capped here.
MAX_MULTIPLIER = 2.0**29
#: Fraction bits of the linear-resize interpolation weights (per axis).
RESIZE_WEIGHT_BITS = 10
#: Fraction bits of the softmax exp table.
SOFTMAX_EXP_BITS = 15

Int8Lut = np.ndarray


def quantize_multiplier(real: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """Fixed-point form (m, n) of positive real multipliers: ``real ~= m * 2**-n``.

    m is in [2**30, 2**31) (31 significant bits) unless the multiplier is so small that
    the shift would exceed `MAX_SHIFT`, where m shrinks instead (down to 0). Multipliers
    above `MAX_MULTIPLIER` are capped to it (the same saturated outputs).

    >>> m, n = quantize_multiplier(0.75)
    >>> float(m[0] * 2.0 ** -n[0])
    0.75
    >>> m, n = quantize_multiplier(1e15)
    >>> float(m[0] * 2.0 ** -n[0]) == MAX_MULTIPLIER
    True
    """
    r = np.atleast_1d(np.asarray(real, dtype=np.float64))
    if np.any(r < 0) or not np.all(np.isfinite(r)):
        raise QuantizationError(f"requantize multipliers must be finite and >= 0, not {r}")
    r = np.minimum(r, MAX_MULTIPLIER)
    frac, exp = np.frexp(r)  # r = frac * 2**exp, frac in [0.5, 1)
    m = np.rint(frac * (1 << MULT_BITS)).astype(np.int64)
    carry = m == (1 << MULT_BITS)
    m[carry] //= 2
    exp = exp + carry
    n = MULT_BITS - exp.astype(np.int64)
    assert np.all(n >= 1), "MAX_MULTIPLIER keeps the shift positive"
    big = n > MAX_SHIFT
    m[big] = np.rint(r[big] * 2.0**MAX_SHIFT).astype(np.int64)
    n[big] = MAX_SHIFT
    m[r == 0] = 0
    return m, n


def build_lut(
    fn: Callable[[np.ndarray], np.ndarray],
    in_scale: float,
    in_zp: int,
    out_scale: float,
    out_zp: int,
) -> Int8Lut:
    """The 256-entry int8 table of ``fn`` between two quantizations (index ``q + 128``).

    >>> lut = build_lut(lambda v: np.maximum(v, 0), 0.1, 0, 0.1, 0)
    >>> [int(lut[q + 128]) for q in (-5, 0, 7)]
    [0, 0, 7]
    """
    q = np.arange(QMIN, QMAX + 1, dtype=np.float64)
    with np.errstate(all="ignore"):
        y = fn(in_scale * (q - in_zp))
    y = np.nan_to_num(np.asarray(y, np.float64), nan=0.0, posinf=np.inf, neginf=-np.inf)
    with np.errstate(all="ignore"):
        qo = np.rint(y / out_scale) + out_zp
    return np.clip(np.nan_to_num(qo, posinf=QMAX, neginf=QMIN), QMIN, QMAX).astype(np.int8)


__all__ = [
    "MAX_MULTIPLIER",
    "MAX_SHIFT",
    "MULT_BITS",
    "QMAX",
    "QMIN",
    "RESIZE_WEIGHT_BITS",
    "SOFTMAX_EXP_BITS",
    "Int8Lut",
    "build_lut",
    "quantize_multiplier",
]
