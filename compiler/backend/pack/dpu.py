"""Pass ``pack`` for DPU layers: the parameter records, tables and constant operands of an
element-wise, reduction, softmax, normalisation or float-step layer (`DpuPacker`), and the
order a DPU task reads its operands in (`dpu_operands`). The other units' blobs are
packed in `constants`, whose packer extends this one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from aipusim.compiler.backend.lower.layer import LayerPlan
from aipusim.compiler.backend.lower.layout_dma import broadcast_pattern, physical_axes
from aipusim.compiler.backend.pack.blobs import LayerConstants, _bytes, _one_range, _zp
from aipusim.compiler.ir import Graph, Op
from aipusim.compiler.quant.quantize import QStep, QuantizedGraph
from aipusim.isa import params as P
from aipusim.isa.float18 import FloatFormat
from aipusim.isa.tasks import DpuKind, DpuThen

#: The integer program's float step kinds -> their parameter block (`isa.params.FLOAT_PARAMS`).
_FLOAT_KIND = {"layernorm": "layernorm", "div_fp": "div", "pow_fp": "pow"}


class DpuPacker:
    """Packs DPU layers' constants from the graph and its integer program (``None``: the
    back end on a float graph, for timing: blobs of the right size holding zeros)."""

    def __init__(self, graph: Graph, program: QuantizedGraph | None) -> None:
        self.g, self.program = graph, program

    def step(self, name: str) -> QStep | None:
        return self.program.steps.get(name) if self.program is not None else None

    # -- DPU -------------------------------------------------------------------------------
    def dpu(self, layer: LayerPlan) -> LayerConstants:
        step = self.step(layer.name)
        if self.program is None or step is None:
            return LayerConstants(params=np.zeros(self.dpu_size(layer), np.uint8))
        node = self.g.node(layer.name)
        out = node.outputs[0]
        q_out = self.program.qparams(out)
        lo, hi = (-32768, 32767) if q_out.dtype.value == "int16" else (-128, 127)
        zo = _zp(self.program, out)
        kind = step.kind
        names, swapped = dpu_operands(node, self.g, self.program)
        operand = self.const_operand(node, names)
        if node.op is Op.CONCAT:  # one SCALAR per part, the constant parts' bytes
            mults = np.asarray(step.params["mults"], np.int64).reshape(-1)
            recs = [
                P.scalar_record(m0=int(m), shift=int(step.params["shift"]), lo=lo, hi=hi,
                                za=int(_zp(self.program, name)[0]), zo=int(zo[0]))
                for name, m in zip(node.present_inputs, mults, strict=True)
            ]  # fmt: skip
            blob = np.concatenate([
                np.zeros(0, np.int8),  # (a placed Concat has no constant part)
                *(np.ascontiguousarray(
                    np.asarray(self.g.const(n)).reshape(self.g.shape(n))
                    .transpose(physical_axes(self.g.shape(n)))
                ).astype(np.int8).reshape(-1)
                for n in node.present_inputs if self.g.is_constant(n)),
            ])  # fmt: skip
            return LayerConstants(params=_bytes(np.concatenate(recs)), operand=blob.view(np.uint8))
        if kind in ("rescale", "mul"):
            if len(names) == 2 and swapped and layer.dpu_kind is DpuKind.SUB:
                why = "a subtraction whose first operand is broadcast"
                return LayerConstants(params=np.zeros(P.SCALAR.itemsize, np.uint8), incomplete=why)
            lo, hi, table = self.chained_activation(layer, lo, hi)
            rec = _bytes(self.binary_record(step, names, swapped, int(zo[0]), lo, hi))
            then_offset = -1
            if layer.then is not DpuThen.NONE:  # the second step's record and operand next
                rec2, operand2 = self.then_step(node, self.g.node(layer.fused[0]))
                rec, then_offset = np.concatenate([rec, rec2]), len(operand)
                operand = np.concatenate([operand, operand2])
            if len(table):  # the fused activation's table right after the record
                return LayerConstants(
                    params=np.concatenate([rec, table]),
                    operand=operand,
                    table_offset=P.SCALAR.itemsize,
                )
            return LayerConstants(params=rec, operand=operand, then_offset=then_offset)
        if kind == "mean":
            rec = P.scalar_record(
                m0=int(np.asarray(step.params["mult"]).reshape(-1)[0]),
                shift=int(np.asarray(step.params["shift"]).reshape(-1)[0]),
                za=int(_zp(self.program, node.inputs[0])[0]),
                zo=int(zo[0]),
            )
            return LayerConstants(params=_bytes(rec))
        if kind == "clamp":
            c = max(len(np.atleast_1d(step.params["lo"])), len(np.atleast_1d(step.params["hi"])))
            rec = P.channel_records(bias=np.zeros(c, np.int64), mult=0, shift=0, zo=0,
                                    lo=step.params["lo"], hi=step.params["hi"])  # fmt: skip
            return LayerConstants(params=_bytes(rec))
        if kind == "lut":
            table = np.asarray(step.params["table"], np.int8).view(np.uint8).copy()
            return LayerConstants(params=table, table_offset=0)
        if kind == "softmax":
            rec = _bytes(P.scalar_record(m0=int(step.params["recip"]), zo=int(zo[0])))
            table = np.asarray(step.params["exp_table"], np.int64).astype("<i4")
            return LayerConstants(
                params=np.concatenate([rec, _bytes(table)]),
                table_offset=len(rec),
                operand=operand,  # a masked softmax's keep mask, one byte an entry
            )
        if kind == "mac":  # BatchNormalization on the DPU: a per-channel scale
            p = step.params
            c = len(np.atleast_1d(p["mult"]))
            rec = P.channel_records(
                bias=p["bias"], mult=p["mult"], shift=p["shift"], zo=np.broadcast_to(zo, (c,)),
                zi=np.broadcast_to(_zp(self.program, node.inputs[0]), (c,)),
                scale=p["weight_q"],
            )  # fmt: skip
            return LayerConstants(params=_bytes(rec))
        if kind in ("layernorm", "div_fp", "pow_fp"):
            p = step.params
            fmt = FloatFormat(*(int(v) for v in p["fp_format"]))
            zs = [int(_zp(self.program, n)[0]) for n in names[:2]]
            rec = P.scalar_record(za=zs[0], zb=zs[1] if len(zs) > 1 else 0, zo=int(zo[0]),
                                  lo=lo, hi=hi)  # fmt: skip
            return LayerConstants(params=P.float_block(_FLOAT_KIND[kind], fmt, rec, p))
        if kind == "matmul":  # B has zero point 0 (an IMC operand's grid)
            rec = P.scalar_record(
                m0=int(np.asarray(step.params["mult"]).reshape(-1)[0]),
                shift=int(np.asarray(step.params["shift"]).reshape(-1)[0]),
                za=int(_zp(self.program, node.inputs[0])[0]), zo=int(zo[0]), lo=lo, hi=hi,
            )  # fmt: skip
            return LayerConstants(params=_bytes(rec))
        if kind == "share" and node.op is Op.REDUCE_MAX:
            return LayerConstants(params=np.zeros(0, np.uint8))  # nothing but the data
        return LayerConstants(
            params=np.zeros(self.dpu_size(layer), np.uint8),
            incomplete=f"DPU step {kind} has no functional parameters yet",
        )

    def binary_record(
        self, step: QStep, names: Sequence[str], swapped: bool, zo: int, lo: int, hi: int
    ) -> np.ndarray:
        """The `SCALAR` record of an element-wise ``rescale`` or ``mul`` step whose task reads
        ``names`` (``swapped``: in the reverse of the node's order)."""
        assert self.program is not None
        za, zb = (int(_zp(self.program, n)[0]) for n in (*names, names[0])[:2])
        if step.kind == "rescale":
            mults = [int(m) for m in np.asarray(step.params["mults"], np.int64)]
            if swapped:
                mults = mults[::-1]
            m1 = abs(mults[1]) if len(mults) > 1 else 0
            return P.scalar_record(m0=mults[0], m1=m1, shift=int(step.params["shift"]),
                                   za=za, zb=zb, zo=zo, lo=lo, hi=hi)  # fmt: skip
        return P.scalar_record(
            m0=int(np.asarray(step.params["mult"]).reshape(-1)[0]),
            shift=int(np.asarray(step.params["shift"]).reshape(-1)[0]),
            za=za, zb=zb, zo=zo, lo=lo, hi=hi,
        )  # fmt: skip

    def then_step(self, first: Any, second: Any) -> tuple[np.ndarray, np.ndarray]:
        """The record bytes and constant operand of a second element-wise step
        (`dpu_chain`): its operand a is the first node's result, b the other input."""
        mid = first.outputs[0]
        other = next(t for t in second.present_inputs if t != mid)
        step = self.step(second.name)
        assert self.program is not None and step is not None, second.name
        zo = int(_zp(self.program, second.outputs[0])[0])
        swapped = second.present_inputs[0] != mid
        rec = self.binary_record(step, [mid, other], swapped, zo, -128, 127)
        return _bytes(rec), self.const_operand(second, [other])

    def chained_activation(self, layer: LayerPlan, lo: int, hi: int) -> tuple[int, int, np.ndarray]:
        """(lo, hi, table) of an element-wise layer with its activation fused
        (`dpu_chain`): a one-range clamp narrows the record's range, a table follows the
        record."""
        chained = layer.fused and layer.then is DpuThen.NONE
        act = self.step(layer.fused[-1]) if chained else None
        if act is None:
            return lo, hi, np.zeros(0, np.uint8)
        if act.kind == "lut":
            return lo, hi, np.asarray(act.params["table"], np.int8).view(np.uint8).copy()
        assert act.kind == "clamp", f"{layer.name}: a fused {act.kind} step"
        return (*_one_range(act), np.zeros(0, np.uint8))

    def dpu_size(self, layer: LayerPlan) -> int:
        """Bytes of a DPU layer's parameters without a program (the largest case)."""
        return P.SCALAR.itemsize + P.SOFTMAX_TABLE_BYTES + layer.dpu_const_bytes

    def const_operand(self, node: Any, names: Sequence[str]) -> np.ndarray:
        """A constant operand of an element-wise op, int8 in its tensor's layout (spread
        to the output's shape when no ``(div, mod)`` broadcast can read it)."""
        out_shape = self.g.shape(node.outputs[0])
        for name in names:
            arr = self.g.const(name)
            if arr is None:
                continue
            q = np.asarray(arr)
            shape = self.g.shape(name)
            if broadcast_pattern(out_shape, shape) is None:
                q, shape = np.broadcast_to(q.reshape(shape), out_shape), out_shape
            q = np.ascontiguousarray(q.reshape(shape).transpose(physical_axes(shape)))
            return q.astype(np.int8).view(np.uint8).reshape(-1).copy()
        return np.zeros(0, np.uint8)


def dpu_operands(node: Any, graph: Graph, program: QuantizedGraph | None) -> tuple[list[str], bool]:
    """The tensors a DPU layer's task reads, in its operand order: activations and quantized
    constant operands, the one as large as the output first (``True``: swapped from the
    node's order, so that only operand 1 is ever broadcast)."""
    names = [
        i
        for i in node.present_inputs
        if not graph.is_constant(i)
        or (program is not None and i in graph.tensors and graph.tensor(i).quant is not None
            and np.asarray(graph.const(i)).dtype.kind != "f")
    ]  # fmt: skip
    if node.op is Op.MASKED_SOFTMAX:  # the scores, then the keep mask (a uint8 constant)
        return [node.inputs[0], node.inputs[1]], False
    if len(names) == 2 and node.op is not Op.MATMUL:  # (a product's factors keep order)
        n = math.prod(graph.shape(node.outputs[0]))
        if math.prod(graph.shape(names[0])) != n and math.prod(graph.shape(names[1])) == n:
            return [names[1], names[0]], True
    return names, False


__all__ = ["DpuPacker", "dpu_operands"]
