"""`InputInfo`: a runtime input of a compiled model, with the shapes it may take.

Each dimension is an ``int`` (fixed) or a ``(min, opt, max)`` triple (a range). The model
is compiled for the ``opt`` shape; other shapes inside the bounds are accepted at call time
and outside them are refused with the dimension named.

>>> info = InputInfo(((1, 1, 4), 3, 32, 32))
>>> info.shape_bounds
ShapeBounds(min=(1, 3, 32, 32), opt=(1, 3, 32, 32), max=(4, 3, 32, 32))
>>> info.check("input", (2, 3, 32, 32))
(2, 3, 32, 32)
>>> info.check("input", (5, 3, 32, 32))
Traceback (most recent call last):
...
aipusim.base.errors.ConfigError: input `input` dim 0 must be within 1..4, not 5
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aipusim.base.errors import ConfigError, InvalidArgument

Dim = int | tuple[int, int, int]


@dataclass(frozen=True)
class ShapeBounds:
    """Smallest, optimized-for and largest shape, one integer per dimension."""

    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]

    def dynamic_dims(self) -> tuple[int, ...]:
        """Indices of the dimensions whose size may change between calls."""
        return tuple(
            i for i, (lo, hi) in enumerate(zip(self.min, self.max, strict=True)) if lo != hi
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _dim(value: Any, index: int) -> tuple[int, int, int]:
    if _is_int(value):
        if value < 1:
            raise ConfigError(f"InputInfo dim {index} must be a positive integer, not {value}")
        return int(value), int(value), int(value)
    if isinstance(value, Sequence) and len(value) == 3 and all(_is_int(v) for v in value):
        lo, opt, hi = (int(v) for v in value)
        if not 1 <= lo <= opt <= hi:
            raise ConfigError(
                f"InputInfo dim {index} must be a (min, opt, max) triple with "
                f"1 <= min <= opt <= max, not {tuple(value)}"
            )
        return lo, opt, hi
    raise ConfigError(
        f"InputInfo dim {index} must be an integer or a (min, opt, max) triple, not {value!r}"
    )


class InputInfo:
    """A graph input that stays an input of the compiled model.

    ``shape``: one entry per dimension, an ``int`` or a ``(min, opt, max)`` triple.
    ``dtype``: what callers pass (numpy dtype, default float32); arrays are cast to it.
    """

    __slots__ = ("dtype", "shape_bounds")

    def __init__(self, shape: Sequence[Dim], dtype: Any = np.float32) -> None:
        if isinstance(shape, str | bytes) or not isinstance(shape, Sequence) or not shape:
            raise ConfigError(
                f"InputInfo shape must be a non-empty sequence of dims, not {shape!r}"
            )
        dims = [_dim(d, i) for i, d in enumerate(shape)]
        self.shape_bounds = ShapeBounds(
            tuple(d[0] for d in dims), tuple(d[1] for d in dims), tuple(d[2] for d in dims)
        )
        try:
            self.dtype = np.dtype(dtype)
        except TypeError:
            raise ConfigError(f"InputInfo dtype must be a numpy dtype, not {dtype!r}") from None

    @property
    def shape(self) -> tuple[Dim, ...]:
        """The shape as given: ints for fixed dims, triples for ranges."""
        b = self.shape_bounds
        return tuple(
            lo if lo == hi else (lo, opt, hi)
            for lo, opt, hi in zip(b.min, b.opt, b.max, strict=True)
        )

    def check(self, name: str, shape: Sequence[int]) -> tuple[int, ...]:
        """``shape`` as a tuple if it lies inside the bounds, else a `ConfigError`."""
        b = self.shape_bounds
        shape = tuple(int(d) for d in shape)
        if len(shape) != len(b.opt):
            raise ConfigError(
                f"input `{name}` must have {len(b.opt)} dims {self._text()}, "
                f"not {len(shape)} (shape {shape})"
            )
        for i, (lo, d, hi) in enumerate(zip(b.min, shape, b.max, strict=True)):
            if not lo <= d <= hi:
                valid = f"{lo}" if lo == hi else f"within {lo}..{hi}"
                raise ConfigError(f"input `{name}` dim {i} must be {valid}, not {d}")
        return shape

    def _text(self) -> str:
        return "(" + ", ".join(str(d) for d in self.shape) + ")"

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for ``aipusim_model.json``)."""
        b = self.shape_bounds
        return {"min": list(b.min), "opt": list(b.opt), "max": list(b.max), "dtype": self.dtype.str}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InputInfo:
        """Inverse of `to_dict`."""
        dims = [
            lo if lo == hi else (lo, opt, hi)
            for lo, opt, hi in zip(data["min"], data["opt"], data["max"], strict=True)
        ]
        return cls(dims, np.dtype(data["dtype"]))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, InputInfo):
            return NotImplemented
        return self.shape_bounds == other.shape_bounds and self.dtype == other.dtype

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"InputInfo(shape={self._text()}, dtype={self.dtype.name})"


def check_finite(name: str, array: np.ndarray) -> None:
    """Refuse a float input holding NaN or infinity: quantizing one casts it to an
    arbitrary int8 (numpy warns of an invalid cast), and the output would look valid.

    >>> check_finite("x", np.array([1.0, np.nan, np.nan], np.float32))
    Traceback (most recent call last):
    ...
    aipusim.base.errors.InvalidArgument: input `x` must be finite, not NaN (2 NaN values)
    """
    if array.dtype.kind not in "fc":
        return
    bad = {"NaN": int(np.isnan(array).sum()), "inf": int(np.isinf(array).sum())}
    found = {word: count for word, count in bad.items() if count}
    if found:
        counts = ", ".join(f"{count} {word} values" for word, count in found.items())
        raise InvalidArgument(
            f"input `{name}` must be finite, not {' and '.join(found)} ({counts})"
        )


__all__ = ["InputInfo", "ShapeBounds", "check_finite"]
