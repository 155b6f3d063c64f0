"""Small graph queries and the single-node evaluator the passes share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx

from aipusim.compiler.export import node_to_onnx
from aipusim.compiler.ir import Graph, Node


def evaluate_node(node: Node, inputs: Mapping[str, np.ndarray], opset: int) -> list[np.ndarray]:
    """Run one node with the ONNX reference runtime (constant folding)."""
    from onnx.reference import ReferenceEvaluator

    proto: onnx.NodeProto = node_to_onnx(node, list(node.inputs), list(node.outputs), node.name)
    ev = ReferenceEvaluator(proto, opsets={"": opset})
    feeds = {k: np.asarray(v) for k, v in inputs.items() if k}
    return [np.asarray(v) for v in ev.run(None, feeds)]


def sole_consumer(graph: Graph, tensor: str) -> Node | None:
    """The only node reading ``tensor``, if exactly one does and it is no graph output."""
    users = graph.consumers(tensor)
    if len(users) != 1 or graph.is_output(tensor):
        return None
    if sum(1 for i in users[0].inputs if i == tensor) != 1:
        return None
    return users[0]


def const_operand(graph: Graph, node: Node) -> tuple[int, np.ndarray] | None:
    """For a binary node with exactly one constant operand: (its index, its array)."""
    ins = node.inputs
    if len(ins) != 2:
        return None
    flags = [graph.is_constant(i) for i in ins]
    if flags.count(True) != 1:
        return None
    idx = flags.index(True)
    arr = graph.const(ins[idx])
    assert arr is not None
    return idx, arr


def scalar_value(array: np.ndarray) -> float | None:
    """The value of a one-element array, else None."""
    return float(array.reshape(-1)[0]) if array.size == 1 else None


def channel_vector(array: np.ndarray, out_shape: Sequence[int], axis: int = 1) -> np.ndarray | None:
    """``array`` as a per-channel vector along ``axis`` of a tensor of ``out_shape`` if it
    broadcasts that way (scalar or [C,1,1] / [1,C,1,1] ...), else None."""
    rank = len(out_shape)
    if array.ndim > rank:
        return None
    shape = (1,) * (rank - array.ndim) + array.shape
    channels = out_shape[axis]
    if any(d != 1 for i, d in enumerate(shape) if i != axis):
        return None
    if shape[axis] not in (1, channels):
        return None
    return np.broadcast_to(array.reshape(-1), (channels,)).astype(np.float32)


__all__ = ["channel_vector", "const_operand", "evaluate_node", "scalar_value", "sole_consumer"]
