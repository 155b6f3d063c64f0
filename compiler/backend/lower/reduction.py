"""Where a DPU reduction's groups and a DPU product's matrices lie (`DpuOp` fields).

A reduction (``reduce``, ``reduce_max``, ``softmax``, ``layernorm``) over logical ``axes``
of a tensor reads, in the tensor's memory order (`layout_dma.physical_axes`: NHWC for rank
4), group ``(o, g)`` element ``k`` at ``o * o_stride + g * g_stride + k * k_stride``. The
reduced axes must be neighbours in memory order: they become ``n``, the axes before them
``outer`` and the axes after them ``groups`` (then ``g_stride`` 1, ``k_stride`` groups). A
reduction's one result per group lands at ``o * groups + g``: the memory order of the
output with the reduced axes kept as 1.

>>> reduction_geometry((1, 16, 64), (2,))  # a LayerNorm over tokens' last axis
Reduction(outer=16, groups=1, n=64, o_stride=64, g_stride=1, k_stride=1)
>>> reduction_geometry((1, 2, 16, 16), (3,))  # attention scores [1, heads, T, T], NHWC
Reduction(outer=16, groups=2, n=16, o_stride=32, g_stride=1, k_stride=2)
>>> reduction_geometry((1, 8, 4, 4), (1, 2)) is None  # C and H are not neighbours in NHWC
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from aipusim.compiler.backend.lower.layout_dma import physical_axes
from aipusim.compiler.ir import Graph, Node, Op
from aipusim.compiler.quant.opsupport import reduce_axes
from aipusim.isa.tasks import DpuKind

#: The DPU kinds whose tasks take a reduction's geometry.
REDUCTION_KINDS = frozenset(
    {DpuKind.REDUCE, DpuKind.REDUCE_MAX, DpuKind.SOFTMAX, DpuKind.LAYERNORM}
)


class Reduction(NamedTuple):
    outer: int
    groups: int
    n: int
    o_stride: int
    g_stride: int
    k_stride: int

    def rows(self, count: int, total: int) -> Reduction:
        """The geometry of ``count`` of ``total`` equal slices of ``outer`` (a row tile of a
        reduction over trailing axes)."""
        assert self.outer % total == 0, (self, total)
        return self._replace(outer=self.outer // total * count)


def reduction_geometry(shape: Sequence[int], axes: Sequence[int]) -> Reduction | None:
    """The geometry of a reduction of ``shape`` over logical ``axes`` (normalised, >= 0);
    None when the axes are not neighbours in memory order."""
    order = physical_axes(shape)
    at = sorted(order.index(a) for a in axes)
    if not at or at != list(range(at[0], at[0] + len(at))):
        return None
    phys = [shape[a] for a in order]
    outer = math.prod(phys[: at[0]])
    n = math.prod(phys[at[0] : at[-1] + 1])
    groups = math.prod(phys[at[-1] + 1 :])
    return Reduction(outer, groups, n, n * groups, 1, groups)


class Matrices(NamedTuple):
    """The matrices over a tensor's last two axes, one per head (the axes before them):
    head ``h`` starts at element ``h * head_stride`` (0: one matrix for every head) and
    its neighbouring elements are ``step`` apart (1: row-major; the heads' count when the
    heads are the channels of a channels-last tensor)."""

    heads: int
    head_stride: int
    step: int


def matrices(shape: Sequence[int]) -> Matrices | None:
    """How ``shape``'s matrices lie in memory; None when a head's rows are not ``step``
    times their length apart or the heads span more than one axis.

    >>> matrices((1, 3, 5, 4)), matrices((3, 5, 4)), matrices((4, 6))
    (Matrices(heads=3, head_stride=1, step=3), Matrices(heads=3, head_stride=20, step=1), \
Matrices(heads=1, head_stride=0, step=1))
    """
    if len(shape) < 2:
        return None
    order = physical_axes(shape)
    phys = [shape[a] for a in order]
    phys_strides = [math.prod(phys[i + 1 :]) for i in range(len(phys))]
    stride = {a: phys_strides[i] for i, a in enumerate(order)}
    step = stride[len(shape) - 1]
    if stride[len(shape) - 2] != shape[-1] * step:
        return None
    batch = [a for a in range(len(shape) - 2) if shape[a] > 1]
    if len(batch) > 1:
        return None
    heads = math.prod(shape[:-2])
    return Matrices(heads, stride[batch[0]] if batch else 0, step)


def reduced_axes(node: Node, graph: Graph) -> tuple[int, ...]:
    """The logical axes ``node`` (Softmax, LayerNormalization, Reduce*) reduces over."""
    rank = len(graph.shape(node.inputs[0]))
    if node.op is Op.LAYER_NORM:
        return tuple(range(int(node.attr("axis", -1)) % rank, rank))
    if node.op in (Op.SOFTMAX, Op.MASKED_SOFTMAX):
        return (int(node.attr("axis", -1)) % rank,)
    return reduce_axes(node, graph)


__all__ = [
    "REDUCTION_KINDS",
    "Matrices",
    "Reduction",
    "matrices",
    "reduced_axes",
    "reduction_geometry",
]
