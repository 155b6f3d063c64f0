"""The worked examples of README.md (and of docs/cli.md, the CLI reference) run as written,
in order, each file's in an empty folder.

Every ``$ command`` line of the README's ``console`` blocks (with its ``\\`` continuation
lines) runs in bash with the installed ``aipusim`` first on PATH, as a newcomer would type
it. Each must exit 0 (the README shows ``echo "exit $?"`` where a failure is the point) and
print no traceback; an ``aipusim: error:`` line the README shows must be the one printed.
The Python API example is a doctest of its own (`tests/api/test_done_when.py`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CLI_REFERENCE = ROOT / "docs" / "cli.md"
BIN = Path(sys.executable).parent


def examples(path: Path = README) -> list[tuple[str, list[str]]]:
    """(command, output lines shown under it) of every console block of ``path``, in order."""
    text = path.read_text(encoding="utf-8")
    found: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.S):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            if not lines[i].startswith("$ "):
                i += 1
                continue
            command = lines[i][2:]
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command[:-1] + " " + lines[i].strip()
            i += 1
            shown = []
            while i < len(lines) and not lines[i].startswith("$ "):
                shown.append(lines[i])
                i += 1
            found.append((command, shown))
    return found


def test_the_readme_has_worked_examples() -> None:
    commands = [c for c, _ in examples()]
    assert len(commands) >= 10
    # the quantize-only example compiles a model exported before it
    quantize = next(i for i, c in enumerate(commands) if "--quantize-only" in c)
    assert any("zoo export mobilenetv2" in c for c in commands[:quantize])


def test_the_cli_reference_has_worked_examples() -> None:
    assert len(examples(CLI_REFERENCE)) >= 10


@pytest.mark.slow
@pytest.mark.parametrize("path", [README, CLI_REFERENCE], ids=["README", "cli"])
def test_every_worked_example_runs_as_written(tmp_path: Path, path: Path) -> None:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    for command, shown in examples(path):
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, (command, done.stderr[-2000:])
        assert "Traceback" not in done.stderr, (command, done.stderr[-2000:])
        for line in shown:
            if line.startswith("aipusim: error:"):
                assert line in done.stderr, (command, line, done.stderr)
