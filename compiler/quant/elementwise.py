"""Element-wise float functions of IR nodes (no numba): what the float executor runs and
what the quantizer tabulates into 256-entry lookup tables.

Example:
    >>> import numpy as np
    >>> from aipusim.compiler.ir import Graph, Node, Op, Tensor
    >>> g = Graph("g", (Node("r", Op.RELU, ("x",), ("y",)),),
    ...           {"x": Tensor("x", (2,)), "y": Tensor("y", (2,))}, {}, ("x",), ("y",))
    >>> unary_function(g.nodes[0], g)(np.array([-1.0, 2.0])).tolist()
    [0.0, 2.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from aipusim.compiler.ir import Graph, Node, Op
from aipusim.compiler.quant import opsupport as S

Array = np.ndarray


def _erf(x: Array) -> Array:
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7: below float32 resolution near 1).
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))


def _sigmoid(x: Array) -> Array:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


#: sqrt(2 / pi), the constant of GELU's tanh approximation.
GELU_TANH_K = math.sqrt(2.0 / math.pi)


def gelu(x: Array, approximate: str = "none") -> Array:
    """GELU: x * Phi(x) with the erf form (``none``) or its tanh approximation.

    >>> [round(float(v), 4) for v in gelu(np.array([-1.0, 1.0]))]
    [-0.1587, 0.8413]
    """
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(GELU_TANH_K * (x + 0.044715 * x**3)))
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _clip_bounds(node: Node, graph: Graph) -> tuple[float, float]:
    lo, hi = node.attr("min", -math.inf), node.attr("max", math.inf)
    for k, name in ((1, "min"), (2, "max")):
        if len(node.inputs) > k and node.inputs[k]:
            arr = graph.const(node.inputs[k])
            if arr is None:
                raise S.unsupported(node, f"the {name} bound must be a constant")
            if k == 1:
                lo = float(arr.reshape(-1)[0])
            else:
                hi = float(arr.reshape(-1)[0])
    return float(lo), float(hi)


def unary_function(node: Node, graph: Graph) -> Callable[[Array], Array]:
    """The float function of a single-activation-input element-wise node.

    Binary ops whose second operand is a scalar constant (Pow by 2, Div by 6, ...) count
    as unary too. LUT nodes may carry the affine attributes of
    ``simplify_mac_before_after_lut`` (y = os * f(is * x + ib) + ob).
    """
    op = node.op
    if op is Op.RELU:
        fn: Callable[[Array], Array] = lambda x: np.maximum(x, 0)  # noqa: E731
    elif op is Op.CLIP:
        lo, hi = _clip_bounds(node, graph)
        fn = lambda x: np.clip(x, lo, hi)  # noqa: E731
    elif op is Op.LEAKY_RELU:
        alpha = float(node.attr("alpha", 0.01))
        fn = lambda x: np.where(x >= 0, x, alpha * x)  # noqa: E731
    elif op is Op.SIGMOID:
        fn = _sigmoid
    elif op is Op.SILU:
        fn = lambda x: x * _sigmoid(x)  # noqa: E731
    elif op is Op.HARD_SIGMOID:
        a, b = float(node.attr("alpha", 0.2)), float(node.attr("beta", 0.5))
        fn = lambda x: np.clip(a * x + b, 0, 1)  # noqa: E731
    elif op is Op.HARD_SWISH:
        fn = lambda x: x * np.clip(x / 6 + 0.5, 0, 1)  # noqa: E731
    elif op is Op.GELU:
        approximate = str(node.attr("approximate", "none"))
        fn = lambda x: gelu(x, approximate)  # noqa: E731
    elif op in PLAIN_FUNCTIONS:
        fn = PLAIN_FUNCTIONS[op]
    elif op in (Op.POW, Op.DIV, Op.MUL, Op.ADD, Op.SUB) and scalar_operand(node, graph):
        c = scalar_operand(node, graph)
        assert c is not None
        value, const_first = c
        fn = _scalar_binary(node, value, const_first)
    else:
        raise S.unsupported(node, "not an element-wise function of one activation")
    affine = [
        node.attr(k) for k in ("aipu_in_scale", "aipu_in_bias", "aipu_out_scale", "aipu_out_bias")
    ]
    if any(v is not None for v in affine):
        i_s, i_b, o_s, o_b = (
            float(v) if v is not None else d
            for v, d in zip(affine, (1.0, 0.0, 1.0, 0.0), strict=True)
        )
        inner = fn
        fn = lambda x: o_s * inner(i_s * x + i_b) + o_b  # noqa: E731
    return fn


PLAIN_FUNCTIONS: dict[Op, Callable[[Array], Array]] = {
    Op.TANH: np.tanh,
    Op.ERF: _erf,
    Op.SQRT: np.sqrt,
    Op.EXP: np.exp,
    Op.LOG: np.log,
    Op.RECIPROCAL: lambda x: 1.0 / x,
    Op.NEG: np.negative,
}


def scalar_operand(node: Node, graph: Graph) -> tuple[float, bool] | None:
    """(value, is_first_operand) when one operand of a binary op is a one-element constant."""
    if node.op not in (Op.POW, Op.DIV, Op.MUL, Op.ADD, Op.SUB) or len(node.inputs) != 2:
        return None
    a, b = (graph.const(i) for i in node.inputs)
    if b is not None and a is None and b.size == 1:
        return float(b.reshape(-1)[0]), False
    if a is not None and b is None and a.size == 1 and node.op is not Op.POW:
        return float(a.reshape(-1)[0]), True
    return None


def _scalar_binary(node: Node, c: float, const_first: bool) -> Callable[[Array], Array]:
    op = node.op
    if op is Op.POW:
        return lambda x: np.power(x, c)
    if op is Op.MUL:
        return lambda x: x * c
    if op is Op.ADD:
        return lambda x: x + c
    if op is Op.SUB:
        return (lambda x: c - x) if const_first else (lambda x: x - c)
    return (lambda x: c / x) if const_first else (lambda x: x / c)


__all__ = ["GELU_TANH_K", "PLAIN_FUNCTIONS", "gelu", "scalar_operand", "unary_function"]
