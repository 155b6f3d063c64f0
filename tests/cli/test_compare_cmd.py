"""`aipusim compare MODEL --modes/--limits`: the multicore and power studies for one model,
printed (table, conclusions, figure)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aipusim.cli.main import main


def test_modes_print_the_study_table_conclusions_and_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "c"
    args = ["compare", "tiny_cnn", "--modes", "batch,cooperative", "--input-size", "16"]
    assert main([*args, "--frames", "1", "--workers", "1", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| mode" in text and "| batch " in text and "| cooperative " in text
    assert "pipeline" not in text.split("- ")[0]  # only the modes asked for
    assert "gives the highest FPS" in text
    assert f"figure: {out / 'multicore.png'}" in text
    assert (out / "multicore.png").is_file() and (out / "README.md").is_file()


def test_limits_run_the_power_study(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "p"
    args = ["compare", "tiny_cnn", "--limits", "0.5,1", "--input-size", "16", "--frames", "1"]
    assert main([*args, "--workers", "1", "-o", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert [row["u"] for row in summary["table"]] == [0.5, 1.0]
    assert any("FPS/W peaks at" in c for c in summary["conclusions"])
    assert (out / "pareto.png").is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--modes", "batch", "--limits", "1"], "compare takes --modes or --limits, not both"),
        (["--modes", "turbo"], "--modes must be some of multiprocess, batch, cooperative, "),
        (["--limits", "2"], "--limits must be in (0, 1], not [2.0]"),
    ],
)
def test_bad_choices_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture, args: list[str], message: str
) -> None:
    assert main(["compare", "tiny_cnn", "-o", str(tmp_path / "x"), *args]) == 2
    assert message in capsys.readouterr().err
