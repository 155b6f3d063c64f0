"""Small IR graphs for the quantization tests, built as ONNX with onnx.helper and imported."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper, shape_inference

from aipusim.compiler.importer import import_model
from aipusim.compiler.ir import Graph


class OnnxNet:
    """Appends ONNX nodes with seeded weights; `graph()` imports the result."""

    def __init__(self, shape: tuple[int, ...], seed: int = 0) -> None:
        self.shape = shape
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.n = 0

    def _name(self, hint: str) -> str:
        self.n += 1
        return f"{hint}{self.n}"

    def const(self, array: np.ndarray, hint: str = "c") -> str:
        name = self._name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs: object):
        outs = [self._name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(
            helper.make_node(op_type, inputs, outs, name=self._name(op_type), **attrs)
        )
        return outs[0] if n_out == 1 else outs

    def conv(self, x: str, cin: int, cout: int, k: int = 3, stride: int = 1, group: int = 1):
        # He-style scale keeps activations near unit variance through depth.
        std = np.sqrt(2.0 / (cin // group * k * k))
        w = self.const(self.rng.normal(0, std, (cout, cin // group, k, k)).astype(np.float32))
        b = self.const(self.rng.normal(0, 0.1, (cout,)).astype(np.float32))
        p = k // 2
        return self.op(
            "Conv", [x, w, b], kernel_shape=[k, k], pads=[p] * 4, strides=[stride] * 2, group=group
        )

    def gemm(self, x: str, cin: int, cout: int) -> str:
        w = self.const(self.rng.normal(0, np.sqrt(1.0 / cin), (cout, cin)).astype(np.float32))
        b = self.const(self.rng.normal(0, 0.1, (cout,)).astype(np.float32))
        return self.op("Gemm", [x, w, b], transB=1)

    def graph(self, outputs: list[str]) -> Graph:
        x = helper.make_tensor_value_info("input", TensorProto.FLOAT, list(self.shape))
        g = helper.make_graph(self.nodes, "net", [x], [], initializer=self.inits)
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        # Output shapes come from ONNX shape inference (the checker wants them declared).
        inferred = {v.name: v for v in shape_inference.infer_shapes(model).graph.value_info}
        model.graph.output.extend(inferred[o] for o in outputs)
        return import_model(model)


@pytest.fixture
def onnx_net() -> Callable[..., OnnxNet]:
    """Factory: ``onnx_net((1, 3, 16, 16), seed=0)`` -> an `OnnxNet` whose input is ``input``."""
    return OnnxNet


def small_cnn(seed: int = 0) -> Graph:
    """conv-relu, conv-relu6, residual add, maxpool, depthwise conv, GAP, gemm."""
    net = OnnxNet((1, 3, 16, 16), seed)
    y = net.op("Relu", [net.conv("input", 3, 8)])
    z = net.conv(y, 8, 8)
    zero, six = net.const(np.float32(0.0)), net.const(np.float32(6.0))
    z = net.op("Clip", [z, zero, six])
    y = net.op("Add", [y, z])
    y = net.op("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
    y = net.op("Relu", [net.conv(y, 8, 8, group=8)])
    y = net.op("GlobalAveragePool", [y])
    y = net.op("Flatten", [y])
    return net.graph([net.gemm(y, 8, 10)])


@pytest.fixture
def cnn() -> Graph:
    return small_cnn()
