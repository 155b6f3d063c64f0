"""Graph IR: immutability, lookups, editing, verify and dump."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from aipusim.compiler.ir import (
    AIPU_OPS,
    DPU_OPS,
    DWPU_OPS,
    LAYOUT_OPS,
    LUT_OPS,
    MVM_OPS,
    Attrs,
    DType,
    Graph,
    Node,
    Op,
    Tensor,
    dump,
    is_depthwise,
    prune_graph,
    topological_sort,
    verify,
)


def chain() -> Graph:
    """x -> conv(w, b) -> y -> relu -> z, plus a dead node."""
    w = np.ones((4, 3, 3, 3), np.float32)
    b = np.zeros(4, np.float32)
    return Graph(
        name="chain",
        nodes=(
            Node("conv", Op.CONV, ("x", "w", "b"), ("y",), {"pads": [1, 1, 1, 1]}),
            Node("relu", Op.RELU, ("y",), ("z",)),
            Node("dead", Op.SIGMOID, ("y",), ("unused",)),
        ),
        tensors={
            "x": Tensor("x", (1, 3, 8, 8)),
            "w": Tensor("w", w.shape),
            "b": Tensor("b", b.shape),
            "y": Tensor("y", (1, 4, 8, 8)),
            "z": Tensor("z", (1, 4, 8, 8)),
            "unused": Tensor("unused", (1, 4, 8, 8)),
        },
        constants={"w": w, "b": b},
        inputs=("x",),
        outputs=("z",),
    )


def test_nodes_and_attrs_are_immutable_and_hashable() -> None:
    n = Node("c", Op.CONV, ["x", "w"], ["y"], {"strides": [2, 2], "value": np.zeros(3)})
    assert n.inputs == ("x", "w") and n.attrs["strides"] == (2, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        n.name = "d"  # type: ignore[misc]
    with pytest.raises(TypeError):
        n.attrs["strides"] = (1, 1)  # type: ignore[index]
    assert not n.attrs["value"].flags.writeable
    same = Node("c", Op.CONV, ("x", "w"), ("y",), {"value": np.zeros(3), "strides": (2, 2)})
    assert n == same and hash(n) == hash(same)
    assert n.with_(name="d").name == "d" and n.name == "c"
    assert Attrs({"a": 1}).with_(a=None, b=2) == {"b": 2}


def test_graph_constants_are_read_only_and_lookups_work() -> None:
    g = chain()
    with pytest.raises(ValueError):
        g.constants["w"][0, 0, 0, 0] = 5.0
    with pytest.raises(TypeError):
        g.tensors["q"] = Tensor("q", (1,))  # type: ignore[index]
    assert g.producer("y").name == "conv" and g.producer("x") is None
    assert [n.name for n in g.consumers("y")] == ["relu", "dead"]
    assert g.is_constant("w") and not g.is_constant("x")
    assert g.node("relu").op is Op.RELU and g.ops() == {"Conv": 1, "Relu": 1, "Sigmoid": 1}


def test_other_ops_keep_their_onnx_type() -> None:
    n = Node("nms", Op.OTHER, ("a",), ("b",), onnx_type="MyOp", domain="custom")
    assert n.op_type == "MyOp"
    assert Node("s", Op.SILU, ("a",), ("b",)).domain == "aipusim"


def test_op_groups_cover_the_supported_operator_list() -> None:
    required = [
        "Conv",
        "ConvTranspose",
        "Gemm",
        "MatMul",
        "BatchNormalization",
        "Relu",
        "Clip",
        "Sigmoid",
        "HardSigmoid",
        "HardSwish",
        "Mul",
        "Add",
        "Sub",
        "Div",
        "Pow",
        "Sqrt",
        "Erf",
        "Softmax",
        "ReduceMean",
        "MaxPool",
        "AveragePool",
        "GlobalAveragePool",
        "Resize",
        "Concat",
        "Split",
        "Slice",
        "Reshape",
        "Flatten",
        "Transpose",
        "Squeeze",
        "Unsqueeze",
        "Identity",
        "Pad",
        "Cast",
    ]
    assert {Op(name) for name in required} <= AIPU_OPS
    assert Op.SILU in LUT_OPS and LUT_OPS <= DPU_OPS
    assert not MVM_OPS & (DWPU_OPS | DPU_OPS | LAYOUT_OPS)
    assert Op.NON_MAX_SUPPRESSION not in AIPU_OPS and Op.OTHER not in AIPU_OPS


def test_verify_accepts_a_good_graph_and_prune_drops_dead_nodes() -> None:
    g = chain()
    verify(g)
    pruned = prune_graph(g)
    verify(pruned)
    assert [n.name for n in pruned.nodes] == ["conv", "relu"]
    assert "unused" not in pruned.tensors


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda g: g.with_nodes(reversed(g.nodes)), "not produced before use"),
        (lambda g: g.with_nodes((*g.nodes, g.nodes[1])), "duplicate node names"),
        (
            lambda g: g.with_nodes((*g.nodes, Node("again", Op.RELU, ("x",), ("z",)))),
            "assigned twice",
        ),
        (
            lambda g: g.with_nodes((*g.nodes, Node("n", Op.RELU, ("z",), ("ghost",)))),
            "not declared",
        ),
        (
            lambda g: dataclasses.replace(
                g, tensors={**g.tensors, "z": Tensor("z", (1, -1, 8, 8))}
            ),
            "non-static shape",
        ),
        (
            lambda g: dataclasses.replace(g, tensors={**g.tensors, "w": Tensor("w", (4, 1, 3, 3))}),
            "declared",
        ),
        (lambda g: dataclasses.replace(g, outputs=("nowhere",)), "never produced"),
        (
            lambda g: g.with_nodes((Node("conv", Op.CONV, ("x",), ("y",)), *g.nodes[1:])),
            "inputs",
        ),
    ],
)
def test_verify_rejects_broken_graphs(mutate, message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        verify(mutate(chain()))


def test_verify_checks_conv_groups() -> None:
    g = chain()
    bad = g.with_nodes((g.nodes[0].with_(attrs={"group": 3}), *g.nodes[1:]))
    with pytest.raises(AssertionError, match="Cin 3"):
        verify(bad)


def test_dynamic_shapes_allowed_only_after_data_dependent_ops() -> None:
    tensors = {
        "b": Tensor("b", (1, 10, 4)),
        "s": Tensor("s", (1, 1, 10)),
        "i": Tensor("i", (-1, 3), DType.INT64),
        "j": Tensor("j", (-1, 3), DType.INT64),
    }
    nodes = (
        Node("nms", Op.NON_MAX_SUPPRESSION, ("b", "s"), ("i",)),
        Node("id", Op.IDENTITY, ("i",), ("j",)),
    )
    verify(Graph("g", nodes, tensors, {}, ("b", "s"), ("j",)))
    with pytest.raises(AssertionError, match="non-static"):
        verify(Graph("g", nodes[1:], tensors, {}, ("i",), ("j",)))


def test_editor_rewires_sorts_and_prunes() -> None:
    g = chain()
    ed = g.edit()
    # insert a node in front of relu: y -> neg -> relu
    t = ed.new_tensor("y_neg", (1, 4, 8, 8))
    ed.add(Node("neg", Op.NEG, ("y",), (t,)))
    ed.replace(g.node("relu"), g.node("relu").with_(inputs=(t,)))
    h = ed.build()
    verify(h)
    assert [n.name for n in h.nodes] == ["conv", "neg", "relu"]
    ed2 = h.edit()
    c = ed2.add_constant("w", np.zeros(2, np.float32))
    assert c != "w" and ed2.unique_name("w") not in ("w", c)
    ed2.remove(h.node("relu"))
    ed2.replace_uses("z", t)
    h2 = ed2.build()
    verify(h2)
    assert h2.outputs == (t,) and "z" not in h2.tensors


def test_topological_sort_is_stable() -> None:
    g = chain()
    shuffled = g.with_nodes((g.nodes[2], g.nodes[1], g.nodes[0]))
    # conv must move first; dead and relu keep their given relative order
    assert [n.name for n in topological_sort(shuffled).nodes] == ["conv", "dead", "relu"]


def test_dump_shows_shapes_constants_and_attrs() -> None:
    text = dump(chain())
    assert "conv: Conv(x[1,3,8,8], w[4,3,3,3]=const, b[4]=const) -> y[1,4,8,8]" in text
    assert "pads=(1,1,1,1)" in text
    assert text.splitlines()[0].startswith("graph chain (opset 17) inputs: x[1,3,8,8]")
    assert text.splitlines()[-1] == "outputs: z[1,4,8,8]"


def test_is_depthwise() -> None:
    g = chain()
    assert not is_depthwise(g.node("conv"), g)
    dw = Graph(
        "dw",
        (Node("c", Op.CONV, ("x", "w"), ("y",), {"group": 3}),),
        {
            "x": Tensor("x", (1, 3, 4, 4)),
            "w": Tensor("w", (3, 1, 3, 3)),
            "y": Tensor("y", (1, 3, 2, 2)),
        },
        {"w": np.zeros((3, 1, 3, 3), np.float32)},
        ("x",),
        ("y",),
    )
    verify(dw)
    assert is_depthwise(dw.node("c"), dw)


@pytest.mark.parametrize(
    ("node", "shapes", "message"),
    [
        (Node("t", Op.TRANSPOSE, ("a",), ("b",), {"perm": (0, 0)}), [(2, 3), (3, 2)], "perm"),
        (Node("t", Op.TRANSPOSE, ("a",), ("b",), {"perm": (1, 0)}), [(2, 3), (2, 3)], "shape"),
        (Node("r", Op.RESHAPE, ("a", "s"), ("b",)), [(2, 3), (7,)], "changes the size"),
        (Node("m", Op.ADD, ("a", "c"), ("b",)), [(2, 3), (2, 4)], "broadcast"),
        (Node("s", Op.SOFTMAX, ("a",), ("b",), {"axis": 2}), [(2, 3), (2, 3)], "axis 2"),
        (Node("g", Op.GEMM, ("a", "c"), ("b",)), [(2, 3), (2, 2)], "inner dims"),
    ],
)
def test_verify_op_shape_rules(node: Node, shapes, message: str) -> None:
    tensors = {
        "a": Tensor("a", shapes[0]),
        "b": Tensor("b", shapes[1]),
        "c": Tensor("c", (4, 2) if node.op is Op.GEMM else (2, 4)),
        "s": Tensor("s", (1,), DType.INT64),
    }
    consts = {"s": np.array([7], np.int64)}
    g = Graph("g", (node,), tensors, consts, ("a", "c"), ("b",))
    with pytest.raises(AssertionError, match=message):
        verify(g)


def test_dump_shows_quantization() -> None:
    from aipusim.compiler.ir import QuantParams

    g = chain()
    q = QuantParams(np.float32(0.05), np.int32(-3))
    wq = QuantParams(np.full(4, 0.01, np.float32), np.zeros(4, np.int32), axis=0)
    tensors = {**g.tensors, "z": Tensor("z", (1, 4, 8, 8), DType.INT8, q)}
    tensors["w"] = Tensor("w", (4, 3, 3, 3), DType.FLOAT32, wq)
    text = dump(dataclasses.replace(g, tensors=tensors))
    assert "-> z[1,4,8,8]:int8{q s=0.05 z=-3}" in text
    assert "w[4,3,3,3]=const{q per-channel axis 0}" in text


def test_quant_params_compare_by_value() -> None:
    from aipusim.compiler.ir import QuantParams

    a = QuantParams(np.array([0.1, 0.2]), np.zeros(2), axis=0)
    b = QuantParams(np.array([0.1, 0.2], np.float32), np.zeros(2, np.int32), axis=0)
    assert a == b and hash(a) == hash(b) and not a.scale.flags.writeable
    assert a != QuantParams(np.array([0.1, 0.3]), np.zeros(2), axis=0)
    assert a != QuantParams(np.array([0.1, 0.2]), np.zeros(2), axis=1)
