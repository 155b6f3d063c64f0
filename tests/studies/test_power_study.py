"""Study 2 (mvm_utilization_limit) on tiny_cnn: tables, figures, the Pareto front, and the
physics checks that turn a suspicious number into a reported anomaly."""

from __future__ import annotations

import pandas as pd
import pytest
from study_helpers import assert_quoted_numbers_in_tables, readme_of

from aipusim.base.errors import ConfigError
from aipusim.studies import StudyResult
from aipusim.studies.power import (
    DEFAULT_LIMITS,
    FRONTS,
    Front,
    anomalies,
    check_limits,
    conclusions,
)


def test_readme_has_run_facts_tables_and_figures(power_study: StudyResult) -> None:
    text = readme_of(power_study)
    assert "## What was run" in text
    assert "`mvm_utilization_limit` u = 0.250, 0.500, 1.000" in text
    assert "## Observed anomalies (checked from the numbers)" in text
    for u in ("0.250", "0.500", "1.000"):
        assert f"| tiny_cnn | {u} " in text
    for name in ("power_vs_limit.png", "pareto.png"):
        png = power_study.output_dir / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png.stat().st_size > 10_000
        assert f"]({name})" in text


def test_conclusions_quote_table_cells(power_study: StudyResult) -> None:
    assert_quoted_numbers_in_tables(power_study)


@pytest.mark.parametrize("front", FRONTS, ids=lambda f: f.flag)
def test_pareto_flags_mark_exactly_the_undominated_points(
    power_study: StudyResult, front: Front
) -> None:
    t = power_study.table
    assert (t["status"] == "ok").all(), t["error"].tolist()
    sign = 1 if front.maximize else -1
    y = sign * t[front.column]
    for i, row in t.iterrows():
        others = t.index != i
        beaten = (
            (t["FPS"][others] >= row["FPS"])
            & (y[others] >= y[i])
            & ((t["FPS"][others] > row["FPS"]) | (y[others] > y[i]))
        ).any()
        assert (row[front.flag] == "yes") == (not beaten)


def test_fps_per_w_peak_is_the_table_maximum(power_study: StudyResult) -> None:
    t = power_study.table
    best = t.loc[t["FPS/W"].idxmax(), "u"]
    assert f"FPS/W peaks at **u={best:.3f}**" in power_study.conclusions[0]


def _table(fps: list[float], peak: list[float]) -> pd.DataFrame:
    u = [0.25, 0.5, 1.0]
    return pd.DataFrame(
        {
            "model": "m",
            "u": u,
            "FPS": fps,
            "avg power (W)": [1.0, 1.5, 2.0],
            "peak power 10us (W)": peak,
            "peak power 100ns (W)": [2 * v for v in peak],
            "FPS/W": [f / p for f, p in zip(fps, [1.0, 1.5, 2.0], strict=True)],
            "energy/frame (mJ)": 1.0,
            "p50 latency (ms)": 1.0,
            "status": "ok",
            "error": "",
            "front FPS/W": ["yes", "yes", "yes"],
            "front peak W": ["yes", "yes", "yes"],
        }
    )


def test_monotone_curves_give_no_anomaly() -> None:
    assert anomalies(_table([10.0, 18.0, 30.0], [2.0, 3.0, 4.0])) == ([], [])
    found, odd = conclusions(_table([10.0, 18.0, 30.0], [2.0, 3.0, 4.0]))
    assert odd == [] and not any("Caution" in f for f in found)


def test_fps_rising_as_compute_is_throttled_is_an_anomaly() -> None:
    odd, flat = anomalies(_table([30.0, 18.0, 20.0], [2.0, 3.0, 2.5]))
    assert flat == []
    assert odd == [
        "FPS falls from 30.0 at u=0.250 to 18.0 at u=0.500: more active MVM array should "
        "not give less",
        "peak power falls from 3.000 at u=0.500 to 2.500 at u=1.000: more active MVM array "
        "should not give less",
    ]
    found, flagged = conclusions(_table([30.0, 18.0, 20.0], [2.0, 3.0, 2.5]))
    assert flagged == [f"`m`: {a}" for a in odd]
    assert found[-1].startswith("**Caution**: 2 step(s) break the expected physics")


def test_limits_are_checked_and_sorted() -> None:
    assert check_limits([1, 0.5, 0.5]) == [0.5, 1.0]
    assert DEFAULT_LIMITS == (0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0)
    with pytest.raises(ConfigError, match=r"--limits must be in \(0, 1\], not \[1.5\]"):
        check_limits([0.5, 1.5])
    with pytest.raises(ConfigError, match="at least one value"):
        check_limits([])


def test_a_drop_under_one_percent_is_flat_not_an_anomaly() -> None:
    odd, flat = anomalies(_table([10.0, 18.0, 17.9], [2.0, 3.0, 4.0]))
    assert odd == []
    assert flat == ["FPS falls from 18.0 at u=0.500 to 17.9 at u=1.000"]
    found, _ = conclusions(_table([10.0, 18.0, 17.9], [2.0, 3.0, 4.0]))
    assert "Flat steps (FPS or peak power lower by under 1 % at the higher limit)" in found[-1]
