"""Issue 18's small graphs end to end.

A 2-layer transformer encoder (attention, LayerNorm in both forms, GELU in both forms) and an
opset-9 CNN (old BatchNormalization and Upsample) compile in every multicore mode, pass the
static tasklist check and simulate, and their int8 result matches the fp32 result of the
original model in onnxruntime within the quantization tolerance. One small graph per new op
and pattern (`transformer_models.OP_GRAPHS`) does the same in the default mode.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from transformer_models import OP_GRAPHS, cnn_opset9, encoder

import aipusim
from aipusim.compiler.quant.accuracy import sqnr_db
from aipusim.compiler.quant.advice import SQNR_TARGET_DB
from aipusim.compiler.quant.data import bundled_image_calibration, image_input
from aipusim.isa.check import check_paths

#: (multicore_mode, aipu_cores_used, resources_used): 4 x Batch-1 (processes or threads of
#: the host; the same tasklists) and the 4-core modes.
MODES = {
    "4xbatch1": ("multiprocess", 1, 0.25),
    "4xbatch1_threads": ("multithread", 1, 0.25),
    "batch": ("batch", 4, 1.0),
    "cooperative": ("cooperative", 4, 1.0),
    "pipeline": ("pipeline", 4, 1.0),
}
MODELS = {"encoder": encoder, "cnn_opset9": cnn_opset9}
#: int8 against fp32 on random inputs: 256 levels give ~48 dB per tensor; a few layers of
#: accumulated rounding leave well above this floor (the advice target is 20 dB).
TOLERANCE_DB = 25.0


def fp32_onnxruntime(path: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """The original model's first output in onnxruntime (opset 9 Upsample included)."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def random_input(model: onnx.ModelProto, seed: int) -> np.ndarray:
    """A sample for the model's one input like its calibration data: token ids below 50, a
    held-aside photograph for an image input (which calibrates on the bundled
    photographs), else N(0, 1) floats."""
    info = model.graph.input[0].type.tensor_type
    shape = [d.dim_value for d in info.shape.dim]
    rng = np.random.default_rng(seed)
    if info.elem_type == onnx.TensorProto.INT64:
        return rng.integers(0, 50, shape).astype(np.int64)
    if image_input(shape) is not None:
        held = bundled_image_calibration("x", tuple(shape)).held_aside
        return held[seed % len(held)]["x"]
    return rng.standard_normal(shape).astype(np.float32)


@pytest.fixture(scope="module", params=[(m, k) for m in MODELS for k in MODES], ids=str)
def compiled(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    name, mode_key = request.param
    mode, cores, resources = MODES[mode_key]
    root = tmp_path_factory.mktemp(f"{name}-{mode_key}")
    model = MODELS[name]()
    path = root / f"{name}.onnx"
    onnx.save(model, path)
    config = {"aipu_cores_used": cores, "resources_used": resources, "multicore_mode": mode}
    return path, aipusim.compile(str(path), config, output_dir=root / "out"), root / "out"


def test_compiles_checks_and_simulates(compiled) -> None:
    _path, m, out = compiled
    report = check_paths([out / "compiled_model"])
    assert report.ok, report.format()
    result = m.simulate(frames=2)
    assert result.total_cycles >= result.lower_bound_cycles > 0
    assert result.active_cores == 4 and result.fps > 0
    assert all(0.0 <= u <= 1.0 for u in result.utilization.values())


def test_int8_matches_fp32_within_tolerance(compiled) -> None:
    path, m, _out = compiled
    x = random_input(onnx.load(path), seed=5)
    assert sqnr_db(fp32_onnxruntime(path, {"x": x}), m(x)) > TOLERANCE_DB


def test_attention_runs_on_the_mvm_with_weight_loads_every_frame(tmp_path) -> None:
    path = tmp_path / "encoder.onnx"
    onnx.save(encoder(), path)
    aipusim.compile(str(path), output_dir=tmp_path / "out")
    report = json.loads((tmp_path / "out" / "compiled_model" / "report.json").read_text())
    attention = [layer for layer in report["layers"] if "matmul_choice" in layer]
    assert len(attention) == 4  # Q.K^T and attention.V in both layers
    for layer in attention:
        # 16 vectors per head through a 32 x 16 operand: 8 cycles a vector on the MVM
        # against 32 MACs per output on 64 DPU lanes
        choice = layer["matmul_choice"]
        assert choice["unit"] == "mvm" and choice["mvm_cycles"] < choice["dpu_cycles"]
        assert choice["imc_weight_bytes_per_frame"] > 0
        assert layer["scheduled_cycles_by_unit"]["wload"] > 0  # loaded in the frame


@pytest.mark.parametrize("name", OP_GRAPHS)
def test_each_op_compiles_simulates_and_matches_fp32(name: str, tmp_path: Path) -> None:
    build, aipu_op = OP_GRAPHS[name]
    model = build()
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    m = aipusim.compile(str(path), output_dir=tmp_path / "out")
    compiled = tmp_path / "out" / "compiled_model"
    assert check_paths([compiled]).ok
    assert m.simulate(frames=2).fps > 0
    report = json.loads((compiled / "report.json").read_text())
    if aipu_op is None:  # an embedding lookup of the input: the graph cleaner's host part
        log = (tmp_path / "out" / "compilation_log.txt").read_text()
        assert "before the AIPU graph: `gather_" in log
    else:
        assert aipu_op in {layer["op"] for layer in report["layers"]}
    xs = [random_input(model, seed) for seed in range(4)]
    want = np.concatenate([fp32_onnxruntime(path, {"x": x}).ravel() for x in xs])
    got = np.concatenate([np.asarray(m(x)).ravel() for x in xs])
    # one op's int8 rounding (four random inputs): above the target an output must reach
    assert sqnr_db(want, got) > SQNR_TARGET_DB


@pytest.mark.parametrize("double", [False, True], ids=["loads_exposed", "double_buffered"])
def test_attention_estimate_is_the_simulated_layer_time(double: bool, tmp_path: Path) -> None:
    # the cost the choice is made with is the time the schedule takes: loads hidden behind
    # the previous head only with weight double buffering
    path = tmp_path / "encoder.onnx"
    onnx.save(encoder(), path)
    config = {"imc_double_buffer_sequential": double}
    m = aipusim.compile(str(path), config, output_dir=tmp_path / "out")
    report = json.loads((tmp_path / "out" / "compiled_model" / "report.json").read_text())
    result = m.simulate(frames=4)
    busy = result.profile().set_index("layer")["busy_us"] * result.frequency_hz / 1e6
    attention = [layer for layer in report["layers"] if "matmul_choice" in layer]
    assert len(attention) == 4
    for layer in attention:
        estimated = layer["estimated_cycles"]
        assert estimated == layer["matmul_choice"]["mvm_cycles"]
        assert busy[layer["name"]] == pytest.approx(estimated, rel=0.01)
        hidden = layer["estimated_compute_cycles"] + layer["estimated_weight_load_cycles"]
        assert (estimated < hidden) == double
