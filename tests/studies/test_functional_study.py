"""Study 6 (functional matrix) on tiny_cnn: every mode run on data, the verdict of each cell,
and conclusions that follow from the table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from study_helpers import readme_of

from aipusim.studies import StudyResult, run_functional_study
from aipusim.studies.functional import MODES, conclusions, depths_of, detail


@pytest.fixture(scope="module")
def functional_study(tmp_path_factory: pytest.TempPathFactory) -> StudyResult:
    out = tmp_path_factory.mktemp("studies") / "functional"
    return run_functional_study(
        out, models=["tiny_cnn"], input_size=32, frames=4, workers=1, progress=False
    )


def test_every_mode_runs_on_data_and_is_bit_exact(functional_study: StudyResult) -> None:
    table = functional_study.table
    assert list(table["mode"]) == [m.label for m in MODES]
    assert list(table["tiling depth"]) == [1] * len(MODES)
    assert list(table["result"]) == ["bit-exact"] * len(MODES)
    assert list(table["mismatching elements"]) == [0] * len(MODES)
    assert functional_study.conclusions == [
        "**5 of 5** cells (model x mode x tiling depth) are bit-exact against the int8 reference.",
        "`tiny_cnn`: bit-exact in all 5 of its cells.",
    ]


def test_readme_has_the_matrix_and_its_figure(functional_study: StudyResult) -> None:
    text = readme_of(functional_study)
    assert "| tiny_cnn | multithread | 1 " in text
    assert "`multicore_mode=multithread`" in text
    png = functional_study.output_dir / "functional.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![functional matrix](functional.png)" in text


def test_depths_are_one_and_the_built_in_default() -> None:
    assert depths_of("resnet50") == (1,)
    assert depths_of("yolov8n") == (1, 6)


def test_conclusions_name_every_cell_that_is_not_bit_exact() -> None:
    table = pd.DataFrame(
        {
            "model": ["a", "a", "b"],
            "mode": ["batch", "pipeline", "batch"],
            "tiling depth": [1, 6, 1],
            "result": ["bit-exact", "differs", "failed"],
            "mismatching elements": [0, 7, None],
            "detail": ["", "differs from the int8 reference", "HazardError: x"],
        }
    )
    assert conclusions(table) == [
        "**1 of 3** cells (model x mode x tiling depth) are bit-exact against the int8 reference.",
        "`a`, pipeline, tiling depth 6: differs: differs from the int8 reference",
        "`b`, batch, tiling depth 1: failed: HazardError: x",
    ]


def test_detail_is_the_error_or_the_check_line() -> None:
    failed = pd.Series({"status": "failed", "error": "HazardError: x", "bit_exact": None})
    differs = pd.Series({"status": "ok", "error": None, "bit_exact": False, "check": "c"})
    exact = pd.Series({"status": "ok", "error": None, "bit_exact": True, "check": "ok"})
    assert [detail(failed), detail(differs), detail(exact)] == ["HazardError: x", "c", ""]


def test_report_functional_through_the_cli_names_a_bad_model(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from aipusim.cli.main import main

    assert main(["report", "functional", "-o", str(tmp_path / "out"), "--models", "nope"]) == 2
    err = capsys.readouterr().err
    assert "zoo model" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
