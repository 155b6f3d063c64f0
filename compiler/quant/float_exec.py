"""The float32 reference executor of the IR (numpy + the numba window kernels).

Calibration runs the graph in float32 many times and needs every activation, so this
executor is built for speed: convolutions are im2col + float32 BLAS GEMMs (the same
`kernels.conv_accumulate` the int8 reference uses in float64; transposed convolutions
GEMM + col2im, `kernels.conv_transpose_accumulate`), depthwise convs and pooling
are the numba kernels. ``on_tensor`` sees every value as it is produced, and values are
freed as soon as their last consumer has run.

Example:
    >>> import numpy as np
    >>> from aipusim.compiler.ir import Graph, Node, Op, Tensor
    >>> g = Graph("g", (Node("r", Op.RELU, ("x",), ("y",)),),
    ...           {"x": Tensor("x", (2,)), "y": Tensor("y", (2,))}, {}, ("x",), ("y",))
    >>> run_fp32(g, {"x": np.array([-1.0, 2.0], np.float32)})["y"].tolist()
    [0.0, 2.0]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from aipusim.compiler.ir import Graph, Node, Op
from aipusim.compiler.passes.bn_fold import bn_scale_shift
from aipusim.compiler.quant import kernels as K
from aipusim.compiler.quant import opsupport as S
from aipusim.compiler.quant.data import float_inputs
from aipusim.compiler.quant.elementwise import (
    PLAIN_FUNCTIONS,
    gelu,
    scalar_operand,
    unary_function,
)

Array = np.ndarray
TensorCallback = Callable[[str, Array], None]


# ----------------------------------------------------------------------- ops


def _conv(node: Node, graph: Graph, x: list[Array]) -> Array:
    win = S.conv_window(node, graph)
    acc = K.conv_accumulate(
        x[0],
        x[1],
        strides=win.strides,
        pads=win.pads,
        dilations=win.dilations,
        group=int(node.attr("group", 1)),
        out_hw=win.out_hw,
        acc_dtype=np.float32,
    )
    if len(x) > 2:
        acc += x[2].reshape(1, -1, 1, 1)
    return acc


def _conv_transpose(node: Node, graph: Graph, x: list[Array]) -> Array:
    win = S.conv_transpose_window(node, graph)
    acc = K.conv_transpose_accumulate(
        x[0],
        x[1],
        strides=win.strides,
        pads=win.pads,
        dilations=win.dilations,
        group=int(node.attr("group", 1)),
        out_hw=win.out_hw,
        acc_dtype=np.float32,
    )
    if len(x) > 2:
        acc = acc + x[2].reshape(1, -1, 1, 1)
    return acc


def _gemm(node: Node, graph: Graph, x: list[Array]) -> Array:
    a = x[0].T if node.attr("transA", 0) else x[0]
    b = x[1].T if node.attr("transB", 0) else x[1]
    y = float(node.attr("alpha", 1.0)) * (a @ b)
    if len(x) > 2:
        y = y + float(node.attr("beta", 1.0)) * x[2]
    return y.astype(np.float32)


def _batch_norm(node: Node, graph: Graph, x: list[Array]) -> Array:
    k, shift = bn_scale_shift(*x[1:5], float(node.attr("epsilon", 1e-5)))
    shape = (1, -1) + (1,) * (x[0].ndim - 2)
    return (x[0] * k.reshape(shape) + shift.reshape(shape)).astype(x[0].dtype)


def _pool(node: Node, graph: Graph, x: list[Array]) -> Array:
    win = S.window_attrs(node, graph.shape(node.inputs[0]), graph.shape(node.outputs[0]))
    if node.op is Op.MAX_POOL:
        return K.max_pool(x[0], win.kernel, win.strides, win.pads, win.dilations, win.out_hw)
    sums, count = K.pool_sum(
        x[0],
        win.kernel,
        win.strides,
        win.pads,
        win.out_hw,
        count_include_pad=bool(node.attr("count_include_pad", 0)),
        acc_dtype=np.float32,
    )
    return sums / count


def _resize(node: Node, graph: Graph, x: list[Array]) -> Array:
    in_shape, out_shape = graph.shape(node.inputs[0]), graph.shape(node.outputs[0])
    y = x[0]
    linear = S.resize_mode(node) == "linear"
    for ax in S.resized_axes(in_shape, out_shape):
        if linear:
            i0, i1, frac = S.resize_linear_coords(node, graph, ax, in_shape[ax], out_shape[ax])
            shape = [1] * y.ndim
            shape[ax] = len(frac)
            f = frac.reshape(shape).astype(np.float32)
            y = np.take(y, i0, axis=ax) * (1 - f) + np.take(y, i1, axis=ax) * f
        else:
            idx = S.resize_nearest_index(node, graph, ax, in_shape[ax], out_shape[ax])
            y = np.take(y, idx, axis=ax)
    return y


def _softmax(node: Node, graph: Graph, x: list[Array]) -> Array:
    axis = int(node.attr("axis", -1))
    if node.op is Op.MASKED_SOFTMAX:  # masked entries out of the max and the sum: 0
        keep = np.broadcast_to(np.asarray(x[1]).astype(bool), x[0].shape)
        v = np.where(keep, x[0], -np.inf)
    else:
        v = x[0]
    e = np.exp(v - v.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _reduce(node: Node, graph: Graph, x: list[Array]) -> Array:
    axes = S.reduce_axes(node, graph)
    keep = bool(node.attr("keepdims", 1))
    fn = {Op.REDUCE_MEAN: np.mean, Op.REDUCE_MAX: np.max, Op.REDUCE_SUM: np.sum}[node.op]
    return fn(x[0], axis=axes, keepdims=keep)


def _binary(node: Node, graph: Graph, x: list[Array]) -> Array:
    a, b = x
    fn = {
        Op.ADD: np.add,
        Op.SUB: np.subtract,
        Op.MUL: np.multiply,
        Op.DIV: np.divide,
        Op.POW: np.power,
        Op.MIN: np.minimum,
        Op.MAX: np.maximum,
    }[node.op]
    return fn(a, b)


def _prelu(node: Node, graph: Graph, x: list[Array]) -> Array:
    return np.where(x[0] >= 0, x[0], x[0] * x[1])


def layer_norm(x: Array, scale: Array, bias: Array | None, axis: int, eps: float) -> Array:
    """ONNX LayerNormalization (opset 17): normalise over the axes from ``axis`` on."""
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps) * scale
    return y + bias if bias is not None else y


def _layer_norm(node: Node, graph: Graph, x: list[Array]) -> Array:
    bias = x[2] if len(x) > 2 else None
    eps = float(node.attr("epsilon", 1e-5))
    return layer_norm(x[0], x[1], bias, int(node.attr("axis", -1)), eps)


_OPS: dict[Op, Callable[[Node, Graph, list[Array]], Array]] = {
    Op.CONV: _conv,
    Op.CONV_TRANSPOSE: _conv_transpose,
    Op.GEMM: _gemm,
    Op.MATMUL: lambda n, g, x: np.matmul(x[0], x[1]),
    Op.BATCH_NORM: _batch_norm,
    Op.MAX_POOL: _pool,
    Op.AVERAGE_POOL: _pool,
    Op.GLOBAL_AVERAGE_POOL: lambda n, g, x: x[0].mean(axis=(2, 3), keepdims=True),
    Op.GLOBAL_MAX_POOL: lambda n, g, x: x[0].max(axis=(2, 3), keepdims=True),
    Op.RESIZE: _resize,
    Op.UPSAMPLE: _resize,
    Op.SOFTMAX: _softmax,
    Op.MASKED_SOFTMAX: _softmax,
    Op.REDUCE_MEAN: _reduce,
    Op.REDUCE_MAX: _reduce,
    Op.REDUCE_SUM: _reduce,
    Op.PRELU: _prelu,
    Op.LAYER_NORM: _layer_norm,
    Op.EINSUM: lambda n, g, x: np.einsum(str(n.attr("equation")), *x),
}

_UNARY_OPS = frozenset(
    {
        Op.RELU,
        Op.CLIP,
        Op.LEAKY_RELU,
        Op.SIGMOID,
        Op.SILU,
        Op.GELU,
        Op.HARD_SIGMOID,
        Op.HARD_SWISH,
        *PLAIN_FUNCTIONS,
    }
)
_BINARY = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.POW, Op.MIN, Op.MAX})


def run_node(node: Node, graph: Graph, x: list[Array]) -> list[Array]:
    """Outputs of one node from its input values (missing optional inputs dropped)."""
    op = node.op
    if op in S.LAYOUT_EXEC_OPS:
        return S.run_layout(node, graph, x, S.pad_constant(node, graph) if op is Op.PAD else 0.0)
    if op in _UNARY_OPS:
        return [unary_function(node, graph)(x[0]).astype(np.float32)]
    if op in _BINARY:
        if op is Op.MIN or op is Op.MAX:
            out = x[0]
            for v in x[1:]:
                out = _binary(node, graph, [out, v])
            return [np.asarray(out, np.float32)]
        return [np.asarray(_binary(node, graph, x), np.float32)]
    fn = _OPS.get(op)
    if fn is None:
        raise S.unsupported(node, "the float reference executor has no kernel for it")
    return [np.asarray(fn(node, graph, x), np.float32)]


def run_fp32(
    graph: Graph,
    inputs: Mapping[str, Array],
    *,
    on_tensor: TensorCallback | None = None,
    keep_all: bool = False,
    replace: Callable[[str, Array], Array] | None = None,
) -> dict[str, Array]:
    """Run ``graph`` in float32; returns its outputs (every tensor with ``keep_all``).

    ``replace(name, value)`` may change each input and activation as it is produced (the
    later nodes read what it returns): e.g. round one tensor to its int8 grid to see what
    that alone does to the outputs (`accuracy.rounding_sensitivity`).
    """
    values: dict[str, Array] = float_inputs(graph, inputs)
    if replace:
        values = {name: replace(name, arr) for name, arr in values.items()}
    if on_tensor:
        for name, arr in values.items():
            on_tensor(name, arr)
    last_use = _last_uses(graph)
    outputs = set(graph.outputs)
    for step, node in enumerate(graph.nodes):
        args = [_value(graph, values, i) for i in node.present_inputs]
        results = run_node(node, graph, args)
        for name, arr in zip([o for o in node.outputs if o], results, strict=False):
            if replace:
                arr = replace(name, arr)
            values[name] = arr
            if on_tensor:
                on_tensor(name, arr)
        if not keep_all:
            for i in node.present_inputs:
                if last_use.get(i) == step and i not in outputs:
                    values.pop(i, None)
    if keep_all:
        return values
    return {o: values[o] for o in graph.outputs}


def _value(graph: Graph, values: dict[str, Array], name: str) -> Array:
    if name in values:
        return values[name]
    const = graph.const(name)
    assert const is not None, f"tensor {name} has no value"
    return const.astype(np.float32) if const.dtype.kind == "f" else const


def _last_uses(graph: Graph) -> dict[str, int]:
    last: dict[str, int] = {}
    for step, node in enumerate(graph.nodes):
        for i in node.present_inputs:
            last[i] = step
    return last


__all__ = ["gelu", "layer_norm", "run_fp32", "run_node", "scalar_operand", "unary_function"]
