"""Pass 3c, ``apply_arithmetic_simplification`` (fast math: may change float rounding).

Rewrites, repeated until nothing changes:
- Sub by a constant -> Add of its negation; Div by a constant -> Mul by its reciprocal;
- Mul by 1 and Add of 0 (that do not broadcast) disappear;
- chains Mul(Mul(x, a), b) and Add(Add(x, a), b) merge into one op;
- a per-channel Mul/Add after a Conv goes into its weights/bias, a per-channel Mul before a
  (groups=1) Conv goes into its weights (zero padding stays zero);
- x * Sigmoid(x) -> SiLU(x), x * HardSigmoid(x; 1/6, 1/2) -> HardSwish(x) (one LUT op);
- MatMul by constant 2-D weights followed by an Add of a constant per-column bias (how
  torch.onnx exports ``nn.Linear`` on a sequence) -> one Gemm with that bias, between
  Reshapes to 2-D and back: the bias joins the int32 accumulators instead of costing a
  separate int8 Add.
"""

from __future__ import annotations

import numpy as np

from aipusim.compiler.ir import Graph, GraphEditor, Node, Op
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.passes.util import channel_vector, const_operand, sole_consumer

_MAX_ROUNDS = 8


def _shape_of_broadcast(graph: Graph, x: str, c: np.ndarray) -> tuple[int, ...] | None:
    try:
        return tuple(np.broadcast_shapes(graph.shape(x), c.shape))
    except ValueError:
        return None


def _sub_div_to_add_mul(graph: Graph, ed: GraphEditor, node: Node) -> bool:
    if node.op not in (Op.SUB, Op.DIV):
        return False
    co = const_operand(graph, node)
    if co is None or co[0] != 1 or co[1].dtype.kind != "f":
        return False
    c = co[1]
    if node.op is Op.DIV:
        if np.any(c == 0):
            return False
        new_c, op = (1.0 / c.astype(np.float64)).astype(c.dtype), Op.MUL
    else:
        new_c, op = -c, Op.ADD
    name = ed.add_constant(f"{node.inputs[1]}_{op.value.lower()}", new_c)
    ed.replace(node, node.with_(op=op, inputs=(node.inputs[0], name)))
    return True


def _neutral(graph: Graph, ed: GraphEditor, node: Node) -> bool:
    if node.op not in (Op.MUL, Op.ADD):
        return False
    co = const_operand(graph, node)
    if co is None:
        return False
    idx, c = co
    x = node.inputs[1 - idx]
    neutral = 1 if node.op is Op.MUL else 0
    out = node.outputs[0]
    if not np.all(c == neutral) or graph.shape(x) != graph.shape(out):
        return False
    if graph.tensor(x).dtype != graph.tensor(out).dtype:
        return False
    if graph.is_output(out):
        # keep the output's name: the producer of x writes it directly
        producer = graph.producer(x)
        if producer is None or sole_consumer(graph, x) is not node:
            return False
        producer = ed.nodes.get(producer.name)
        if producer is None:
            return False
        ed.remove(node)
        outs = tuple(out if o == x else o for o in producer.outputs)
        ed.replace(producer, producer.with_(outputs=outs))
        return True
    ed.remove(node)
    ed.replace_uses(out, x)
    return True


def _merge_chain(graph: Graph, ed: GraphEditor, node: Node) -> bool:
    if node.op not in (Op.MUL, Op.ADD):
        return False
    co = const_operand(graph, node)
    if co is None:
        return False
    idx, b = co
    inner = graph.producer(node.inputs[1 - idx])
    if inner is None or inner.op is not node.op or inner.name not in ed.nodes:
        return False
    if sole_consumer(graph, inner.outputs[0]) is not node:
        return False
    ico = const_operand(graph, inner)
    if ico is None:
        return False
    jdx, a = ico
    merged = a * b if node.op is Op.MUL else a + b
    x = inner.inputs[1 - jdx]
    if _shape_of_broadcast(graph, x, merged) != graph.shape(node.outputs[0]):
        return False
    name = ed.add_constant(f"{node.name}/merged", merged.astype(a.dtype))
    ed.remove(inner)
    ed.replace(node, node.with_(inputs=(x, name)))
    return True


def _into_conv_after(graph: Graph, ed: GraphEditor, node: Node) -> bool:
    if node.op not in (Op.MUL, Op.ADD):
        return False
    co = const_operand(graph, node)
    if co is None:
        return False
    idx, c = co
    conv = graph.producer(node.inputs[1 - idx])
    if conv is None or conv.op is not Op.CONV or conv.name not in ed.nodes:
        return False
    if sole_consumer(graph, conv.outputs[0]) is not node:
        return False
    out_shape = graph.shape(conv.outputs[0])
    vec = channel_vector(c, out_shape)
    if vec is None or graph.shape(node.outputs[0]) != out_shape:
        return False
    conv = ed.nodes[conv.name]
    w = ed.constants.get(conv.inputs[1])
    if w is None:
        return False
    has_bias = len(conv.inputs) > 2 and bool(conv.inputs[2])
    bias = ed.constants.get(conv.inputs[2]) if has_bias else np.zeros(out_shape[1], np.float32)
    if bias is None:
        return False
    if node.op is Op.MUL:
        w = w * vec.reshape((-1,) + (1,) * (w.ndim - 1)).astype(w.dtype)
        bias = bias * vec
    else:
        bias = bias + vec
    w_name = ed.add_constant(f"{conv.inputs[1]}_s", w.astype(np.float32))
    b_name = ed.add_constant(f"{conv.name}_bias_s", np.asarray(bias, np.float32))
    ed.remove(node)
    ed.replace(conv, conv.with_(inputs=(conv.inputs[0], w_name, b_name), outputs=node.outputs))
    return True


def _into_conv_before(graph: Graph, ed: GraphEditor, node: Node) -> bool:
    if node.op is not Op.MUL:
        return False
    co = const_operand(graph, node)
    if co is None:
        return False
    idx, c = co
    x = node.inputs[1 - idx]
    conv = sole_consumer(graph, node.outputs[0])
    if conv is None or conv.op is not Op.CONV or conv.inputs[0] != node.outputs[0]:
        return False
    if int(conv.attr("group", 1)) != 1 or conv.name not in ed.nodes:
        return False
    vec = channel_vector(c, graph.shape(x))
    if vec is None or graph.shape(x) != graph.shape(node.outputs[0]):
        return False
    conv = ed.nodes[conv.name]
    w = ed.constants.get(conv.inputs[1])
    if w is None:
        return False
    w = w * vec.reshape((1, -1) + (1,) * (w.ndim - 2)).astype(w.dtype)
    w_name = ed.add_constant(f"{conv.inputs[1]}_in", w.astype(np.float32))
    ed.remove(node)
    ed.replace(conv, conv.with_(inputs=(x, w_name, *conv.inputs[2:])))
    return True


def _fuse_gated(graph: Graph, ed: GraphEditor, node: Node) -> bool:
    """x * Sigmoid(x) -> SiLU(x); x * HardSigmoid(x, 1/6, 0.5) -> HardSwish(x)."""
    if node.op is not Op.MUL or len(node.inputs) != 2:
        return False
    for gate_idx in (0, 1):
        gate = graph.producer(node.inputs[gate_idx])
        x = node.inputs[1 - gate_idx]
        if gate is None or gate.inputs[0] != x or gate.name not in ed.nodes:
            continue
        if sole_consumer(graph, gate.outputs[0]) is not node:
            continue
        if gate.op is Op.SIGMOID:
            fused = Op.SILU
        elif (
            gate.op is Op.HARD_SIGMOID
            and np.isclose(float(gate.attr("alpha", 0.2)), 1 / 6)
            and np.isclose(float(gate.attr("beta", 0.5)), 0.5)
        ):
            fused = Op.HARD_SWISH
        else:
            continue
        ed.remove(gate)
        ed.replace(node, Node(node.name, fused, (x,), node.outputs))
        return True
    return False


def _bias_into_matmul(graph: Graph, ed: GraphEditor, node: Node) -> bool:
    if node.op is not Op.ADD:
        return False
    co = const_operand(graph, node)
    if co is None:
        return False
    idx, c = co
    mm = graph.producer(node.inputs[1 - idx])
    if mm is None or mm.op is not Op.MATMUL or mm.name not in ed.nodes:
        return False
    w = graph.const(mm.inputs[1])
    if w is None or w.ndim != 2 or graph.is_constant(mm.inputs[0]):
        return False
    if sole_consumer(graph, mm.outputs[0]) is not node:
        return False
    out_shape = graph.shape(node.outputs[0])
    n = w.shape[1]
    if out_shape != graph.shape(mm.outputs[0]) or c.size != n or c.shape[-1] != n:
        return False
    x, k = mm.inputs[0], w.shape[0]
    rows = int(np.prod(out_shape[:-1], dtype=np.int64))
    bias = ed.add_constant(f"{mm.name}/bias", np.asarray(c, np.float32).reshape(n))
    ed.remove(node)
    if len(out_shape) == 2:
        ed.replace(mm, Node(mm.name, Op.GEMM, (x, mm.inputs[1], bias), node.outputs))
        return True
    flat = ed.new_tensor(f"{mm.name}/x2d", (rows, k))
    shape2 = ed.add_constant(f"{mm.name}/shape2d", np.array([rows, k], np.int64))
    ed.add(Node(ed.unique_name(f"{mm.name}/to_2d"), Op.RESHAPE, (x, shape2), (flat,)))
    y2 = ed.new_tensor(f"{mm.name}/y2d", (rows, n))
    ed.replace(mm, Node(mm.name, Op.GEMM, (flat, mm.inputs[1], bias), (y2,)))
    shape_out = ed.add_constant(f"{mm.name}/shape", np.array(out_shape, np.int64))
    ed.add(Node(ed.unique_name(f"{mm.name}/from_2d"), Op.RESHAPE, (y2, shape_out), node.outputs))
    return True


_RULES = (
    _sub_div_to_add_mul,
    _neutral,
    _merge_chain,
    _into_conv_after,
    _into_conv_before,
    _fuse_gated,
    _bias_into_matmul,
)


def arithmetic_simplification(graph: Graph, ctx: PassContext | None) -> Graph:
    """Apply the fast-math rewrites above until a fixed point (at most a few rounds)."""
    for _ in range(_MAX_ROUNDS):
        ed = graph.edit()
        touched: set[str] = set()
        for node in graph.nodes:
            if node.name in touched or node.name not in ed.nodes:
                continue
            # one rewrite per node and neighbourhood per round keeps the edits independent
            before = set(ed.nodes)
            for rule in _RULES:
                if rule(graph, ed, ed.nodes[node.name]):
                    touched |= before ^ set(ed.nodes)
                    touched |= _neighbours(graph, node)
                    break
        if not touched:
            return graph
        graph = ed.build()
    return graph


def _neighbours(graph: Graph, node: Node) -> set[str]:
    names = {node.name}
    for i in node.present_inputs:
        p = graph.producer(i)
        if p is not None:
            names.add(p.name)
            names.update(c.name for c in graph.consumers(i))
    for o in node.outputs:
        names.update(c.name for c in graph.consumers(o))
    return names


__all__ = ["arithmetic_simplification"]
