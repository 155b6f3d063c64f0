"""Tasklists the compiler emits for zoo models: text round trip is byte-identical and the
static checker finds nothing (the issue's "done when", end to end through the CLI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aipusim.cli.main import main
from aipusim.isa import (
    assemble,
    check_paths,
    disassemble,
    encode_tasklist,
    find_tasklists,
    read_tasklist,
)

MODES = ["multiprocess", "batch", "cooperative", "pipeline"]
ZOO = ["tiny_cnn", "resnet18", "resnet50", "mobilenetv2", "efficientnet_b0", "yolov5s", "yolov8n"]


def _compile(tmp_path: Path, model: str, mode: str, cores: int) -> Path:
    onnx_path = tmp_path / f"{model}.onnx"
    if not onnx_path.exists():
        assert main(["zoo", "export", model, "-o", str(onnx_path)]) == 0
    out = tmp_path / f"{model}_{mode}"
    args = ["compile", "-i", str(onnx_path), "-o", str(out), "--aipu-cores", str(cores)]
    assert main([*args, "--set", f"multicore_mode={mode}"]) == 0
    return out / "compiled_model"


def _assert_roundtrip_and_clean(compiled: Path) -> None:
    files = find_tasklists(compiled)
    assert files
    for path in files:
        data = path.read_bytes()
        assert encode_tasklist(assemble(disassemble(read_tasklist(path)))) == data, path.name
    report = check_paths([compiled])
    assert report.ok, report.format()


@pytest.mark.parametrize("mode", MODES)
def test_tiny_cnn_tasklists(tmp_path: Path, mode: str, capsys) -> None:
    cores = 1 if mode == "multiprocess" else 4
    _assert_roundtrip_and_clean(_compile(tmp_path, "tiny_cnn", mode, cores))


@pytest.mark.slow
@pytest.mark.parametrize("model", ZOO[1:])
@pytest.mark.parametrize("mode", ["multiprocess", "cooperative"])
def test_zoo_tasklists(tmp_path: Path, model: str, mode: str, capsys) -> None:
    cores = 1 if mode == "multiprocess" else 4
    _assert_roundtrip_and_clean(_compile(tmp_path, model, mode, cores))
