"""Pass ``fuse_residual``: a residual ``Add`` (and its activation) on an MVM's output stream.

A ResNet block ends in ``Conv -> Add(shortcut) -> Relu``. Run as three layers, the conv
writes its int8 output to memory, a DPU ``add`` reads it back with the shortcut, and a
DPU ``lut`` reads the sum once more. A production NPU compiler fuses the three on the
MVM's output stream: the DPU requantizes each output, adds the shortcut's byte read from
L1 (rescaling both operands to the Add's grid with the Add's own integer record) and
applies the activation, one pass; the conv's int8 output is never written
(`aipusim.isa.tasks.PostOp.REQUANT_ADD`).

An ``Add`` of two int8 activations of one shape is fused into the MVM layer producing one
of them when that layer is the operand's only writer and the operand has no other reader;
its unary activation (what `lower` fuses into an MVM) follows when the Add's sum has no
other reader (a clamp only when one range serves every channel). The fused layer reads
``(x, shortcut)``, writes the Add's (or the activation's) output, lists the Add (and
activation) in ``fused`` and names the Add in ``residual``. It takes the earlier of the
two places where every input is ready.

A conv with an activation of its own (the YOLO bottleneck's conv + SiLU + Add) is fused
too: the DPU looks the requantized value up in the conv's table, then adds
(`aipusim.isa.tasks.PostOp.REQUANT_LUT_ADD`, `LayerPlan.lut_before_add`). The pass has
one table: an activation after such an add joins only when it is a one-range clamp
(folded into the Add's record), else it stays a DPU layer of its own.

The integer program (`aipusim.compiler.quant.QuantizedGraph`) is not changed: the fused
layer computes exactly what the conv, the Add and the activation compute one after the
other (`constants` packs the Add's record and the activation after the conv's records).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from aipusim.compiler.backend.lower.layer import LayerPlan, LayerUnit, activation_bytes
from aipusim.compiler.backend.lower.units import FUSABLE_ACTIVATIONS, LUT_OF
from aipusim.compiler.ir import DType, Graph, Op
from aipusim.compiler.quant.quantize import QuantizedGraph
from aipusim.isa.tasks import CLAMP_LUTS, DpuKind, LutKind


def _int8(graph: Graph, name: str) -> bool:
    return graph.tensor(name).dtype is not DType.INT16


def _sole_reader(graph: Graph, tensor: str) -> bool:
    return len(graph.consumers(tensor)) == 1 and not graph.is_output(tensor)


def _clamp_ok(program: QuantizedGraph | None, name: str) -> bool:
    """True when the activation ``name`` may follow the add: a table, or one clamp range for
    every channel that overlaps int8 (so that it folds into the Add's record exactly)."""
    step = program.steps.get(name) if program is not None else None
    if step is None or step.kind == "lut":
        return True
    if step.kind != "clamp":
        return False
    lo, hi = np.unique(step.params["lo"]), np.unique(step.params["hi"])
    return len(lo) == 1 and len(hi) == 1 and -128 <= int(lo[0]) <= int(hi[0]) <= 127


class LayerChains:
    """The layers of a back end being fused, with the questions every fusion pass asks:
    who writes a tensor, and which unary activation alone reads it (`dpu_chain` too)."""

    def __init__(
        self, layers: Sequence[LayerPlan], graph: Graph, program: QuantizedGraph | None
    ) -> None:
        self.layers: list[LayerPlan | None] = list(layers)
        self.g, self.program = graph, program

    def index_of_output(self, tensor: str) -> int | None:
        for i, layer in enumerate(self.layers):
            if layer is not None and tensor in layer.outputs:
                return i
        return None

    def activation_of(self, out: str) -> int | None:
        """Index of the unary activation layer that alone reads ``out``, if it can follow."""
        if not _sole_reader(self.g, out):
            return None
        node = self.g.consumers(out)[0]
        i = self.index_of_output(node.outputs[0]) if node.outputs else None
        if i is None or node.op not in FUSABLE_ACTIVATIONS:
            return None
        layer = self.layers[i]
        assert layer is not None
        if layer.unit is not LayerUnit.DPU or layer.inputs != (out,) or len(layer.outputs) != 1:
            return None
        if not _int8(self.g, layer.outputs[0]) or not _clamp_ok(self.program, layer.name):
            return None
        return i


class _Fuser(LayerChains):
    def conv_of(self, add: LayerPlan) -> tuple[int, int] | None:
        """(producer index, input index of its output in the Add) of a fusable conv."""
        shapes = {tuple(self.g.shape(t)) for t in (*add.inputs, add.outputs[0])}
        if len(add.inputs) != 2 or add.inputs[0] == add.inputs[1] or len(shapes) != 1:
            return None
        if not all(_int8(self.g, t) for t in (*add.inputs, add.outputs[0])):
            return None
        if len(next(iter(shapes))) != 4:
            return None
        step = self.program.steps.get(add.name) if self.program is not None else None
        if self.program is not None and (step is None or step.kind != "rescale"):
            return None
        for k in (0, 1):
            i = self.index_of_output(add.inputs[k])
            p = self.layers[i] if i is not None else None
            if (
                p is not None
                and p.unit is LayerUnit.MVM
                and p.runtime is None
                and len(p.fused) == (p.lut is not LutKind.NONE)  # at most its activation
                and p.outputs == (add.inputs[k],)
                and _sole_reader(self.g, add.inputs[k])
            ):
                return i, k
        return None

    def clamp_only(self, ri: int | None) -> bool:
        """True when the activation layer ``ri`` needs no table (one clamp range): what
        may follow an add that comes after the conv's own table."""
        act = self.layers[ri] if ri is not None else None
        if act is None:
            return False
        step = self.program.steps.get(act.name) if self.program is not None else None
        if step is None:
            return LUT_OF[self.g.node(act.name).op] in CLAMP_LUTS
        return step.kind == "clamp"

    def fuse(self, ai: int) -> None:
        add = self.layers[ai]
        assert add is not None
        found = self.conv_of(add)
        if found is None:
            return
        pi, k = found
        conv = self.layers[pi]
        assert conv is not None
        other = add.inputs[1 - k]
        ri = self.activation_of(add.outputs[0])
        if conv.fused and not self.clamp_only(ri):
            ri = None  # one table per pass: the conv's; an activation after stays a layer
        act = self.layers[ri] if ri is not None else None
        last = act if act is not None else add
        lut = LUT_OF[self.g.node(act.name).op] if act is not None else LutKind.NONE
        fused = replace(
            conv,
            inputs=(conv.inputs[0], other),
            in_bytes=(conv.in_bytes[0], activation_bytes(self.g, other)),
            outputs=last.outputs,
            out_bytes=last.out_bytes,
            lut=conv.lut if conv.fused else lut,
            fused=(*conv.fused, add.name, *((act.name,) if act is not None else ())),
            consts=conv.consts + add.consts + (act.consts if act is not None else ()),
            residual=add.name,
        )
        # the fused layer runs where both its inputs are ready: the conv's place when the
        # shortcut is written before it, the Add's otherwise
        oi = self.index_of_output(other)
        at = pi if oi is None or oi < pi else ai
        for i in (pi, ai, ri):
            if i is not None:
                self.layers[i] = None
        self.layers[at] = fused

    def run(self) -> tuple[LayerPlan, ...]:
        for i in range(len(self.layers)):
            layer = self.layers[i]
            if (
                layer is not None
                and layer.unit is LayerUnit.DPU
                and layer.dpu_kind is DpuKind.ADD
                and self.g.node(layer.name).op is Op.ADD
            ):
                self.fuse(i)
        return tuple(layer for layer in self.layers if layer is not None)


def fuse_residual_adds(
    layers: Sequence[LayerPlan], graph: Graph, program: QuantizedGraph | None
) -> tuple[LayerPlan, ...]:
    """``layers`` with every fusable residual Add (and its activation) folded into the MVM
    layer that writes one of its operands (see the module docstring)."""
    return _Fuser(layers, graph, program).run()


__all__ = ["LayerChains", "fuse_residual_adds"]
