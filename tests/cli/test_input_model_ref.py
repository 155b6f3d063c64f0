"""`aipusim compile` references the input ONNX model by path and SHA-256 instead of copying
it (--keep-input-model copies it); what reads the model back follows the reference."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import aipusim
from aipusim.base.errors import ConfigError
from aipusim.cli.main import main


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    import onnx

    path = tmp_path / "m.onnx"
    onnx.save(aipusim.zoo.build("tiny_cnn", input_size=16), path)
    return path


def test_compile_references_the_model_and_load_follows_it(
    tmp_path: Path, model_file: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "out"
    assert main(["compile", "-i", str(model_file), "-o", str(out)]) == 0
    assert not (out / "input_model" / "fp32_model.onnx").exists()
    ref = json.loads((out / "input_model" / "source.json").read_text())
    assert ref["sha256"] == hashlib.sha256(model_file.read_bytes()).hexdigest()
    assert ref["path"] == str(model_file.resolve())
    model = aipusim.load(out)  # reads the float model through the reference
    assert tuple(model.input_names) == ("input",)
    model_file.write_bytes(model_file.read_bytes() + b"\0")
    with pytest.raises(ConfigError, match=r"must still exist with SHA-256 .* not be changed"):
        aipusim.load(out)


def test_keep_input_model_copies_it(tmp_path: Path, model_file: Path) -> None:
    out = tmp_path / "out"
    assert main(["compile", "-i", str(model_file), "-o", str(out), "--keep-input-model"]) == 0
    copy = out / "input_model" / "fp32_model.onnx"
    assert copy.read_bytes() == model_file.read_bytes()
    model_file.unlink()
    assert tuple(aipusim.load(out).input_names) == ("input",)
