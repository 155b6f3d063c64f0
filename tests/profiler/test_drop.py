from __future__ import annotations

import pandas as pd
import pytest

from aipusim.base.errors import ConfigError
from aipusim.profiler.drop import check_percent, drop_by_value, drop_count


def test_drops_top_and_bottom_percent_of_each_group():
    df = pd.DataFrame(
        {"g": ["a"] * 100 + ["b"] * 10, "v": list(range(100, 0, -1)) + list(range(10))}
    )
    kept = drop_by_value(df, "v", ["g"], 5.0)
    a = sorted(kept[kept["g"] == "a"]["v"])
    assert a == list(range(6, 96))  # 5 smallest (1-5) and 5 largest (96-100) gone
    assert sorted(kept[kept["g"] == "b"]["v"]) == list(range(10))  # 5 % of 10 < 1


def test_fractional_percent_counts_as_documented():
    assert drop_count(1000, 0.25) == 2
    assert drop_count(1000, 0.1) == 1
    assert drop_count(399, 0.25) == 0


def test_zero_percent_keeps_everything():
    df = pd.DataFrame({"g": [1, 1], "v": [3, 4]})
    assert drop_by_value(df, "v", ["g"], 0.0) is df


@pytest.mark.parametrize("bad", [-1, 50, 75.0, float("nan"), "5", True])
def test_bad_percent_is_rejected(bad):
    with pytest.raises(ConfigError, match="drop percentile must be a number in"):
        check_percent(bad)
