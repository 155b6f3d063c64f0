from __future__ import annotations

import numpy as np
import pytest

from aipusim.api.inputs import InputInfo, ShapeBounds
from aipusim.base.errors import ConfigError


def test_ints_and_triples_make_bounds() -> None:
    info = InputInfo(((1, 2, 8), 3, 224, (100, 224, 300)), dtype="float16")
    assert info.shape_bounds == ShapeBounds((1, 3, 224, 100), (2, 3, 224, 224), (8, 3, 224, 300))
    assert info.shape_bounds.dynamic_dims() == (0, 3)
    assert info.dtype == np.float16
    assert info.shape == ((1, 2, 8), 3, 224, (100, 224, 300))


def test_a_fixed_triple_reads_back_as_an_int() -> None:
    assert InputInfo(((3, 3, 3), 4)).shape == (3, 4)


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ((0, 3), r"dim 0 must be a positive integer, not 0"),
        (((2, 1, 3), 3), r"dim 0 must be a \(min, opt, max\) triple with 1 <= min"),
        (((1, 2), 3), r"dim 0 must be an integer or a \(min, opt, max\) triple"),
        ((1, 2.5), r"dim 1 must be an integer"),
        ((True, 2), r"dim 0 must be an integer"),
        ((), r"shape must be a non-empty sequence"),
        ("1,3", r"shape must be a non-empty sequence"),
    ],
)
def test_bad_shapes_are_refused(shape: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        InputInfo(shape)  # type: ignore[arg-type]


def test_bad_dtype_is_refused() -> None:
    with pytest.raises(ConfigError, match="dtype must be a numpy dtype"):
        InputInfo((1, 2), dtype=object())


def test_check_names_the_dimension_and_the_range() -> None:
    info = InputInfo(((1, 1, 4), 3))
    assert info.check("x", (4, 3)) == (4, 3)
    with pytest.raises(ConfigError, match=r"input `x` dim 0 must be within 1..4, not 5"):
        info.check("x", (5, 3))
    with pytest.raises(ConfigError, match=r"input `x` dim 1 must be 3, not 2"):
        info.check("x", (1, 2))
    with pytest.raises(ConfigError, match=r"input `x` must have 2 dims \(\(1, 1, 4\), 3\), not 3"):
        info.check("x", (1, 3, 1))


def test_round_trip_through_plain_data() -> None:
    info = InputInfo(((1, 2, 4), 3, 32), dtype=np.int8)
    assert InputInfo.from_dict(info.to_dict()) == info
    assert InputInfo.from_dict(info.to_dict()) != InputInfo(((1, 2, 4), 3, 32))
