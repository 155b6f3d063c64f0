"""``aipusim simulate``: what it records and says when asked for a trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from aipusim.cli.main import main
from aipusim.profiler import load_trace
from aipusim.run.job import DEFAULT_RUN_LEVELS


@pytest.fixture(scope="module")
def compiled(zoo_compiles) -> Path:
    return zoo_compiles.compiled("tiny_cnn", 16, mode="multiprocess", cores=1, resources=0.25)


def test_trace_without_levels_records_the_run_levels_and_says_so(
    compiled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.txt"
    assert main(["simulate", str(compiled), "--frames", "2", "--trace", str(trace)]) == 0
    err = capsys.readouterr().err
    levels = ",".join(DEFAULT_RUN_LEVELS)
    assert f"recorded levels {levels}" in err
    loaded = load_trace(trace)
    assert loaded.header.levels == DEFAULT_RUN_LEVELS
    assert all(len(loaded[tag]) > 0 for tag in DEFAULT_RUN_LEVELS)
    assert main(["profile", str(trace), "--json"]) == 0
    assert '"layer"' in capsys.readouterr().out


def test_levels_given_are_recorded_without_a_note(
    compiled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.txt"
    args = ["simulate", str(compiled), "--frames", "1", "--trace", str(trace), "--levels", "B"]
    assert main(args) == 0
    assert "recorded levels" not in capsys.readouterr().err
    assert load_trace(trace).header.levels == ("B",)


def test_detail_cycle_runs_and_a_bad_detail_is_refused(
    compiled: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", str(compiled), "--frames", "1", "--detail", "cycle", "--json"]) == 0
    assert '"fps"' in capsys.readouterr().out
    assert main(["simulate", str(compiled), "--detail", "fine"]) == 2
    assert "'fine' is not one of 'fast', 'cycle'" in capsys.readouterr().err
