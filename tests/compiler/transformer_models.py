"""Small transformer and old-opset ONNX models built with onnx.helper, for the tests.

`encoder` is a pre-norm transformer encoder: per layer LayerNorm -> multi-head attention
(Q·Kᵀ and attention·V as activation x activation MatMuls, Softmax) -> residual Add ->
LayerNorm -> MLP with GELU -> residual Add. Layer ``i`` takes ``ln_forms[i]`` ("op": one
LayerNormalization node; "decomposed": ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add)
and ``gelu_forms[i]`` ("erf" or "tanh", spelled in element-wise ops as exporters do).

`cnn_opset9` is an opset-9 CNN with the old BatchNormalization and Upsample forms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _G:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.n = 0

    def name(self, hint: str) -> str:
        self.n += 1
        return f"{hint}_{self.n}"

    def const(self, hint: str, value: np.ndarray | float | Sequence[int]) -> str:
        arr = np.asarray(value)
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def op(self, op: str, ins: Sequence[str], **attrs: object) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, list(ins), [out], name=out, **attrs))
        return out

    def linear(self, x: str, din: int, dout: int, std: float) -> str:
        w = self.const("w", self.rng.normal(0.0, std, (din, dout)))
        b = self.const("b", self.rng.normal(0.0, 0.02, dout))
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def layer_norm(self, x: str, d: int, form: str) -> str:
        gamma = self.const("gamma", self.rng.normal(1.0, 0.1, d))
        beta = self.const("beta", self.rng.normal(0.0, 0.1, d))
        if form == "op":
            return self.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-5)
        mean = self.op("ReduceMean", [x], axes=[-1], keepdims=1)
        dev = self.op("Sub", [x, mean])
        var = self.op("ReduceMean", [self.op("Pow", [dev, self.const("two", 2.0)])], axes=[-1])
        std = self.op("Sqrt", [self.op("Add", [var, self.const("eps", 1e-5)])])
        return self.op("Add", [self.op("Mul", [self.op("Div", [dev, std]), gamma]), beta])

    def gelu(self, x: str, form: str) -> str:
        if form == "erf":  # torch's nn.GELU() export
            erf = self.op("Erf", [self.op("Div", [x, self.const("sqrt2", math.sqrt(2.0))])])
            one = self.op("Add", [erf, self.const("one", 1.0)])
            return self.op("Mul", [self.op("Mul", [x, one]), self.const("half", 0.5)])
        # nn.GELU(approximate="tanh"): x cubed as Pow, the 0.5 applied first
        cube = self.op("Pow", [x, self.const("three", 3.0)])
        inner = self.op("Add", [x, self.op("Mul", [cube, self.const("c", 0.044715)])])
        arg = self.op("Mul", [inner, self.const("k", math.sqrt(2.0 / math.pi))])
        one = self.op("Add", [self.op("Tanh", [arg]), self.const("one", 1.0)])
        return self.op("Mul", [self.op("Mul", [x, self.const("half", 0.5)]), one])

    def attention(self, x: str, tokens: int, d: int, heads: int) -> str:
        dh = d // heads
        split = self.const("shape", np.array([1, tokens, heads, dh], np.int64))

        def heads_first(t: str) -> str:
            return self.op("Transpose", [self.op("Reshape", [t, split])], perm=[0, 2, 1, 3])

        q = heads_first(self.linear(x, d, d, 0.2))
        k = heads_first(self.linear(x, d, d, 0.2))
        v = heads_first(self.linear(x, d, d, 0.2))
        kt = self.op("Transpose", [k], perm=[0, 1, 3, 2])
        scores = self.op("Div", [self.op("MatMul", [q, kt]), self.const("sqrt_dh", math.sqrt(dh))])
        attn = self.op("Softmax", [scores], axis=-1)
        ctx = self.op("Transpose", [self.op("MatMul", [attn, v])], perm=[0, 2, 1, 3])
        merged = self.op("Reshape", [ctx, self.const("shape", np.array([1, tokens, d], np.int64))])
        return self.linear(merged, d, d, 0.1)


def encoder(
    *,
    tokens: int = 16,
    d: int = 64,
    heads: int = 2,
    ln_forms: Sequence[str] = ("op", "decomposed"),
    gelu_forms: Sequence[str] = ("erf", "tanh"),
    seed: int = 0,
    opset: int = 17,
) -> onnx.ModelProto:
    """A len(ln_forms)-layer encoder over input ``x`` [1, tokens, d] (output ``y``)."""
    g = _G(seed)
    x = "x"
    for ln_form, gelu_form in zip(ln_forms, gelu_forms, strict=True):
        h = g.attention(g.layer_norm(x, d, ln_form), tokens, d, heads)
        x = g.op("Add", [x, h])
        m = g.linear(g.gelu(g.linear(g.layer_norm(x, d, ln_form), d, 2 * d, 0.2), gelu_form),
                     2 * d, d, 0.1)  # fmt: skip
        x = g.op("Add", [x, m])
    g.nodes.append(helper.make_node("Identity", [x], ["y"], name="out"))
    inp = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, tokens, d])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, tokens, d])
    graph = helper.make_graph(g.nodes, "encoder", [inp], [out], initializer=g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def cnn_opset9(*, seed: int = 0, size: int = 16) -> onnx.ModelProto:
    """Conv + BatchNormalization (opset-9 form: 5 inputs, no ``spatial``) + Relu, Upsample
    (opset 9: scales as an input) nearest, Conv + BN + Relu, Upsample linear, Conv."""
    g = _G(seed)

    def conv_bn_relu(x: str, cin: int, cout: int) -> str:
        w = g.const("w", g.rng.normal(0.0, math.sqrt(2.0 / (9 * cin)), (cout, cin, 3, 3)))
        y = g.op("Conv", [x, w], pads=[1, 1, 1, 1], kernel_shape=[3, 3])
        stats = [
            g.const("scale", g.rng.uniform(0.5, 1.5, cout)),
            g.const("bias", g.rng.normal(0.0, 0.1, cout)),
            g.const("mean", g.rng.normal(0.0, 0.2, cout)),
            g.const("var", g.rng.uniform(0.5, 2.0, cout)),
        ]
        return g.op("Relu", [g.op("BatchNormalization", [y, *stats], epsilon=1e-5)])

    x = conv_bn_relu("x", 3, 8)
    x = g.op("Upsample", [x, g.const("scales", [1.0, 1.0, 2.0, 2.0])], mode="nearest")
    x = conv_bn_relu(x, 8, 8)
    x = g.op("Upsample", [x, g.const("scales", [1.0, 1.0, 2.0, 2.0])], mode="linear")
    w = g.const("w", g.rng.normal(0.0, 0.2, (4, 8, 1, 1)))
    g.nodes.append(helper.make_node("Conv", [x, w], ["y"], name="head", kernel_shape=[1, 1]))
    inp = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4 * size, 4 * size])
    graph = helper.make_graph(g.nodes, "cnn9", [inp], [out], initializer=g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 4
    return model
