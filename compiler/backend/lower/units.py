"""Pass 6, lower: map every graph node to the unit that runs it (docs/architecture.md §5).

Conv (dense or grouped), ConvTranspose, Gemm/MatMul with constant weights -> MVM; MatMul of
two activations -> MVM with run-time weights or the DPU (`attention`);
depthwise conv, pooling, Resize/Upsample -> DWPU; element-wise arithmetic, activations
(LUT), reductions, BatchNorm -> DPU; Reshape/Flatten/Squeeze/Unsqueeze/Identity/Cast ->
an alias of their input (no task); Concat/Split/Slice/Transpose/Pad -> DMA copies, except
a Concat marked for placement, with a constant part or with a part on another grid than its
output (`regrids`) -> DPU (a rescale per part).

A unary activation whose only producer is an MVM or DWPU layer is fused into that layer
(the DPU applies it as the outputs stream out, ``PostOp.REQUANT_LUT``), as the hardware does.

Byte sizes: every activation and weight is int8 and every bias int32 after quantization,
so the float IR graph and the quantized graph give the same plan (an integer constant
keeps its own size).

>>> from aipusim.compiler.ir import Graph, Node, Op, Tensor
>>> import numpy as np
>>> g = Graph("g", (Node("c", Op.CONV, ("x", "w"), ("y",), {"kernel_shape": [3, 3],
...         "pads": [1, 1, 1, 1]}), Node("r", Op.RELU, ("y",), ("z",))),
...     {"x": Tensor("x", (1, 8, 4, 4)), "w": Tensor("w", (16, 8, 3, 3)),
...      "y": Tensor("y", (1, 16, 4, 4)), "z": Tensor("z", (1, 16, 4, 4))},
...     {"w": np.zeros((16, 8, 3, 3), np.float32)}, ("x",), ("z",))
>>> [(p.name, p.unit.value, p.lut.value, p.outputs) for p in lower_graph(g)]
[('c', 'mvm', 'relu', ('z',))]
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from aipusim.base.errors import UnsupportedOperatorError
from aipusim.compiler.backend.lower.layer import (
    ConstKind,
    ConstRef,
    ConvGeometry,
    LayerPlan,
    LayerUnit,
    RuntimeMatmul,
    activation_bytes,
    const_bytes,
    memory_rows,
)
from aipusim.compiler.backend.lower.layout_dma import same_bytes
from aipusim.compiler.ir import (
    BINARY_OPS,
    DPU_OPS,
    DWPU_OPS,
    LAYOUT_OPS,
    LUT_OPS,
    PLACE_PARTS_ATTR,
    SOURCE_OP_ATTR,
    Graph,
    Node,
    Op,
    is_depthwise,
)
from aipusim.compiler.quant import opsupport as S
from aipusim.isa.tasks import DpuKind, DwpuKind, LutKind

LUT_OF: dict[Op, LutKind] = {
    Op.RELU: LutKind.RELU,
    Op.LEAKY_RELU: LutKind.RELU,
    Op.CLIP: LutKind.CLIP,
    Op.SIGMOID: LutKind.SIGMOID,
    Op.HARD_SIGMOID: LutKind.HARD_SIGMOID,
    Op.HARD_SWISH: LutKind.HARD_SWISH,
    Op.SILU: LutKind.SILU,
    Op.TANH: LutKind.TANH,
    Op.ERF: LutKind.ERF,
    Op.SQRT: LutKind.SQRT,
    Op.EXP: LutKind.EXP,
    Op.LOG: LutKind.POW,  # LutKind has no log entry; any function is one table lookup
    Op.RECIPROCAL: LutKind.RECIPROCAL,
    Op.POW: LutKind.POW,
    Op.GELU: LutKind.GELU,
}
_BINARY_KIND: dict[Op, DpuKind] = {
    Op.ADD: DpuKind.ADD,
    Op.SUB: DpuKind.SUB,
    Op.MUL: DpuKind.MUL,
    Op.DIV: DpuKind.DIV,
    Op.MIN: DpuKind.MIN,
    Op.MAX: DpuKind.MAX,
    Op.PRELU: DpuKind.MUL,
    Op.POW: DpuKind.POW,  # of two tensors (a scalar exponent is a LUT)
}
#: Activations that can ride on the output stream of an MVM/DWPU layer.
FUSABLE_ACTIVATIONS = frozenset(
    {Op.RELU, Op.CLIP, Op.SIGMOID, Op.HARD_SIGMOID, Op.HARD_SWISH, Op.SILU, Op.GELU}
)
ALIAS_OPS = frozenset({Op.RESHAPE, Op.FLATTEN, Op.SQUEEZE, Op.UNSQUEEZE, Op.IDENTITY, Op.CAST})


def unwrap_graph(graph_or_qgraph: Any) -> Graph:
    """The IR `Graph` of a `Graph` or of a quantized graph (which holds one as ``graph``)."""
    graph = getattr(graph_or_qgraph, "graph", graph_or_qgraph)
    assert isinstance(graph, Graph), f"expected a Graph, not {type(graph).__name__}"
    return graph


def _nchw(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """A shape as N, C, H, W (rank 2 -> C only; rank 3 -> C, W)."""
    if len(shape) >= 4:
        n, c, h = shape[0], shape[1], shape[2]
        return n, c, h, math.prod(shape[3:])
    if len(shape) == 3:
        return shape[0], shape[1], 1, shape[2]
    if len(shape) == 2:
        return shape[0], shape[1], 1, 1
    return 1, max(1, math.prod(shape)), 1, 1


def regrids(graph: Graph, node: Node) -> bool:
    """True if some part of a quantized Concat lies on another grid than its output (a
    DMA copy would move its integers unchanged; the DPU rescales them). A float graph
    (not quantized yet) has no grids: False.

    >>> from aipusim.compiler.ir import QuantParams, Tensor
    >>> q1 = QuantParams(np.float32(0.1), np.int64(0))
    >>> q2 = QuantParams(np.float32(0.2), np.int64(0))
    >>> g = Graph("g", (Node("c", Op.CONCAT, ("a", "b"), ("y",), {"axis": 0}),),
    ...     {"a": Tensor("a", (2,), quant=q1), "b": Tensor("b", (2,), quant=q2),
    ...      "y": Tensor("y", (4,), quant=q1)}, {}, ("a", "b"), ("y",))
    >>> regrids(g, g.node("c"))
    True
    """
    out = graph.tensor(node.outputs[0]).quant
    if out is None:
        return False
    for name in node.present_inputs:
        q = graph.tensor(name).quant
        if q is None:
            continue
        if (
            q.dtype is not out.dtype
            or q.axis != out.axis
            or not (
                np.array_equal(q.scale, out.scale) and np.array_equal(q.zero_point, out.zero_point)
            )
        ):
            return True
    return False


def _pair(node: Node, key: str, default: int) -> tuple[int, int]:
    value = node.attr(key)
    if value is None:
        return default, default
    vals = tuple(int(v) for v in value)
    return (vals[0], vals[-1]) if vals else (default, default)


class _Lowerer:
    def __init__(self, graph: Graph) -> None:
        self.g = graph
        self.plans: list[LayerPlan] = []
        self.by_output: dict[str, LayerPlan] = {}
        self.unsupported: list[str] = []
        #: PWORD channel pads (apply_pword_padding): padded tensor -> the unpadded one
        self.pword_source: dict[str, str] = {}

    def act_inputs(self, node: Node) -> tuple[str, ...]:
        return tuple(i for i in node.present_inputs if not self.g.is_constant(i))

    def base(self, node: Node, unit: LayerUnit, **kw: Any) -> LayerPlan:
        ins = self.act_inputs(node)
        outs = tuple(o for o in node.outputs if o and self.g.tensors.get(o) is not None)
        return LayerPlan(
            name=node.name,
            op=str(node.attrs.get(SOURCE_OP_ATTR, node.op_type)),  # a Gemm lowered to a conv
            unit=unit,
            inputs=ins,
            outputs=outs,
            in_bytes=tuple(activation_bytes(self.g, i) for i in ins),
            out_bytes=tuple(activation_bytes(self.g, o) for o in outs),
            elements=sum(self.g.tensor(o).size for o in outs),
            is_first=any(i in self.g.inputs for i in ins),
            rows=memory_rows(self.g.shape(outs[0])) if outs else 1,
            **kw,
        )

    def consts(self, node: Node, weight_index: int | None) -> tuple[ConstRef, ...]:
        refs = []
        for idx, name in enumerate(node.inputs):
            arr = self.g.const(name) if name else None
            if arr is None or arr.size == 0:
                continue
            if idx == weight_index:
                refs.append(ConstRef(name, const_bytes(arr, bias=False), ConstKind.WEIGHT))
            else:
                refs.append(ConstRef(name, const_bytes(arr, bias=True), ConstKind.DPU_CONST))
        return tuple(refs)

    # -- per unit ------------------------------------------------------------------
    def is_pword_pad(self, node: Node) -> bool:
        """A Pad of only the channel axis whose readers are all convolutions: the array
        reads zero rows for the padded channels, so memory never holds them."""
        if node.op is not Op.PAD or len(node.present_inputs) < 2:
            return False
        pads = self.g.const(node.inputs[1])
        rank = len(self.g.shape(node.inputs[0]))
        if pads is None or pads.size != 2 * rank or rank < 3:
            return False
        others = [int(v) for i, v in enumerate(pads.reshape(-1)) if i not in (1, rank + 1)]
        readers = self.g.consumers(node.outputs[0])
        return (
            not any(others)
            and bool(readers)
            and all(r.op in (Op.CONV, Op.CONV_TRANSPOSE) for r in readers)
        )

    def conv(self, node: Node) -> LayerPlan:
        x = _nchw(self.g.shape(self.pword_source.get(node.inputs[0], node.inputs[0])))
        w = self.g.shape(node.inputs[1])
        y = _nchw(self.g.shape(node.outputs[0]))
        groups = int(node.attr("group", 1))
        sh, sw = _pair(node, "strides", 1)
        kh, kw = (w[2], w[3]) if len(w) >= 4 else (1, w[-1] if len(w) == 3 else 1)
        in_h, in_w = x[2], x[3]
        n = x[0]
        upsample, src_h, src_w = 1, 0, 0
        if node.op is Op.CONV_TRANSPOSE:
            # The array runs a stride-s transposed conv as a stride-1 conv over the
            # zero-upsampled input (s - 1 zeros between pixels, bordered by the kernel
            # extent less the pads): every tap of every input channel is a weight row
            # (R = kh*kw*Cin/group), Cout columns, one input vector per output pixel. The
            # window's input is then out + k - 1 (upsampled) rows and columns.
            upsample, src_h, src_w = sh, n * x[2], x[3]
            sh = sw = 1
            in_h, in_w = y[2] + kh - 1, y[3] + kw - 1
        # Images of a batch are more rows of input vectors: a 1x1 conv over N images (what
        # rewrite_dense_to_conv2d makes of a MatMul over N tokens) streams N * H * W vectors.
        pt, pl, dh, dw = self.window_pads(node, x, y, (kh, kw))
        geo = ConvGeometry(
            x[1], y[1], kh, kw, sh, sw, n * in_h, in_w, n * y[2], y[3], groups, pt, pl, dh, dw,
            upsample, src_h, src_w, n,
        )  # fmt: skip
        bias = self.consts(node, weight_index=1)
        # Requantize scales per output channel ride with the bias (DPU constants).
        plan = self.base(node, LayerUnit.MVM, consts=bias, geometry=geo)
        source = self.pword_source.get(node.inputs[0])
        if source is not None:
            plan = replace(
                plan,
                is_first=source in self.g.inputs,
                in_bytes=(activation_bytes(self.g, source),),
            )
        return plan

    def depthwise(self, node: Node) -> LayerPlan:
        x = _nchw(self.g.shape(node.inputs[0]))
        y = _nchw(self.g.shape(node.outputs[0]))
        w = self.g.shape(node.inputs[1])
        sh, sw = _pair(node, "strides", 1)
        pt, pl, dh, dw = self.window_pads(node, x, y, (w[2], w[3]))
        geo = ConvGeometry(
            x[1], y[1], w[2], w[3], sh, sw, x[0] * x[2], x[3], y[0] * y[2], y[3], x[1],
            pt, pl, dh, dw, images=x[0],
        )  # fmt: skip
        return self.base(
            node,
            LayerUnit.DWPU,
            consts=self.consts(node, weight_index=1),
            geometry=geo,
            dwpu_kind=DwpuKind.DWCONV,
        )

    def window_pads(
        self, node: Node, x: tuple[int, ...], y: tuple[int, ...], k: tuple[int, int]
    ) -> tuple[int, int, int, int]:
        """(pad_top, pad_left, dilation_h, dilation_w) of a 2-D window op (ONNX attributes,
        auto_pad resolved); a ConvTranspose's are those of the stride-1 conv the array runs
        over its upsampled input."""
        if node.op is Op.CONV_TRANSPOSE:
            win = S.conv_transpose_window(node, self.g)
            (dh, dw), (pt, pl) = win.dilations, win.pads[:2]
            return (k[0] - 1) * dh - pt, (k[1] - 1) * dw - pl, dh, dw
        if len(self.g.shape(node.inputs[0])) != 4:
            return 0, 0, 1, 1
        win = S.window_attrs(node, (x[0], x[1], x[2], x[3]), (y[0], y[1], y[2], y[3]), k)
        return win.pads[0], win.pads[1], win.dilations[0], win.dilations[1]

    def matmul(self, node: Node) -> LayerPlan:
        a = self.g.shape(node.inputs[0])
        b = self.g.shape(node.inputs[1])
        trans_b = node.op is Op.GEMM and int(node.attr("transB", 0)) == 1
        k, n = (b[-1], b[-2]) if trans_b else (b[-2], b[-1])
        rows = math.prod(a[:-1]) if len(a) > 1 else 1  # input vectors
        geo = ConvGeometry(k, n, 1, 1, 1, 1, 1, rows, 1, rows)
        return self.base(node, LayerUnit.MVM, consts=self.consts(node, 1), geometry=geo)

    def matmul_act(self, node: Node) -> LayerPlan:
        """Two activations (attention): an MVM layer whose weights (the second operand) are
        written at run time, one weight set per head; `attention.choose` may move it to the
        DPU once mapped."""
        mm = runtime_shapes(
            self.g.shape(node.inputs[0]),
            self.g.shape(node.inputs[1]),
            self.g.shape(node.outputs[0]),
        )
        return self.base(node, LayerUnit.MVM, geometry=mm.geometry(), runtime=mm)

    def dwpu(self, node: Node) -> LayerPlan:
        x = _nchw(self.g.shape(node.inputs[0]))
        y = _nchw(self.g.shape(node.outputs[0]))
        if node.op in (Op.GLOBAL_AVERAGE_POOL, Op.GLOBAL_MAX_POOL):
            kind, (kh, kw), (sh, sw) = DwpuKind.GLOBALPOOL, (x[2], x[3]), (1, 1)
        elif node.op in (Op.RESIZE, Op.UPSAMPLE):
            linear = str(node.attr("mode", "nearest")) in ("linear", "bilinear", "cubic")
            kind = DwpuKind.RESIZE_LINEAR if linear else DwpuKind.RESIZE_NEAREST
            kh, kw = (2, 2) if linear else (1, 1)
            sh = sw = 1
        else:
            kind = DwpuKind.MAXPOOL if node.op is Op.MAX_POOL else DwpuKind.AVGPOOL
            kh, kw = _pair(node, "kernel_shape", 1)
            sh, sw = _pair(node, "strides", 1)
        pads = (0, 0, 1, 1)
        if kind in (DwpuKind.MAXPOOL, DwpuKind.AVGPOOL):
            pads = self.window_pads(node, x, y, (kh, kw))
        geo = ConvGeometry(
            x[1], y[1], kh, kw, sh, sw, x[0] * x[2], x[3], y[0] * y[2], y[3], x[1], *pads,
            images=x[0],
        )  # fmt: skip
        return self.base(node, LayerUnit.DWPU, geometry=geo, dwpu_kind=kind)

    def dpu(self, node: Node) -> LayerPlan:
        consts = self.consts(node, weight_index=None)
        n_act = len(self.act_inputs(node))
        if (node.op in BINARY_OPS and n_act >= 2) or (
            node.op in BINARY_OPS and node.op is not Op.POW
        ):
            kind, lut = _BINARY_KIND[node.op], LutKind.NONE
        elif node.op in LUT_OPS or node.op in LUT_OF:
            kind, lut = DpuKind.LUT, LUT_OF.get(node.op, LutKind.RELU)
        elif node.op in (Op.SOFTMAX, Op.MASKED_SOFTMAX):  # (the mask: a byte constant)
            kind, lut = DpuKind.SOFTMAX, LutKind.EXP
        elif node.op in (Op.REDUCE_MEAN, Op.REDUCE_MAX, Op.REDUCE_SUM):
            kind, lut = DpuKind.REDUCE, LutKind.NONE
        elif node.op is Op.BATCH_NORM:
            kind, lut = DpuKind.REQUANT, LutKind.NONE
        elif node.op is Op.LAYER_NORM:
            kind, lut = DpuKind.LAYERNORM, LutKind.NONE
        else:  # Neg
            kind, lut = DpuKind.MUL, LutKind.NONE
        rowwise = kind not in (DpuKind.SOFTMAX, DpuKind.LAYERNORM, DpuKind.REDUCE)
        if kind in (DpuKind.SOFTMAX, DpuKind.LAYERNORM):
            rank = len(self.g.shape(node.outputs[0]))
            axis = int(node.attr("axis", -1))
            rowwise = rank != 4 and axis in (-1, rank - 1)
        return self.base(
            node, LayerUnit.DPU, consts=consts, dpu_kind=kind, lut=lut, rowwise=rowwise
        )

    def try_fuse(self, node: Node) -> bool:
        """Fold a unary activation into the MVM/DWPU layer that produced its input."""
        if node.op not in FUSABLE_ACTIVATIONS or len(self.act_inputs(node)) != 1:
            return False
        src = node.inputs[0]
        producer = self.by_output.get(src)
        if (
            producer is None
            or producer.unit not in (LayerUnit.MVM, LayerUnit.DWPU)
            or producer.lut is not LutKind.NONE
            or producer.outputs != (src,)
            or len(self.g.consumers(src)) != 1
            or self.g.is_output(src)
            or not self.pool_keeps(producer, node)
        ):
            return False
        out = node.outputs[0]
        fused = replace(
            producer,
            outputs=(out,),
            out_bytes=(activation_bytes(self.g, out),),
            lut=LUT_OF[node.op],
            fused=(*producer.fused, node.name),
            consts=producer.consts + self.consts(node, weight_index=None),
        )
        at = next(i for i, p in enumerate(self.plans) if p is producer)
        self.plans[at] = fused
        self.by_output.pop(src)
        self.by_output[out] = fused
        return True

    def pool_keeps(self, producer: LayerPlan, node: Node) -> bool:
        """Whether a DWPU pool or resize can carry activation ``node`` on its output. Their
        parameter blocks hold no table and no clamp record (only a depthwise conv's
        `CHANNEL` records do), so only an activation that is no arithmetic at all on the int8
        output fuses: a Relu/Clip whose grid is the pool's and whose clamp is the whole int8
        range (the requantize's own saturation). Anything else stays a DPU table layer."""
        if producer.unit is not LayerUnit.DWPU or producer.dwpu_kind is DwpuKind.DWCONV:
            return True
        qi, qo = self.g.tensor(node.inputs[0]).quant, self.g.tensor(node.outputs[0]).quant
        if qi is None or qo is None:  # a float graph (timing only): nothing to compute
            return True
        if node.op not in (Op.RELU, Op.CLIP):
            return False
        from aipusim.compiler.quant.quantize import lut_step  # the quantizer's own decision

        step = lut_step(node, self.g, qi, qo)
        return step.kind == "clamp" and bool(
            np.all(step.params["lo"] <= -128) and np.all(step.params["hi"] >= 127)
        )

    def lower(self, node: Node) -> LayerPlan | None:
        op = node.op
        if op in (Op.CONV, Op.CONV_TRANSPOSE):
            if is_depthwise(node, self.g):
                return self.depthwise(node)
            return self.conv(node)
        if op is Op.MATMUL and not any(self.g.is_constant(i) for i in node.inputs):
            return self.matmul_act(node)
        if op in (Op.GEMM, Op.MATMUL):
            if not self.g.is_constant(node.inputs[1]):
                self.unsupported.append(
                    f"{node.name} ({node.op_type} with a constant first operand: transpose it)"
                )
                return None
            return self.matmul(node)
        if op in DWPU_OPS:
            return self.dwpu(node)
        if self.try_fuse(node):
            return None
        if op in DPU_OPS or op in LUT_OF:
            return self.dpu(node)
        if op in ALIAS_OPS:
            # free only when memory lists the elements in the same order (layout_dma)
            src, dst = self.g.shape(node.inputs[0]), self.g.shape(node.outputs[0])
            unit = LayerUnit.ALIAS if same_bytes(src, dst) else LayerUnit.DMA
            return self.base(node, unit)
        if self.is_pword_pad(node):
            self.pword_source[node.outputs[0]] = node.inputs[0]
            return self.base(node, LayerUnit.ALIAS)
        placed = op is Op.CONCAT and bool(node.attr(PLACE_PARTS_ATTR))
        if placed or (
            op is Op.CONCAT
            and (len(self.act_inputs(node)) != len(node.present_inputs) or regrids(self.g, node))
        ):
            # each part moved onto the output's grid by the DPU: a placed channel Concat
            # into its channel slice of each row tile; one with a constant part (a class
            # token) or with parts on other grids (RoPE's rotate_half, a KV cache's past
            # and new rows) whole, the constant read from the constants image
            consts = self.consts(node, weight_index=None)
            return self.base(
                node, LayerUnit.DPU, consts=consts, dpu_kind=DpuKind.RESCALE, rowwise=placed
            )
        if op in LAYOUT_OPS:
            return self.base(node, LayerUnit.DMA)
        self.unsupported.append(f"{node.name} ({node.op_type})")
        return None

    def run(self) -> list[LayerPlan]:
        for node in self.g.nodes:
            plan = self.lower(node)
            if plan is None:
                continue
            self.plans.append(plan)
            for out in plan.outputs:
                self.by_output[out] = plan
        if self.unsupported:
            raise UnsupportedOperatorError(
                f"operators must run on a unit of the AIPU (MVM, DPU, DWPU, DMA); "
                f"{len(self.unsupported)} cannot: {', '.join(self.unsupported)}"
            )
        return self.plans


def lower_graph(graph_or_qgraph: Any) -> list[LayerPlan]:
    """The layers of a graph in execution (topological) order, one unit each."""
    return _Lowerer(unwrap_graph(graph_or_qgraph)).run()


def runtime_shapes(a: tuple[int, ...], b: tuple[int, ...], out: tuple[int, ...]) -> RuntimeMatmul:
    """The `RuntimeMatmul` of ``a @ b`` (numpy matmul shapes, batch dims broadcast).

    >>> runtime_shapes((1, 3, 197, 64), (1, 3, 64, 197), (1, 3, 197, 197))
    RuntimeMatmul(heads=3, m=197, k=64, n=197, steps=(3, 3, 3))
    """
    from aipusim.compiler.backend.lower.reduction import matrices

    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    heads = math.prod(out[:-2]) if len(out) > 2 else 1
    found = (matrices(t) for t in (a2, b2, out))
    steps = tuple(1 if f is None else f.step for f in found)
    return RuntimeMatmul(heads, a2[-2], a2[-1], b2[-1], steps)  # type: ignore[arg-type]


__all__ = [
    "ALIAS_OPS",
    "FUSABLE_ACTIVATIONS",
    "LUT_OF",
    "lower_graph",
    "runtime_shapes",
    "unwrap_graph",
]
