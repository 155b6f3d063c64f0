"""`aipusim.base.arrays`: the same answers as the numpy calls they stand in for."""

from __future__ import annotations

import numpy as np
import pytest

from aipusim.base.arrays import unique_sorted


@pytest.mark.parametrize("high", [1, 4, 1000, 10**12])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.bool_])
def test_unique_sorted_equals_np_unique(high: int, dtype: type) -> None:
    rng = np.random.default_rng(high)
    values = rng.integers(-high, high, size=5000).astype(dtype)
    got = unique_sorted(values)
    want = np.unique(values)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_unique_sorted_of_empty_and_one() -> None:
    assert unique_sorted(np.zeros(0, np.int64)).tolist() == []
    assert unique_sorted(np.array([7])).tolist() == [7]
