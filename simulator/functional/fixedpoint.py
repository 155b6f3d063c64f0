"""The fixed-point steps the units share (numba): rounding shifts, the requantize of a
`CHANNEL` record, clamps and table lookups.

>>> int(rshift(5, 1)), int(rshift(-5, 1)), int(requant(10, 2, 1 << 30, 31, 3))
(3, -2, 9)
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def rshift(v, s):  # pragma: no cover - jitted
    """``(v + 2**(s-1)) >> s``, round half up; a shift of 0 or less rounds nothing."""
    if s <= 0:
        return v
    return (v + (np.int64(1) << (s - 1))) >> s


@numba.njit(cache=True)
def requant(acc, bias, mult, shift, zo):  # pragma: no cover - jitted
    """``((acc + bias) * mult + 2**(shift-1)) >> shift) + zo`` (before the clamp)."""
    return rshift((acc + bias) * mult, shift) + zo


@numba.njit(cache=True)
def saturate(v, lo, hi):  # pragma: no cover - jitted
    """(``v`` clamped to ``[lo, hi]``, 1 if it was clamped else 0)."""
    if v < lo:
        return lo, 1
    if v > hi:
        return hi, 1
    return v, 0


@numba.njit(cache=True)
def finish(r, lo, hi, lut, use_lut):  # pragma: no cover - jitted
    """Clamp to the record's ``[lo, hi]``, then to int8, then the table lookup."""
    r = min(max(r, lo), hi)
    r = min(max(r, -128), 127)
    if use_lut:
        r = lut[r + 128]
    return r


__all__ = ["finish", "requant", "rshift", "saturate"]
