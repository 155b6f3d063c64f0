"""Small ONNX models built with onnx.helper, shared by the compiler tests.

Each builder returns an `onnx.ModelProto` with seeded random weights. Use them through the
``onnx_models`` fixture (a namespace of the builder functions) or import the functions
from this module's namespace via the fixture. ``run_model`` evaluates a model with the
ONNX reference runtime.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


class _Builder:
    """Accumulates nodes and initializers with unique names."""

    def __init__(self, seed: int = 0, *, weights_in_constants: bool = False) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0
        self.weights_in_constants = weights_in_constants

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def const(self, hint: str, array: np.ndarray) -> str:
        name = self.name(hint)
        tensor = numpy_helper.from_array(np.asarray(array), name)
        if self.weights_in_constants:
            self.nodes.append(helper.make_node("Constant", [], [name], value=tensor))
        else:
            self.inits.append(tensor)
        return name

    def node(
        self, op: str, inputs: Sequence[str], n_out: int = 1, **attrs: object
    ) -> str | list[str]:
        outs = [self.name(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=self.name(op), **attrs))
        return outs[0] if n_out == 1 else outs

    def conv(self, x: str, cin: int, cout: int, k: int = 3, stride: int = 1, group: int = 1) -> str:
        w = self.const("w", self.rng.normal(0, 0.3, (cout, cin // group, k, k)).astype(np.float32))
        b = self.const("b", self.rng.normal(0, 0.1, (cout,)).astype(np.float32))
        p = k // 2
        return self.node(
            "Conv",
            [x, w, b],
            kernel_shape=[k, k],
            pads=[p, p, p, p],
            strides=[stride, stride],
            group=group,
        )

    def bn(self, x: str, c: int) -> str:
        r = self.rng
        scale = self.const("gamma", r.uniform(0.5, 1.5, c).astype(np.float32))
        bias = self.const("beta", r.normal(0, 0.1, c).astype(np.float32))
        mean = self.const("mean", r.normal(0, 0.1, c).astype(np.float32))
        var = self.const("var", r.uniform(0.5, 2.0, c).astype(np.float32))
        return self.node("BatchNormalization", [x, scale, bias, mean, var], epsilon=1e-3)

    def model(
        self,
        inputs: Sequence[onnx.ValueInfoProto],
        outputs: Sequence[str],
        opset: int = 17,
        name: str = "test_model",
    ) -> onnx.ModelProto:
        outs = [helper.make_tensor_value_info(o, F, None) for o in outputs]
        for o in outs:  # the checker wants a shape field; inference fills the dims
            o.type.tensor_type.shape.SetInParent()
        graph = helper.make_graph(self.nodes, name, list(inputs), outs, initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model


def conv_bn_relu(seed: int = 0, *, size: int = 16, opset: int = 17) -> onnx.ModelProto:
    """x[1,3,s,s] -> Conv-BN-Relu -> depthwise Conv-BN-Clip(0,6) -> Conv-BN -> y."""
    b = _Builder(seed)
    x = "x"
    h = b.node("Relu", [b.bn(b.conv(x, 3, 8), 8)])
    h = b.bn(b.conv(h, 8, 8, group=8), 8)
    h = b.node("Clip", [h, b.const("lo", np.float32(0)), b.const("hi", np.float32(6))])
    h = b.bn(b.conv(h, 8, 16, k=1), 16)
    return b.model([helper.make_tensor_value_info(x, F, [1, 3, size, size])], [h], opset=opset)


def classifier(seed: int = 0, *, softmax: bool = True, size: int = 16) -> onnx.ModelProto:
    """Conv-BN-Relu, residual block, GAP, Flatten, Gemm, optional Softmax at the output."""
    b = _Builder(seed)
    h = b.node("Relu", [b.bn(b.conv("x", 3, 8, stride=2), 8)])
    r = b.node("Relu", [b.bn(b.conv(h, 8, 8), 8)])
    r = b.bn(b.conv(r, 8, 8), 8)
    h = b.node("Relu", [b.node("Add", [h, r])])
    h = b.node("Flatten", [b.node("GlobalAveragePool", [h])], axis=1)
    w = b.const("fc_w", b.rng.normal(0, 0.3, (10, 8)).astype(np.float32))
    fb = b.const("fc_b", b.rng.normal(0, 0.1, (10,)).astype(np.float32))
    h = b.node("Gemm", [h, w, fb], transB=1)
    if softmax:
        h = b.node("Softmax", [h], axis=1)
    return b.model([helper.make_tensor_value_info("x", F, [1, 3, size, size])], [h])


def residual_concat(seed: int = 0) -> onnx.ModelProto:
    """Two conv branches concatenated on channels, SiLU as Sigmoid*x, MatMul head."""
    b = _Builder(seed)
    h = b.conv("x", 4, 8)
    h = b.node("Mul", [h, b.node("Sigmoid", [h])])
    a = b.conv(h, 8, 4, k=1)
    c = b.conv(h, 8, 12, k=3)
    h = b.node("Concat", [a, c], axis=1)
    h = b.node("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = b.node(
        "Resize", [h, "", b.const("scales", np.array([1, 1, 2, 2], np.float32))], mode="nearest"
    )
    h = b.node("HardSwish", [h])
    h = b.node("Transpose", [h], perm=[0, 2, 3, 1])
    w = b.const("mm_w", b.rng.normal(0, 0.3, (16, 6)).astype(np.float32))
    h = b.node("MatMul", [h, w])
    return b.model([helper.make_tensor_value_info("x", F, [1, 4, 8, 8])], [h])


def constant_weights(seed: int = 0, *, dynamic: bool = False) -> onnx.ModelProto:
    """PyTorch-export style: weights in Constant nodes and a Shape->Gather->Concat->Reshape
    flatten; optionally a dynamic batch dim."""
    b = _Builder(seed, weights_in_constants=True)
    h = b.node("Relu", [b.conv("x", 3, 8, stride=2)])
    shape = b.node("Shape", [h])
    n = b.node("Gather", [shape, b.const("zero", np.array(0, np.int64))], axis=0)
    n = b.node("Unsqueeze", [n, b.const("axes", np.array([0], np.int64))])
    target = b.node("Concat", [n, b.const("minus1", np.array([-1], np.int64))], axis=0)
    h = b.node("Reshape", [h, target])
    w = b.const("fc_w", b.rng.normal(0, 0.1, (8 * 4 * 4, 5)).astype(np.float32))
    h = b.node("MatMul", [h, w])
    h = b.node("Add", [h, b.const("fc_b", b.rng.normal(0, 0.1, (5,)).astype(np.float32))])
    dims: list[int | str] = ["batch", 3, 8, 8] if dynamic else [1, 3, 8, 8]
    return b.model([helper.make_tensor_value_info("x", F, dims)], [h])


def nhwc_preprocess(seed: int = 0, *, dynamic: bool = True) -> onnx.ModelProto:
    """uint8 NHWC image -> Cast, Div 255, Sub mean, Div std, Transpose to NCHW -> convs."""
    b = _Builder(seed)
    h = b.node("Cast", ["image"], to=TensorProto.FLOAT)
    h = b.node("Div", [h, b.const("c255", np.float32(255.0))])
    h = b.node("Sub", [h, b.const("mean", np.array([0.485, 0.456, 0.406], np.float32))])
    h = b.node("Div", [h, b.const("std", np.array([0.229, 0.224, 0.225], np.float32))])
    h = b.node("Transpose", [h], perm=[0, 3, 1, 2])
    h = b.node("Relu", [b.bn(b.conv(h, 3, 8), 8)])
    h = b.conv(h, 8, 4, k=1)
    dims: list[int | str] = ["N", "H", "W", 3] if dynamic else [1, 16, 16, 3]
    inp = helper.make_tensor_value_info("image", TensorProto.UINT8, dims)
    return b.model([inp], [h])


def detector(seed: int = 0, *, nms: bool = False, classes: int = 3) -> onnx.ModelProto:
    """YOLO-like: conv head [1, 4+nc, H, W] -> Reshape -> box decode (Sigmoid, *stride,
    +grid), class scores Sigmoid, Concat(boxes, scores), Transpose -> [1, HW, 4+nc];
    optionally NMS on the result."""
    b = _Builder(seed)
    h = b.node("Relu", [b.conv("x", 3, 8, stride=2)])
    h = b.conv(h, 8, 4 + classes, k=1)  # [1, 4+nc, 4, 4]
    hw = 16
    flat = b.node("Reshape", [h, b.const("shape", np.array([1, 4 + classes, hw], np.int64))])
    xy, wh, cls = b.node(
        "Split", [flat, b.const("split", np.array([2, 2, classes], np.int64))], n_out=3, axis=1
    )
    grid = np.stack(np.meshgrid(np.arange(4), np.arange(4)), 0).reshape(1, 2, hw).astype(np.float32)
    xy = b.node("Mul", [b.node("Sigmoid", [xy]), b.const("two", np.float32(2.0))])
    xy = b.node("Add", [xy, b.const("grid", grid)])
    xy = b.node("Mul", [xy, b.const("stride", np.float32(8.0))])
    wh = b.node("Mul", [b.node("Exp", [wh]), b.const("anchor", np.float32(16.0))])
    scores = b.node("Sigmoid", [cls])
    out = b.node("Concat", [xy, wh, scores], axis=1)
    out = b.node("Transpose", [out], perm=[0, 2, 1])
    outputs = [out]
    if nms:
        boxes = b.node(
            "Transpose", [b.node("Concat", [xy, b.node("Add", [xy, wh])], axis=1)], perm=[0, 2, 1]
        )
        sel = b.node(
            "NonMaxSuppression",
            [
                boxes,
                scores,
                b.const("maxout", np.array([10], np.int64)),
                b.const("iou", np.array([0.5], np.float32)),
                b.const("thr", np.array([0.3], np.float32)),
            ],
        )
        outputs.append(sel)
    model = b.model([helper.make_tensor_value_info("x", F, [1, 3, 8, 8])], outputs, opset=17)
    if nms:
        model.graph.output[1].type.tensor_type.elem_type = TensorProto.INT64
    return model


def opset11(seed: int = 0) -> onnx.ModelProto:
    """Opset-11 model: Squeeze/Unsqueeze/ReduceMean with axes attributes, Split with a
    split attribute, Resize with roi+scales, Clip with min/max inputs."""
    b = _Builder(seed)
    h = b.conv("x", 3, 8)
    h = b.node("Clip", [h, b.const("lo", np.float32(0.0)), b.const("hi", np.float32(6.0))])
    a, c = b.node("Split", [h], n_out=2, axis=1, split=[4, 4])
    h = b.node("Add", [a, c])
    h = b.node(
        "Resize",
        [
            h,
            b.const("roi", np.zeros(0, np.float32)),
            b.const("scales", np.array([1, 1, 2, 2], np.float32)),
        ],
        mode="linear",
    )
    h = b.node("ReduceMean", [h], axes=[2, 3], keepdims=1)
    h = b.node("Squeeze", [h], axes=[2, 3])
    h = b.node("Unsqueeze", [h], axes=[1])
    return b.model([helper.make_tensor_value_info("x", F, [1, 3, 8, 8])], [h], opset=11)


def random_feeds(
    model: onnx.ModelProto, seed: int = 0, shapes: Mapping[str, Sequence[int]] | None = None
) -> dict[str, np.ndarray]:
    """Random inputs for the model's graph inputs (static dims, or ``shapes``)."""
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = (shapes or {}).get(vi.name) or [d.dim_value for d in vi.type.tensor_type.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        if dtype == np.uint8:
            feeds[vi.name] = rng.integers(0, 256, shape, dtype=np.uint8)
        else:
            feeds[vi.name] = rng.normal(0, 1, shape).astype(dtype)
    return feeds


def run_model(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate with onnx.reference; output name -> array."""
    from onnx.reference import ReferenceEvaluator

    names = [o.name for o in model.graph.output]
    return dict(zip(names, ReferenceEvaluator(model).run(None, dict(feeds)), strict=True))


BUILDERS = types.SimpleNamespace(
    conv_bn_relu=conv_bn_relu,
    classifier=classifier,
    residual_concat=residual_concat,
    constant_weights=constant_weights,
    nhwc_preprocess=nhwc_preprocess,
    detector=detector,
    opset11=opset11,
    random_feeds=random_feeds,
    run_model=run_model,
)


@pytest.fixture
def onnx_models() -> types.SimpleNamespace:
    """The model builders of this module (plus ``random_feeds`` and ``run_model``)."""
    return BUILDERS
