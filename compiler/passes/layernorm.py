"""Pass 3b, ``fuse_layernorm``: the decomposed LayerNorm of older exports -> one
LayerNormalization node.

Exporters before opset 17 (and hand-written modules) spell a LayerNorm over the last axes as

    mean = ReduceMean(x)          d = x - mean        var = ReduceMean(d^2)   (Pow 2 or d*d)
    y = d / Sqrt(var + eps)       (or d * Reciprocal(Sqrt(var + eps)))
    y = y * gamma + beta          (each optional; constants over the normalised axes)

Quantized node by node, that chain loses most of its precision in the int8 variance and
standard deviation; as one LayerNormalization it gets the DPU's statistics scheme (integer
sums, float18 normalisation: see `aipusim.compiler.quant.kernels.layer_norm_int`). The
rewrite needs every intermediate to be read only inside the pattern, the two ReduceMeans to
reduce the same trailing axes, and eps, gamma and beta to be constants; anything else stays
as it is (and is quantized op by op).
"""

from __future__ import annotations

import numpy as np

from aipusim.compiler.ir import Graph, GraphEditor, Node, Op
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.passes.util import const_operand, scalar_value


def _trailing_axis(graph: Graph, node: Node) -> int | None:
    """The first axis of a keepdims ReduceMean over the trailing axes, else None."""
    if node.op is not Op.REDUCE_MEAN or not int(node.attr("keepdims", 1)):
        return None
    rank = len(graph.shape(node.inputs[0]))
    axes = node.attr("axes")
    if axes is None and len(node.inputs) > 1 and node.inputs[1]:
        arr = graph.const(node.inputs[1])
        axes = None if arr is None else tuple(int(a) for a in arr.reshape(-1))
    if not axes:
        return None
    norm = sorted(int(a) % rank for a in axes)
    return norm[0] if norm == list(range(norm[0], rank)) else None


class _Match:
    """Walks one candidate pattern from its first ReduceMean."""

    def __init__(self, graph: Graph, mean: Node) -> None:
        self.g = graph
        self.mean = mean
        self.nodes: list[Node] = [mean]

    def only_reader(self, tensor: str, *, reads: int = 1) -> Node | None:
        users = self.g.consumers(tensor)
        if len(users) != 1 or self.g.is_output(tensor):
            return None
        return users[0] if sum(i == tensor for i in users[0].inputs) == reads else None

    def take(self, node: Node | None, op: Op) -> Node | None:
        if node is None or node.op is not op:
            return None
        self.nodes.append(node)
        return node

    def run(self) -> tuple[str, int, float, str, list[Node]] | None:
        """(x, axis, eps, output of the normalisation, nodes) of a decomposed LayerNorm."""
        g, x = self.g, self.mean.inputs[0]
        axis = _trailing_axis(g, self.mean)
        if axis is None:
            return None
        sub = self.take(self.only_reader(self.mean.outputs[0]), Op.SUB)
        if sub is None or sub.inputs != (x, self.mean.outputs[0]):
            return None
        d = sub.outputs[0]
        users = g.consumers(d)
        if g.is_output(d) or len(users) != 2:
            return None
        square = next((u for u in users if u.op in (Op.POW, Op.MUL)), None)
        norm = next((u for u in users if u is not square), None)
        if square is None or norm is None:
            return None
        if square.op is Op.POW:
            exponent = g.const(square.inputs[1])
            if square.inputs[0] != d or exponent is None or scalar_value(exponent) != 2:
                return None
        elif square.inputs != (d, d):
            return None
        self.nodes.append(square)
        var = self.take(self.only_reader(square.outputs[0]), Op.REDUCE_MEAN)
        if var is None or _trailing_axis(g, var) != axis:
            return None
        add = self.take(self.only_reader(var.outputs[0]), Op.ADD)
        co = const_operand(g, add) if add is not None else None
        eps = scalar_value(co[1]) if co is not None else None
        if eps is None or eps < 0:
            return None
        std = self.take(self.only_reader(add.outputs[0]), Op.SQRT)
        if std is None:
            return None
        after = self.only_reader(std.outputs[0])
        if after is not None and after.op is Op.RECIPROCAL:
            self.nodes.append(after)
            if norm.op is not Op.MUL or set(norm.inputs) != {d, after.outputs[0]}:
                return None
        elif after is not norm or norm.op is not Op.DIV or norm.inputs != (d, std.outputs[0]):
            return None
        self.nodes.append(norm)
        return x, axis, eps, norm.outputs[0], self.nodes


def _affine(
    graph: Graph, tensor: str, op: Op, norm_shape: tuple[int, ...]
) -> tuple[Node, np.ndarray] | None:
    """A Mul (gamma) or Add (beta) by a constant over the normalised axes that alone reads
    ``tensor``, and that constant broadcast to ``norm_shape``."""
    users = graph.consumers(tensor)
    if len(users) != 1 or graph.is_output(tensor) or users[0].op is not op:
        return None
    co = const_operand(graph, users[0])
    if co is None:
        return None
    c = co[1]
    lead = c.shape[: max(0, c.ndim - len(norm_shape))]
    try:
        full = np.broadcast_to(c.reshape(c.shape[len(lead) :]), norm_shape)
    except ValueError:
        return None
    if any(d != 1 for d in lead) or graph.shape(users[0].outputs[0]) != graph.shape(tensor):
        return None
    return users[0], np.ascontiguousarray(full, np.float32)


def _fuse(graph: Graph, ed: GraphEditor, mean: Node) -> bool:
    found = _Match(graph, mean).run()
    if found is None:
        return False
    x, axis, eps, y, nodes = found
    norm_shape = graph.shape(x)[axis:]
    gamma = np.ones(norm_shape, np.float32)
    beta = None
    scale = _affine(graph, y, Op.MUL, norm_shape)
    if scale is not None:
        nodes.append(scale[0])
        gamma, y = scale[1], scale[0].outputs[0]
    shift = _affine(graph, y, Op.ADD, norm_shape)
    if shift is not None:
        nodes.append(shift[0])
        beta, y = shift[1], shift[0].outputs[0]
    if any(n.name not in ed.nodes for n in nodes):
        return False
    for n in nodes:
        ed.remove(n)
    inputs = [x, ed.add_constant(f"{mean.name}/gamma", gamma)]
    if beta is not None:
        inputs.append(ed.add_constant(f"{mean.name}/beta", beta))
    rank = len(graph.shape(x))
    attrs = {"axis": axis - rank, "epsilon": float(eps)}
    ed.add(
        Node(
            ed.unique_name(f"{mean.name}/LayerNormalization"),
            Op.LAYER_NORM,
            tuple(inputs),
            (y,),
            attrs,
        )
    )
    return True


def fuse_layernorm(graph: Graph, ctx: PassContext | None) -> Graph:
    """Replace every decomposed LayerNorm (see the module docstring) by LayerNormalization."""
    ed = graph.edit()
    count = sum(_fuse(graph, ed, n) for n in graph.nodes if n.op is Op.REDUCE_MEAN)
    if not count:
        return graph
    if ctx is not None:
        ctx.log.info("fuse_layernorm: %d decomposed LayerNorm(s) -> LayerNormalization", count)
    return ed.build()


__all__ = ["fuse_layernorm"]
