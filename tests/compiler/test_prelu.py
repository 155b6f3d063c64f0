"""``decompose_prelu``: PRelu with one slope becomes LeakyRelu, per-channel slopes become
Relu + Min * slope; the rewritten graph computes PRelu, compiles on every multicore mode and
runs bit-exact against the int8 reference, convolutional and dense."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

import aipusim
from aipusim.api.functional_check import chip_inputs, compare
from aipusim.compiler import CompilerConfig
from aipusim.compiler.ir import Op
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.pipeline import FRONT, run_pipeline
from aipusim.compiler.quant.float_exec import run_fp32
from aipusim.simulator import simulate

C, SIDE = 28, 22  # the shape of the MTCNN R-net layer whose rows split unevenly over 4 cores
RNG = np.random.default_rng(7)


def conv_prelu(slopes: np.ndarray) -> object:
    """Conv 3->C, PRelu(slopes), Conv C->C (NCHW)."""
    inits = [
        numpy_helper.from_array(RNG.standard_normal((C, 3, 3, 3)).astype(np.float32), "w1"),
        numpy_helper.from_array(RNG.standard_normal((C, C, 1, 1)).astype(np.float32), "w2"),
        numpy_helper.from_array(slopes.astype(np.float32), "slope"),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "w1"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("PRelu", ["a", "slope"], ["b"]),
        helper.make_node("Conv", ["b", "w2"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "conv_prelu",
        [helper.make_tensor_value_info("input", 1, [1, 3, SIDE, SIDE])],
        [helper.make_tensor_value_info("out", 1, [1, C, SIDE, SIDE])],
        initializer=inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def dense_prelu() -> object:
    """Flatten, MatMul + Add 192->128, PRelu(128 slopes), MatMul 128->4: a Keras face net's head."""
    inits = [
        numpy_helper.from_array(RNG.standard_normal((192, 128)).astype(np.float32), "w1"),
        numpy_helper.from_array(RNG.standard_normal((128,)).astype(np.float32), "b1"),
        numpy_helper.from_array(RNG.uniform(0, 0.5, (128,)).astype(np.float32), "slope"),
        numpy_helper.from_array(RNG.standard_normal((128, 4)).astype(np.float32), "w2"),
    ]
    nodes = [
        helper.make_node("Flatten", ["input"], ["f"]),
        helper.make_node("MatMul", ["f", "w1"], ["m"]),
        helper.make_node("Add", ["m", "b1"], ["a"]),
        helper.make_node("PRelu", ["a", "slope"], ["b"]),
        helper.make_node("MatMul", ["b", "w2"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "dense_prelu",
        [helper.make_tensor_value_info("input", 1, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("out", 1, [1, 4])],
        initializer=inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def front(model: object) -> object:
    ctx = PassContext(CompilerConfig())
    passes = [p for p in FRONT if p.name != "quantize"][: [p.name for p in FRONT].index("quantize")]
    return run_pipeline(model, ctx, passes=passes).graph


def test_per_channel_slopes_become_relu_min_mul_add_and_compute_prelu() -> None:
    model = conv_prelu(RNG.uniform(-0.2, 0.4, (C, 1, 1)))
    graph = front(model)
    ops = [n.op for n in graph.nodes]
    assert Op.PRELU not in ops
    assert {Op.RELU, Op.MIN, Op.MUL, Op.ADD} <= set(ops)
    x = RNG.standard_normal((1, 3, SIDE, SIDE)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"input": x})[0]
    got = run_fp32(graph, {"input": x})["out"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_one_slope_is_a_leaky_relu() -> None:
    graph = front(conv_prelu(np.full((C, 1, 1), 0.25)))
    leaky = [n for n in graph.nodes if n.op is Op.LEAKY_RELU]
    assert len(leaky) == 1 and leaky[0].attr("alpha") == 0.25
    assert Op.PRELU not in {n.op for n in graph.nodes}


@pytest.mark.parametrize("model", ["conv", "dense"])
@pytest.mark.parametrize(
    "config",
    [
        {},
        {"multicore_mode": "batch", "aipu_cores_used": 4, "resources_used": 1.0},
        {"multicore_mode": "cooperative", "aipu_cores_used": 4, "resources_used": 1.0},
        {"multicore_mode": "pipeline", "aipu_cores_used": 4, "resources_used": 1.0},
    ],
    ids=["1core", "batch", "cooperative", "pipeline"],
)
def test_prelu_models_run_bit_exact(model: str, config: dict, tmp_path: Path) -> None:
    onnx_model = conv_prelu(RNG.uniform(-0.2, 0.4, (C, 1, 1))) if model == "conv" else dense_prelu()
    folder = aipusim.compile(onnx_model, config, output_dir=tmp_path).compiled_dir()
    # a dense tensor split over cooperative cores reads its scalar zero from any element
    assert json.loads((folder / "model.json").read_text())["extra"]["functional_gaps"] == {}
    chip, how = chip_inputs(folder)
    check = compare(simulate(folder, frames=1, functional=True, inputs=chip), folder, chip, how)
    assert check.bit_exact, check.text()
