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
from collections.abc import Callable, Sequence

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


def _single_input(
    g: _G, out: str, shape: Sequence[int], *, opset: int = 17, dtype: int = TensorProto.FLOAT
) -> onnx.ModelProto:
    """Model of ``g``'s nodes from input ``x`` (``shape``) to output ``y`` (``out``)."""
    g.nodes.append(helper.make_node("Identity", [out], ["y"], name="out"))
    inp = helper.make_tensor_value_info("x", dtype, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    y.type.tensor_type.shape.SetInParent()
    graph = helper.make_graph(g.nodes, "op", [inp], [y], initializer=g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


#: Tokens x width of the sequence graphs, and the NCHW shape of the image graphs.
SEQ = (1, 16, 32)
IMG = (1, 8, 6, 6)


def _seq(g: _G) -> str:
    """x -> a projection (so that the op under test reads a computed int8 tensor)."""
    return g.op("MatMul", ["x", g.const("w", g.rng.normal(0.0, 0.3, (32, 32)))])


def _img(g: _G) -> str:
    return g.op("Conv", ["x", g.const("w", g.rng.normal(0.0, 0.4, (8, 8, 1, 1)))])


def _head(g: _G, t: str, shape: Sequence[int]) -> str:
    """A layer after the op under test, as in a network (the graph cleaner would move a
    host-suited op that ends the graph to the host): a projection of the last axis to 48
    or a 3x3 conv to 16 channels, both larger than a decoding kernel after a Softmax."""
    if len(shape) == 4:
        w = g.const("head", g.rng.normal(0.0, 0.2, (16, shape[1], 3, 3)))
        return g.op("Conv", [t, w], pads=[1, 1, 1, 1])
    return g.op("MatMul", [t, g.const("head", g.rng.normal(0.0, 0.2, (shape[-1], 48)))])


def _layernorm_variant(form: str) -> onnx.ModelProto:
    """A decomposed LayerNorm as other exporters spell it: ``muldd`` (d*d and
    d * Reciprocal(std)), ``opset18`` (ReduceMean's axes as an input)."""
    g = _G(1)
    a = _seq(g)
    opset = 18 if form == "opset18" else 17

    def mean(t: str) -> str:
        if opset >= 18:
            return g.op("ReduceMean", [t, g.const("axes", np.array([-1], np.int64))])
        return g.op("ReduceMean", [t], axes=[-1])

    d = g.op("Sub", [a, mean(a)])
    sq = g.op("Mul", [d, d]) if form == "muldd" else g.op("Pow", [d, g.const("two", 2.0)])
    std = g.op("Sqrt", [g.op("Add", [mean(sq), g.const("eps", 1e-5)])])
    n = g.op("Mul", [d, g.op("Reciprocal", [std])]) if form == "muldd" else g.op("Div", [d, std])
    gamma, beta = g.const("gamma", g.rng.normal(1.0, 0.1, 32)), g.const("beta", 0.1 * np.ones(32))
    return _single_input(g, g.op("Add", [g.op("Mul", [n, gamma]), beta]), SEQ, opset=opset)


def _channel_norm() -> onnx.ModelProto:
    """The decomposition over the channels (axis 1): not a LayerNorm, so Div, Pow and Sqrt
    of computed tensors run one by one."""
    g = _G(2)
    a = _img(g)
    d = g.op("Sub", [a, g.op("ReduceMean", [a], axes=[1])])
    var = g.op("ReduceMean", [g.op("Pow", [d, g.const("two", 2.0)])], axes=[1])
    n = g.op("Div", [d, g.op("Sqrt", [g.op("Add", [var, g.const("eps", 1e-5)])])])
    return _single_input(g, _head(g, n, IMG), IMG)


def _binary_tensor(op: str) -> onnx.ModelProto:
    """Div or Pow of two computed tensors (the divisor / base kept in [1.5, 2.5])."""
    g = _G(3)
    a = _img(g)
    b = g.op("Add", [g.op("Sigmoid", ["x"]), g.const("one", 1.5)])
    return _single_input(g, _head(g, g.op(op, [a, b] if op == "Div" else [b, a]), IMG), IMG)


def _sqrt_tensor() -> onnx.ModelProto:
    g = _G(4)
    a = _img(g)
    return _single_input(g, _head(g, g.op("Sqrt", [g.op("Mul", [a, a])]), IMG), IMG)


def _softmax(axis: int) -> onnx.ModelProto:
    g = _G(5)
    x, shape = (_seq(g), SEQ) if axis == -1 else (_img(g), IMG)
    return _single_input(g, _head(g, g.op("Softmax", [x], axis=axis), shape), shape)


def _gelu(form: str) -> onnx.ModelProto:
    g = _G(6)
    x = _seq(g)
    if form == "op":  # opset 20's Gelu node
        return _single_input(g, g.op("Gelu", [x]), SEQ, opset=20)
    return _single_input(g, g.gelu(x, form), SEQ)


def _gather(kind: str) -> onnx.ModelProto:
    g = _G(7)
    if kind == "embedding":  # token ids of the input into a constant table: on the host
        table = g.const("table", g.rng.normal(0.0, 1.0, (50, 32)))
        e = g.op("Gather", [table, "x"], axis=0)
        pos = g.const("pos", g.rng.normal(0.0, 0.1, (1, 16, 32)))
        y = g.op("MatMul", [g.op("Add", [e, pos]), g.const("w", g.rng.normal(0, 0.3, (32, 32)))])
        return _single_input(g, y, (1, 16), dtype=TensorProto.INT64)
    if kind == "token":  # the class token: a scalar index on the token axis
        cls = g.op("Gather", [_seq(g), g.const("i", np.array(0))], axis=1)
        return _single_input(g, _head(g, cls, (1, 32)), SEQ)
    idx = g.const("idx", np.array([2, 0, 5], np.int64))  # channels picked by constant indices
    picked = g.op("Gather", [_img(g), idx], axis=1)
    return _single_input(g, _head(g, picked, (1, 3, 6, 6)), IMG)


def _einsum(form: str) -> onnx.ModelProto:
    g = _G(8)
    if form == "qk":  # two activations, heads as a batch letter
        shape = g.const("shape", np.array([1, 16, 2, 16], np.int64))
        q = g.op("Reshape", [_seq(g), shape])
        k = g.op("Reshape", [_seq(g), shape])
        scores = g.op("Einsum", [q, k], equation="bqhd,bkhd->bhqk")
        return _single_input(g, _head(g, scores, (1, 2, 16, 16)[-1:]), SEQ)
    if form == "proj":  # a constant operand: becomes MatMul's weight
        w = g.const("w", g.rng.normal(0.0, 0.3, (32, 24)))
        return _single_input(g, g.op("Einsum", ["x", w], equation="bld,dk->blk"), SEQ)
    wt = g.const("wt", g.rng.normal(0.0, 0.3, (24, 16)))  # the constant first
    return _single_input(g, g.op("Einsum", [wt, "x"], equation="ik,bkj->bij"), SEQ)


def _matmul_constant_first() -> onnx.ModelProto:
    """W @ x with a constant W (torch.matmul(W, x)), x a computed [1, 16, 32]."""
    g = _G(10)
    w = g.const("w_first", g.rng.normal(0.0, 0.3, (24, 16)))
    return _single_input(g, _head(g, g.op("MatMul", [w, _seq(g)]), SEQ), SEQ)


def _masked_attention(form: str) -> onnx.ModelProto:
    """Causal single-head attention over 16 tokens with a constant mask: ``add`` (0 / -1e4,
    as Hugging Face exports), ``where`` (masked_fill with -inf) or ``bias`` (Swin: a
    relative position bias plus -100 where masked)."""
    g = _G(11)
    q, k, v = _seq(g), _seq(g), _seq(g)
    s = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 2, 1])])
    causal = np.tril(np.ones((16, 16), bool))
    if form == "where":
        s = g.op("Where", [g.const("keep", causal), s, g.const("fill", -np.inf)])
    else:
        masked = -1e4 if form == "add" else -100.0
        bias = g.rng.normal(0.0, 0.5, (16, 16)) if form == "bias" else np.zeros((16, 16))
        s = g.op("Add", [s, g.const("mask", np.where(causal, bias, masked))])
    p = g.op("Softmax", [s], axis=-1)
    return _single_input(g, _head(g, g.op("MatMul", [p, v]), SEQ), SEQ)


def _class_token() -> onnx.ModelProto:
    """ViT's class token: a constant row put before the tokens (a Concat of a constant into
    the residual stream, which the LayerNorm after it reads as int16)."""
    g = _G(10)
    cls = g.const("cls", g.rng.normal(0.0, 0.02, (1, 1, 32)))
    tokens = g.op("Concat", [cls, _seq(g)], axis=1)
    gamma, beta = g.const("gamma", g.rng.normal(1.0, 0.1, 32)), g.const("beta", np.zeros(32))
    ln = g.op("LayerNormalization", [tokens, gamma, beta], axis=-1, epsilon=1e-5)
    return _single_input(g, _head(g, ln, (1, 17, 32)), SEQ)


def _expand_tile(op: str) -> onnx.ModelProto:
    g = _G(9)
    a = _img(g)
    if op == "Expand":  # a per-pixel mean broadcast back over the channels
        m = g.op("ReduceMean", [a], axes=[1])
        e = g.op("Expand", [m, g.const("shape", np.array(IMG, np.int64))])
        return _single_input(g, _head(g, g.op("Add", [e, a]), IMG), IMG)
    tiled = g.op("Tile", [a, g.const("reps", np.array([1, 2, 1, 1]))])
    return _single_input(g, _head(g, tiled, (1, 16, 6, 6)), IMG)


#: One small graph per transformer op and pattern of issue 18 -> the op that must then run
#: on the AIPU (``report.json`` layer op; None: the pattern runs on the host). The LayerNorm
#: and GELU patterns end their graphs: fused before the graph cleaner, they stay whole on
#: the AIPU; the other ops are followed by a layer (`_head`).
OP_GRAPHS: dict[str, tuple[Callable[[], onnx.ModelProto], str | None]] = {
    "layernorm_op": (lambda: _single_input(_ln_op_graph(), "ln", SEQ), "LayerNormalization"),
    "layernorm_muldd_reciprocal": (lambda: _layernorm_variant("muldd"), "LayerNormalization"),
    "layernorm_opset18_axes_input": (lambda: _layernorm_variant("opset18"), "LayerNormalization"),
    "norm_over_channels_unfused": (_channel_norm, "Div"),
    "div_of_tensors": (lambda: _binary_tensor("Div"), "Div"),
    "pow_of_tensors": (lambda: _binary_tensor("Pow"), "Pow"),
    "sqrt_of_tensor": (_sqrt_tensor, "Sqrt"),
    "softmax_axis1": (lambda: _softmax(1), "Softmax"),
    "softmax_axis2": (lambda: _softmax(2), "Softmax"),
    "softmax_last_axis": (lambda: _softmax(-1), "Softmax"),
    "gelu_erf": (lambda: _gelu("erf"), "Gelu"),
    "gelu_tanh": (lambda: _gelu("tanh"), "Gelu"),
    "gelu_opset20": (lambda: _gelu("op"), "Gelu"),
    "gather_channels": (lambda: _gather("channels"), "Gather"),
    "gather_class_token": (lambda: _gather("token"), "Gather"),
    "gather_embedding": (lambda: _gather("embedding"), None),
    "einsum_qk": (lambda: _einsum("qk"), "MatMul"),
    "einsum_projection": (lambda: _einsum("proj"), "MatMul"),
    "einsum_constant_first": (lambda: _einsum("const_first"), "MatMul"),
    "matmul_constant_first": (_matmul_constant_first, "MatMul"),
    "masked_attention_add": (lambda: _masked_attention("add"), "MaskedSoftmax"),
    "masked_attention_where": (lambda: _masked_attention("where"), "MaskedSoftmax"),
    "masked_attention_bias": (lambda: _masked_attention("bias"), "MaskedSoftmax"),
    "class_token": (_class_token, "Concat"),
    "expand": (lambda: _expand_tile("Expand"), "Expand"),
    "tile": (lambda: _expand_tile("Tile"), "Tile"),
}


def _ln_op_graph() -> _G:
    g = _G(0)
    g.nodes.append(
        helper.make_node(
            "LayerNormalization",
            [_seq(g), g.const("gamma", g.rng.normal(1.0, 0.1, 32)), g.const("beta", np.zeros(32))],
            ["ln"],
            name="ln",
            axis=-1,
            epsilon=1e-5,
        )
    )
    return g
