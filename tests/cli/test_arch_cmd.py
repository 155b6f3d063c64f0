"""``aipusim arch`` and the CLI's handling of errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from aipusim.arch import DEFAULT_ARCH_PATH
from aipusim.cli.main import main


def test_show_prints_the_peak(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["arch", "show"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "metis: 4 cores at 800 MHz, peak 209.7 TOPS int8 (52.4 per core)"
    assert "l1_budget_bytes_per_core" in out


def test_show_json_parses(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["arch", "show", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["derived"]["peak_tops"] == pytest.approx(209.7152)
    assert data["mvm"]["rows"] == 512


def test_bad_arch_file_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    text = DEFAULT_ARCH_PATH.read_text()
    bad.write_text(re.sub(r"(?m)^lanes = \d+", "lanes = -1", text, count=1))
    assert main(["arch", "show", "--arch", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err == "aipusim: error: dpu.lanes must be an integer 1-2^20 (count), not -1\n"


def test_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["arch", "validate", str(DEFAULT_ARCH_PATH)]) == 0
    assert "valid (metis, peak 209.7 TOPS)" in capsys.readouterr().out


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert "aipusim, version" in capsys.readouterr().out
    assert main(["--help"]) == 0
    assert "arch" in capsys.readouterr().out


def test_unknown_subcommand_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frobnicate"]) == 2
    assert "No such command 'frobnicate'" in capsys.readouterr().err
