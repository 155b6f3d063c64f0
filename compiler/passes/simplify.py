"""Pass 3a, simplify: constant folding and removal of no-op nodes (exact in float32).

``fold_constants`` evaluates every node whose inputs are all constant (and Shape/Size of
static tensors), merges chains of Transposes, drops Identity/Dropout, Cast to the same
type, Reshape/Flatten/Squeeze/Unsqueeze to the same shape, identity Transpose, zero Pad,
whole-tensor Slice, and merges chains of Reshapes.

>>> from aipusim.compiler.ir import Graph, Node, Op, Tensor
>>> g = Graph("g", (Node("i", Op.IDENTITY, ("x",), ("y",)), Node("r", Op.RELU, ("y",), ("z",))),
...           {k: Tensor(k, (2,)) for k in "xyz"}, {}, ("x",), ("z",))
>>> [n.op for n in fold_constants(g, None).nodes]
[<Op.RELU: 'Relu'>]
"""

from __future__ import annotations

import numpy as np

from aipusim.compiler.ir import Graph, GraphEditor, Node, Op
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.passes.util import evaluate_node, sole_consumer

#: Largest constant (elements) folding may create; beyond it the node stays (memory guard).
MAX_FOLD_ELEMENTS = 1 << 26
_NO_FOLD = frozenset({Op.NON_MAX_SUPPRESSION, Op.OTHER})
_RESHAPES = frozenset({Op.RESHAPE, Op.FLATTEN, Op.SQUEEZE, Op.UNSQUEEZE})


def folds_to_view(graph: Graph, node: Node) -> bool:
    """A Transpose of a constant: folded into a transposed view of the constant, whatever
    its size, which costs no memory (a tied LM head, ``MatMul(x, Transpose(embedding))``,
    is 1 GB of float32 in llama_1b)."""
    return (
        node.op is Op.TRANSPOSE
        and not node.domain
        and len(node.present_inputs) == 1
        and graph.is_constant(node.inputs[0])
    )


def _foldable(graph: Graph, node: Node) -> bool:
    if node.op in _NO_FOLD or node.domain:
        return False
    if node.op is Op.SHAPE:
        return graph.tensor(node.inputs[0]).is_static
    if not node.present_inputs:
        return node.op is Op.CONSTANT
    if not all(graph.is_constant(i) for i in node.present_inputs):
        return False
    if folds_to_view(graph, node):
        return True
    return all(graph.tensor(o).size <= MAX_FOLD_ELEMENTS for o in node.outputs if o)


def _fold(graph: Graph) -> Graph:
    ed: GraphEditor | None = None
    for node in graph.nodes:
        if not _foldable(graph, node):
            continue
        if folds_to_view(graph, node):
            x = graph.const(node.inputs[0])
            values = [np.transpose(x, node.attr("perm", tuple(reversed(range(x.ndim)))))]
        else:
            if node.op is Op.SHAPE:
                feeds = {node.inputs[0]: np.empty(graph.shape(node.inputs[0]), np.uint8)}
            else:
                feeds = {i: graph.const(i) for i in node.present_inputs}
            values = evaluate_node(node, feeds, graph.opset)
        ed = ed or graph.edit()
        ed.remove(node)
        for name, value in zip(node.outputs, values, strict=False):
            if name:
                declared = graph.tensor(name).dtype
                ed.set_constant(name, np.asarray(value).astype(declared.np, copy=False))
    if ed is None:
        return graph
    # a folded output can feed further folds: repeat on the new graph
    return _fold(ed.build())


def _is_noop(graph: Graph, node: Node) -> bool:
    if node.op is Op.OTHER and node.onnx_type == "Dropout":
        return len([o for o in node.outputs if o]) == 1 or not graph.consumers(node.outputs[1])
    if not node.inputs or not node.inputs[0] or not node.outputs:
        return False
    x, y = node.inputs[0], node.outputs[0]
    same_shape = graph.shape(x) == graph.shape(y)
    same_type = graph.tensor(x).dtype == graph.tensor(y).dtype
    if node.op is Op.IDENTITY:
        return True
    if node.op is Op.CAST:
        return same_type
    if node.op in _RESHAPES:
        return same_shape and same_type
    if node.op is Op.TRANSPOSE:
        perm = node.attr("perm")
        return perm is not None and tuple(perm) == tuple(range(len(perm)))
    if node.op is Op.PAD:
        pads = graph.const(node.inputs[1])
        return pads is not None and not np.any(pads) and same_shape
    if node.op is Op.SLICE:
        return same_shape and all(graph.is_constant(i) for i in node.present_inputs[1:])
    return False


def _remove_noops(graph: Graph) -> Graph:
    ed = graph.edit()
    changed = False
    for original in graph.nodes:
        node = ed.nodes[original.name]  # inputs may have been renamed by earlier removals
        if not _is_noop(graph, node):
            continue
        x, y = node.inputs[0], node.outputs[0]
        if graph.is_output(y) and (graph.is_output(x) or x in graph.inputs):
            continue  # an output that is also an input/output keeps its own node
        ed.remove(node)
        if graph.is_output(y):
            # keep the output name: rename the producer's output instead of the consumers'
            producer = graph.producer(x)
            if producer is None or len(graph.consumers(x)) != 1:
                ed.add(node.with_(op=Op.IDENTITY, inputs=(x,), outputs=(y,), attrs={}))
                continue
            ed.replace(producer, _rename_output(ed.nodes[producer.name], x, y))
            ed.replace_uses(x, y)
        else:
            ed.replace_uses(y, x)
        changed = True
    return ed.build() if changed else graph


def _rename_output(node: Node, old: str, new: str) -> Node:
    return node.with_(outputs=tuple(new if o == old else o for o in node.outputs))


def _merge_reshapes(graph: Graph) -> Graph:
    """Reshape(Reshape(x)) -> Reshape(x) when the inner result has no other reader."""
    ed = graph.edit()
    changed = False
    for original in graph.nodes:
        node = ed.nodes[original.name]
        if node.op not in _RESHAPES:
            continue
        inner = graph.producer(node.inputs[0])
        if inner is None or inner.name not in ed.nodes:
            continue
        inner = ed.nodes[inner.name]
        if inner.op not in _RESHAPES:
            continue
        if len(graph.consumers(inner.outputs[0])) != 1 or graph.is_output(inner.outputs[0]):
            continue
        shape = np.asarray(graph.shape(node.outputs[0]), np.int64)
        target = ed.add_constant(f"{node.name}/shape", shape)
        ed.remove(inner)
        ed.replace(
            node,
            Node(node.name, Op.RESHAPE, (inner.inputs[0], target), node.outputs),
        )
        changed = True
    return ed.build() if changed else graph


def _merge_transposes(graph: Graph) -> Graph:
    """Transpose(Transpose(x)) -> one Transpose (or nothing: the no-op pass drops identity)."""
    ed = graph.edit()
    changed = False
    for original in graph.nodes:
        node = ed.nodes[original.name]
        if node.op is not Op.TRANSPOSE:
            continue
        inner = graph.producer(node.inputs[0])
        if inner is None or inner.name not in ed.nodes:
            continue
        inner = ed.nodes[inner.name]
        if inner.op is not Op.TRANSPOSE or sole_consumer(graph, inner.outputs[0]) is None:
            continue
        rank = len(graph.shape(inner.inputs[0]))
        p_in = tuple(inner.attr("perm", tuple(reversed(range(rank)))))
        p_out = tuple(node.attr("perm", tuple(reversed(range(rank)))))
        ed.remove(inner)
        perm = tuple(p_in[p] for p in p_out)
        ed.replace(node, node.with_(inputs=(inner.inputs[0],), attrs={"perm": perm}))
        changed = True
    return ed.build() if changed else graph


def fold_constants(graph: Graph, ctx: PassContext | None) -> Graph:
    """Fold constant subgraphs, merge Reshape and Transpose chains, drop no-op nodes
    (float-exact)."""
    graph = _fold(graph)
    graph = _merge_transposes(graph)
    graph = _remove_noops(graph)
    return _merge_reshapes(graph)


__all__ = ["fold_constants", "folds_to_view"]
