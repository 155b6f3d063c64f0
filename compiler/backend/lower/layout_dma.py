"""Layout ops as DMA copies: how tensors lie in memory and how to move them.

A 4-D tensor ``[N, C, H, W]`` lies channels-last, ``[N, H, W, C]``; any other rank lies in
its logical (row-major) order. A Reshape, Flatten, Squeeze or Unsqueeze is free (an alias of
its input's buffer) only when both tensors list their elements in the same order
(`same_bytes`); otherwise, and for Transpose, Concat, Split, Slice and Pad, the data moves.

`copy_plan` works a layout op out element by element: for every element of an output, the
input element it comes from (or a fill value). `runs` then cuts that map into the fewest
`DmaCopy` tasks, each up to three nested levels (planes x rows x a contiguous run), so any
strided slice or two-axis transpose is one task.

>>> same_bytes((1, 64, 1, 1), (1, 64)), same_bytes((1, 8, 4, 4), (1, 128))
(True, False)
>>> [(c.src_off, c.dst_off, c.planes, c.rows, c.run) for c in runs(np.arange(6), 0)]
[(0, 0, 1, 1, 6)]
>>> strided = runs(np.arange(4), 2 * np.arange(4))
>>> [(c.rows, c.run, c.src_row_stride, c.dst_row_stride) for c in strided]
[(4, 1, 1, 2)]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from aipusim.compiler.ir import Graph, Node, Op


def physical_axes(shape: Sequence[int]) -> tuple[int, ...]:
    """Logical axes in memory order: NHWC for rank 4, the logical order otherwise."""
    return (0, 2, 3, 1) if len(shape) == 4 else tuple(range(len(shape)))


def logical_index(shape: Sequence[int]) -> np.ndarray:
    """For each element in memory order, its position in logical (row-major) order."""
    idx = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    return np.ascontiguousarray(idx.transpose(physical_axes(shape))).reshape(-1)


def same_bytes(a: Sequence[int], b: Sequence[int]) -> bool:
    """True when tensors of shapes ``a`` and ``b`` with the same logical elements lie in
    memory in the same order (a reshape between them moves no byte)."""
    if math.prod(a) != math.prod(b):
        return False

    def logical_order(shape: Sequence[int]) -> bool:
        # channels-last equals row-major when only one of C and H*W exceeds 1
        return len(shape) != 4 or shape[1] == 1 or shape[2] * shape[3] == 1

    if logical_order(a) and logical_order(b):
        return True
    if len(a) == 4 and len(b) == 4:
        # [N, C, H*W] is what NHWC keeps: equal batch, channels and pixels per image
        return a[0] == b[0] and a[1] == b[1] and a[2] * a[3] == b[2] * b[3]
    return False


def broadcast_pattern(out_shape: Sequence[int], in_shape: Sequence[int]) -> tuple[int, int] | None:
    """``(div, mod)`` when element ``e`` of an output (memory order) reads element ``(e //
    div) % mod`` of an operand broadcast to it (numpy rules, each tensor in its own
    layout); None when no such pair describes it.

    >>> broadcast_pattern((1, 8, 4, 4), (1, 8, 1, 1)), broadcast_pattern((1, 8, 4, 4), (1, 1, 4, 4))
    ((1, 8), (8, 16))
    >>> broadcast_pattern((2, 3), (2, 1)), broadcast_pattern((1, 8, 4, 4), (1, 8, 4, 1))
    ((3, 2), None)
    """
    n = math.prod(out_shape)
    size = math.prod(in_shape)
    if size == n and tuple(in_shape) == tuple(out_shape):
        return 1, n
    try:
        np.broadcast_shapes(tuple(in_shape), tuple(out_shape))
    except ValueError:
        return None
    # the operand's memory position of every output element, in the output's memory order
    logical = np.arange(size, dtype=np.int64).reshape(in_shape)
    inverse = np.empty(size, np.int64)
    inverse[logical_index(in_shape)] = np.arange(size)
    src = np.broadcast_to(logical, out_shape)
    m = inverse[np.ascontiguousarray(src.transpose(physical_axes(out_shape))).reshape(-1)]
    changes = np.flatnonzero(m[1:] != m[:-1])
    div = int(changes[0]) + 1 if len(changes) else n
    e = np.arange(n, dtype=np.int64)
    if not np.array_equal(m, (e // div) % size):
        return None
    return div, size


@dataclass(frozen=True)
class Copy:
    """One strided copy: ``planes`` x ``rows`` runs of ``run`` elements (element offsets)."""

    src: int  # which source (index into the op's inputs; -1: the fill value)
    src_off: int
    dst_off: int
    planes: int
    rows: int
    run: int
    src_plane_stride: int = 0
    dst_plane_stride: int = 0
    src_row_stride: int = 0
    dst_row_stride: int = 0


def copy_heads(copy: Copy, heads: int, lo: int, hi: int) -> Copy | None:
    """The part of ``copy`` that moves source heads ``[lo, hi)`` of a source with
    ``heads`` interleaved heads (element ``e``'s head: ``e % heads``), None when its outer
    levels do not run over the heads one by one (a level of ``heads`` steps of 1, every
    other step a multiple of ``heads``) or the part is empty. A transpose of one token's
    heads ``[1, H, 1, d] -> [1, 1, H, d]`` is H planes of d rows.

    >>> c = Copy(0, 0, 0, planes=8, rows=32, run=1, src_plane_stride=1, dst_plane_stride=32,
    ...          src_row_stride=8, dst_row_stride=1)
    >>> part = copy_heads(c, 8, 2, 4)
    >>> part.src_off, part.dst_off, part.planes
    (2, 64, 2)
    """
    if hi <= lo or copy.run != 1 or copy.src_off % heads:
        return None
    for level, other in (("plane", "row"), ("row", "plane")):
        count = f"{level}s"
        if (
            getattr(copy, count) == heads
            and getattr(copy, f"src_{level}_stride") == 1
            and getattr(copy, f"src_{other}_stride") % heads == 0
        ):
            return replace(
                copy,
                src_off=copy.src_off + lo,
                dst_off=copy.dst_off + lo * getattr(copy, f"dst_{level}_stride"),
                **{count: hi - lo},
            )
    return None


def copy_part(copy: Copy, parts: int, part: int) -> Copy | None:
    """Part ``part`` of ``copy`` cut in ``parts`` along its longer outer level (its rows,
    or its planes when they are more), None when that part is empty. The parts write
    disjoint bytes, so several DMA queues may move them at once.

    >>> c = Copy(0, 0, 100, planes=1, rows=10, run=4, src_row_stride=8, dst_row_stride=4)
    >>> copy_part(c, 4, 1)
    Copy(src=0, src_off=24, dst_off=112, planes=1, rows=3, run=4, src_plane_stride=0, \
dst_plane_stride=0, src_row_stride=8, dst_row_stride=4)
    >>> copy_part(Copy(0, 0, 0, planes=1, rows=2, run=4), 4, 3) is None
    True
    """
    by_rows = copy.rows >= copy.planes
    count = copy.rows if by_rows else copy.planes
    per = math.ceil(count / parts)
    lo, hi = min(count, part * per), min(count, (part + 1) * per)
    if hi <= lo:
        return None
    if by_rows:
        return replace(
            copy,
            src_off=copy.src_off + lo * copy.src_row_stride,
            dst_off=copy.dst_off + lo * copy.dst_row_stride,
            rows=hi - lo,
        )
    return replace(
        copy,
        src_off=copy.src_off + lo * copy.src_plane_stride,
        dst_off=copy.dst_off + lo * copy.dst_plane_stride,
        planes=hi - lo,
    )


def runs(src: np.ndarray, dst: np.ndarray | int, source: int = 0) -> list[Copy]:
    """Cut an element map (destination ``dst[i]`` takes source element ``src[i]``; ``dst``
    an int: contiguous from there) into copies of at most three levels: runs contiguous on
    both sides, rows of runs at constant strides, planes of rows at constant strides."""
    src = np.asarray(src, np.int64)
    n = len(src)
    if isinstance(dst, int | np.integer):
        dst = np.arange(int(dst), int(dst) + n, dtype=np.int64)
    dst = np.asarray(dst, np.int64)
    breaks = np.flatnonzero((np.diff(src) != 1) | (np.diff(dst) != 1))
    out: list[Copy] = []
    i = 0
    while i < n:
        j = int(np.searchsorted(breaks, i))
        run = int(breaks[j]) - i + 1 if j < len(breaks) else n - i
        rows, rs, rd = _repeats(src, dst, i, run)
        planes, ps, pd = _repeats(src, dst, i, rows * run)
        out.append(Copy(source, int(src[i]), int(dst[i]), planes, rows, run, ps, pd, rs, rd))
        i += planes * rows * run
    return out


def _repeats(src: np.ndarray, dst: np.ndarray, i: int, size: int) -> tuple[int, int, int]:
    """How many consecutive blocks of ``size`` elements from ``i`` repeat the first at
    constant source and destination strides, and the strides. Checks 2, 4, 8, ... blocks
    at a time, so finding ``r`` repeats costs O(r * size)."""
    n = len(src)
    if i + size >= n:
        return 1, 0, 0
    rs, rd = int(src[i + size] - src[i]), int(dst[i + size] - dst[i])
    if rs < 0 or rd < 0:
        return 1, 0, 0  # a DMA's strides are unsigned
    s0, d0 = src[i : i + size], dst[i : i + size]
    count, chunk = 1, 1
    while True:
        m = min(chunk, (n - i) // size - count)
        if m <= 0:
            return count, rs, rd
        lo = i + count * size
        k = np.arange(count, count + m, dtype=np.int64)[:, None]
        s = src[lo : lo + m * size].reshape(m, size)
        d = dst[lo : lo + m * size].reshape(m, size)
        ok = np.all(s == s0 + k * rs, axis=1) & np.all(d == d0 + k * rd, axis=1)
        bad = np.flatnonzero(~ok)
        if len(bad):
            return count + int(bad[0]), rs, rd
        count += m
        chunk *= 2


def copy_plan(node: Node, graph: Graph) -> list[tuple[int, list[Copy]]]:
    """For each output of a layout op, its copies (element offsets in memory order)."""
    ins = [i for i in node.present_inputs if not graph.is_constant(i)]
    if node.op is Op.CONCAT and len(ins) != len(node.present_inputs):
        raise NotImplementedError(f"no layout plan for a {node.op_type} of constants")
    in_shapes = [graph.shape(i) for i in ins]
    plans = []
    for k, out in enumerate(o for o in node.outputs if o):
        out_shape = graph.shape(out)
        source, element = _sources(node, graph, in_shapes, k, out_shape)
        # memory order of the output -> (which input, its memory position)
        phys = logical_index(out_shape)
        which, logical = source[phys], element[phys]
        pos = np.full(len(phys), -1, np.int64)
        for j, shape in enumerate(in_shapes):
            sel = which == j
            if np.any(sel):
                inverse = np.empty(math.prod(shape), np.int64)
                inverse[logical_index(shape)] = np.arange(math.prod(shape))
                pos[sel] = inverse[logical[sel]]
        copies: list[Copy] = []
        for src in np.unique(which).tolist():
            at = np.flatnonzero(which == src)
            if src < 0:
                # the fill bytes: each contiguous stretch of padding reads the fill blob
                # from its start (a source stride of 0 between stretches)
                starts = np.flatnonzero(np.diff(at, prepend=at[0] - 2) != 1)
                offset = np.arange(len(at)) - np.repeat(starts, np.diff([*starts, len(at)]))
                copies += runs(offset, at, -1)
            else:
                copies += runs(pos[at], at, int(src))
        plans.append((k, copies))
    return plans


def _sources(
    node: Node, graph: Graph, in_shapes: list[tuple[int, ...]], k: int, out_shape: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """(source input, source logical element) of every logical element of output ``k``;
    input -1 means the fill value. The op runs on the input's element indices."""
    from aipusim.compiler.quant import opsupport as S

    if node.op is Op.CONCAT:
        axis = int(node.attr("axis", 0)) % len(out_shape)
        parts = []
        for j, shape in enumerate(in_shapes):
            idx = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
            parts.append((np.full(shape, j, np.int64), idx))
        which = np.concatenate([p[0] for p in parts], axis=axis).reshape(-1)
        elem = np.concatenate([p[1] for p in parts], axis=axis).reshape(-1)
        return which, elem
    if node.op not in S.LAYOUT_EXEC_OPS or len(in_shapes) != 1:
        raise NotImplementedError(f"no layout plan for {node.op_type}")
    idx = np.arange(math.prod(in_shapes[0]), dtype=np.int64).reshape(in_shapes[0])
    region = np.asarray(S.run_layout(node, graph, [idx], -1)[k], np.int64).reshape(-1)
    return np.where(region >= 0, 0, -1), region


__all__ = [
    "Copy",
    "broadcast_pattern",
    "copy_heads",
    "copy_part",
    "copy_plan",
    "logical_index",
    "physical_axes",
    "runs",
    "same_bytes",
]
