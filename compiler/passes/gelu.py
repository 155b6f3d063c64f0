"""Pass 3c, ``fuse_gelu``: GELU spelled in element-wise ops -> one Gelu node (a LUT).

Exporters write GELU as 0.5·x·(1 + erf(x/√2)) or with its tanh approximation
0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), in many orders (Div by √2 or Mul by 1/√2,
Pow 3 or x·x·x, the 0.5 first or last). Rather than match each spelling, the pass starts at
every Erf and Tanh, takes the element-wise region between a tensor x and a Mul after it
(nodes reading only x, region tensors and scalar constants; nothing inside read from
outside) and evaluates it on a grid of x: if it computes GELU (either form, within float32
rounding) the region becomes ``Gelu(x)`` with ``approximate`` ``none`` or ``tanh``. Quantized
node by node the chain would round five times in int8; as one op it is one 256-entry table.
"""

from __future__ import annotations

import numpy as np

from aipusim.compiler.ir import Graph, GraphEditor, Node, Op
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.quant.elementwise import gelu

#: Ops a GELU region may contain (with scalar constant operands only).
_POINTWISE = frozenset({Op.MUL, Op.DIV, Op.ADD, Op.SUB, Op.POW, Op.ERF, Op.TANH})
#: Grid the region is checked on, and the largest deviation from GELU accepted there.
_GRID = np.linspace(-8.0, 8.0, 321, dtype=np.float32)
_TOLERANCE = 2e-5
#: How far up from the Erf/Tanh the source x is looked for.
_MAX_DEPTH = 6


def _pointwise(graph: Graph, node: Node) -> bool:
    if node.op not in _POINTWISE or len(node.outputs) != 1:
        return False
    consts = [graph.const(i) for i in node.present_inputs if graph.is_constant(i)]
    return all(c is not None and c.size == 1 for c in consts) and len(consts) < len(node.inputs)


def _candidates(graph: Graph, seed: Node) -> list[str]:
    """Tensors above ``seed`` along element-wise producers, nearest first."""
    out: list[str] = []
    frontier = [i for i in seed.present_inputs if not graph.is_constant(i)]
    for _ in range(_MAX_DEPTH):
        nxt = []
        for t in frontier:
            if t not in out:
                out.append(t)
            p = graph.producer(t)
            if p is not None and _pointwise(graph, p):
                nxt += [i for i in p.present_inputs if not graph.is_constant(i)]
        frontier = nxt
    return out


def _forward(graph: Graph, x: str) -> list[Node]:
    """Element-wise nodes computable from ``x`` and scalar constants, in graph order."""
    known = {x}
    region = []
    for node in graph.nodes:
        ins = [i for i in node.present_inputs if not graph.is_constant(i)]
        if ins and all(i in known for i in ins) and _pointwise(graph, node):
            region.append(node)
            known.add(node.outputs[0])
    return region


def _ancestors(nodes: list[Node], end: Node) -> list[Node]:
    made = {n.outputs[0]: n for n in nodes}
    keep, todo = {end.name}, [end]
    while todo:
        for i in todo.pop().present_inputs:
            p = made.get(i)
            if p is not None and p.name not in keep:
                keep.add(p.name)
                todo.append(p)
    return [n for n in nodes if n.name in keep]


def _evaluate(graph: Graph, x: str, region: list[Node]) -> np.ndarray | None:
    # Imported here: the float executor loads numba's kernels, which a compile without a
    # GELU candidate should not pay for.
    from aipusim.compiler.quant.float_exec import run_node

    values = {x: _GRID}
    with np.errstate(all="ignore"):
        for node in region:
            args = [values[i] if i in values else graph.const(i) for i in node.present_inputs]
            values[node.outputs[0]] = np.asarray(run_node(node, graph, args)[0]).reshape(-1)
    out = values[region[-1].outputs[0]]
    return out if out.shape == _GRID.shape else None


def _which_gelu(values: np.ndarray) -> str | None:
    for approximate in ("none", "tanh"):
        ref = gelu(_GRID.astype(np.float64), approximate)
        if np.all(np.abs(values - ref) <= _TOLERANCE * (1.0 + np.abs(ref))):
            return approximate
    return None


def _match(graph: Graph, seed: Node) -> tuple[str, list[Node], str] | None:
    """(x, region, approximate) of the GELU around ``seed``, if there is one."""
    for x in _candidates(graph, seed):
        forward = _forward(graph, x)
        for end in (n for n in forward if n.op is Op.MUL):
            region = _ancestors(forward, end)
            if seed not in region:
                continue
            inside = {n.name for n in region}
            leaks = any(
                graph.is_output(n.outputs[0])
                or any(c.name not in inside for c in graph.consumers(n.outputs[0]))
                for n in region
                if n is not end
            )
            if leaks:
                continue
            values = _evaluate(graph, x, region)
            approximate = _which_gelu(values) if values is not None else None
            if approximate is not None:
                return x, region, approximate
    return None


def fuse_gelu(graph: Graph, ctx: PassContext | None) -> Graph:
    """Replace every element-wise GELU (see the module docstring) by one Gelu node."""
    ed: GraphEditor | None = None
    count = 0
    for seed in graph.nodes:
        if seed.op not in (Op.ERF, Op.TANH):
            continue
        if ed is not None and seed.name not in ed.nodes:
            continue
        found = _match(graph, seed)
        if found is None:
            continue
        x, region, approximate = found
        ed = ed or graph.edit()
        if any(n.name not in ed.nodes for n in region):
            continue
        for n in region:
            ed.remove(n)
        end = region[-1]
        attrs = {"approximate": approximate}
        ed.add(Node(ed.unique_name(f"{seed.name}/Gelu"), Op.GELU, (x,), end.outputs, attrs))
        count += 1
    if ed is None or not count:
        return graph
    if ctx is not None:
        ctx.log.info("fuse_gelu: %d element-wise GELU(s) -> Gelu", count)
    return ed.build()


__all__ = ["fuse_gelu"]
