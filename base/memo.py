"""Values computed from read-only arrays, remembered while those very arrays live.

A sweep worker compiles the same model point after point. The imported graph is kept
(`aipusim.compiler.driver`), so its constants are the same array objects every time, and
what is computed from them alone (a BatchNorm folded into a convolution's weights, the
digest of a constant for the quantization cache's key) need not be computed again.
Arrays are recognised by identity, checked through weak references (an id is reused only
after its array is freed), and only read-only ones count: a graph's constants are never
written in place (`aipusim.compiler.ir.frozen_array`).

>>> memo = ArrayMemo()
>>> a = np.arange(4)
>>> a.flags.writeable = False
>>> memo.get((a,), "sum", lambda: int(a.sum())), memo.get((a,), "sum", lambda: -1)
(6, 6)
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")


class ArrayMemo:
    """``get(arrays, what, compute)``: ``compute()``, remembered by the identity of
    ``arrays`` (all read-only) and ``what`` for as long as the arrays live."""

    def __init__(self) -> None:
        self._entries: dict[tuple[Any, ...], tuple[list[weakref.ref[np.ndarray]], Any]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, arrays: Sequence[np.ndarray], what: Hashable, compute: Callable[[], T]) -> T:
        if not arrays or any(a.flags.writeable for a in arrays):
            return compute()
        key = (tuple(id(a) for a in arrays), what)
        hit = self._entries.get(key)
        if hit is not None and all(r() is a for r, a in zip(hit[0], arrays, strict=True)):
            return hit[1]
        value = compute()

        def forget(_: object, key: tuple[Any, ...] = key) -> None:
            # (a later entry under a reused id is dropped too: it is computed again)
            self._entries.pop(key, None)

        self._entries[key] = ([weakref.ref(a, forget) for a in arrays], value)
        return value


__all__ = ["ArrayMemo"]
