"""Pass 1d, ``fuse_attention_mask``: a constant attention mask before a Softmax -> one
MaskedSoftmax that leaves the masked entries out.

Exporters mask attention scores with a large negative constant: ``Add(scores, M)`` where
``M`` holds 0 (or a bias) where attending is allowed and -1e4, -1e9, the float minimum,
-inf (or Swin's -100) where it is not, or ``Where(keep, scores, -1e9)``. In float that
works because exp() of such an entry is 0. In int8 it cannot: the Add's output grid must
span the mask value, so the scores keep a handful of its 256 steps and the probabilities
come out nearly uniform (a causal 16-token attention: 3 dB SQNR at the output).

The pass takes a constant ``M`` (or the Where's constant condition and fill value) that
feeds only a Softmax, reads every entry at or below `MASK_BELOW` as masked, and rewrites

    Softmax(Add(s, M))        ->  MaskedSoftmax(Add(s, B), keep)   (B: M with masked -> 0)
    Softmax(Where(c, s, F))   ->  MaskedSoftmax(s, keep = c)

dropping the Add when ``B`` is all zero. ``keep`` is a uint8 constant (1: attend) in the
mask's broadcastable shape; the DPU skips the masked entries in the exponent sum and
writes 0 for them. Rows with no kept entry (where float softmax would ignore the mask
offset) and masks with nothing masked are left as they are.

>>> import numpy as np
>>> from aipusim.compiler.ir import Tensor
>>> m = np.triu(np.full((4, 4), -1e9, np.float32), 1)
>>> g = Graph("g", (Node("add", Op.ADD, ("s", "m"), ("a",)),
...                 Node("sm", Op.SOFTMAX, ("a",), ("p",), {"axis": -1})),
...           {"s": Tensor("s", (1, 4, 4)), "m": Tensor("m", (4, 4)),
...            "a": Tensor("a", (1, 4, 4)), "p": Tensor("p", (1, 4, 4))},
...           {"m": m}, ("s",), ("p",))
>>> [n.op_type for n in fuse_attention_mask(g, None).nodes]
['MaskedSoftmax']
"""

from __future__ import annotations

import numpy as np

from aipusim.compiler.ir import Graph, GraphEditor, Node, Op
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.passes.util import sole_consumer

#: Mask entries at or below this are masked: exp(-100) < 4e-44, nothing a float32
#: probability resolves next to an unmasked entry (Swin's shifted-window mask is -100;
#: other exporters use -1e4, -1e9, the float minimum or -inf).
MASK_BELOW = -100.0


def _keeps_a_row(keep: np.ndarray, shape: tuple[int, ...], axis: int) -> bool:
    """True if every softmax row of a tensor of ``shape`` keeps at least one entry."""
    full = np.broadcast_to(keep.astype(bool), shape)
    return bool(full.any(axis=axis).all())


def _mask_of(graph: Graph, node: Node) -> tuple[str, np.ndarray, np.ndarray | None] | None:
    """(scores, keep, bias or None) of an Add/Where that masks its scores, else None."""
    if node.op is Op.ADD:
        flags = [graph.is_constant(i) for i in node.inputs]
        if flags.count(True) != 1:
            return None
        m = np.asarray(graph.const(node.inputs[flags.index(True)]), np.float64)
        masked = m <= MASK_BELOW
        if not masked.any() or not np.isfinite(m[~masked]).all():
            return None
        bias = np.where(masked, 0.0, m)
        return node.inputs[flags.index(False)], ~masked, bias if bias.any() else None
    if node.op is Op.WHERE and len(node.inputs) == 3:
        cond, a, b = node.inputs
        c = graph.const(cond)
        if c is None or graph.is_constant(a) == graph.is_constant(b):
            return None
        fill = graph.const(b if graph.is_constant(b) else a)
        if fill is None or fill.size != 1 or float(fill.reshape(-1)[0]) > MASK_BELOW:
            return None
        keep = c.astype(bool) if graph.is_constant(b) else ~c.astype(bool)
        return (a if graph.is_constant(b) else b), keep, None
    return None


def _rewrite(graph: Graph, ed: GraphEditor, softmax: Node) -> bool:
    src = graph.producer(softmax.inputs[0])
    if src is None or sole_consumer(graph, softmax.inputs[0]) is not softmax:
        return False
    found = _mask_of(graph, src)
    if found is None:
        return False
    scores, keep, bias = found
    shape = graph.shape(softmax.inputs[0])
    axis = int(softmax.attr("axis", -1)) % len(shape)
    if graph.shape(scores) != shape or not _keeps_a_row(keep, shape, axis):
        return False
    keep_name = ed.add_constant(f"{softmax.name}/keep", keep.astype(np.uint8))
    x = scores
    if bias is not None:
        b = ed.add_constant(f"{src.name}/bias", bias.astype(np.float32))
        ed.replace(src, Node(src.name, Op.ADD, (scores, b), src.outputs))
        x = src.outputs[0]
    else:
        ed.remove(src)
    ed.replace(
        softmax,
        Node(softmax.name, Op.MASKED_SOFTMAX, (x, keep_name), softmax.outputs, {"axis": axis}),
    )
    return True


def fuse_attention_mask(graph: Graph, ctx: PassContext | None) -> Graph:
    """Fuse every constant attention mask into its Softmax (see the module docstring)."""
    softmaxes = [n for n in graph.nodes if n.op is Op.SOFTMAX]
    if not softmaxes:
        return graph
    ed = graph.edit()
    count = sum(_rewrite(graph, ed, n) for n in softmaxes)
    if not count:
        return graph
    if ctx is not None:
        ctx.log.info("fuse_attention_mask: %d masked Softmax(es) -> MaskedSoftmax", count)
    return ed.build()


__all__ = ["MASK_BELOW", "fuse_attention_mask"]
