"""Pass 2, graph cleaner: cut host pre- and post-processing off the graph the AIPU runs.

The graph is split into three: ``preprocess`` (host, before), the core (AIPU) and
``postprocess`` (host, after). Run in that order they give the full model's outputs
(`run_split`). What moves:

- post-processing, walking back from the outputs: nodes whose every consumer is already
  host-side and which are host-suited: ops no AIPU unit runs (NMS, TopK, Gather, ...),
  Softmax/Sigmoid/Exp, layout ops (Reshape, Transpose, Concat, Split, Slice, ...), arithmetic
  on host-side tensors (box decoding: stride/anchor Mul/Add/Sub; arithmetic on AIPU tensors
  only, such as a final bias or residual Add, stays), and a small-weight conv right after a
  Softmax (YOLOv8's DFL);
- with ``graph_cleaner_condition`` + ``graph_cleaner_node``: additionally everything after the
  node of that type with the largest weight tensor (or first weight dim), if that value is at
  least ``graph_cleaner_threshold``;
- pre-processing (when ``graph_cleaner_split_pre_post_processing``), walking forward from the
  inputs: Cast, arithmetic with a constant operand (``/255``, ``-mean``, ``/std``), embedding
  lookups (Gather of a constant table by the input's indices: the AIPU cannot address memory
  by data), and, when
  ``remove_io_padding_and_layout_transform`` or ``remove_layout_transform_from_preamble`` is
  on, the NHWC->NCHW Transpose and a channel-only input Pad (I/O padding); the latter also
  moves preamble Reshapes.

The host graphs are written as ``preprocess.onnx`` / ``postprocess.onnx``; the dumps named by
``graph_cleaner_dump_core_onnx`` / ``graph_cleaner_dump_full_opt_onnx`` too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from aipusim.base.errors import OnnxImportError
from aipusim.compiler.export import run_graph, to_onnx
from aipusim.compiler.ir import (
    AIPU_OPS,
    BINARY_OPS,
    DATA_DEPENDENT_OPS,
    INTERNAL_DOMAIN,
    LAYOUT_OPS,
    Graph,
    Node,
    Op,
    prune_graph,
)
from aipusim.compiler.passes.context import PassContext

#: AIPU-capable ops that still belong on the host when they end the graph.
_TAIL_OPS = (
    LAYOUT_OPS
    | BINARY_OPS
    | frozenset(
        {
            Op.SOFTMAX,
            Op.SIGMOID,
            Op.EXP,
            Op.LOG,
            Op.SQRT,
            Op.NEG,
            Op.RECIPROCAL,
            Op.REDUCE_MAX,
            Op.REDUCE_SUM,
        }
    )
)
_PRE_ARITH = frozenset({Op.MUL, Op.DIV, Op.SUB, Op.ADD})
#: A conv after a Softmax with at most this many weights is a fixed decoding kernel (DFL).
_DFL_MAX_WEIGHTS = 1024
_NCHW_FROM_NHWC = (0, 3, 1, 2)


def _nonconst_inputs(graph: Graph, node: Node) -> list[str]:
    return [i for i in node.present_inputs if not graph.is_constant(i)]


def _host_suited(graph: Graph, node: Node) -> bool:
    # (the compiler's own ops, such as a fused Gelu, run on the AIPU: the host graphs are
    # plain ONNX)
    if node.op not in AIPU_OPS or node.domain not in ("", INTERNAL_DOMAIN):
        return True
    if node.op in _TAIL_OPS:
        return True
    if node.op in (Op.CONV, Op.MATMUL, Op.GEMM):
        w = graph.const(node.inputs[1])
        src = graph.producer(node.inputs[0])
        return (
            w is not None
            and w.size <= _DFL_MAX_WEIGHTS
            and src is not None
            and (src.op is Op.SOFTMAX or (src.op in LAYOUT_OPS and _after_softmax(graph, src)))
        )
    return False


def _after_softmax(graph: Graph, node: Node) -> bool:
    """True if a chain of layout ops leads back to a Softmax."""
    while node.op in LAYOUT_OPS:
        p = graph.producer(node.inputs[0])
        if p is None:
            return False
        node = p
    return node.op is Op.SOFTMAX


def postprocess_nodes(graph: Graph) -> set[str]:
    """Names of the nodes of the host-suited tail (see module doc)."""
    host: set[str] = set()
    for node in reversed(graph.nodes):
        if not _host_suited(graph, node):
            continue
        outs = [o for o in node.outputs if o]
        if all(c.name in host for o in outs for c in graph.consumers(o)):
            host.add(node.name)
    # Arithmetic does not start a tail: applied to AIPU tensors only (a bias Add of a dense
    # layer, a residual Add at the output) it stays on the AIPU. Moving such a node back
    # keeps the split valid because none of its inputs comes from the host.
    for node in graph.nodes:
        if node.name not in host or node.op not in BINARY_OPS:
            continue
        srcs = [graph.producer(i) for i in _nonconst_inputs(graph, node)]
        if not any(p is not None and p.name in host for p in srcs):
            host.discard(node.name)
    return host


def _descendants(graph: Graph, node: Node) -> set[str]:
    seen: set[str] = set()
    frontier = [o for o in node.outputs if o]
    while frontier:
        t = frontier.pop()
        for c in graph.consumers(t):
            if c.name not in seen:
                seen.add(c.name)
                frontier.extend(o for o in c.outputs if o)
    return seen


def condition_split_nodes(graph: Graph, condition: str, node_type: str, threshold: int) -> set[str]:
    """Nodes after the split point chosen by ``graph_cleaner_condition`` (empty if no node
    of ``node_type`` reaches ``threshold``)."""
    best: tuple[int, int, Node] | None = None
    for i, node in enumerate(graph.nodes):
        if node.op_type != node_type:
            continue
        weights = [graph.const(x) for x in node.present_inputs if graph.is_constant(x)]
        weights = [w for w in weights if w is not None and w.ndim >= 1]
        if not weights:
            continue
        if condition == "maximum_weight_tensor_size":
            metric = max(int(w.size) for w in weights)
        else:
            metric = max(int(w.shape[0]) for w in weights)
        # ties go to the later node: the split is after the last of the largest
        if metric >= threshold and (best is None or (metric, i) >= best[:2]):
            best = (metric, i, node)
    if best is None:
        return set()
    return _descendants(graph, best[2])


def _is_channel_padding(graph: Graph, node: Node) -> bool:
    """A constant Pad of the channel axis only (NCHW axis 1 or NHWC last axis): the I/O
    padding the host pipeline does; spatial padding belongs to the network."""
    pads = graph.const(node.inputs[1]) if len(node.inputs) > 1 else None
    if pads is None or str(node.attr("mode", "constant")) != "constant":
        return False
    rank = len(graph.shape(node.inputs[0]))
    if len(node.inputs) > 3 and node.inputs[3]:
        return False  # explicit axes: keep it simple and leave it in the network
    touched = {i % rank for i in np.flatnonzero(pads.reshape(-1))}
    return bool(touched) and touched <= ({1} if rank != 4 else {1, 3}) and len(touched) == 1


def preprocess_nodes(graph: Graph, *, move_layout: bool, move_reshape: bool) -> set[str]:
    """Names of the nodes of the host-suited preamble (see module doc)."""
    available = set(graph.inputs)
    pre: set[str] = set()
    for node in graph.nodes:
        ins = _nonconst_inputs(graph, node)
        if not ins or not all(i in available for i in ins):
            continue
        if any(graph.is_output(o) for o in node.outputs):
            continue
        op = node.op
        ok = op in (Op.CAST, Op.IDENTITY) or (op in _PRE_ARITH and len(ins) == 1)
        if op is Op.TRANSPOSE and move_layout:
            ok = tuple(node.attr("perm", ())) == _NCHW_FROM_NHWC
        if op is Op.PAD and move_layout:
            ok = _is_channel_padding(graph, node)
        if op is Op.RESHAPE and move_reshape:
            ok = True
        if op is Op.GATHER and graph.is_constant(node.inputs[0]):
            # an embedding lookup by the input's indices: tasklists address memory
            # statically, so the host does it (and sends the embeddings)
            ok = True
        if ok:
            pre.add(node.name)
            available.update(o for o in node.outputs if o)
    return pre


def _subgraph(
    graph: Graph, name: str, nodes: Iterable[Node], inputs: list[str], outputs: list[str]
) -> Graph:
    sub = Graph(
        name=name,
        nodes=tuple(nodes),
        tensors=graph.tensors,
        constants=graph.constants,
        inputs=tuple(dict.fromkeys(inputs)),
        outputs=tuple(dict.fromkeys(outputs)),
        opset=graph.opset,
    )
    return prune_graph(sub)


def split_graph(
    graph: Graph, pre: set[str], post: set[str]
) -> tuple[Graph | None, Graph, Graph | None]:
    """(preprocess, core, postprocess) graphs for the given host node sets."""
    assert not pre & post, "a node cannot be both pre- and post-processing"
    core_nodes = [n for n in graph.nodes if n.name not in pre and n.name not in post]
    pre_nodes = [n for n in graph.nodes if n.name in pre]
    post_nodes = [n for n in graph.nodes if n.name in post]

    def produced(nodes: list[Node]) -> set[str]:
        return {o for n in nodes for o in n.outputs if o}

    def needed(nodes: list[Node]) -> list[str]:
        own = produced(nodes)
        return [
            i for n in nodes for i in n.present_inputs if i not in own and not graph.is_constant(i)
        ]

    core_made, pre_made = produced(core_nodes), produced(pre_nodes)
    post_in = needed(post_nodes)
    core_needed = needed(core_nodes)
    core_in = [i for i in graph.inputs if i in core_needed] + core_needed
    core_out = [o for o in graph.outputs if o in core_made] + [i for i in post_in if i in core_made]
    core = _subgraph(graph, graph.name, core_nodes, core_in, core_out)
    pre_graph = post_graph = None
    if pre_nodes:
        pre_out = [i for i in core_in + post_in if i in pre_made]
        pre_graph = _subgraph(
            graph, f"{graph.name}_preprocess", pre_nodes, needed(pre_nodes), pre_out
        )
    if post_nodes:
        post_out = [o for o in graph.outputs if o in produced(post_nodes)]
        post_graph = _subgraph(graph, f"{graph.name}_postprocess", post_nodes, post_in, post_out)
    return pre_graph, core, post_graph


def run_split(
    parts: Iterable[Graph | None], outputs: Iterable[str], feeds: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """Run preprocess, core, postprocess in turn (float, ONNX reference) and collect the
    full model's ``outputs``: the check that a split reproduces the model."""
    env = dict(feeds)
    for part in parts:
        if part is not None:
            env.update(run_graph(part, {i: env[i] for i in part.inputs}))
    return {o: env[o] for o in outputs}


def _check_core(core: Graph, reason: str) -> None:
    stuck = [n for n in core.nodes if n.op in DATA_DEPENDENT_OPS]
    if stuck:
        names = ", ".join(f"`{n.name}` ({n.op_type})" for n in stuck)
        raise OnnxImportError(
            f"data-dependent node{'s' if len(stuck) > 1 else ''} {names} of graph `{core.name}` "
            f"must run on the host, but {reason}"
        )


def graph_cleaner(graph: Graph, ctx: PassContext) -> Graph:
    """Split host pre/post-processing off ``graph``; returns the core graph and leaves the
    host graphs in ``ctx.host_graphs`` and their ONNX files in ``ctx.files``."""
    cfg = ctx.config
    if not cfg.run_graph_cleaner:
        _check_core(graph, "run_graph_cleaner is off")
        return graph
    post = postprocess_nodes(graph)
    if cfg.graph_cleaner_condition is not None:
        # the config only accepts condition and node together
        assert cfg.graph_cleaner_node is not None, "graph_cleaner_condition without a node"
        post |= condition_split_nodes(
            graph,
            str(cfg.graph_cleaner_condition),
            str(cfg.graph_cleaner_node),
            int(cfg.graph_cleaner_threshold),
        )
    pre: set[str] = set()
    if cfg.graph_cleaner_split_pre_post_processing:
        move_layout = bool(
            cfg.remove_io_padding_and_layout_transform or cfg.remove_layout_transform_from_preamble
        )
        pre = preprocess_nodes(
            graph,
            move_layout=move_layout,
            move_reshape=bool(cfg.remove_layout_transform_from_preamble),
        )
        pre -= post
    if len(pre) + len(post) >= len(graph.nodes):
        ctx.log.info("graph cleaner: every node is host-suited; keeping the graph whole")
        pre, post = set(), set()
    pre_g, core, post_g = split_graph(graph, pre, post)
    _check_core(core, "the graph cleaner could not move it off the AIPU graph")
    for key, part in (("preprocess", pre_g), ("postprocess", post_g)):
        if part is not None:
            ctx.host_graphs[key] = part
            ctx.files[f"{key}.onnx"] = part  # (the driver saves it: `export.save_onnx`)
    if cfg.graph_cleaner_dump_core_onnx:
        ctx.files[str(cfg.graph_cleaner_dump_core_onnx)] = to_onnx(core)
    if cfg.graph_cleaner_dump_full_opt_onnx:
        ctx.files[str(cfg.graph_cleaner_dump_full_opt_onnx)] = to_onnx(graph)
    ctx.results["graph_cleaner"] = {
        "preprocess_nodes": sorted(pre),
        "postprocess_nodes": sorted(post),
        "core_inputs": list(core.inputs),
        "core_outputs": list(core.outputs),
    }
    ctx.log.info(
        "graph cleaner: %d preprocess and %d postprocess nodes moved to the host%s%s",
        len(pre),
        len(post),
        _listing("; before the AIPU graph: ", graph, pre),
        _listing("; after it: ", graph, post),
    )
    return core


def _listing(prefix: str, graph: Graph, names: set[str]) -> str:
    """``prefix`` + the moved nodes as `name` (OpType), in graph order ('' if none)."""
    nodes = [n for n in graph.nodes if n.name in names]
    return prefix + ", ".join(f"`{n.name}` ({n.op_type})" for n in nodes) if nodes else ""


__all__ = [
    "condition_split_nodes",
    "graph_cleaner",
    "postprocess_nodes",
    "preprocess_nodes",
    "run_split",
    "split_graph",
]
