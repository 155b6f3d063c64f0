"""fuse_attention_mask: a constant mask before a Softmax becomes a MaskedSoftmax, in float
the same function, in int8 exact zeros where masked."""

from __future__ import annotations

import numpy as np
import pytest
from graph_helpers import model, node

from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.export import run_graph
from aipusim.compiler.importer import import_model
from aipusim.compiler.ir import Op, verify
from aipusim.compiler.passes.attention_mask import MASK_BELOW, fuse_attention_mask
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.pipeline import run_pipeline
from aipusim.compiler.quant import run_fp32, run_int8

RNG = np.random.default_rng(18)
CAUSAL = np.tril(np.ones((6, 6), bool))


def _scores_then(nodes, inits):
    """x [1, 2, 6, 6] (two heads of scores) -> the masking nodes -> Softmax -> y."""
    return model([*nodes, node("Softmax", ["s"], "y", axis=-1)], inits, shape=(1, 2, 6, 6))


def _check_same_float(onnx_model) -> tuple:
    graph = import_model(onnx_model)
    fused = fuse_attention_mask(graph, None)
    verify(fused)
    x = {"x": RNG.normal(0.0, 2.0, (1, 2, 6, 6)).astype(np.float32)}
    want = run_graph(graph, x)["y"]  # onnx.reference on the original nodes
    np.testing.assert_allclose(run_fp32(fused, x)["y"], want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(run_graph(fused, x)["y"], want, rtol=1e-5, atol=1e-7)  # export
    return graph, fused


@pytest.mark.parametrize("value", [-1e4, -1e9, float(np.finfo(np.float32).min), MASK_BELOW])
def test_an_additive_mask_becomes_a_masked_softmax(value: float) -> None:
    mask = np.where(CAUSAL, 0.0, value).astype(np.float32)
    _, fused = _check_same_float(_scores_then([node("Add", ["x", "m"], "s")], {"m": mask}))
    (sm,) = fused.nodes  # the Add of zeros is gone
    assert sm.op is Op.MASKED_SOFTMAX
    keep = fused.const(sm.inputs[1])
    assert keep.dtype == np.uint8 and np.array_equal(keep, CAUSAL)


def test_a_bias_with_the_mask_keeps_the_bias_add() -> None:
    bias = RNG.normal(0.0, 1.0, (6, 6)).astype(np.float32)
    mask = np.where(CAUSAL, bias, -100.0).astype(np.float32)  # Swin's spelling
    _, fused = _check_same_float(_scores_then([node("Add", ["m", "x"], "s")], {"m": mask}))
    add, sm = fused.nodes
    assert add.op is Op.ADD and sm.op is Op.MASKED_SOFTMAX
    assert np.array_equal(fused.const(add.inputs[1]), np.where(CAUSAL, bias, 0.0))


@pytest.mark.parametrize("inverted", [False, True])
def test_a_where_with_a_large_negative_fill_becomes_a_masked_softmax(inverted: bool) -> None:
    cond = ~CAUSAL if inverted else CAUSAL
    ins = ["c", "f", "x"] if inverted else ["c", "x", "f"]
    inits = {"c": cond, "f": np.float32(-np.inf)}
    _, fused = _check_same_float(_scores_then([node("Where", ins, "s")], inits))
    (sm,) = fused.nodes
    assert sm.op is Op.MASKED_SOFTMAX and np.array_equal(fused.const(sm.inputs[1]), CAUSAL)


@pytest.mark.parametrize(
    "mask",
    [
        np.where(CAUSAL, 0.0, -50.0),  # not below MASK_BELOW: a bias like any other
        np.where(np.arange(6)[:, None] == 0, -1e4, 0.0) * np.ones((6, 6)),  # a row all masked
    ],
    ids=["bias_only", "fully_masked_row"],
)
def test_other_constants_stay_an_add(mask: np.ndarray) -> None:
    onnx_model = _scores_then([node("Add", ["x", "m"], "s")], {"m": mask.astype(np.float32)})
    graph = import_model(onnx_model)
    assert fuse_attention_mask(graph, None) is graph


def test_a_mask_read_elsewhere_too_is_left_alone() -> None:
    mask = np.where(CAUSAL, 0.0, -1e4).astype(np.float32)
    onnx_model = model(
        [node("Add", ["x", "m"], "s"), node("Softmax", ["s"], "y", axis=-1),
         node("Relu", ["s"], "r")],
        {"m": mask}, shape=(1, 2, 6, 6), outputs=("y", "r"),
    )  # fmt: skip
    graph = import_model(onnx_model)
    assert fuse_attention_mask(graph, None) is graph


def test_int8_masked_entries_are_exactly_zero() -> None:
    mask = np.where(CAUSAL, 0.0, -1e4).astype(np.float32)
    onnx_model = model(
        [node("Conv", ["x", "w"], "a"), node("Add", ["a", "m"], "s"),
         node("Softmax", ["s"], "y", axis=-1)],
        {"w": RNG.normal(0.0, 0.5, (2, 2, 1, 1)).astype(np.float32), "m": mask},
        shape=(1, 2, 6, 6),
    )  # fmt: skip
    ctx = PassContext(CompilerConfig(run_graph_cleaner=False))
    run_pipeline(onnx_model, ctx, stop_after="quantize")
    q = ctx.results["quantize"]["qgraph"]
    assert Op.MASKED_SOFTMAX in {n.op for n in q.graph.nodes}
    sample = ctx.results["quantize"]["calibration"].samples[0]
    raw = run_int8(q, sample, raw=True)["y"]
    zero = int(q.qparams("y").zero_point)
    masked = np.broadcast_to(~CAUSAL, raw.shape)
    assert np.all(raw[masked] == zero)
    assert np.all(raw[:, :, 0, 0] == raw.max())  # the first token sees only itself: 1.0
