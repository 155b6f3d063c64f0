"""Operating-system errors on the files the CLI and the API write: one line naming the path
and the reason, exit status 2, nothing half written and no temporary file left behind.

Every case runs in one child process (`oserror_child`), so the whole table costs one
interpreter start. The child runs with file permissions in force even when the tests run
as root (`unprivileged`): a read-only folder is refused as it would be for any user. A
full disk is ``/dev/full`` (through a symlink, so a buggy writer could only ever replace
the link) for single files, and a file size limit (``RLIMIT_FSIZE``, "File too large")
for the folders that compile and run build.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from unprivileged import drop_reason, run_unprivileged

HERE = Path(__file__).resolve().parent
LONG = "n" * 300
TRACE_LEVELS = "B,PB,PE,K,M"

#: Cases that build the inputs of the others (they must succeed).
SETUP: list[dict[str, Any]] = [
    {"cli": ["zoo", "export", "tiny_cnn", "-o", "tiny.onnx"]},
    {"cli": ["compile", "-i", "tiny.onnx", "-o", "good"]},
    {"cli": ["simulate", "good", "--frames", "2", "--trace", "t.trace", "--levels", TRACE_LEVELS]},
    {"cli": ["isa", "disasm", "good/compiled_model/core0.tasklist", "-o", "c0.txt"]},
    {"cli": ["compile", "-i", "tiny.onnx", "-o", "busy"]},
]

RO, FULL, NODIR, TOO_LONG, FSIZE = (
    "Permission denied",
    "No space left on device",
    "does not exist",
    "over the file system's 255-byte limit",
    "File too large",
)

#: (id, case, path the message must name, reason it must give)
CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("compile-ro", {"cli": ["compile", "-i", "tiny.onnx", "-o", "ro/out"]}, "ro/out", RO),
    ("compile-long", {"cli": ["compile", "-i", "tiny.onnx", "-o", LONG]}, "nnnn", TOO_LONG),
    (
        "compile-disk-full",
        {"cli": ["compile", "-i", "tiny.onnx", "-o", "cfull"], "fsize": 20_000},
        "cfull",
        FSIZE,
    ),
    (
        "compile-busy",
        {
            "cli": ["compile", "-i", "../tiny.onnx", "-o", ".", "--set", "remove_output_dir=true"],
            "cwd": "busy",
        },
        "'.'",
        "current folder",
    ),
    ("run-ro", {"cli": ["run", "tiny_cnn", "-o", "ro/out"]}, "ro/out", RO),
    ("run-long", {"cli": ["run", "tiny_cnn", "-o", LONG]}, "nnnn", TOO_LONG),
    (
        "run-disk-full",
        {"cli": ["run", "tiny_cnn", "-o", "rfull", "--frames", "2"], "fsize": 20_000},
        "rfull",
        FSIZE,
    ),
    ("simulate-ro", {"cli": ["simulate", "good", "--trace", "ro/t.trace"]}, "ro/t.trace", RO),
    (
        "simulate-full",
        {"cli": ["simulate", "good", "--trace", "full.trace", "--levels", "B,K"]},
        "full.trace",
        FULL,
    ),
    ("simulate-nodir", {"cli": ["simulate", "good", "--trace", "no/t.trace"]}, "no/t.trace", NODIR),
    ("simulate-long", {"cli": ["simulate", "good", "--trace", LONG]}, "nnnn", TOO_LONG),
    ("chrome-ro", {"cli": ["profile", "t.trace", "--chrome", "ro/x.json"]}, "ro/x.json", RO),
    ("chrome-full", {"cli": ["profile", "t.trace", "--chrome", "full.json"]}, "full.json", FULL),
    ("chrome-nodir", {"cli": ["profile", "t.trace", "--chrome", "no/x.json"]}, "no/x.json", NODIR),
    ("plot-ro", {"cli": ["profile", "t.trace", "--plot", "ro/plots"]}, "ro/plots", RO),
    ("csv-ro", {"cli": ["profile", "t.trace", "--csv", "ro/a.csv"]}, "ro/a.csv", RO),
    ("csv-full", {"cli": ["profile", "t.trace", "--csv", "full.csv"]}, "full.csv", FULL),
    ("csv-long", {"cli": ["profile", "t.trace", "--csv", LONG + ".csv"]}, "nnnn", TOO_LONG),
    ("zoo-ro", {"cli": ["zoo", "export", "tiny_cnn", "-o", "ro/x.onnx"]}, "ro/x.onnx", RO),
    ("zoo-full", {"cli": ["zoo", "export", "tiny_cnn", "-o", "full.onnx"]}, "full.onnx", FULL),
    ("zoo-nodir", {"cli": ["zoo", "export", "tiny_cnn", "-o", "no/x.onnx"]}, "no/x.onnx", NODIR),
    ("zoo-long", {"cli": ["zoo", "export", "tiny_cnn", "-o", LONG]}, "nnnn", TOO_LONG),
    ("sweep-ro", {"cli": ["sweep", "tiny_cnn", "--frames", "1", "-o", "ro/sw"]}, "ro/sw", RO),
    ("report-ro", {"cli": ["report", "layers", "--models", "tiny_cnn", "-o", "ro/r"]}, "ro/r", RO),
    ("sweep-long", {"cli": ["sweep", "tiny_cnn", "--frames", "1", "-o", LONG]}, "nnnn", TOO_LONG),
    (
        "disasm-ro",
        {"cli": ["isa", "disasm", "good/compiled_model/core0.tasklist", "-o", "ro/x.txt"]},
        "ro/x.txt",
        RO,
    ),
    (
        "disasm-full",
        {"cli": ["isa", "disasm", "good/compiled_model/core0.tasklist", "-o", "full.txt"]},
        "full.txt",
        FULL,
    ),
    ("asm-ro", {"cli": ["isa", "asm", "c0.txt", "-o", "ro/x.tasklist"]}, "ro/x.tasklist", RO),
    ("asm-full", {"cli": ["isa", "asm", "c0.txt", "-o", "full.tasklist"]}, "full.tasklist", FULL),
    ("asm-nodir", {"cli": ["isa", "asm", "c0.txt", "-o", "no/x.tl"]}, "no/x.tl", NODIR),
    ("api-save-ro", {"api": "save", "path": "ro/m"}, "ro/m", RO),
    ("api-save-long", {"api": "save", "path": LONG}, "nnnn", TOO_LONG),
    ("api-chrome-ro", {"api": "chrome", "path": "ro/x.json"}, "ro/x.json", RO),
    ("api-chrome-full", {"api": "chrome", "path": "full.json"}, "full.json", FULL),
]

#: Names linked to /dev/full.
FULL_LINKS = ("full.trace", "full.json", "full.csv", "full.onnx", "full.txt", "full.tasklist")


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    reason = drop_reason()
    if reason is not None:
        pytest.skip(reason)
    if not Path("/dev/full").exists():
        pytest.skip("/dev/full is not available to stand in for a full disk")
    root = tmp_path_factory.mktemp("oserrors")
    (root / "ro").mkdir()
    (root / "ro").chmod(0o555)
    for name in FULL_LINKS:
        (root / name).symlink_to("/dev/full")
    cases = SETUP + [case for _, case, _, _ in CASES]
    (root / "cases.json").write_text(json.dumps(cases))
    child = run_unprivileged([sys.executable, str(HERE / "oserror_child.py"), "cases.json"], root)
    assert child.returncode == 0, child.stderr[-3000:]
    results = [json.loads(line) for line in child.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(cases), child.stdout[-2000:] + child.stderr[-2000:]
    for case, result in zip(SETUP, results, strict=False):
        assert result["code"] == 0, (case, result)
    by_id = dict(zip([c[0] for c in CASES], results[len(SETUP) :], strict=True))
    yield root, by_id
    (root / "ro").chmod(0o755)


@pytest.mark.parametrize(("case_id", "names", "reason"), [(c[0], c[2], c[3]) for c in CASES])
def test_one_line_naming_path_and_reason(
    outcome: tuple[Path, dict[str, Any]], case_id: str, names: str, reason: str
) -> None:
    result = outcome[1][case_id]
    if case_id.startswith("api-"):
        assert "FileAccessError" in result["types"] and "AipuSimError" in result["types"]
        assert "OSError" in result["types"]
        message = result["error"]
    else:
        assert result["code"] == 2, result
        lines = result["err"].strip().splitlines()
        assert len(lines) == 1, result["err"]
        assert lines[0].startswith("aipusim: error: "), lines[0]
        assert "Traceback" not in result["err"]
        message = lines[0]
    assert names in message and reason in message, message


def test_nothing_half_written_or_left_behind(outcome: tuple[Path, dict[str, Any]]) -> None:
    root, _ = outcome
    assert list((root / "ro").iterdir()) == []
    assert not (root / "no").exists()
    assert not (root / "rfull").exists()
    # a failed compile leaves its report and log only, whatever stopped it
    assert {p.name for p in (root / "cfull").iterdir()} == {
        "compilation_report.json",
        "compilation_log.txt",
    }
    report = json.loads((root / "cfull" / "compilation_report.json").read_text())
    assert report["status"] != "SUCCEEDED" and "File too large" in report["message"]
    assert [p.name for p in root.iterdir() if ".tmp-" in p.name or ".old-" in p.name] == []
    for name in FULL_LINKS:
        assert (root / name).is_symlink()
    # the busy folder still holds its earlier compile, untouched
    assert (root / "busy" / "compiled_model" / "model.json").is_file()
