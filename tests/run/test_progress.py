"""Progress of long stages when stderr is not a terminal: plain lines, no bars."""

from __future__ import annotations

import io
import time

import pytest

from aipusim.run import progress as progress_module
from aipusim.run.progress import Progress


def test_plain_lines_while_advancing_when_quiet_and_at_the_end() -> None:
    out = io.StringIO()
    p = Progress(out, terminal=False, every_s=0.0, quiet_s=0.5)
    step = p.stage("simulate", 4)
    p.note("frame 1")
    step(1)
    time.sleep(1.6)  # one slow step: the watchdog says the stage still runs
    step(3)
    p.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "aipusim: simulate 1/4 (frame 1) (0 s)"
    assert any(line.startswith("aipusim: simulate still running, 1/4") for line in lines)
    assert lines[-2].startswith("aipusim: simulate 4/4")
    assert lines[-1].startswith("aipusim: simulate done in ")
    assert "\r" not in out.getvalue()


def test_a_quick_stage_prints_nothing() -> None:
    out = io.StringIO()
    p = Progress(out, terminal=False)
    p.stage("compile", 3)(3)
    p.close()
    assert out.getvalue() == ""


def test_compile_reports_its_passes_on_a_non_terminal_stderr(
    tmp_path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from aipusim.cli.main import main

    monkeypatch.setattr(progress_module, "EVERY_S", 0.0)
    assert main(["zoo", "export", "tiny_cnn", "-o", str(tmp_path / "t.onnx")]) == 0
    capsys.readouterr()
    assert main(["compile", "-i", str(tmp_path / "t.onnx"), "-o", str(tmp_path / "out")]) == 0
    text = capsys.readouterr().err
    err = text.splitlines()
    assert err[0].startswith("aipusim: compile 1/") and "(after import)" in err[0]
    assert any("(after emit)" in line for line in err)
    assert err[-1].startswith("aipusim: compile done in ")
    # one total on every line, never passed
    _assert_one_total_never_passed(_compile_counts(text))


def _compile_counts(err: str) -> list[tuple[int, int]]:
    """(passes done, total) of every compile progress line in ``err``."""
    import re

    return [(int(m[1]), int(m[2])) for m in re.finditer(r"aipusim: compile (\d+)/(\d+)", err)]


def _assert_one_total_never_passed(counts: list[tuple[int, int]]) -> None:
    from aipusim.compiler.pipeline import pass_names

    assert counts, "no compile progress line"
    assert {total for _, total in counts} == {len(pass_names())}
    assert all(done <= total for done, total in counts)
    assert counts[-1][0] == counts[-1][1]  # after emit: all of it


@pytest.mark.usefixtures("no_run_plots")
def test_run_speaks_at_once_and_its_closing_line_accounts_for_the_wall_time(
    tmp_path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One run checks both its closing line and (every progress line printed) that the
    compile count inside a run has one total and never passes it."""
    import re

    from aipusim.cli.main import main

    monkeypatch.setattr(progress_module, "EVERY_S", 0.0)
    started = time.perf_counter()
    args = ["run", "tiny_cnn", "--input-size", "16", "--frames", "1", "-o", str(tmp_path / "r")]
    assert main(args) == 0
    wall = time.perf_counter() - started
    captured = capsys.readouterr()
    # into a pipe no opening line: bad input must stay the one line of its error
    assert not captured.err.startswith("aipusim: run tiny_cnn: compile, simulate")
    _assert_one_total_never_passed(_compile_counts(captured.err))
    closing = captured.out.strip().splitlines()[-1]
    total = float(re.match(r"wall ([\d.]+) s: ", closing).group(1))
    parts = [float(v) for v in re.findall(r" ([\d.]+) s(?:,|$)", closing.split(": ", 1)[1])]
    assert len(parts) == 7 and "compile" in closing and "profile and plots" in closing
    assert sum(parts) == pytest.approx(total, rel=0.02, abs=0.35)  # (each rounded to 0.1 s)
    assert total == pytest.approx(wall, rel=0.10)


@pytest.mark.usefixtures("no_run_plots")
def test_the_closing_line_counts_the_install_that_make_run_reports(
    tmp_path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make run` on a fresh clone passes its install's seconds: the closing line's wall
    time is then the install plus the process, and "install" is its first part."""
    import re

    from aipusim.cli.main import main

    monkeypatch.setenv("AIPUSIM_INSTALL_SECONDS", "12.5")
    started = time.perf_counter()
    args = ["run", "tiny_cnn", "--input-size", "16", "--frames", "1", "-o", str(tmp_path / "r")]
    assert main(args) == 0
    wall = time.perf_counter() - started + 12.5
    closing = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.match(r"wall [\d.]+ s: install 12\.5 s, start-up and imports ", closing)
    total = float(re.match(r"wall ([\d.]+) s: ", closing).group(1))
    assert total == pytest.approx(wall, rel=0.05)


@pytest.mark.parametrize("value", ["soon", "-3", "nan"])
def test_a_bad_install_seconds_value_is_refused_before_any_work(
    tmp_path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    from aipusim.cli.main import main

    monkeypatch.setenv("AIPUSIM_INSTALL_SECONDS", value)
    assert main(["run", "tiny_cnn", "-o", str(tmp_path / "r")]) == 2
    assert capsys.readouterr().err.strip() == (
        "aipusim: error: AIPUSIM_INSTALL_SECONDS must be a number of seconds >= 0 or unset, "
        f"not {value!r}"
    )
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_a_fresh_run_process_prints_within_two_seconds(tmp_path) -> None:
    """`aipusim run` as a process with stderr a terminal: its first line within 2 s, and
    its closing line's total within 10 % of the process's wall time."""
    import os
    import pty
    import re
    import subprocess
    import sys
    from pathlib import Path

    exe = Path(sys.executable).with_name("aipusim")
    # stderr a terminal, as a person running it sees it: the opening line comes at once
    master, terminal = pty.openpty()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [str(exe), "run", "tiny_cnn", "--input-size", "16", "--frames", "1", "-o",
         str(tmp_path / "r")],
        stdout=subprocess.PIPE, stderr=terminal, text=True,
    )  # fmt: skip
    os.close(terminal)
    first = os.read(master, 4096).decode()
    first_line_s = time.perf_counter() - started
    assert first.startswith("aipusim: run tiny_cnn: compile, simulate")
    out, _ = proc.communicate(timeout=600)
    os.close(master)
    wall = time.perf_counter() - started
    assert proc.returncode == 0 and first_line_s < 2.0
    total = float(re.search(r"^wall ([\d.]+) s: ", out, re.M).group(1))
    assert total == pytest.approx(wall, rel=0.10)
