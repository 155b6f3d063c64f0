"""Pass 3b, BatchNorm folding: BN after Conv/ConvTranspose (or a BatchNorm1d after a Gemm)
goes into the weights and bias; a BN without such a producer becomes a per-channel Mul + Add
(one DPU op).

With s = gamma / sqrt(var + eps): W' = W * s (per output channel), b' = (b - mean) * s + beta.
Exact up to float32 rounding.

A channel with zero variance and ``var + eps == 0`` (epsilon 0, as some exporters write)
has no finite scale: during training its input always equalled its mean, so its normalised
value is taken as 0 and the channel outputs ``beta`` (scale 0) instead of inf/nan.
"""

from __future__ import annotations

import numpy as np

from aipusim.base.memo import ArrayMemo
from aipusim.compiler.ir import Graph, GraphEditor, Node, Op, frozen_array
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.passes.util import sole_consumer


def bn_scale_shift(
    gamma: np.ndarray, beta: np.ndarray, mean: np.ndarray, var: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray]:
    """(scale, shift) per channel of an inference BatchNormalization, in float64; a channel
    with ``var + eps == 0`` gets scale 0 (it outputs beta; see the module doc).

    >>> one, var = np.ones(2), np.array([3.0, 0.0])
    >>> s, t = bn_scale_shift(one, np.array([0.5, 2.0]), one, var, 1.0)
    >>> [float(v) for v in s], [float(v) for v in t]
    ([0.5, 1.0], [0.0, 1.0])
    >>> s, t = bn_scale_shift(one, np.array([0.5, 2.0]), one, var + [1, 0], 0.0)  # 0/0 -> beta
    >>> [float(v) for v in s], [float(v) for v in t]
    ([0.5, 0.0], [0.0, 2.0])
    """
    g, b, m = (np.asarray(a, np.float64) for a in (gamma, beta, mean))
    denom = np.sqrt(np.maximum(np.asarray(var, np.float64), 0.0) + float(eps))
    scale = np.divide(g, denom, out=np.zeros(np.broadcast(g, denom).shape), where=denom > 0)
    return scale, b - m * scale


def _bn_params(graph: Graph, bn: Node) -> tuple[np.ndarray, np.ndarray] | None:
    """(scale, shift) per channel of an inference BN with constant parameters."""
    arrays = [graph.const(i) for i in bn.inputs[1:5]]
    if any(a is None for a in arrays) or int(bn.attr("training_mode", 0)):
        return None
    return bn_scale_shift(*arrays, float(bn.attr("epsilon", 1e-5)))  # type: ignore[arg-type]


def _scaled(weight: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``weight * scale`` computed in float64 and rounded once to the weight's dtype, in one
    pass (no float64 copy of the weights: on a ResNet-50 those are 200 MB of fresh pages)."""
    out = np.empty(np.broadcast_shapes(weight.shape, scale.shape), weight.dtype)
    return np.multiply(weight, scale, out=out, dtype=np.float64, casting="same_kind")


#: Folded convolution weights by the arrays they come from (a warm compile of the same
#: imported graph folds the same constants again).
_FOLDED = ArrayMemo()


def _fold_into_conv(graph: Graph, ed: GraphEditor, conv: Node, bn: Node) -> bool:
    weight = graph.const(conv.inputs[1])
    params = _bn_params(graph, bn)
    if weight is None or params is None:
        return False
    scale, shift = params
    group = int(conv.attr("group", 1))

    def folded() -> np.ndarray:
        if conv.op is Op.CONV:
            return _scaled(weight, scale.reshape((-1,) + (1,) * (weight.ndim - 1)))
        # ConvTranspose weights are [Cin, Cout/group, k...]
        cout_g = weight.shape[1]
        s = scale.reshape(group, cout_g)
        return _scaled(
            weight.reshape((group, -1, cout_g, *weight.shape[2:])),
            s.reshape((group, 1, cout_g) + (1,) * (weight.ndim - 2)),
        ).reshape(weight.shape)

    sources = [weight, *(graph.const(i) for i in bn.inputs[1:5])]
    # (read-only: the graph keeps this very array, so what is computed from it is remembered)
    w = _FOLDED.get(
        sources, (conv.op, group, float(bn.attr("epsilon", 1e-5))), lambda: frozen_array(folded())
    )
    bias_name = conv.inputs[2] if len(conv.inputs) > 2 and conv.inputs[2] else None
    bias = graph.const(bias_name) if bias_name else np.zeros(scale.shape, np.float32)
    if bias is None:
        return False
    b = bias.astype(np.float64) * scale + shift
    w_name = ed.add_constant(f"{conv.inputs[1]}_bn", w)
    b_name = ed.add_constant(f"{conv.name}_bias_bn", b.astype(np.float32))
    ed.remove(bn)
    ed.replace(conv, conv.with_(inputs=(conv.inputs[0], w_name, b_name), outputs=bn.outputs[:1]))
    return True


def _fold_into_gemm(graph: Graph, ed: GraphEditor, gemm: Node, bn: Node) -> bool:
    """BatchNorm1d after a Gemm (features on axis 1): scale the weight columns."""
    weight = graph.const(gemm.inputs[1])
    params = _bn_params(graph, bn)
    if weight is None or params is None or int(gemm.attr("transA", 0)):
        return False
    scale, shift = params
    alpha, beta = float(gemm.attr("alpha", 1.0)), float(gemm.attr("beta", 1.0))
    trans_b = int(gemm.attr("transB", 0))
    w = weight.astype(np.float64) * alpha
    w = w * (scale[:, None] if trans_b else scale[None, :])
    m = scale.shape[0]
    has_c = len(gemm.inputs) > 2 and bool(gemm.inputs[2])
    c = graph.const(gemm.inputs[2]) if has_c else np.zeros(m, np.float32)
    if c is None or c.size not in (1, m):
        return False
    bias = np.broadcast_to(c.reshape(-1).astype(np.float64) * beta, (m,)) * scale + shift
    w_name = ed.add_constant(f"{gemm.inputs[1]}_bn", w.astype(weight.dtype))
    b_name = ed.add_constant(f"{gemm.name}_bias_bn", bias.astype(np.float32))
    ed.remove(bn)
    attrs = gemm.attrs.with_(alpha=None, beta=None)
    ed.replace(
        gemm,
        gemm.with_(inputs=(gemm.inputs[0], w_name, b_name), outputs=bn.outputs[:1], attrs=attrs),
    )
    return True


def fold_batchnorm(graph: Graph, ctx: PassContext | None) -> Graph:
    """Fold every inference BatchNormalization into its conv, or turn it into Mul+Add."""
    ed = graph.edit()
    changed = False
    for bn in graph.nodes:
        if bn.op is not Op.BATCH_NORM or any(o for o in bn.outputs[1:]):
            continue
        conv = graph.producer(bn.inputs[0])
        if (
            conv is not None
            and conv.op in (Op.CONV, Op.CONV_TRANSPOSE)
            and sole_consumer(graph, conv.outputs[0]) is bn
            and conv.name in ed.nodes
            and _fold_into_conv(graph, ed, ed.nodes[conv.name], bn)
        ):
            changed = True
            continue
        if (
            conv is not None
            and conv.op is Op.GEMM
            and sole_consumer(graph, conv.outputs[0]) is bn
            and conv.name in ed.nodes
            and _fold_into_gemm(graph, ed, ed.nodes[conv.name], bn)
        ):
            changed = True
            continue
        params = _bn_params(graph, bn)
        if params is None:
            continue
        scale, shift = params
        rank = len(graph.shape(bn.inputs[0]))
        bshape = (-1,) + (1,) * (rank - 2)
        s = ed.add_constant(f"{bn.name}/scale", scale.astype(np.float32).reshape(bshape))
        t = ed.add_constant(f"{bn.name}/shift", shift.astype(np.float32).reshape(bshape))
        x = graph.tensor(bn.inputs[0])
        mid = ed.new_tensor(f"{bn.name}/scaled", x.shape, x.dtype)
        ed.replace(bn, Node(f"{bn.name}/mul", Op.MUL, (bn.inputs[0], s), (mid,)))
        ed.add(Node(f"{bn.name}/add", Op.ADD, (mid, t), bn.outputs[:1]))
        changed = True
    return ed.build() if changed else graph


__all__ = ["bn_scale_shift", "fold_batchnorm"]
