"""Pass ``decompose_prelu``: PRelu -> operations the AIPU runs in int8.

``PRelu(x, slope) = x`` where ``x >= 0`` and ``slope * x`` elsewhere, with one slope per
channel in face and re-identification networks (Keras and PyTorch exports). The rule:

- all slopes equal (a scalar, or per-channel slopes that agree): ``LeakyRelu(x, alpha)``, one
  256-entry table on the DPU, exact in int8;
- per-channel slopes: ``Relu(x) + Min(x, 0) * slope``. The positive part keeps x's grid (the
  Relu rides on the output stream of the layer before it); the negative part is the DPU's
  minimum against zero, then a multiply by the per-channel slopes whose sum with the
  positive part is one DPU pass (`fuse_dpu_chains`). Every piece has an int8 kernel in the
  reference and in the functional simulator, so the result is bit-exact between them; the
  cost model charges each DPU pass as it charges those ops.

A PRelu whose slope is not a constant stays as it is: quantization names it.
"""

from __future__ import annotations

import numpy as np

from aipusim.compiler.ir import Graph, GraphEditor, Node, Op
from aipusim.compiler.passes.context import PassContext


def decompose_prelu(graph: Graph, ctx: PassContext | None) -> Graph:
    """Replace every PRelu with a constant slope (module doc)."""
    ed: GraphEditor | None = None
    leaky = split = 0
    for node in graph.nodes:
        if node.op is not Op.PRELU or len(node.inputs) < 2:
            continue
        x, slope_name = node.inputs[0], node.inputs[1]
        slope = graph.const(slope_name)
        if slope is None:
            continue
        ed = ed or graph.edit()
        out = node.outputs[0]
        values = np.asarray(slope, dtype=np.float32)
        if values.size and np.all(values == values.reshape(-1)[0]):
            alpha = float(values.reshape(-1)[0])
            ed.replace(node, Node(node.name, Op.LEAKY_RELU, (x,), (out,), {"alpha": alpha}))
            leaky += 1
            continue
        shape = graph.tensor(out).shape
        positive = ed.new_tensor(f"{out}/positive", shape)
        negative = ed.new_tensor(f"{out}/negative", shape)
        scaled = ed.new_tensor(f"{out}/negative_scaled", shape)
        zero = ed.add_constant(f"{node.name}/zero", np.zeros((), np.float32))
        ed.replace(node, Node(f"{node.name}/Relu", Op.RELU, (x,), (positive,)))
        ed.add(Node(ed.unique_name(f"{node.name}/Min"), Op.MIN, (x, zero), (negative,)))
        ed.add(Node(ed.unique_name(f"{node.name}/Mul"), Op.MUL, (negative, slope_name), (scaled,)))
        ed.add(Node(ed.unique_name(f"{node.name}/Add"), Op.ADD, (positive, scaled), (out,)))
        split += 1
    if ed is None:
        return graph
    if ctx is not None:
        ctx.log.info(
            "decompose_prelu: %d PRelu with one slope -> LeakyRelu, %d per-channel -> "
            "Relu + Min * slope",
            leaky,
            split,
        )
    return ed.build()


__all__ = ["decompose_prelu"]
