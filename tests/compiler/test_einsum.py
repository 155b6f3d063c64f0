"""rewrite_einsum: matmul-form equations become Transpose/Reshape + MatMul, numerically."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from aipusim.compiler.importer import import_model
from aipusim.compiler.ir import Op, verify
from aipusim.compiler.passes.einsum import einsum_form, einsum_to_matmul
from aipusim.compiler.quant import run_fp32

RNG = np.random.default_rng(3)


def _model(equation: str, a: tuple[int, ...], b: tuple[int, ...] | None, const_b: bool):
    ins = [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a))]
    inits = []
    names = ["a"]
    if b is not None:
        names.append("b")
        if const_b:
            inits.append(numpy_helper.from_array(RNG.normal(size=b).astype(np.float32), "b"))
        else:
            ins.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, list(b)))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    y.type.tensor_type.shape.SetInParent()
    node = helper.make_node("Einsum", names, ["y"], name="e", equation=equation)
    graph = helper.make_graph([node], "g", ins, [y], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


CASES = [
    ("bhqd,bhkd->bhqk", (1, 2, 5, 8), (1, 2, 7, 8), False),  # Q.K^T
    ("bhqk,bhkd->bhqd", (1, 2, 5, 7), (1, 2, 7, 8), False),  # attention.V
    ("bld,dk->blk", (2, 5, 8), (8, 6), True),  # a projection: the weight stays constant
    ("...ij,...jk->...ik", (3, 4, 5), (3, 5, 2), False),
    ("ij,jk", (4, 5), (5, 3), False),  # implicit output
    ("bij,bjk->bki", (2, 4, 5), (2, 5, 3), False),  # output transposed
    ("ik,bkj->bij", (4, 5), (2, 5, 3), False),  # free letters on both sides, batch on one
    ("kd,bqd->bqk", (6, 8), (2, 5, 8), False),
    ("dk,bqd->bqk", (8, 6), None, True),  # constant first operand
    ("ij->ji", (3, 4), None, False),
    ("bcij,bcjk->bik", (1, 2, 4, 3), (1, 2, 3, 5), False),  # two contracted letters
]


@pytest.mark.parametrize(("equation", "a", "b", "const_b"), CASES)
def test_matmul_forms_compute_the_same(equation, a, b, const_b) -> None:
    if equation == "dk,bqd->bqk":  # put the constant first: swap the operand order
        model = _model("bqd,dk->bqk", (2, 5, 8), (8, 6), True)
        node = model.graph.node[0]
        node.input[:] = ["b", "a"]
        node.attribute[0].s = equation.encode()
    else:
        model = _model(equation, a, b, const_b)
    graph = import_model(model)
    rewritten = einsum_to_matmul(graph, None)
    verify(rewritten)
    assert Op.EINSUM not in {n.op for n in rewritten.nodes}
    feeds = {n: RNG.normal(size=graph.shape(n)).astype(np.float32) for n in graph.inputs}
    want = run_fp32(graph, feeds)[graph.outputs[0]]
    got = run_fp32(rewritten, feeds)[graph.outputs[0]]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    for mm in (n for n in rewritten.nodes if n.op is Op.MATMUL):
        if const_b:  # the constant is MatMul's (rearranged) weight, the activation first
            assert rewritten.is_constant(mm.inputs[1]) and not rewritten.is_constant(mm.inputs[0])


@pytest.mark.parametrize(
    ("equation", "shapes", "reason"),
    [
        ("ii->i", [(3, 3)], "letter `i` repeats within operand 1 (a diagonal)"),
        ("ij,jk->i", [(2, 3), (3, 4)], "letter `k` is summed within one operand"),
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], "only one or two operands"),
        ("ij,jk->ik", [(2, 3), (4, 5)], "letter `j` has sizes 3 and 4"),
        ("ij->i", [(2, 3)], "a one-operand equation must only permute its letters"),
    ],
)
def test_other_equations_say_why(equation, shapes, reason) -> None:
    form = einsum_form(equation, shapes)
    assert not form.ok and form.reason.startswith(reason)


@pytest.mark.parametrize("x_shape", [(16, 5), (2, 16, 5), (1, 3, 16, 5)])
def test_a_constant_first_matmul_puts_the_activation_first(x_shape) -> None:
    # W @ x (torch.matmul(W, x)): the MVM's weights are MatMul's second operand
    w = RNG.normal(size=(6, 16)).astype(np.float32)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    y.type.tensor_type.shape.SetInParent()
    node = helper.make_node("MatMul", ["w", "x"], ["y"], name="mm")
    graph = helper.make_graph([node], "g", [x], [y], [numpy_helper.from_array(w, "w")])
    imported = import_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    rewritten = einsum_to_matmul(imported, None)
    verify(rewritten)
    (mm,) = [n for n in rewritten.nodes if n.op is Op.MATMUL]
    assert rewritten.is_constant(mm.inputs[1]) and not rewritten.is_constant(mm.inputs[0])
    feeds = {"x": RNG.normal(size=x_shape).astype(np.float32)}
    got = run_fp32(rewritten, feeds)["y"]
    np.testing.assert_allclose(got, w @ feeds["x"], rtol=1e-5, atol=1e-5)


def test_a_batched_constant_first_operand_is_left_for_validate_to_name() -> None:
    from aipusim.compiler.ir import Graph, Node, Tensor

    tensors = {"w": Tensor("w", (2, 6, 16)), "x": Tensor("x", (2, 16, 5)),
               "y": Tensor("y", (2, 6, 5))}  # fmt: skip
    consts = {"w": np.ones((2, 6, 16), np.float32)}
    g = Graph("g", (Node("mm", Op.MATMUL, ("w", "x"), ("y",)),), tensors, consts, ("x",), ("y",))
    assert einsum_to_matmul(g, None) is g
