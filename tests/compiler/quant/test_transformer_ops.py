"""int8 schemes of the transformer ops: each op quantized in a small graph tracks fp32, and
gets the step kind the op registry declares (so compiler/README.md's table is true)."""

from __future__ import annotations

import numpy as np
import pytest
from graph_helpers import model, node
from onnx import TensorProto, helper, numpy_helper
from transformer_models import cnn_opset9, encoder

from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.ir import DType, Op
from aipusim.compiler.opregistry import spec
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.pipeline import run_pipeline
from aipusim.compiler.quant import run_fp32, run_int8
from aipusim.compiler.quant.accuracy import sqnr_db

RNG = np.random.default_rng(21)


def quantized(onnx_model, **config):
    ctx = PassContext(CompilerConfig(**config))
    run_pipeline(onnx_model, ctx, stop_after="quantize")
    return ctx.results["quantize"]


def tracks(found, floor_db: float) -> dict[str, float]:
    """SQNR of every output on the calibration samples (inside the calibrated ranges)."""
    q, g = found["qgraph"], found["float_graph"]
    out = {}
    for name in g.outputs:
        ref = np.concatenate(
            [run_fp32(g, s)[name].ravel() for s in found["calibration"].samples[:4]]
        )
        got = np.concatenate(
            [run_int8(q, s)[name].ravel() for s in found["calibration"].samples[:4]]
        )
        out[name] = sqnr_db(ref, got)
        assert out[name] > floor_db, (name, out[name])
    return out


def kinds_follow_the_registry(found) -> set[str]:
    q = found["qgraph"]
    for n in q.graph.nodes:
        assert q.steps[n.name].kind in spec(n.op_type).kinds, (n.name, q.steps[n.name].kind)
    return {q.steps[n.name].kind for n in q.graph.nodes}


W = {
    "w": RNG.normal(0, 0.5, (4, 4, 1, 1)).astype(np.float32),
    "w2": RNG.normal(0, 0.5, (4, 4, 1, 1)).astype(np.float32),
    "idx": np.array([2, 0], np.int64),
    "shape": np.array([2, 4, 3, 3], np.int64),
    "reps": np.array([1, 2, 1, 1], np.int64),
    "one": np.array(1.5, np.float32),
}
GRAPHS = {
    # Div and Pow of two computed tensors (the divisor kept away from 0 by a Sigmoid)
    "div": ([node("Conv", ["x", "w"], "a"), node("Sigmoid", ["x"], "s"),
             node("Add", ["s", "one"], "b"), node("Div", ["a", "b"], "y")], "div_fp"),
    "pow": ([node("Sigmoid", ["x"], "s"), node("Add", ["s", "one"], "a"),
             node("Conv", ["x", "w"], "b"), node("Pow", ["a", "b"], "y")], "pow_fp"),
    "softmax_axis1": ([node("Conv", ["x", "w"], "a"), node("Softmax", ["a"], "y", axis=1)],
                      "softmax"),
    "softmax_axis2": ([node("Conv", ["x", "w"], "a"), node("Softmax", ["a"], "y", axis=2)],
                      "softmax"),
    "gather": ([node("Conv", ["x", "w"], "a"), node("Gather", ["a", "idx"], "y", axis=1)],
               "share"),
    "expand": ([node("Conv", ["x", "w"], "a"), node("ReduceMean", ["a"], "m", axes=[0]),
                node("Expand", ["m", "shape"], "e"), node("Conv", ["e", "w2"], "y")], "share"),
    "tile": ([node("Conv", ["x", "w"], "a"), node("Tile", ["a", "reps"], "y")], "share"),
}  # fmt: skip


@pytest.mark.parametrize("name", GRAPHS)
def test_each_op_tracks_fp32_with_its_registry_kind(name: str) -> None:
    nodes, kind = GRAPHS[name]
    m = model(
        nodes, {k: v for k, v in W.items() if any(k in n.input for n in nodes)}, shape=(2, 4, 3, 3)
    )
    found = quantized(m, run_graph_cleaner=False)
    assert kind in kinds_follow_the_registry(found)
    tracks(found, 30.0)


def test_activation_matmul_is_exact_integer_arithmetic() -> None:
    m = model(
        [node("Transpose", ["x"], "t", perm=[0, 1, 3, 2]), node("MatMul", ["x", "t"], "y")],
        {},
        shape=(1, 2, 5, 8),
    )
    found = quantized(m, run_graph_cleaner=False)
    q = found["qgraph"]
    mm = next(n for n in q.graph.nodes if n.op is Op.MATMUL)
    assert q.steps[mm.name].kind == "matmul"
    b = q.qparams(mm.inputs[1])
    assert int(b.zero_point) == 0  # the IMC-side operand is symmetric
    sample = found["calibration"].samples[0]
    raw = run_int8(q, sample, raw=True, keep_all=True)
    a = raw[mm.inputs[0]].astype(np.int64) - int(q.qparams(mm.inputs[0]).zero_point)
    acc = a @ raw[mm.inputs[1]].astype(np.int64)
    p = q.steps[mm.name].params
    m_, n_ = int(p["mult"][0]), int(p["shift"][0])
    want = np.clip(((acc * m_ + (1 << (n_ - 1))) >> n_) + int(q.qparams("y").zero_point), -128, 127)
    assert np.array_equal(raw["y"], want.astype(np.int8))
    tracks(found, 30.0)


def test_embedding_table_lookup_by_integer_input() -> None:
    table = RNG.normal(0, 1, (10, 6)).astype(np.float32)
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6])
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["e"], name="emb", axis=0),
        helper.make_node("Relu", ["e"], ["y"], name="act"),
    ]
    init = [numpy_helper.from_array(table, "table")]
    g = helper.make_graph(nodes, "emb", [ids], [y], initializer=init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    # (on the AIPU the lookup is refused by validate_operators; the cleaner moves it to
    # the host: see tests/compiler/test_cleaner.py)
    found = quantized(m, run_graph_cleaner=False, validate_operators=False)
    q = found["qgraph"]
    assert q.steps["emb"].kind == "gather"
    assert q.graph.tensor("table").dtype is DType.INT8
    ids_sample = found["calibration"].samples[0]["ids"]
    assert ids_sample.dtype == np.int64 and ids_sample.max() < 10
    tracks(found, 35.0)


def test_residual_stream_is_16_bit_and_mvm_inputs_stay_int8() -> None:
    found = quantized(encoder(), run_graph_cleaner=False)
    g = found["qgraph"].graph
    for n in g.nodes:
        if n.op is Op.LAYER_NORM and n.inputs[0] not in g.inputs:
            assert g.tensor(n.inputs[0]).dtype is DType.INT16  # the residual stream
        if n.op in (Op.MATMUL, Op.CONV, Op.GEMM):
            assert all(g.tensor(i).dtype is DType.INT8 for i in n.inputs[:1])


def test_encoder_and_opset9_cnn_follow_the_registry() -> None:
    kinds = kinds_follow_the_registry(quantized(encoder()))
    assert {"layernorm", "matmul", "lut", "softmax", "rescale"} <= kinds
    assert "resize_linear" in kinds_follow_the_registry(quantized(cnn_opset9()))
