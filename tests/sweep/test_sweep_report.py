"""Pareto fronts, the two plots and the Markdown table of a sweep folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import sweep_evaluators as ev
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from aipusim.sweep import build_space, parse_backend, run_sweep
from aipusim.sweep.report import (
    front_flags,
    pareto_mask,
    plain_number,
    point_labels,
    write_report,
)


def _dominated(i: int, xs: list[float], ys: list[float]) -> bool:
    return any(
        xs[j] >= xs[i] and ys[j] >= ys[i] and (xs[j] > xs[i] or ys[j] > ys[i])
        for j in range(len(xs))
    )


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=12))
def test_the_front_is_exactly_the_non_dominated_points(points: list[tuple[int, int]]) -> None:
    xs = [float(x) for x, _ in points]
    ys = [float(y) for _, y in points]
    expected = [not _dominated(i, xs, ys) for i in range(len(points))]
    assert pareto_mask(xs, ys, (True, True)).tolist() == expected
    # Minimising both is maximising the negatives.
    neg = pareto_mask([-x for x in xs], [-y for y in ys], (False, False))
    assert neg.tolist() == expected
    assert any(expected)


def test_nan_points_are_never_on_the_front() -> None:
    mask = pareto_mask([1.0, np.nan, 2.0], [3.0, 9.0, 1.0], (True, True))
    assert mask.tolist() == [True, False, True]


def test_fronts_are_per_model() -> None:
    ok = pd.DataFrame(
        {
            "model": ["a", "a", "b"],
            "fps": [10.0, 5.0, 1.0],
            "fps_per_w": [2.0, 1.0, 0.5],
            "latency_us_p50": [1.0, 2.0, 9.0],
            "avg_power_w": [5.0, 5.0, 9.0],
        }
    )
    flags = front_flags(ok)
    # b's only point is on its model's front although a's points beat it.
    assert flags["front_fps"].tolist() == [True, False, True]
    assert flags["front_latency"].tolist() == [True, False, True]


def test_the_report_has_plots_fronts_and_failures(tmp_path: Path) -> None:
    space = build_space(
        ["tiny_cnn", "resnet18"],
        ["mvm_utilization_limit=0.25,0.5,1", "aipu_cores_used=1,4"],
        frames=2,
    )
    run_sweep(
        space,
        tmp_path / "sw",
        evaluator=ev.fails_for_resnet,
        backend=parse_backend(workers=2),
        progress=False,
    )
    summary = write_report(tmp_path / "sw", tmp_path / "report")
    assert (summary["points"], summary["ok"], summary["failed"]) == (12, 6, 6)
    for plot in summary["plots"]:
        assert Path(plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    by_label = {p.label(): p.point_id for p in space.points}
    # The test figures grow FPS and FPS/W with the MVM share, so one point dominates...
    fastest = by_label["tiny_cnn mvm_utilization_limit=1.0 aipu_cores_used=4"]
    assert summary["fronts"]["fps"] == [fastest]
    # ...while lower latency always costs power: every ok point is on that front.
    assert len(summary["fronts"]["latency"]) == 6
    text = (tmp_path / "report" / "report.md").read_text()
    assert "## Throughput vs efficiency: Pareto front" in text
    assert "![Throughput vs efficiency](pareto_fps.png)" in text
    assert "## Latency vs power: Pareto front" in text
    assert "RuntimeError: boom on resnet18" in text
    header = next(line for line in text.splitlines() if line.startswith("| model"))
    assert [c.strip() for c in header.strip("|").split("|")][:3] == [
        "model",
        "mvm_utilization_limit",
        "aipu_cores_used",
    ]


def test_figures_print_in_plain_notation() -> None:
    assert [plain_number(v) for v in (193312.4, 1933.04, 2.6676, 0.001234)] == [
        "193312",
        "1933",
        "2.668",
        "0.001234",
    ]
    assert plain_number(float("nan")) == ""


def test_front_points_are_labelled_and_coincident_points_share_one_label() -> None:
    ok = pd.DataFrame(
        {
            "model": ["m"] * 3,
            "mvm_utilization_limit": ["0.5", "1.0", "0.25"],
            "fps": [193312.4, 193312.4, 1000.0],
            "fps_per_w": [50.0, 50.0, 10.0],
        }
    )
    labels = point_labels(ok, "fps", "fps_per_w", ["mvm_utilization_limit"])
    assert labels == [
        (193312.4, 50.0, "mvm_utilization_limit=0.5\nmvm_utilization_limit=1.0 (same figures)"),
        (1000.0, 10.0, "mvm_utilization_limit=0.25"),
    ]
