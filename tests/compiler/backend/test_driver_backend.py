"""The back end inside the whole compiler: artifacts and status codes via the driver."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

import aipusim.zoo as zoo
from aipusim.base.errors import ConfigError, MemoryPlanError
from aipusim.compiler import CompilerConfig
from aipusim.compiler.driver import compile_model
from aipusim.compiler.pipeline import FRONT, PIPELINE
from aipusim.compiler.request import CompileRequest

NO_QUANT = tuple(p for p in PIPELINE if p.name != "quantize")


def _request(tmp_path: Path, **config) -> CompileRequest:
    model = tmp_path / "m.onnx"
    onnx.save(zoo.build("tiny_cnn"), model)
    return CompileRequest(
        model_path=model, output_dir=tmp_path / "out", config=CompilerConfig(**config)
    )


def test_the_pipeline_ends_with_the_back_end() -> None:
    names = [p.name for p in PIPELINE]
    assert names[: len(FRONT)] == [p.name for p in FRONT]
    assert names[len(FRONT) :] == [
        "lower",
        "fuse_residual",
        "fuse_dpu_chains",
        "tile",
        "multicore",
        "imc",
        "pack",
        "memplan",
        "schedule",
        "estimate",
        "emit",
    ]


def test_compile_writes_compiled_model(tmp_path: Path) -> None:
    result = compile_model(_request(tmp_path), passes=NO_QUANT)
    assert "compiled_model/model.json" in result.files
    assert "compiled_model/core0.tasklist" in result.files
    report = json.loads((tmp_path / "out" / "compilation_report.json").read_text())
    assert report["status"] == "SUCCEEDED"


def test_memory_plan_failure_reports_its_status(tmp_path: Path) -> None:
    with pytest.raises(MemoryPlanError):
        compile_model(_request(tmp_path, ddr_constraint=1000, l2_constraint=1000), passes=NO_QUANT)
    report = json.loads((tmp_path / "out" / "compilation_report.json").read_text())
    assert report["status"] == "LOWER_TIR_ERROR"
    assert "buffer" in report["message"] or "buffer" in json.dumps(report)


def test_cores_x_mode_that_make_no_sense_report_a_config_error(tmp_path: Path) -> None:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 4, 4])
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["r"], ["y"])],
        "two",
        [x],
        [y],
    )
    model = tmp_path / "two.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    config = CompilerConfig(aipu_cores_used=4, resources_used=1.0, multicore_mode="pipeline")
    request = CompileRequest(model_path=model, output_dir=tmp_path / "out", config=config)
    with pytest.raises(ConfigError, match="aipu_cores_used must be at most the"):
        compile_model(request, passes=NO_QUANT)
    report = json.loads((tmp_path / "out" / "compilation_report.json").read_text())
    assert report["status"] == ConfigError.status
    assert "multicore" in json.dumps(report)
