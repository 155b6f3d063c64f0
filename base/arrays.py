"""Array helpers shared by the packages.

>>> unique_sorted(np.array([3, 1, 3, 2]))
array([1, 2, 3])
"""

from __future__ import annotations

import numpy as np


def unique_sorted(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of a 1-D integer or boolean array, as ``np.unique`` gives.

    Why not ``np.unique``: numpy 2.4 answers a plain ``np.unique`` of integers with a hash
    table, then sorts; on 700k distinct int64 values that takes about 1 s against 15 ms for
    sorting and keeping each run's first value (the profiler's layer table spent most of
    its time there on a 1M-line trace).

    >>> unique_sorted(np.array([], dtype=np.int64)).tolist()
    []
    """
    values = np.asarray(values)
    assert values.ndim == 1 and values.dtype.kind in "biu", "integer or boolean 1-D array"
    ordered = np.sort(values)
    if len(ordered) == 0:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


__all__ = ["unique_sorted"]
