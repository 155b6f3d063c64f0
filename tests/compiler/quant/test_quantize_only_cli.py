"""``aipusim compile --quantize-only``: the quantized_model/ artifacts and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from PIL import Image

import aipusim.zoo as zoo
from aipusim.cli.main import main
from aipusim.compiler.quant import read_quantized_model, run_int8

QM_FILES = {
    "quantized_model_manifest.json",
    "quantized_model.json",
    "quantized_model.txt",
    "quantized_model.npz",
    "report.json",
}


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("model") / "tiny.onnx"
    onnx.save(zoo.build("tiny_cnn"), p)
    return p


def test_quantize_only_writes_the_quantized_model(model_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = [
        "compile",
        "-i",
        str(model_path),
        "--quantize-only",
        "-o",
        str(out),
        "--set",
        "quantization_debug=true",
    ]
    assert main(args) == 0
    qm = out / "quantized_model"
    assert {p.name for p in qm.iterdir()} == QM_FILES
    report = json.loads((qm / "report.json").read_text())
    (name, first), *_ = report["outputs"].items()
    assert {"sqnr_db", "max_abs_error", "top1_agreement", "input_rounding_sqnr_db"} <= set(first)
    assert report["per_layer_sqnr_db"]
    status = json.loads((out / "compilation_report.json").read_text())
    assert status["status"] == "SUCCEEDED"
    q = read_quantized_model(qm / "quantized_model_manifest.json")
    x = np.zeros(q.graph.shape(q.graph.inputs[0]), np.float32)
    assert name in run_int8(q, {q.graph.inputs[0]: x})


def test_bad_transform_is_one_line_and_leaves_no_model(
    model_path: Path, tmp_path: Path, capsys
) -> None:
    images = tmp_path / "imgs"
    images.mkdir()
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(images / "a.png")
    script = tmp_path / "t.py"
    script.write_text("def transform(image):\n    return image\n")
    out = tmp_path / "out"
    code = main(
        [
            "compile",
            "-i",
            str(model_path),
            "--quantize-only",
            "-o",
            str(out),
            "--imageset",
            str(images),
            "--transform",
            str(script),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "must define a function get_preprocess_transform" in err and "Traceback" not in err
    assert not (out / "quantized_model").exists()
    status = json.loads((out / "compilation_report.json").read_text())
    assert status["status"] == "QTOOLS_ERROR"


def test_empty_imageset_is_named(model_path: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "none").mkdir()
    script = tmp_path / "t.py"
    script.write_text("def get_preprocess_transform(image):\n    return image\n")
    code = main(
        [
            "compile",
            "-i",
            str(model_path),
            "--quantize-only",
            "-o",
            str(tmp_path / "o"),
            "--imageset",
            str(tmp_path / "none"),
            "--transform",
            str(script),
        ]
    )
    assert code == 2
    assert "contains no images" in capsys.readouterr().err


def test_compile_starts_from_a_quantized_model(model_path: Path, tmp_path: Path) -> None:
    first = tmp_path / "q"
    assert main(["compile", "-i", str(model_path), "--quantize-only", "-o", str(first)]) == 0
    manifest = first / "quantized_model" / "quantized_model_manifest.json"
    out = tmp_path / "c"
    assert main(["compile", "-i", str(manifest), "-o", str(out)]) == 0
    report = json.loads((out / "compilation_report.json").read_text())
    ran = {p["name"]: p["ran"] for p in report["passes"]}
    assert not ran["quantize"] and ran["validate_operators"]
    assert (out / "compiled_model").is_dir()
    assert (out / "quantized_model" / "quantized_model_manifest.json").is_file()


def test_a_broken_manifest_is_a_quantization_error(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "quantized_model_manifest.json"
    bad.write_text('{"format": "other"}')
    assert main(["compile", "-i", str(bad), "-o", str(tmp_path / "o")]) == 2
    assert "must have format aipusim-quantized-model" in capsys.readouterr().err
    report = json.loads((tmp_path / "o" / "compilation_report.json").read_text())
    assert report["status"] == "QTOOLS_ERROR"
