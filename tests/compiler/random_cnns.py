"""Random small CNNs with the pathologies of trained weights, for the property tests.

A model is a chain of layers drawn from `LAYERS` (one row per construct: adding an operator
is one line and its builder), over an input of 1-4 channels and 3-12 pixels a side,
optionally ended by a `HEADS` row. Weights come from a numpy generator seeded by the draw,
then a `PATHOLOGIES` row reshapes them as training leaves them: dead channels that keep a
bias, weights of 1e-9, one channel 10^4 x the others, a whole conv dead (a constant branch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

Draw = Callable[[st.SearchStrategy[Any]], Any]


@dataclass(frozen=True)
class Act:
    """A 4-D activation of the model being built (batch 1)."""

    name: str
    c: int
    h: int
    w: int


@dataclass
class Model:
    """Nodes and initializers with unique names, and the draw and generator they use."""

    draw: Draw
    rng: np.random.Generator
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    inits: list[onnx.TensorProto] = field(default_factory=list)
    count: int = 0

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{hint}{self.count}"

    def const(self, hint: str, value: np.ndarray) -> str:
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def node(self, op: str, inputs: list[str], **attrs: Any) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out


# ------------------------------------------------------------------ weight pathologies


def _some(m: Model, n: int) -> np.ndarray:
    """A random non-empty subset of ``n`` channels (all of them possible)."""
    k = m.draw(st.integers(1, n))
    return m.rng.choice(n, size=k, replace=False)


def _dead_with_bias(m: Model, w: np.ndarray, b: np.ndarray) -> None:
    c = _some(m, w.shape[0])
    w[c] = 0.0
    b[c] = m.rng.choice([-1.0, 1.0], c.size) * m.rng.uniform(0.2, 3.0, c.size)


def _tiny(m: Model, w: np.ndarray, b: np.ndarray) -> None:
    w[_some(m, w.shape[0])] *= 1e-9


def _outlier(m: Model, w: np.ndarray, b: np.ndarray) -> None:
    c = int(m.rng.integers(w.shape[0]))
    w[c] *= 1e4
    b[c] *= 1e4


def _all_dead(m: Model, w: np.ndarray, b: np.ndarray) -> None:
    w[...] = 0.0


#: What training does to a weight tensor (output channels on axis 0), in place.
PATHOLOGIES: dict[str, Callable[[Model, np.ndarray, np.ndarray], None]] = {
    "plain": lambda m, w, b: None,
    "dead_with_bias": _dead_with_bias,
    "tiny": _tiny,
    "outlier": _outlier,
    "all_dead": _all_dead,
}


def _weights(m: Model, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    w = m.rng.normal(0, 0.4, shape)
    b = m.rng.normal(0, 0.2, shape[0])
    PATHOLOGIES[m.draw(st.sampled_from(sorted(PATHOLOGIES)))](m, w, b)
    return w, b


# ------------------------------------------------------------------ layers


def _out(size: int, k: int, stride: int, pad: int, dilation: int = 1) -> int:
    return (size + 2 * pad - dilation * (k - 1) - 1) // stride + 1


def _conv_layer(m: Model, x: Act, cout: int, group: int, max_k: int = 3) -> Act:
    k = m.draw(st.integers(1, min(max_k, x.h, x.w)))
    dil = m.draw(st.integers(1, 2)) if k > 1 and min(x.h, x.w) >= 2 * k else 1
    stride = m.draw(st.integers(1, 2))
    pad = m.draw(st.integers(0, k - 1))
    h, w = _out(x.h, k, stride, pad, dil), _out(x.w, k, stride, pad, dil)
    wt, b = _weights(m, (cout, x.c // group, k, k))
    ins = [x.name, m.const("w", wt), m.const("b", b)]
    y = m.node("Conv", ins, kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4,
               dilations=[dil] * 2, group=group)  # fmt: skip
    return Act(y, cout, h, w)


def conv(m: Model, x: Act) -> Act:
    divisors = [g for g in range(1, x.c + 1) if x.c % g == 0]
    group = m.draw(st.sampled_from(divisors))
    cout = group * m.draw(st.integers(1, max(1, 8 // group)))
    return _conv_layer(m, x, cout, group)


def depthwise(m: Model, x: Act) -> Act:
    return _conv_layer(m, x, x.c, x.c)


def batchnorm(m: Model, x: Act) -> Act:
    r, c = m.rng, x.c
    gamma, beta = r.uniform(0.3, 1.5, c), r.normal(0, 0.3, c)
    mean, var = r.normal(0, 0.3, c), r.uniform(0.05, 2.0, c)
    if m.draw(st.booleans()):  # channels that never varied in training
        var[_some(m, c)] = 0.0
    eps = m.draw(st.sampled_from([1e-5, 1e-3, 1e-12]))
    ins = [x.name, *(m.const(n, v) for n, v in zip("gbmv", (gamma, beta, mean, var), strict=True))]
    return Act(m.node("BatchNormalization", ins, epsilon=eps), x.c, x.h, x.w)


def _unary(op: str, **attrs: Any) -> Callable[[Model, Act], Act]:
    def layer(m: Model, x: Act) -> Act:
        return Act(m.node(op, [x.name], **attrs), x.c, x.h, x.w)

    return layer


def clip(m: Model, x: Act) -> Act:
    lo, hi = m.draw(st.sampled_from([(0.0, 6.0), (-1.0, 1.0), (0.0, 1.0)]))
    ins = [x.name, m.const("lo", np.array(lo)), m.const("hi", np.array(hi))]
    return Act(m.node("Clip", ins), x.c, x.h, x.w)


def add_branch(m: Model, x: Act) -> Act:
    """x + a 1x1 conv of x (the conv may be dead: a constant branch)."""
    wt, b = _weights(m, (x.c, x.c, 1, 1))
    br = m.node("Conv", [x.name, m.const("w", wt), m.const("b", b)], kernel_shape=[1, 1])
    return Act(m.node("Add", [x.name, br]), x.c, x.h, x.w)


def add_constant(m: Model, x: Act) -> Act:
    shape = m.draw(st.sampled_from([(1, x.c, 1, 1), (1,), (1, x.c, x.h, x.w)]))
    k = m.const("k", m.rng.normal(0, 1.0, shape))
    return Act(m.node(m.draw(st.sampled_from(["Add", "Mul"])), [x.name, k]), x.c, x.h, x.w)


def concat(m: Model, x: Act) -> Act:
    """x next to a 1x1 conv of it (or of a constant: the conv dead)."""
    cout = m.draw(st.integers(1, 4))
    wt, b = _weights(m, (cout, x.c, 1, 1))
    br = m.node("Conv", [x.name, m.const("w", wt), m.const("b", b)], kernel_shape=[1, 1])
    ins = [x.name, br] if m.draw(st.booleans()) else [br, x.name]
    return Act(m.node("Concat", ins, axis=1), x.c + cout, x.h, x.w)


def _pool(op: str) -> Callable[[Model, Act], Act]:
    def layer(m: Model, x: Act) -> Act:
        k = m.draw(st.integers(1, min(3, x.h, x.w)))
        stride = m.draw(st.integers(1, 2))
        pad = m.draw(st.integers(0, k // 2))
        attrs: dict[str, Any] = {"kernel_shape": [k, k], "strides": [stride] * 2, "pads": [pad] * 4}
        if op == "AveragePool":
            attrs["count_include_pad"] = m.draw(st.integers(0, 1))
        y = m.node(op, [x.name], **attrs)
        return Act(y, x.c, _out(x.h, k, stride, pad), _out(x.w, k, stride, pad))

    return layer


def prelu(m: Model, x: Act) -> Act:
    """PRelu with trained-looking per-channel slopes, or one slope for all channels."""
    shape = m.draw(st.sampled_from([(x.c, 1, 1), (1,)]))
    slope = m.const("slope", m.rng.uniform(-0.1, 0.4, shape))
    return Act(m.node("PRelu", [x.name, slope]), x.c, x.h, x.w)


def global_pool(m: Model, x: Act) -> Act:
    return Act(m.node("GlobalAveragePool", [x.name]), x.c, 1, 1)


#: The layers a random CNN chains (name -> builder of one layer on the current activation).
LAYERS: dict[str, Callable[[Model, Act], Act]] = {
    "conv": conv,
    "depthwise": depthwise,
    "batchnorm": batchnorm,
    "relu": _unary("Relu"),
    "clip": clip,
    "sigmoid": _unary("Sigmoid"),
    "hardswish": _unary("HardSwish"),
    "hardsigmoid": _unary("HardSigmoid"),
    "leakyrelu": _unary("LeakyRelu", alpha=0.1),
    "prelu": prelu,
    "tanh": _unary("Tanh"),
    "add_branch": add_branch,
    "add_constant": add_constant,
    "concat": concat,
    "maxpool": _pool("MaxPool"),
    "avgpool": _pool("AveragePool"),
    "global_pool": global_pool,
}


def gemm_head(m: Model, x: Act) -> tuple[str, list[int]]:
    flat = m.node("Flatten", [x.name], axis=1)
    n = m.draw(st.integers(1, 6))
    wt, b = _weights(m, (n, x.c * x.h * x.w))
    return m.node("Gemm", [flat, m.const("w", wt), m.const("b", b)], transB=1), [1, n]


def matmul_head(m: Model, x: Act) -> tuple[str, list[int]]:
    flat = m.node("Flatten", [x.name], axis=1)
    n = m.draw(st.integers(1, 6))
    wt, _ = _weights(m, (n, x.c * x.h * x.w))
    return m.node("MatMul", [flat, m.const("w", wt.T)]), [1, n]


#: How a model may end (None: with its last 4-D activation).
HEADS: dict[str, Callable[[Model, Act], tuple[str, list[int]]] | None] = {
    "none": None,
    "gemm": gemm_head,
    "matmul": matmul_head,
}


def random_cnn(draw: Draw, max_layers: int = 5) -> onnx.ModelProto:
    """One random CNN (opset 17) with input ``x`` and output ``y``."""
    m = Model(draw, np.random.default_rng(draw(st.integers(0, 2**32 - 1))))
    x = Act("x", draw(st.integers(1, 4)), draw(st.integers(3, 12)), draw(st.integers(3, 12)))
    first = x
    for _ in range(draw(st.integers(1, max_layers))):
        x = LAYERS[draw(st.sampled_from(sorted(LAYERS)))](m, x)
    head = HEADS[draw(st.sampled_from(sorted(HEADS)))]
    out, shape = head(m, x) if head is not None else (x.name, [1, x.c, x.h, x.w])
    m.nodes.append(helper.make_node("Identity", [out], ["y"], name="y"))
    inp = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, first.c, first.h, first.w])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    graph = helper.make_graph(m.nodes, "random_cnn", [inp], [y], initializer=m.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model
