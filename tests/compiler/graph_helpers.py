"""Tiny ONNX-model helpers for the pass tests (one node list -> a checked model)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(7)


def model(
    nodes: Sequence[onnx.NodeProto],
    inits: dict[str, np.ndarray],
    shape: Sequence[int] = (1, 4, 6, 6),
    outputs: Sequence[str] = ("y",),
) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
    for o in outs:
        o.type.tensor_type.shape.SetInParent()
    tensors = [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()]
    graph = helper.make_graph(list(nodes), "t", [x], outs, initializer=tensors)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def node(op: str, ins: Sequence[str], out: str, **attrs: object) -> onnx.NodeProto:
    return helper.make_node(op, list(ins), [out], name=out, **attrs)


def w(*shape: int) -> np.ndarray:
    return RNG.normal(0, 0.5, shape).astype(np.float32)
