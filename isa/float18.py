"""The DPU's short float ("float18"): the number format and its exact rounding.

The DPU computes some steps of the transformer ops (LayerNorm's normalisation, division
and powers of two tensors) in a binary float narrower than float32: 1 sign bit,
``exponent_bits`` and ``fraction_bits`` from ``arch.dpu`` (8 and 9 by default). The int8
reference and the functional simulator must agree bit for bit, so every float step is
defined here, once:

- a value is a float64 that `FloatFormat.round` has rounded: round to nearest, ties to even,
  on ``fraction_bits`` fraction bits; results below the smallest normal number
  2**(1 - bias) are flushed to (signed) zero (no subnormals); results beyond the largest
  finite number (2 - 2**-f) * 2**bias become ±inf; NaN stays NaN;
- an operation (``mul``, ``add``, ``div``, ``sqrt``) is the float64 IEEE operation on two
  format values followed by `round`. Products and sums of two format values are exact in
  float64, so they are correctly rounded; quotients and roots are rounded twice (53 bits,
  then ``fraction_bits``), which is the definition, not an approximation of one.

Transcendental functions never run in float: they are tables computed at compile time
(data of the program), see `aipusim.isa.fp_kernels`.

>>> fmt = FloatFormat(8, 9)
>>> float(fmt.round(np.float64(1.0 + 2**-10)))  # a tie: rounds to the even neighbour 1.0
1.0
>>> float(fmt.round(np.float64(1.0 + 3 * 2**-10)))
1.00390625
>>> float(fmt.div(np.float64(1.0), np.float64(3.0)))
0.33349609375
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

Array = np.ndarray


@dataclass(frozen=True)
class FloatFormat:
    """A binary float with ``exponent_bits`` and ``fraction_bits`` (plus a sign bit)."""

    exponent_bits: int = 8
    fraction_bits: int = 9

    def __post_init__(self) -> None:
        assert 2 <= self.exponent_bits <= 11 and 1 <= self.fraction_bits <= 52, self

    @classmethod
    def of(cls, arch: Any) -> FloatFormat:
        """The DPU float format of an `Arch`."""
        return cls(arch.dpu.float_exponent_bits, arch.dpu.float_fraction_bits)

    @property
    def bias(self) -> int:
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def min_normal(self) -> float:
        return float(np.ldexp(1.0, 1 - self.bias))

    @property
    def max_finite(self) -> float:
        return float(np.ldexp(2.0 - 2.0**-self.fraction_bits, self.bias))

    def round(self, x: Array | float) -> Array:
        """Round float64 values to this format (see the module docstring)."""
        v = np.asarray(x, np.float64)
        mant, exp = np.frexp(v)  # v = mant * 2**exp, 0.5 <= |mant| < 1
        with np.errstate(invalid="ignore", over="ignore"):
            scaled = np.rint(np.ldexp(mant, self.fraction_bits + 1))  # ties to even
            r = np.ldexp(scaled, exp - self.fraction_bits - 1)
            r = np.where(np.abs(r) < self.min_normal, np.copysign(0.0, v), r)
            r = np.where(np.abs(r) > self.max_finite, np.copysign(np.inf, v), r)
        return np.where(np.isfinite(v), r, v)

    @property
    def bits(self) -> int:
        """Width of a value: sign, exponent and fraction bits."""
        return 1 + self.exponent_bits + self.fraction_bits

    def encode(self, x: Array | float) -> Array:
        """The bit patterns (uint32, in the low `bits` bits) of values of this format: sign,
        biased exponent, fraction, IEEE-style (exponent 0: zero, all ones: inf, or NaN with
        the top fraction bit). Values that `round` would change are refused.

        >>> fmt = FloatFormat(8, 9)
        >>> [hex(int(b)) for b in fmt.encode([1.0, -2.0, np.inf])]
        ['0xfe00', '0x30000', '0x1fe00']
        >>> fmt.decode(fmt.encode([0.33349609375, -0.0])).tolist()
        [0.33349609375, -0.0]
        """
        v = np.asarray(x, np.float64)
        same = (self.round(v) == v) | np.isnan(v)
        if not np.all(same):
            bad = v[~same].reshape(-1)[0]
            raise ValueError(f"float18 values must be values of the format, not {float(bad)!r}")
        e, f = self.exponent_bits, self.fraction_bits
        top = (1 << e) - 1
        with np.errstate(invalid="ignore"):
            mant, exp = np.frexp(np.abs(np.nan_to_num(v, nan=0.0, posinf=0.0, neginf=0.0)))
        frac = np.rint((mant * 2 - 1) * (1 << f)).astype(np.int64)
        biased = (exp - 1 + self.bias).astype(np.int64)
        zero = v == 0
        biased = np.where(zero, 0, biased)
        frac = np.where(zero, 0, frac)
        inf, nan = np.isinf(v), np.isnan(v)
        biased = np.where(inf | nan, top, biased)
        frac = np.where(inf, 0, np.where(nan, 1 << (f - 1), frac))
        sign = np.signbit(v).astype(np.int64)
        return ((sign << (e + f)) | (biased << f) | frac).astype(np.uint32)

    def decode(self, bits: Array) -> Array:
        """Values (float64) of bit patterns `encode` made; a zero exponent reads as a signed
        zero (no subnormals)."""
        b = np.asarray(bits, np.int64)
        e, f = self.exponent_bits, self.fraction_bits
        top = (1 << e) - 1
        sign = np.where((b >> (e + f)) & 1, -1.0, 1.0)
        biased = (b >> f) & top
        frac = (b & ((1 << f) - 1)).astype(np.float64)
        with np.errstate(over="ignore"):  # the all-ones exponent: replaced below
            value = np.ldexp(1.0 + frac / (1 << f), (biased - self.bias).astype(np.int64))
        value = np.where(biased == 0, 0.0, value)
        value = np.where(biased == top, np.where(frac == 0, np.inf, np.nan), value)
        return sign * value

    def mul(self, a: Array, b: Array) -> Array:
        with np.errstate(all="ignore"):
            return self.round(np.multiply(a, b, dtype=np.float64))

    def add(self, a: Array, b: Array) -> Array:
        with np.errstate(all="ignore"):
            return self.round(np.add(a, b, dtype=np.float64))

    def div(self, a: Array, b: Array) -> Array:
        with np.errstate(all="ignore"):
            return self.round(np.divide(a, b, dtype=np.float64))

    def sqrt(self, a: Array) -> Array:
        with np.errstate(all="ignore"):
            return self.round(np.sqrt(np.asarray(a, np.float64)))


def to_int8(v: Array, zero_point: int | Array) -> Array:
    """A float result to int8: ``zero_point + rint(v)`` (ties to even) saturated to
    [-128, 127]; ±inf saturate, NaN gives the zero point (a real 0)."""
    v = np.asarray(v, np.float64)
    r = np.rint(np.nan_to_num(v, nan=0.0, posinf=1e9, neginf=-1e9))
    return np.clip(r + np.asarray(zero_point, np.float64), -128, 127).astype(np.int8)


__all__ = ["FloatFormat", "to_int8"]
