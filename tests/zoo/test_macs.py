"""count_macs / count_params on hand-made graphs whose counts are known by hand."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from aipusim.base.errors import OnnxImportError
from aipusim.zoo import count_macs, count_params


def _model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, list[int | str]],
    weights: dict[str, tuple[int, ...]],
    output: str = "y",
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
        initializer=[
            numpy_helper.from_array(np.zeros(shape, np.float32), name)
            for name, shape in weights.items()
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_plain_conv_counts_cout_ho_wo_k2_cin() -> None:
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1] * 4)
    model = _model([node], {"x": [2, 8, 10, 12]}, {"w": (16, 8, 3, 3)})
    assert count_macs(model) == 2 * 16 * 10 * 12 * 3 * 3 * 8


def test_grouped_and_depthwise_conv_divide_by_groups() -> None:
    grouped = helper.make_node(
        "Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4, group=4
    )
    model = _model([grouped], {"x": [1, 8, 16, 16]}, {"w": (12, 2, 3, 3)})
    assert count_macs(model) == 12 * 8 * 8 * 3 * 3 * 2
    depthwise = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[5, 5], group=8)
    model = _model([depthwise], {"x": [1, 8, 16, 16]}, {"w": (8, 1, 5, 5)})
    assert count_macs(model) == 8 * 12 * 12 * 25


def test_conv_transpose_counts_per_input_element() -> None:
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[2, 2], strides=[2, 2])
    model = _model([node], {"x": [1, 16, 5, 5]}, {"w": (16, 4, 2, 2)})
    assert count_macs(model) == 16 * 5 * 5 * 4 * 2 * 2


def test_gemm_with_transposes_and_matmul_with_batch() -> None:
    gemm = helper.make_node("Gemm", ["x", "w"], ["y"], transA=1, transB=1)
    model = _model([gemm], {"x": [64, 3]}, {"w": (10, 64)})
    assert count_macs(model) == 3 * 10 * 64
    matmul = helper.make_node("MatMul", ["a", "b"], ["y"])
    model = _model([matmul], {"a": [4, 1, 7, 32], "b": [3, 32, 5]}, {})
    assert count_macs(model) == 4 * 3 * 7 * 5 * 32


def test_other_ops_cost_no_macs() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])]
    assert count_macs(_model(nodes, {"x": [1, 4, 8, 8]}, {})) == 0


def test_dynamic_shape_is_a_clear_error() -> None:
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[1, 1])
    model = _model([node], {"x": ["N", 8, 4, 4]}, {"w": (4, 8, 1, 1)})
    with pytest.raises(OnnxImportError, match=r"node '' \(Conv\): the shape of 'y' is unknown"):
        count_macs(model)


def test_params_are_weights_biases_and_bn_affine_only() -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("BatchNormalization", ["c", "g", "beta", "m", "v"], ["y"]),
    ]
    weights = {"w": (4, 3, 3, 3), "b": (4,), "g": (4,), "beta": (4,), "m": (4,), "v": (4,)}
    model = _model(nodes, {"x": [1, 3, 8, 8]}, weights)
    assert count_params(model) == 4 * 3 * 3 * 3 + 4 + 4 + 4
