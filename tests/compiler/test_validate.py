"""validate_operators: every unsupported node named at once, supported graphs pass."""

from __future__ import annotations

import numpy as np
import pytest
from graph_helpers import model, node, w
from onnx import TensorProto, helper

from aipusim.base.errors import UnsupportedOperatorError
from aipusim.compiler.importer import import_model
from aipusim.compiler.passes.validate import validate_operators


def test_supported_models_pass_unchanged(onnx_models) -> None:
    for build in (onnx_models.conv_bn_relu, onnx_models.classifier, onnx_models.residual_concat):
        g = import_model(build())
        assert validate_operators(g, None) is g


def test_all_unsupported_nodes_are_named_at_once(onnx_models) -> None:
    g = import_model(onnx_models.detector(nms=True))
    with pytest.raises(UnsupportedOperatorError) as err:
        validate_operators(g, None)
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("1 operator of graph `test_model` cannot run on the AIPU: ")
    assert "(NonMaxSuppression: no AIPU unit implements it)" in text


def test_reasons_for_supported_op_types() -> None:
    m = model(
        [
            # activation x activation MatMul and Div by a tensor run on the AIPU
            node("MatMul", ["x", "x"], "mm"),
            node("Div", ["mm", "mm"], "d"),
            node("Resize", ["d", "", "scales"], "r", mode="cubic"),
            node("Pad", ["r", "pads"], "p", mode="reflect"),
            node("Conv", ["p", "wt"], "c"),
            node("Einsum", ["c", "c"], "e", equation="bcij,bcjk->bci"),
            node("Cast", ["e"], "idx", to=TensorProto.INT64),
            node("Gather", ["e", "idx"], "g", axis=0),
            node("TopK", ["g", "k"], "y"),
        ],
        {
            "scales": np.array([1, 1, 2, 2], np.float32),
            "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64),
            "wt": w(2, 4, 1, 1),
            "k": np.array([1], np.int64),
        },
        shape=(1, 4, 4, 4),
    )
    # TopK has two outputs; declare the indices so the checker is satisfied
    m.graph.node[-1].output.append("topk_idx")
    g = import_model(m)
    with pytest.raises(UnsupportedOperatorError, match="5 operators") as err:
        validate_operators(g, None)
    text = str(err.value)
    for expected in (
        "`r` (Resize: mode 'cubic' is not one of nearest, linear)",
        "`p` (Pad: mode 'reflect' is not constant)",
        "`e` (Einsum: equation `bcij,bcjk->bci` is not a matmul form: letter `k` is summed "
        "within one operand)",
        "`g` (Gather: its indices are computed at run time",
        "`y` (TopK: no AIPU unit implements it)",
    ):
        assert expected in text


def test_conv3d_is_unsupported() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4, 4])
    from onnx import numpy_helper

    m = helper.make_model(
        helper.make_graph(
            [helper.make_node("Conv", ["x", "w"], ["y"], name="c3", pads=[1] * 6)],
            "g",
            [x],
            [y],
            initializer=[numpy_helper.from_array(w(3, 2, 3, 3, 3), "w")],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    with pytest.raises(UnsupportedOperatorError, match=r"`c3` \(Conv: only 1-D and 2-D"):
        validate_operators(import_model(m), None)
