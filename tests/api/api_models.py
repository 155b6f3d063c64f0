"""Small ONNX models the API tests compile (two graph inputs, so one can be baked in)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def two_input_model(channels: int = 8, side: int = 8) -> onnx.ModelProto:
    """``y = relu(conv(x) + conv(z))``: inputs ``x`` and ``z`` of shape (1, C, side, side)."""
    rng = np.random.default_rng(0)
    shape = [1, channels, side, side]
    w1 = numpy_helper.from_array(
        (rng.standard_normal((channels, channels, 3, 3)) * 0.2).astype(np.float32), "w1"
    )
    w2 = numpy_helper.from_array(
        (rng.standard_normal((channels, channels, 1, 1)) * 0.2).astype(np.float32), "w2"
    )
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1], name="conv_x"),
        helper.make_node("Conv", ["z", "w2"], ["b"], name="conv_z"),
        helper.make_node("Add", ["a", "b"], ["s"], name="add"),
        helper.make_node("Relu", ["s"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "two_inputs",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, shape),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, shape),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        [w1, w2],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model
