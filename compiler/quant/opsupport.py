"""Operator semantics shared by the float and the int8 executors.

Attribute decoding (ONNX defaults, ``auto_pad``), Resize coordinate maps, and the layout
ops (Reshape, Transpose, Slice, Concat, ...) that move values without arithmetic: they run
unchanged on float32 and on int8 arrays. Output shapes are taken from the IR, whose shapes
are static, so Reshape/Flatten/Squeeze need no shape arithmetic here.

>>> from aipusim.compiler.ir import Node, Op
>>> window_attrs(Node("p", Op.MAX_POOL, ("x",), ("y",), {"kernel_shape": [3, 3]}),
...              (1, 1, 8, 8), (1, 1, 6, 6)).pads
(0, 0, 0, 0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aipusim.base.errors import UnsupportedOperatorError
from aipusim.compiler.ir import Graph, Node, Op


@dataclass(frozen=True)
class Window:
    """A 2-D sliding window: kernel, strides, pads (top, left, bottom, right), dilations."""

    kernel: tuple[int, int]
    strides: tuple[int, int]
    pads: tuple[int, int, int, int]
    dilations: tuple[int, int]
    out_hw: tuple[int, int]


def unsupported(node: Node, why: str) -> UnsupportedOperatorError:
    return UnsupportedOperatorError(f"node {node.name} ({node.op_type}) cannot be quantized: {why}")


def window_attrs(
    node: Node,
    in_shape: tuple[int, ...],
    out_shape: tuple[int, ...],
    kernel: tuple[int, ...] | None = None,
) -> Window:
    """Decode Conv/pool window attributes of a 2-D (NCHW) op."""
    if len(in_shape) != 4:
        raise unsupported(node, f"only 2-D (NCHW) windows are supported, input is {in_shape}")
    k = tuple(int(v) for v in (kernel or node.attr("kernel_shape")))
    strides = tuple(int(v) for v in node.attr("strides", (1, 1)))
    dil = tuple(int(v) for v in node.attr("dilations", (1, 1)))
    out_hw = (int(out_shape[2]), int(out_shape[3]))
    auto_pad = str(node.attr("auto_pad", "NOTSET"))
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads_list: list[int] = [0, 0, 0, 0]
        for ax in range(2):
            total = max(
                (out_hw[ax] - 1) * strides[ax] + (k[ax] - 1) * dil[ax] + 1 - in_shape[2 + ax], 0
            )
            small, big = total // 2, total - total // 2
            begin, end = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
            pads_list[ax], pads_list[ax + 2] = begin, end
        pads = tuple(pads_list)
    elif auto_pad == "VALID":
        pads = (0, 0, 0, 0)
    else:
        pads = tuple(int(v) for v in node.attr("pads", (0, 0, 0, 0)))
    return Window(k, strides, pads, dil, out_hw)  # type: ignore[arg-type]


def conv_window(node: Node, graph: Graph) -> Window:
    w_shape = graph.shape(node.inputs[1])
    return window_attrs(
        node, graph.shape(node.inputs[0]), graph.shape(node.outputs[0]), tuple(w_shape[2:])
    )


def conv_transpose_window(node: Node, graph: Graph) -> Window:
    """Decode ConvTranspose attributes (ONNX opset 17) of a 2-D (NCHW) op.

    ``pads`` are the (top, left, bottom, right) crops of the full scatter result; with
    ``auto_pad`` SAME_* or an ``output_shape`` attribute they follow from the (static)
    output shape, as ONNX derives them. ``output_padding`` needs no field: the output is
    the full result cropped at (top, left) to ``out_hw``, and rows/columns beyond the full
    extent are zero (plus bias).
    """
    in_shape, out_shape = graph.shape(node.inputs[0]), graph.shape(node.outputs[0])
    if len(in_shape) != 4:
        raise unsupported(node, f"only 2-D (NCHW) windows are supported, input is {in_shape}")
    w_shape = graph.shape(node.inputs[1])
    k = (int(w_shape[2]), int(w_shape[3]))
    strides = tuple(int(v) for v in node.attr("strides", (1, 1)))
    dil = tuple(int(v) for v in node.attr("dilations", (1, 1)))
    out_pad = tuple(int(v) for v in node.attr("output_padding", (0, 0)))
    out_hw = (int(out_shape[2]), int(out_shape[3]))
    auto_pad = str(node.attr("auto_pad", "NOTSET"))
    if auto_pad in ("SAME_UPPER", "SAME_LOWER") or (
        node.attr("output_shape") is not None and node.attr("pads") is None
    ):
        pads_list = [0, 0, 0, 0]
        for ax in range(2):
            full = strides[ax] * (in_shape[2 + ax] - 1) + out_pad[ax] + (k[ax] - 1) * dil[ax] + 1
            total = full - out_hw[ax]
            small, big = total // 2, total - total // 2
            begin, end = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
            pads_list[ax], pads_list[ax + 2] = begin, end
        pads = tuple(pads_list)
    elif auto_pad == "VALID":
        pads = (0, 0, 0, 0)
    else:
        pads = tuple(int(v) for v in node.attr("pads", (0, 0, 0, 0)))
    if any(p < 0 for p in pads):
        raise unsupported(node, f"pads must be >= 0, not {pads}")
    return Window(k, strides, pads, dil, out_hw)  # type: ignore[arg-type]


def const_ints(graph: Graph, name: str) -> list[int] | None:
    """The integer values of an optional constant input ("" or absent -> None)."""
    if not name:
        return None
    arr = graph.const(name)
    if arr is None:
        raise UnsupportedOperatorError(f"tensor {name} must be a constant here, not computed")
    return [int(v) for v in np.asarray(arr).reshape(-1)]


def reduce_axes(node: Node, graph: Graph) -> tuple[int, ...]:
    """Axes of a Reduce* op (attribute before opset 18, input after), normalised."""
    rank = len(graph.shape(node.inputs[0]))
    axes = node.attr("axes")
    if axes is None and len(node.inputs) > 1:
        axes = const_ints(graph, node.inputs[1])
    if axes is None:
        return tuple(range(rank))
    return tuple(sorted(int(a) % rank for a in axes))


# ----------------------------------------------------------------------- resize


def resize_mode(node: Node) -> str:
    mode = str(node.attr("mode", "nearest"))
    if mode not in ("nearest", "linear"):
        raise unsupported(node, f"resize mode must be nearest or linear, not {mode}")
    return mode


def _resize_scales(node: Node, graph: Graph, in_shape: tuple[int, ...]) -> list[float] | None:
    if node.op is Op.UPSAMPLE:
        return [float(v) for v in np.asarray(graph.const(node.inputs[1])).reshape(-1)]
    if len(node.inputs) > 2 and node.inputs[2]:
        arr = graph.const(node.inputs[2])
        if arr is not None and arr.size == len(in_shape):
            return [float(v) for v in arr.reshape(-1)]
    return None


def resize_source_coords(
    node: Node, graph: Graph, axis: int, in_len: int, out_len: int
) -> np.ndarray:
    """Float source coordinate of every output index along ``axis`` (ONNX Resize rules)."""
    scales = _resize_scales(node, graph, graph.shape(node.inputs[0]))
    scale = scales[axis] if scales else out_len / in_len
    mode = str(
        node.attr(
            "coordinate_transformation_mode",
            "asymmetric" if node.op is Op.UPSAMPLE else "half_pixel",
        )
    )
    o = np.arange(out_len, dtype=np.float64)
    if mode == "asymmetric":
        return o / scale
    if mode == "half_pixel":
        return (o + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if out_len > 1 else np.zeros_like(o)
    if mode == "align_corners":
        return o * (in_len - 1) / (out_len - 1) if out_len > 1 else np.zeros_like(o)
    raise unsupported(node, f"coordinate_transformation_mode {mode} is not supported")


def resize_nearest_index(node: Node, graph: Graph, axis: int, in_len: int, out_len: int):
    src = resize_source_coords(node, graph, axis, in_len, out_len)
    rule = str(node.attr("nearest_mode", "round_prefer_floor"))
    if node.op is Op.UPSAMPLE or rule == "floor":
        idx = np.floor(src)
    elif rule == "ceil":
        idx = np.ceil(src)
    elif rule == "round_prefer_ceil":
        idx = np.floor(src + 0.5)
    else:
        idx = np.ceil(src - 0.5)
    return np.clip(idx, 0, in_len - 1).astype(np.int64)


def resize_linear_coords(node: Node, graph: Graph, axis: int, in_len: int, out_len: int):
    src = np.clip(resize_source_coords(node, graph, axis, in_len, out_len), 0, in_len - 1)
    i0 = np.floor(src).astype(np.int64)
    i1 = np.minimum(i0 + 1, in_len - 1)
    return i0, i1, src - i0


def resized_axes(in_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> list[int]:
    return [a for a, (i, o) in enumerate(zip(in_shape, out_shape, strict=True)) if i != o]


# ----------------------------------------------------------------------- layout ops


def run_layout(node: Node, graph: Graph, x: list[np.ndarray], pad_value: float) -> list[np.ndarray]:
    """Execute a layout op on arrays of any dtype (``pad_value`` fills Pad's border)."""
    op = node.op
    out_shapes = [graph.shape(o) for o in node.outputs if o]
    if op in (Op.RESHAPE, Op.FLATTEN, Op.SQUEEZE, Op.UNSQUEEZE, Op.IDENTITY, Op.CAST):
        return [np.ascontiguousarray(x[0]).reshape(out_shapes[0])]
    if op is Op.TRANSPOSE:
        perm = node.attr("perm") or tuple(reversed(range(x[0].ndim)))
        return [np.ascontiguousarray(np.transpose(x[0], perm))]
    if op is Op.CONCAT:
        return [np.concatenate(x, axis=int(node.attr("axis")))]
    if op is Op.SPLIT:
        axis = int(node.attr("axis", 0)) % x[0].ndim
        bounds = np.cumsum([s[axis] for s in out_shapes])[:-1]
        return [np.ascontiguousarray(p) for p in np.split(x[0], bounds, axis=axis)]
    if op is Op.SLICE:
        return [np.ascontiguousarray(x[0][_slices(node, graph, x[0].shape)])]
    if op is Op.PAD:
        return [_pad(node, graph, x[0], pad_value)]
    if op is Op.GATHER:
        return [gather(node, graph, x)]
    if op is Op.EXPAND:
        return [np.ascontiguousarray(np.broadcast_to(x[0], out_shapes[0]))]
    if op is Op.TILE:
        return [np.tile(x[0], tuple(const_ints(graph, node.inputs[1]) or ()))]
    raise unsupported(node, "not a layout op")


def gather(node: Node, graph: Graph, x: list[np.ndarray]) -> np.ndarray:
    """ONNX Gather of ``x[0]`` by the indices ``x[1]`` (or the constant indices input)."""
    idx = np.asarray(x[1] if len(x) > 1 else graph.const(node.inputs[1])).astype(np.int64)
    axis = int(node.attr("axis", 0)) % x[0].ndim
    size = x[0].shape[axis]
    if idx.size and (idx.min() < -size or idx.max() >= size):
        raise UnsupportedOperatorError(
            f"indices of node {node.name} must lie in [{-size}, {size - 1}], "
            f"not {int(idx.min())}..{int(idx.max())}"
        )
    return np.ascontiguousarray(np.take(x[0], np.where(idx < 0, idx + size, idx), axis=axis))


def _slices(node: Node, graph: Graph, shape: tuple[int, ...]) -> tuple[slice, ...]:
    starts = const_ints(graph, node.inputs[1]) or []
    ends = const_ints(graph, node.inputs[2]) or []
    axes = const_ints(graph, node.inputs[3]) if len(node.inputs) > 3 else None
    steps = const_ints(graph, node.inputs[4]) if len(node.inputs) > 4 else None
    axes = axes if axes is not None else list(range(len(starts)))
    steps = steps if steps is not None else [1] * len(starts)
    sl = [slice(None)] * len(shape)
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        a %= len(shape)
        # ONNX uses INT64 max/min for "to the end"; Python slices clamp the same way.
        sl[a] = slice(s, None if e >= (1 << 62) or e <= -(1 << 62) else e, st)
    return tuple(sl)


def _pad(node: Node, graph: Graph, x: np.ndarray, pad_value: float) -> np.ndarray:
    mode = str(node.attr("mode", "constant"))
    pads = const_ints(graph, node.inputs[1]) or []
    rank = x.ndim
    axes = const_ints(graph, node.inputs[3]) if len(node.inputs) > 3 else None
    axes = [a % rank for a in axes] if axes is not None else list(range(rank))
    width = [(0, 0)] * rank
    for k, a in enumerate(axes):
        width[a] = (pads[k], pads[k + len(axes)])
    if any(b < 0 or e < 0 for b, e in width):
        raise unsupported(node, "negative pads are not supported")
    if mode == "constant":
        return np.pad(x, width, constant_values=np.asarray(pad_value, x.dtype))
    if mode in ("reflect", "edge"):
        return np.pad(x, width, mode=mode)
    raise unsupported(node, f"pad mode must be constant, reflect or edge, not {mode}")


def pad_constant(node: Node, graph: Graph) -> float:
    """The real value Pad writes into its border (0 unless the op gives one)."""
    if len(node.inputs) > 2 and node.inputs[2]:
        arr = graph.const(node.inputs[2])
        if arr is None:
            raise unsupported(node, "the pad value must be a constant")
        return float(np.asarray(arr).reshape(-1)[0]) if arr.size else 0.0
    return 0.0


LAYOUT_EXEC_OPS = frozenset(
    {
        Op.RESHAPE,
        Op.FLATTEN,
        Op.SQUEEZE,
        Op.UNSQUEEZE,
        Op.IDENTITY,
        Op.CAST,
        Op.TRANSPOSE,
        Op.CONCAT,
        Op.SPLIT,
        Op.SLICE,
        Op.PAD,
        Op.GATHER,
        Op.EXPAND,
        Op.TILE,
    }
)
