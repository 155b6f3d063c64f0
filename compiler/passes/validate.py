"""Pass 5e, ``validate_operators``: every node must be something a unit of the AIPU runs.

All offenders are collected and named at once (node name, op type, and why), in one
`UnsupportedOperatorError`.
"""

from __future__ import annotations

from typing import Any

from aipusim.base.errors import UnsupportedOperatorError
from aipusim.compiler.ir import AIPU_OPS, DType, Graph, Node, Op
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.passes.einsum import einsum_form

_RESIZE_MODES = frozenset({"nearest", "linear"})
_NUMERIC = frozenset(DType) - {DType.STRING, DType.BOOL}


def problems(graph: Graph, node: Node) -> str | None:
    """Why ``node`` cannot run on the AIPU, or None if it can."""
    if node.op is Op.EINSUM:  # the matmul forms were rewritten by ``rewrite_einsum``
        form = einsum_form(str(node.attr("equation", "")), [graph.shape(i) for i in node.inputs])
        reason = form.reason or "the rewrite_einsum pass did not run"
        return f"equation `{node.attr('equation')}` is not a matmul form: {reason}"
    if node.op not in AIPU_OPS or node.domain not in ("", "aipusim"):
        return "no AIPU unit implements it"
    for t in (*node.present_inputs, *(o for o in node.outputs if o)):
        tensor = graph.tensor(t)
        if not tensor.is_static:
            return f"tensor `{t}` has a data-dependent shape"
        if tensor.dtype not in _NUMERIC:
            return f"tensor `{t}` has type {tensor.dtype}"
    op = node.op
    if op in (Op.CONV, Op.CONV_TRANSPOSE):
        if not graph.is_constant(node.inputs[1]):
            return "weights are not constant"
        dims = graph.tensor(node.inputs[0]).rank - 2
        if dims not in (1, 2):
            return f"only 1-D and 2-D convolutions are supported, not {dims}-D"
    if op is Op.GEMM and not any(graph.is_constant(i) for i in node.inputs[:2]):
        return "neither operand is a constant weight"
    if op is Op.MATMUL and graph.is_constant(node.inputs[0]) > graph.is_constant(node.inputs[1]):
        return "the constant is the first operand (the MVM's weights are the second)"
    if op is Op.LAYER_NORM and not all(graph.is_constant(i) for i in node.present_inputs[1:]):
        return "scale and bias are not constants"
    if op is Op.GATHER and not graph.is_constant(node.inputs[1]):
        return (
            "its indices are computed at run time, and tasklists address memory statically "
            "(an embedding lookup of a graph input runs on the host: see the graph cleaner)"
        )
    if op in (Op.EXPAND, Op.TILE) and not graph.is_constant(node.inputs[1]):
        return "the target shape / repeats are not constant"
    if op in (Op.RESIZE, Op.UPSAMPLE) and str(node.attr("mode", "nearest")) not in _RESIZE_MODES:
        return f"mode {node.attr('mode')!r} is not one of nearest, linear"
    if op is Op.PAD and str(node.attr("mode", "constant")) != "constant":
        return f"mode {node.attr('mode')!r} is not constant"
    if op is Op.PAD and len(node.inputs) > 1 and not graph.is_constant(node.inputs[1]):
        return "pads are not constant"
    return None


def validate_operators(ir: Any, ctx: PassContext | None) -> Any:
    """Raise `UnsupportedOperatorError` naming every node no unit can run; else return
    the IR (a `Graph`, or a quantized graph holding one) unchanged."""
    graph: Graph = getattr(ir, "graph", ir)
    bad = [(n, why) for n in graph.nodes if (why := problems(graph, n)) is not None]
    if bad:
        listing = "; ".join(f"`{n.name}` ({n.op_type}: {why})" for n, why in bad)
        plural = "s" if len(bad) > 1 else ""
        raise UnsupportedOperatorError(
            f"{len(bad)} operator{plural} of graph `{graph.name}` cannot run on the AIPU: {listing}"
        )
    return ir


__all__ = ["problems", "validate_operators"]
