"""``aipusim simulate --functional`` and ``aipusim run --check``: the verdict, the files,
the exit status on a mismatch, and the options that need --functional."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from aipusim import zoo
from aipusim.cli.main import main
from aipusim.isa.program import record_crc


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fsim")
    onnx.save(zoo.build("tiny_cnn", input_size=32), root / "tiny.onnx")
    out = root / "out"
    sets = [
        "--set",
        "aipu_cores_used=4",
        "--set",
        "multicore_mode=pipeline",
        "--set",
        "resources_used=1.0",
    ]
    assert main(["compile", "-i", str(root / "tiny.onnx"), "-o", str(out), *sets]) == 0
    return out


def test_functional_json_says_bit_exact_per_output(compiled: Path, capsys) -> None:
    capsys.readouterr()
    assert (
        main(["simulate", str(compiled), "--functional", "--check", "--frames", "2", "--json"]) == 0
    )
    data = json.loads(capsys.readouterr().out)
    block = data["functional"]
    assert block["bit_exact"] is True
    assert block["outputs"] == {"logits": {"shape": [1, 10], "mismatches": 0}}
    assert block["input"] == "seeded random int8 (numpy default_rng(0))"


def test_given_input_and_written_outputs(compiled: Path, tmp_path: Path, capsys) -> None:
    x = np.random.default_rng(5).integers(-128, 128, (1, 3, 32, 32)).astype(np.int8)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "outs"
    args = ["simulate", str(compiled), "--functional", "--frames", "1"]
    assert main([*args, "--input", f"input={tmp_path / 'x.npy'}", "--outputs", str(out)]) == 0
    text = capsys.readouterr().out
    assert "functional: bit-exact vs int8 reference (given input)" in text
    logits = np.load(out / "logits.npy")
    assert logits.shape == (1, 10) and logits.dtype == np.int8


def test_value_aware_energy_is_reported_beside_the_cycle_model(compiled: Path, capsys) -> None:
    capsys.readouterr()
    args = ["simulate", str(compiled), "--functional", "--energy-model", "value_aware"]
    assert main([*args, "--frames", "2"]) == 0
    text = capsys.readouterr().out
    assert "energy per frame, cycle model" in text and "value-aware" in text


def test_a_mismatch_exits_1_with_its_status(compiled: Path, tmp_path: Path, capsys) -> None:
    copy = tmp_path / "out"
    shutil.copytree(compiled, copy)
    image = copy / "compiled_model" / "constants.bin"
    data = bytearray(image.read_bytes())
    for i in range(1000, 1064):
        data[i] ^= 1
    image.write_bytes(bytes(data))
    record_crc(image)
    capsys.readouterr()
    code = main(["simulate", str(copy), "--functional", "--check", "--frames", "1", "--json"])
    captured = capsys.readouterr()
    assert code == 1
    assert json.loads(captured.out)["functional"]["bit_exact"] is False
    assert captured.err.startswith("aipusim: error: FUNCTIONAL_MISMATCH: differs from the int8")
    assert "first differing layer" in captured.err and "written by core" in captured.err
    assert captured.err.count("\n") == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--check"], "--check must come with --functional, not without it"),
        (["--outputs", "o"], "--outputs must come with --functional"),
        (["--input", "input=x.npy"], "--input must come with --functional"),
        (["--functional", "--input", "input"], "--input must be NAME=FILE.npy, not 'input'"),
        (
            ["--functional", "--input", "input=missing.npy"],
            "--input input must name an existing .npy file",
        ),
        (["--functional", "--input", "nope=bad.npy"], "inputs must be among the program's inputs"),
        (
            ["--functional", "--input", "input=bad.npy"],
            r"input input must have shape \[1, 3, 32, 32\]",
        ),
        (
            ["--functional", "--input", "input=text.npy"],
            "--input input must be a numpy .npy array file",
        ),
    ],
)
def test_bad_functional_options(
    compiled: Path, tmp_path: Path, monkeypatch, capsys, extra: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "bad.npy", np.zeros((1, 3, 31, 32), np.int8))
    (tmp_path / "text.npy").write_text("not an array")
    capsys.readouterr()
    assert main(["simulate", str(compiled), *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert __import__("re").search(message, err), err
    assert not (tmp_path / "o").exists()


@pytest.mark.usefixtures("no_run_plots")
def test_run_check_writes_the_verdict_into_the_report(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    assert main(["run", "tiny_cnn", "--check", "--frames", "2", "-o", str(out)]) == 0
    assert "functional: bit-exact vs int8 reference" in capsys.readouterr().out
    report = (out / "report.md").read_text()
    assert "## Functional check\n\n- bit-exact vs int8 reference" in report
    assert json.loads((out / "run.json").read_text())["functional"]["bit_exact"] is True
