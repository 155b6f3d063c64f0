"""Simplify passes: constant folding, no-op removal, BatchNorm folding, fast-math rewrites.

Every rewrite is checked for numerical equivalence through the IR -> ONNX exporter.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import pytest
from graph_helpers import RNG, model, node, w
from onnx import TensorProto

from aipusim.compiler.export import run_graph
from aipusim.compiler.importer import import_model
from aipusim.compiler.ir import Graph, Op, verify
from aipusim.compiler.passes.arith import arithmetic_simplification
from aipusim.compiler.passes.bn_fold import fold_batchnorm
from aipusim.compiler.passes.simplify import fold_constants


def check(
    m: onnx.ModelProto, fn: Callable[[Graph, None], Graph], *, rtol: float = 1e-5
) -> tuple[Graph, Graph]:
    """Import, run the pass, verify, and compare outputs on random inputs."""
    before = import_model(m)
    after = fn(before, None)
    verify(after)
    shape = before.shape("x")
    feeds = {"x": RNG.normal(0, 1, shape).astype(np.float32)}
    ref, got = run_graph(before, feeds), run_graph(after, feeds)
    assert set(ref) == set(got)
    for key in ref:
        np.testing.assert_allclose(got[key], ref[key], rtol=rtol, atol=rtol)
    return before, after


def test_constant_subgraphs_fold() -> None:
    m = model(
        [
            node("Add", ["a", "b"], "ab"),
            node("Transpose", ["ab"], "abt", perm=[1, 0]),
            node("Reshape", ["abt", "shape"], "c"),
            node("Mul", ["x", "c"], "y"),
        ],
        {"a": w(6, 6), "b": w(6, 6), "shape": np.array([1, 1, 6, 6], np.int64)},
    )
    m.graph.node.insert(0, node("Identity", ["x"], "unused"))
    before = import_model(m)
    # the importer already folds constant nodes; fold_constants handles what passes create
    assert before.ops() == {"Mul": 1}
    _, after = check(m, fold_constants)
    assert after.ops() == {"Mul": 1}


def test_fold_constants_on_an_ir_graph() -> None:
    from aipusim.compiler.ir import Graph, Node, Tensor

    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = Graph(
        "g",
        (
            Node("t", Op.TRANSPOSE, ("a",), ("at",), {"perm": (1, 0)}),
            Node("s", Op.SHAPE, ("x",), ("xs",)),
            Node("m", Op.MUL, ("x", "at"), ("y",)),
        ),
        {
            "a": Tensor("a", (2, 3)),
            "at": Tensor("at", (3, 2)),
            "x": Tensor("x", (3, 2)),
            "xs": Tensor("xs", (2,), "int64"),
            "y": Tensor("y", (3, 2)),
        },
        {"a": a},
        ("x",),
        ("y", "xs"),
    )
    verify(g)
    h = fold_constants(g, None)
    verify(h)
    assert h.ops() == {"Mul": 1}
    np.testing.assert_array_equal(h.const("at"), a.T)
    assert h.const("xs").tolist() == [3, 2] and h.tensor("xs").dtype == "int64"


def test_noops_disappear_and_output_names_stay() -> None:
    m = model(
        [
            node("Identity", ["x"], "i"),
            node("Cast", ["i"], "c", to=TensorProto.FLOAT),
            node("Reshape", ["c", "same"], "r"),
            node("Transpose", ["r"], "t", perm=[0, 1, 2, 3]),
            node("Relu", ["t"], "relu"),
            node("Pad", ["relu", "zeros"], "p"),
            node("Identity", ["p"], "y"),
        ],
        {"same": np.array([1, 4, 6, 6], np.int64), "zeros": np.zeros(8, np.int64)},
    )
    _, after = check(m, fold_constants)
    assert after.ops() == {"Relu": 1}
    assert after.outputs == ("y",) and after.nodes[0].outputs == ("y",)


def test_reshape_chains_merge() -> None:
    m = model(
        [
            node("Reshape", ["x", "s1"], "a"),
            node("Flatten", ["a"], "b", axis=1),
            node("Relu", ["b"], "y"),
        ],
        {"s1": np.array([1, 4, 36], np.int64)},
    )
    _, after = check(m, fold_constants)
    assert after.ops() == {"Reshape": 1, "Relu": 1}


def bn_inits(c: int, prefix: str = "") -> dict[str, np.ndarray]:
    return {
        f"{prefix}g": RNG.uniform(0.5, 1.5, c).astype(np.float32),
        f"{prefix}b": RNG.normal(0, 0.2, c).astype(np.float32),
        f"{prefix}m": RNG.normal(0, 0.2, c).astype(np.float32),
        f"{prefix}v": RNG.uniform(0.5, 2.0, c).astype(np.float32),
    }


def bn(x: str, out: str, prefix: str = "") -> onnx.NodeProto:
    return node("BatchNormalization", [x] + [f"{prefix}{k}" for k in "gbmv"], out, epsilon=1e-3)


@pytest.mark.parametrize("group", [1, 2, 4])
def test_batchnorm_folds_into_conv(group: int) -> None:
    m = model(
        [
            node("Conv", ["x", "w", "cb"], "c", pads=[1, 1, 1, 1], group=group),
            bn("c", "y"),
        ],
        {"w": w(8, 4 // group, 3, 3), "cb": w(8), **bn_inits(8)},
    )
    _, after = check(m, fold_batchnorm)
    assert after.ops() == {"Conv": 1}


def test_batchnorm_folds_into_conv_without_bias_and_conv_transpose() -> None:
    # (onnx.reference cannot run grouped ConvTranspose, so this one has group 1)
    m = model(
        [
            node("Conv", ["x", "w"], "c"),
            bn("c", "d"),
            node("ConvTranspose", ["d", "wt"], "e", strides=[2, 2]),
            bn("e", "y", "t"),
        ],
        {"w": w(6, 4, 1, 1), "wt": w(6, 4, 2, 2), **bn_inits(6), **bn_inits(4, "t")},
    )
    _, after = check(m, fold_batchnorm)
    assert after.ops() == {"Conv": 1, "ConvTranspose": 1}


@pytest.mark.parametrize("op, group", [("Conv", 1), ("Conv", 4), ("ConvTranspose", 2)])
def test_folded_weights_are_the_float64_product_rounded_once(op: str, group: int) -> None:
    """Bit for bit W' = float32(float64(W) * s): the folded weights (and so the quantized
    model) do not depend on how the product is computed."""
    weights = w(8, 8 // group, 3, 3)
    nodes = [node(op, ["x", "w"], "c", group=group), bn("c", "y")]
    before = import_model(model(nodes, {"w": weights, **bn_inits(8)}, shape=(1, 8, 6, 6)))
    after = fold_batchnorm(before, None)
    (conv,) = after.nodes
    gamma, var = (before.const(k).astype(np.float64) for k in "gv")
    # the epsilon attribute is a float32 in the ONNX file: 1e-3 rounded to float32
    s = gamma / np.sqrt(var + float(np.float32(1e-3)))
    if op == "Conv":
        want = weights.astype(np.float64) * s.reshape(-1, 1, 1, 1)
    else:  # [Cin, Cout/group, k, k]: output channel g * (Cout/group) + o
        per_group = s.reshape(group, 1, -1, 1, 1)
        want = weights.astype(np.float64).reshape(group, -1, *weights.shape[1:]) * per_group
    got = after.const(conv.inputs[1])
    np.testing.assert_array_equal(got, want.reshape(weights.shape).astype(np.float32))


def test_batchnorm_without_conv_becomes_mul_add() -> None:
    m = model([node("Relu", ["x"], "r"), bn("r", "y")], bn_inits(4))
    _, after = check(m, fold_batchnorm)
    assert after.ops() == {"Relu": 1, "Mul": 1, "Add": 1}


def test_batchnorm_after_shared_conv_is_not_folded() -> None:
    m = model(
        [node("Conv", ["x", "w"], "c"), bn("c", "y"), node("Relu", ["c"], "z")],
        {"w": w(4, 4, 1, 1), **bn_inits(4)},
        outputs=("y", "z"),
    )
    _, after = check(m, fold_batchnorm)
    assert after.ops() == {"Conv": 1, "Mul": 1, "Add": 1, "Relu": 1}


def test_sub_div_become_add_mul_and_chains_merge() -> None:
    m = model(
        [
            node("Relu", ["x"], "r"),
            node("Sub", ["r", "a"], "s"),
            node("Div", ["s", "b"], "d"),
            node("Mul", ["d", "c"], "e"),
            node("Mul", ["e", "one"], "f"),
            node("Add", ["f", "zero"], "y"),
        ],
        {
            "a": np.float32(0.5),
            "b": np.full((4, 1, 1), 2.0, np.float32),
            "c": np.float32(3.0),
            "one": np.float32(1.0),
            "zero": np.zeros((1, 4, 1, 1), np.float32),
        },
    )
    _, after = check(m, arithmetic_simplification)
    assert after.ops() == {"Relu": 1, "Add": 1, "Mul": 1}


def test_per_channel_mul_add_fold_into_conv() -> None:
    m = model(
        [
            node("Mul", ["x", "s_in"], "xs"),
            node("Conv", ["xs", "w", "cb"], "c", pads=[1, 1, 1, 1]),
            node("Mul", ["c", "s_out"], "cm"),
            node("Add", ["cm", "shift"], "y"),
        ],
        {
            "s_in": RNG.uniform(0.5, 2, (1, 4, 1, 1)).astype(np.float32),
            "w": w(5, 4, 3, 3),
            "cb": w(5),
            "s_out": RNG.uniform(0.5, 2, (5, 1, 1)).astype(np.float32),
            "shift": w(5, 1, 1),
        },
    )
    _, after = check(m, arithmetic_simplification)
    assert after.ops() == {"Conv": 1}


def test_sigmoid_gates_fuse_into_silu_and_hardswish() -> None:
    m = model(
        [
            node("Sigmoid", ["x"], "s"),
            node("Mul", ["x", "s"], "silu"),
            node("HardSigmoid", ["silu"], "h", alpha=1 / 6, beta=0.5),
            node("Mul", ["h", "silu"], "y"),
        ],
        {},
    )
    _, after = check(m, arithmetic_simplification)
    assert after.ops() == {"SiLU": 1, "HardSwish": 1}


def test_gate_with_other_readers_is_kept() -> None:
    m = model(
        [node("Sigmoid", ["x"], "s"), node("Mul", ["x", "s"], "y"), node("Relu", ["s"], "z")],
        {},
        outputs=("y", "z"),
    )
    _, after = check(m, arithmetic_simplification)
    assert after.ops() == {"Sigmoid": 1, "Mul": 1, "Relu": 1}


def test_simplify_on_real_builders(onnx_models) -> None:
    for build in (onnx_models.conv_bn_relu, onnx_models.classifier, onnx_models.residual_concat):
        m = build()
        before = import_model(m)
        after = arithmetic_simplification(fold_batchnorm(fold_constants(before, None), None), None)
        verify(after)
        assert "BatchNormalization" not in after.ops()
        feeds = onnx_models.random_feeds(m)
        ref, got = run_graph(before, feeds), run_graph(after, feeds)
        for key in ref:
            np.testing.assert_allclose(got[key], ref[key], rtol=1e-4, atol=1e-5)


def test_transpose_chains_merge_and_cancel() -> None:
    m = model(
        [
            node("Transpose", ["x"], "a", perm=[0, 2, 3, 1]),
            node("Transpose", ["a"], "b", perm=[0, 3, 1, 2]),
            node("Relu", ["b"], "r"),
            node("Transpose", ["r"], "c", perm=[0, 2, 3, 1]),
            node("Transpose", ["c"], "y", perm=[0, 2, 1, 3]),
        ],
        {},
    )
    _, after = check(m, fold_constants)
    assert after.ops() == {"Relu": 1, "Transpose": 1}


def test_batchnorm1d_folds_into_gemm() -> None:
    m = model(
        [node("Gemm", ["x", "fw", "fb"], "gm", transB=1, alpha=0.5, beta=2.0), bn("gm", "y")],
        {"fw": w(6, 10), "fb": w(6), **bn_inits(6)},
        shape=(3, 10),
    )
    _, after = check(m, fold_batchnorm)
    assert after.ops() == {"Gemm": 1}
