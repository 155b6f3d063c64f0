"""Study 1 (multicore modes) on tiny_cnn: README tables, figure, and conclusions that follow
from the numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from study_helpers import assert_quoted_numbers_in_tables, readme_of

from aipusim.base.errors import ConfigError
from aipusim.studies import StudyResult, run_multicore_study
from aipusim.studies.multicore import MODES, conclusions


def test_readme_has_run_facts_table_and_figure(multicore_study: StudyResult) -> None:
    text = readme_of(multicore_study)
    assert "## What was run" in text
    assert "commit `" in text
    assert "`tiny_cnn` (32x32)" in text
    for mode in MODES:
        assert f"| tiny_cnn | {mode.label} " in text
    png = multicore_study.output_dir / "multicore.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000
    assert "![multicore modes](multicore.png)" in text
    assert list((multicore_study.output_dir / "results").glob("part-*.parquet"))


def test_every_mode_ran_and_the_reference_ratio_is_one(multicore_study: StudyResult) -> None:
    table = multicore_study.table
    assert (table["status"] == "ok").all(), table["error"].tolist()
    assert list(table["mode"]) == [m.label for m in MODES]
    assert (table["FPS"] > 0).all()
    assert (table["p99 latency (ms)"] >= table["p50 latency (ms)"]).all()
    ref = table.loc[table["mode"] == "4 x Batch-1", "FPS vs 4 x Batch-1"]
    assert ref.tolist() == [1.0]


def test_conclusions_quote_table_cells(multicore_study: StudyResult) -> None:
    assert_quoted_numbers_in_tables(multicore_study)


def test_conclusions_name_the_best_modes(multicore_study: StudyResult) -> None:
    table = multicore_study.table
    fastest = table.loc[table["FPS"].idxmax(), "mode"]
    idle = table.loc[table["unloaded latency (ms)"].idxmin(), "mode"]
    quickest = table.loc[table["p50 latency (ms)"].idxmin(), "mode"]
    assert f"**{fastest}** gives the highest FPS" in multicore_study.conclusions[0]
    assert f"**{idle}** has the lowest unloaded latency" in multicore_study.conclusions[1]
    assert f"**{quickest}** has the lowest queued p50 latency" in multicore_study.conclusions[2]


def _row(model: str, mode: str, fps: float, p50: float, mj: float, ref: float) -> dict:
    return {
        "model": model,
        "mode": mode,
        "FPS": fps,
        "FPS vs 4 x Batch-1": fps / ref,
        "unloaded latency (ms)": p50 / 2,
        "p50 latency (ms)": p50,
        "p99 latency (ms)": p50 * 1.5,
        "energy/frame (mJ)": mj,
        "avg power (W)": 3.0,
        "FPS/W": fps / 3.0,
        "status": "ok",
        "error": "",
    }


def test_conclusions_of_a_known_table() -> None:
    table = pd.DataFrame(
        [
            _row("a", "4 x Batch-1", 100.0, 4.0, 2.0, 100.0),
            _row("a", "batch", 250.0, 8.0, 1.5, 100.0),
            _row("a", "cooperative", 120.0, 1.0, 3.0, 100.0),
            {
                **_row("a", "pipeline", np.nan, np.nan, np.nan, 100.0),
                "status": "failed",
                "error": "CompileError: no fit",
            },
        ]
    )
    text = conclusions(table)
    assert text[0] == (
        "`a`: **batch** gives the highest FPS (250.0 FPS, 2.50 x 4 x Batch-1); "
        "next is cooperative with 120.0 FPS."
    )
    assert text[1] == "`a`: **cooperative** has the lowest unloaded latency (0.500 ms)."
    assert text[2] == (
        "`a`: **cooperative** has the lowest queued p50 latency (1.000 ms; p99 1.500 ms)."
    )
    assert text[3] == "`a`: **batch** uses the least energy per frame (1.5000 mJ)."
    assert "**batch** is the fastest mode for 1" in text[4]
    assert text[5] == "`a` in mode pipeline failed: CompileError: no fit"


def test_resume_reuses_the_stored_points(multicore_study: StudyResult) -> None:
    results = multicore_study.output_dir / "results"
    before = sorted(p.name for p in results.glob("part-*.parquet"))
    again = run_multicore_study(
        multicore_study.output_dir, models=["tiny_cnn"], frames=2, resume=True, progress=False
    )
    assert sorted(p.name for p in results.glob("part-*.parquet")) == before
    pd.testing.assert_frame_equal(again.table, multicore_study.table)


def test_a_folder_with_other_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="must be empty or an earlier `aipusim report`"):
        run_multicore_study(tmp_path, models=["tiny_cnn"], frames=1, progress=False)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_an_unknown_model_is_refused_before_running(tmp_path: Path) -> None:
    from aipusim.base.errors import ZooError

    with pytest.raises(ZooError, match="zoo model"):
        run_multicore_study(tmp_path / "x", models=["nope"], frames=1, progress=False)
    assert not (tmp_path / "x").exists()
