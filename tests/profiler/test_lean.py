"""The lean ``aipusim profile`` route (`aipusim.profiler.lean`, no pandas) prints what the
pandas route prints, byte for byte, on traces of every shape: all levels or a few, cut,
with bad or contradicting lines, empty; with and without drops.

The pandas route is forced by ``--markdown FILE`` (it writes the table to FILE and prints
the same lines), so each case runs the command twice and compares stdout and stderr.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from aipusim.cli.main import main
from aipusim.profiler import write_synthetic_trace

OPTIONS = (
    [],
    ["--drop-percentile", "10"],
    ["--drop-percentile", "25", "--drop-by", "time"],
    ["--drop-percentile", "0.5", "--drop-by", "value"],
)


def _both(path: Path, options: list[str], tmp_path: Path, capsys) -> None:
    lean_code = main(["profile", str(path), *options])
    lean = capsys.readouterr()
    md = tmp_path / "forced.md"
    full_code = main(["profile", str(path), *options, "--markdown", str(md)])
    full = capsys.readouterr()
    assert (lean_code, lean.out, lean.err) == (full_code, full.out, full.err)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("lean") / "s.trace"
    write_synthetic_trace(path, frames=9, cores=4)
    return path.read_text()


def _keep(text: str, tags: tuple[str, ...]) -> str:
    lines = text.splitlines(keepends=True)
    return lines[0] + "".join(ln for ln in lines[1:] if ln[1 : ln.index("]")] in tags)


LEVEL_SETS = [
    ("B", "PB", "PE", "K", "M", "T"),
    ("K",),
    ("K", "M"),
    ("B", "K", "M"),
    ("PB", "PE"),
    ("PB", "K", "M"),
    ("B", "PB", "PE"),
    ("B",),
]


def _level_cases() -> list:
    """Every level set with every drop setting. The fast suite runs each level set without
    drops and with one drop setting (turn about, so each setting meets several level sets);
    the rest of the cross product, one pandas run each, is in the slow set."""
    cases = []
    for i, tags in enumerate(LEVEL_SETS):
        fast = {0, 1 + i % (len(OPTIONS) - 1)}
        for j, options in enumerate(OPTIONS):
            marks = () if j in fast else pytest.mark.slow
            cases.append(pytest.param(tags, options, marks=marks, id=f"{'-'.join(tags)}:{j}"))
    return cases


@pytest.mark.parametrize(("tags", "options"), _level_cases())
def test_synthetic_levels(synthetic, tags, options, write_trace, tmp_path, capsys) -> None:
    _both(write_trace(_keep(synthetic, tags)), options, tmp_path, capsys)


def test_hand_written_trace(tiny, tmp_path, capsys) -> None:
    for options in OPTIONS:
        _both(tiny, options, tmp_path, capsys)


def test_cut_bad_contradicting_and_unknown_lines(tiny_text, write_trace, tmp_path, capsys):
    lines = tiny_text.rstrip("\n").splitlines()
    lines.insert(3, "[K]  core=7 unit=mvm frame=0 layer=conv task=9 tile=0 start=0 end=1 macs=0")
    lines.insert(4, "[K]  core=0 unit=mvm frame=0 layer=conv task=9 tile=0 start=5 end=1 macs=0")
    lines.insert(5, "[K] garbage")
    lines.insert(6, "[Z] an unknown tag")
    lines.insert(7, "[K]  unit=dpu core=0 frame=1 layer=add task=4 tile=0 start=36 end=39 macs=0")
    text = "\n".join(lines)
    cut = write_trace(text[: text.rindex("end=") + 6], "cut.trace")
    for path in (write_trace(text + "\n", "bad.trace"), cut):
        for options in OPTIONS[:2]:
            _both(path, options, tmp_path, capsys)
        _both(path, ["--strict"], tmp_path, capsys)


def test_header_only_trace(header, write_trace, tmp_path, capsys) -> None:
    _both(write_trace(header + "\n"), [], tmp_path, capsys)


def test_lean_route_loads_no_pandas(tiny) -> None:
    code = (
        "import sys\n"
        "from aipusim.cli.main import main\n"
        f"assert main(['profile', {str(tiny)!r}]) == 0\n"
        "assert 'pandas' not in sys.modules, 'pandas imported'\n"
        # with the compiled scan the strings come encoded: no Arrow compute kernel; nor
        # base.fileio when there is no file to write
        "from aipusim.profiler.native import NATIVE\n"
        "assert NATIVE is None or 'pyarrow.compute' not in sys.modules, 'pyarrow.compute'\n"
        "assert 'aipusim.base.fileio' not in sys.modules, 'base.fileio imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_pipe_table_prints_what_tabulate_prints() -> None:
    """`tables.pipe_table` (the lean route's Markdown) against tabulate on random tables of
    the layer table's kinds of columns; None leaves a table to tabulate."""
    import random

    from tabulate import tabulate

    from aipusim.profiler.tables import pipe_table

    rng = random.Random(3)
    words = ["conv1", "res2a", "-", "mvm", "Conv", "<NA>", "a_b.c/d", "12", "1,000", "", "nan"]
    printed = 0
    for _ in range(500):
        rows, columns = rng.randint(1, 5), {}
        for c in range(rng.randint(1, 4)):
            kind = rng.choice(["int", "float", "str", "mixed"])
            if kind == "int":
                values = [rng.randint(-(10**6), 10**12) for _ in range(rows)]
            elif kind == "float":
                values = [
                    rng.choice([float("nan"), rng.uniform(-1e6, 1e6), 0.0]) for _ in range(rows)
                ]
            elif kind == "str":
                values = [rng.choice(words) for _ in range(rows)]
            else:
                values = [rng.choice(["<NA>", rng.randint(0, 10**9)]) for _ in range(rows)]
            columns[f"{kind}_{c}"] = values
        quick = pipe_table(columns)
        if quick is not None:
            printed += 1
            assert quick == tabulate(columns, headers="keys", tablefmt="pipe", floatfmt=".3f")
    assert printed > 100
    assert pipe_table({"a": []}) is None


def test_frames_too_far_apart_to_key_by_their_range(write_trace, tmp_path, capsys) -> None:
    """Group keys fall back to ranks when the frames' range times the cores and layers
    passes int64."""
    head = "# aipusim-trace 1 freq_hz=1000000 cores=2 model=tiny levels=K\n"
    rows = [
        "core=0 unit=mvm frame=0 layer=conv task=2 tile=0 start=2 end=8 macs=1000",
        "core=1 unit=mvm frame=100000000000000000 layer=conv task=2 tile=0 start=2 end=8 macs=9",
        "core=1 unit=mvm frame=900000000000000000 layer=fc task=3 tile=0 start=9 end=10 macs=0",
    ]
    path = write_trace(head + "".join(f"[K]  {r}\n" for r in rows))
    _both(path, [], tmp_path, capsys)
