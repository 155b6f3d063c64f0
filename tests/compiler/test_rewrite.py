"""Hardware-driven rewrites: each checked for numerical equivalence on random inputs."""

from __future__ import annotations

import numpy as np
import pytest
from graph_helpers import RNG, model, node, w
from onnx import TensorProto, helper

from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.export import run_graph, to_onnx
from aipusim.compiler.importer import import_model
from aipusim.compiler.ir import PLACE_PARTS_ATTR, Op, is_depthwise, verify
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.passes.rewrite import (
    concat_to_resadd,
    dense_to_conv2d,
    mac_around_lut,
    place_concat,
    pword_padding,
)

CTX = PassContext(CompilerConfig())


def check(m, fn, *, rtol: float = 1e-5):
    before = import_model(m)
    after = fn(before, CTX)
    verify(after)
    feeds = {i: RNG.normal(0, 1, before.shape(i)).astype(np.float32) for i in before.inputs}
    ref, got = run_graph(before, feeds), run_graph(after, feeds)
    for key in ref:
        np.testing.assert_allclose(got[key], ref[key], rtol=rtol, atol=rtol)
    return before, after


@pytest.mark.parametrize(
    ("alpha", "beta", "trans_b", "bias_shape"),
    [(1.0, 1.0, 1, (5,)), (0.5, 2.0, 0, (1, 5)), (1.0, 1.0, 0, None)],
)
def test_gemm_becomes_1x1_conv(alpha, beta, trans_b, bias_shape) -> None:
    inits = {"w": w(5, 12) if trans_b else w(12, 5)}
    ins = ["x", "w"]
    if bias_shape:
        inits["c"] = w(*bias_shape)
        ins.append("c")
    m = model(
        [node("Gemm", ins, "y", alpha=alpha, beta=beta, transB=trans_b)], inits, shape=(3, 12)
    )
    _, after = check(m, dense_to_conv2d)
    assert after.ops() == {"Reshape": 2, "Conv": 1}
    conv = next(n for n in after.nodes if n.op is Op.CONV)
    assert after.shape(conv.inputs[1]) == (5, 12, 1, 1)
    assert after.shape(conv.inputs[0]) == (3, 12, 1, 1)


def test_matmul_with_bias_add_becomes_conv_with_bias() -> None:
    m = model(
        [node("MatMul", ["x", "w"], "mm"), node("Add", ["mm", "b"], "y")],
        {"w": w(6, 7), "b": w(7)},
        shape=(1, 4, 5, 6),
    )
    _, after = check(m, dense_to_conv2d)
    assert after.ops() == {"Reshape": 2, "Conv": 1}
    conv = next(n for n in after.nodes if n.op is Op.CONV)
    assert len(conv.inputs) == 3 and after.shape(conv.inputs[0]) == (20, 6, 1, 1)


def test_matmul_of_two_activations_is_left_alone() -> None:
    m = model([node("MatMul", ["x", "x"], "y")], {}, shape=(1, 4, 4))
    before, after = check(m, dense_to_conv2d)
    assert after is before


def test_channel_concat_becomes_pad_and_add() -> None:
    m = model(
        [
            node("Relu", ["x"], "a"),
            node("Conv", ["x", "w"], "b"),
            node("Concat", ["a", "b", "k"], "y", axis=1),
        ],
        {"w": w(3, 4, 1, 1), "k": w(1, 2, 6, 6)},
    )
    _, after = check(m, concat_to_resadd)
    assert "Concat" not in after.ops()
    assert after.ops() == {"Relu": 1, "Conv": 1, "Pad": 2, "Add": 2}
    assert after.producer("y").op is Op.ADD


def test_concat_on_other_axes_stays() -> None:
    m = model([node("Concat", ["x", "x"], "y", axis=2)], {})
    before, after = check(m, concat_to_resadd)
    assert after is before
    assert place_concat(before, CTX) is before


def test_channel_concat_of_activations_is_placed_not_padded_and_added() -> None:
    m = model(
        [
            node("Relu", ["x"], "a"),
            node("Conv", ["x", "w"], "b"),
            node("Concat", ["a", "b", "a"], "y", axis=-3),
        ],
        {"w": w(3, 4, 1, 1)},
    )
    _, placed = check(m, place_concat)
    assert placed.ops() == {"Relu": 1, "Conv": 1, "Concat": 1}
    cat = placed.producer("y")
    assert cat.attr(PLACE_PARTS_ATTR) == 1 and cat.inputs == ("a", "b", "a")
    # the pad-and-add rewrite leaves a placed Concat alone
    assert concat_to_resadd(placed, CTX) is placed


def test_a_concat_with_a_constant_part_is_left_to_pads_and_adds() -> None:
    m = model(
        [node("Relu", ["x"], "a"), node("Concat", ["a", "k"], "y", axis=1)],
        {"k": w(1, 2, 6, 6)},
    )
    before, placed = check(m, place_concat)
    assert placed is before
    assert concat_to_resadd(placed, CTX).ops() == {"Relu": 1, "Pad": 1, "Add": 1}


def test_pword_padding_pads_group1_convs(onnx_models) -> None:
    m = onnx_models.residual_concat()
    before, after = check(m, pword_padding)
    for n in after.nodes:
        if n.op is Op.CONV and not is_depthwise(n, after):
            assert after.shape(n.inputs[0])[1] % 64 == 0
            assert after.shape(n.inputs[1])[1] % 64 == 0
    # the two convs reading the same tensor share one Pad
    convs_before = [n for n in before.nodes if n.op is Op.CONV]
    assert after.ops()["Pad"] == len({n.inputs[0] for n in convs_before})


def test_pword_padding_skips_depthwise_and_aligned(onnx_models) -> None:
    m = model(
        [
            node("Conv", ["x", "dw"], "d", group=64, pads=[1, 1, 1, 1]),
            node("Conv", ["d", "pw"], "y"),
        ],
        {"dw": w(64, 1, 3, 3), "pw": w(8, 64, 1, 1)},
        shape=(1, 64, 5, 5),
    )
    before, after = check(m, pword_padding)
    assert after is before


def test_mac_around_lut_absorbs_gelu_affines() -> None:
    # GELU as exported: x * 0.5 * (1 + erf(x / sqrt(2)))
    m = model(
        [
            node("Div", ["x", "sqrt2"], "xd"),
            node("Erf", ["xd"], "e"),
            node("Add", ["e", "one"], "e1"),
            node("Mul", ["x", "e1"], "xm"),
            node("Mul", ["xm", "half"], "y"),
        ],
        {
            "sqrt2": np.float32(np.sqrt(2.0)),
            "one": np.float32(1.0),
            "half": np.float32(0.5),
        },
    )
    _, after = check(m, mac_around_lut)
    erf = next(n for n in after.nodes if n.op is Op.ERF)
    assert erf.inputs == ("x",)
    assert erf.attrs["aipu_in_scale"] == pytest.approx(1 / np.sqrt(2))
    assert erf.attrs["aipu_out_bias"] == pytest.approx(1.0)
    assert after.ops() == {"Erf": 1, "Mul": 2}
    proto = to_onnx(after)
    assert all(not a.name.startswith("aipu_") for n in proto.graph.node for a in n.attribute)


def test_mac_around_lut_absorbs_chains_on_both_sides() -> None:
    m = model(
        [
            node("Mul", ["x", "a"], "p"),
            node("Sub", ["p", "b"], "q"),
            node("Sigmoid", ["q"], "s"),
            node("Div", ["s", "c"], "t"),
            node("Sub", ["t", "d"], "y"),
        ],
        {a: np.float32(v) for a, v in zip("abcd", (1.5, 0.25, 4.0, -1.0), strict=True)},
    )
    _, after = check(m, mac_around_lut)
    assert after.ops() == {"Sigmoid": 1}
    assert after.nodes[0].outputs == ("y",)


def test_mac_around_lut_keeps_shared_and_tensor_operands() -> None:
    m = model(
        [
            node("Mul", ["x", "a"], "p"),
            node("Sigmoid", ["p"], "s"),
            node("Relu", ["p"], "r"),
            node("Mul", ["s", "v"], "y"),
        ],
        {"a": np.float32(2.0), "v": w(1, 4, 1, 1)},
        outputs=("y", "r"),
    )
    before, after = check(m, mac_around_lut)
    assert after is before


def test_rewrites_on_builders(onnx_models) -> None:
    for build in (onnx_models.classifier, onnx_models.residual_concat, onnx_models.detector):
        m = build()
        g = import_model(m)
        h = g
        for fn in (dense_to_conv2d, concat_to_resadd, pword_padding, mac_around_lut):
            h = fn(h, CTX)
            verify(h)
        assert not {"Gemm", "MatMul"} & set(h.ops())
        feeds = onnx_models.random_feeds(m)
        ref, got = run_graph(g, feeds), run_graph(h, feeds)
        for key in ref:
            np.testing.assert_allclose(got[key], ref[key], rtol=1e-4, atol=1e-5)


def test_int8_weights_keep_their_dtype() -> None:
    """After quantization weights are int8 and biases int32: the rewrites keep the types."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    g = import_model(
        helper.make_model(
            helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
            opset_imports=[helper.make_opsetid("", 17)],
        )
    )
    from aipusim.compiler.ir import Node

    ed = g.edit()
    wq = ed.add_constant("wq", np.ones((4, 8), np.int8), exact_name=True)
    bq = ed.add_constant("bq", np.arange(4, dtype=np.int32), exact_name=True)
    ed.remove(g.node(g.nodes[0].name))
    ed.add(Node("fc", Op.GEMM, ("x", wq, bq), ("y",), {"transB": 1}))
    h = dense_to_conv2d(ed.build(), CTX)
    conv = next(n for n in h.nodes if n.op is Op.CONV)
    assert h.const(conv.inputs[1]).dtype == np.int8
    assert h.const(conv.inputs[2]).dtype == np.int32
    p = pword_padding(h, CTX)
    conv = next(n for n in p.nodes if n.op is Op.CONV)
    assert p.const(conv.inputs[1]).shape == (4, 64, 1, 1)
    assert p.const(conv.inputs[1]).dtype == np.int8


def test_rewrites_keep_quantization_parameters(onnx_models) -> None:
    from aipusim.compiler.pipeline import FRONT, run_pipeline

    ctx = PassContext(CompilerConfig())
    quantized = run_pipeline(
        onnx_models.residual_concat(), ctx, passes=FRONT, stop_after="quantize"
    ).graph
    concat = next(n for n in quantized.nodes if n.op is Op.CONCAT)
    out_q = quantized.tensor(concat.outputs[0]).quant
    assert out_q is not None
    g = concat_to_resadd(quantized, CTX)
    verify(g)
    assert g.tensor(concat.outputs[0]).quant == out_q
    for n in g.nodes:
        if n.op is Op.PAD:
            assert g.tensor(n.outputs[0]).quant == g.tensor(n.inputs[0]).quant
    h = pword_padding(g, CTX)
    verify(h)
    for n in h.nodes:
        if n.op is Op.CONV and n.name in {c.name for c in g.nodes if c.op is Op.CONV}:
            assert h.tensor(n.inputs[1]).quant == g.tensor(g.node(n.name).inputs[1]).quant
            assert h.tensor(n.inputs[0]).quant == g.tensor(g.node(n.name).inputs[0]).quant
