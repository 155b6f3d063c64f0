"""`make run` installs what running needs; `make test` adds the test tools."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def recipe(target: str) -> str:
    """The commands ``make`` would run for ``target`` from nothing (a dry run)."""
    return subprocess.run(
        ["make", "--dry-run", "--always-make", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_run_installs_no_test_tools_and_test_does() -> None:
    run = recipe("run")
    assert "pip install -q -e ." in run and "[dev" not in run and "distributed" not in run
    assert "'.[dev,distributed]'" in recipe("test")


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_test_draws_a_share_of_the_examples_and_test_slow_all_of_them() -> None:
    assert "HYPOTHESIS_PROFILE=fast" in recipe("test")
    slow = recipe("test-slow")
    assert "HYPOTHESIS_PROFILE=full" in slow and "-m hypothesis" in slow
