"""Pass ``fuse_dpu_chains``: an element-wise DPU op and the activation after it, one pass.

Run as two layers, ``Add -> Relu`` (or ``Mul -> Sigmoid``, ...) writes the Add's int8 sum
to L1, and a DPU ``lut`` task reads it back to apply the activation. The DPU has the table
next to its lanes: one task computes the binary op with its own integer record, clamps to
int8 and looks the result up in the activation's table (``DpuOp.lut``, the table at
``lut_addr``), so the sum is never stored. A Relu or Clip whose one range serves every
channel folds into the binary op's record instead (``lut`` relu/clip: no table, no lookup).

An element-wise layer of kind ``add``, ``sub``, ``mul``, ``min`` or ``max`` (integer step
``rescale`` or ``mul``: not a float constant's table, which would need a second table) with
an int8 output is fused with the unary activation that alone reads its output (what
`residual.LayerChains.activation_of` finds: the activations `lower` fuses into an MVM).
The fused layer keeps the binary op's name, kind and inputs, writes the activation's
output, and lists the activation in ``fused``.

The integer program is not changed: the fused task computes the binary step, clamped to
its output's int8 range, then the activation's step, as the two layers did one after the
other (`constants` packs the binary op's record and then the activation's table).

Two element-wise layers run first: an ``add``, ``sub`` or ``mul`` (integer step
``rescale`` or ``mul``, two operands, an int8 output) whose result is read only by a
second such layer of the same shape (``Mul -> Add``: an affine ``x * gamma + beta`` left
by a decomposed normalisation, or ``a * b + c``) becomes one DPU layer: the task computes
the first step with its record, clamps it to int8 and computes the second step
(`aipusim.isa.tasks.DpuOp.then`) with the second layer's record and its other operand
(an activation, or a constant the fused layer's operand blob carries after the first's).
The fused layer keeps the first layer's name and kind, reads the inputs of both, writes
the second layer's output, lists the second layer in ``fused`` and its kind in ``then``;
it runs where its inputs are all ready. A second ``sub`` takes the first result as its
minuend only; an activation after the second layer stays a layer of its own.

>>> from aipusim.compiler.backend.lower.units import lower_graph
>>> from aipusim.compiler.ir import Graph, Node, Op, Tensor
>>> g = Graph("g", (Node("a", Op.ADD, ("x", "y"), ("s",)), Node("r", Op.RELU, ("s",), ("z",))),
...     {n: Tensor(n, (1, 4, 2, 2)) for n in "xysz"}, {}, ("x", "y"), ("z",))
>>> [(p.name, p.outputs, p.fused, p.lut.value) for p in fuse_dpu_chains(lower_graph(g), g, None)]
[('a', ('z',), ('r',), 'relu')]
>>> g = Graph("g", (Node("m", Op.MUL, ("x", "y"), ("s",)), Node("a", Op.ADD, ("s", "w"), ("z",))),
...     {n: Tensor(n, (1, 4, 2, 2)) for n in "xyswz"}, {}, ("x", "y", "w"), ("z",))
>>> [(p.name, p.inputs, p.outputs, p.fused, p.then.value)
...  for p in fuse_dpu_chains(lower_graph(g), g, None)]
[('m', ('x', 'y', 'w'), ('z',), ('a',), 'add')]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from aipusim.compiler.backend.lower.layer import LayerPlan, LayerUnit, activation_bytes
from aipusim.compiler.backend.lower.residual import LayerChains
from aipusim.compiler.backend.lower.units import LUT_OF
from aipusim.compiler.backend.pack.dpu import dpu_operands
from aipusim.compiler.ir import DType, Graph
from aipusim.compiler.quant.quantize import QuantizedGraph
from aipusim.isa.tasks import DpuKind, DpuThen, LutKind

#: The element-wise kinds whose result the DPU can pass on to a table in the same task.
CHAIN_KINDS = frozenset({DpuKind.ADD, DpuKind.SUB, DpuKind.MUL, DpuKind.MIN, DpuKind.MAX})
#: Integer steps of those kinds that end in one int8 record (not a float constant's table).
_CHAIN_STEPS = frozenset({"rescale", "mul"})
#: The kinds of two element-wise layers one task computes one after the other.
THEN_KINDS = frozenset({DpuKind.ADD, DpuKind.SUB, DpuKind.MUL})


class _DpuChains(LayerChains):
    def head(self, layer: LayerPlan | None) -> bool:
        """True when ``layer`` is an element-wise op an activation may follow."""
        if (
            layer is None
            or layer.unit is not LayerUnit.DPU
            or layer.dpu_kind not in CHAIN_KINDS
            or layer.fused
            or layer.lut is not LutKind.NONE
            or len(layer.outputs) != 1
            or self.g.tensor(layer.outputs[0]).dtype is DType.INT16
        ):
            return False
        step = self.program.steps.get(layer.name) if self.program is not None else None
        return self.program is None or (step is not None and step.kind in _CHAIN_STEPS)

    def binary(self, layer: LayerPlan | None) -> bool:
        """True when ``layer`` is an element-wise layer of `THEN_KINDS` with two operands
        that may be either step of a two-layer chain."""
        if not self.head(layer):
            return False
        assert layer is not None
        node = self.g.node(layer.name)
        if layer.dpu_kind not in THEN_KINDS or not layer.rowwise or len(node.present_inputs) != 2:
            return False
        return self.program is None or len(dpu_operands(node, self.g, self.program)[0]) == 2

    def second_of(self, layer: LayerPlan) -> int | None:
        """Index of the element-wise layer that alone reads ``layer``'s result and may be
        computed after it in the same task."""
        mid = layer.outputs[0]
        if len(self.g.consumers(mid)) != 1 or self.g.is_output(mid):
            return None
        node = self.g.consumers(mid)[0]
        i = self.index_of_output(node.outputs[0]) if node.outputs else None
        second = self.layers[i] if i is not None else None
        if second is None or second.name != node.name or not self.binary(second):
            return None
        ins = node.present_inputs
        if mid not in ins or ins[0] == ins[1] or self.g.shape(mid) != self.g.shape(ins[0]):
            return None
        if self.g.shape(node.outputs[0]) != self.g.shape(mid):
            return None
        # a subtraction's record subtracts operand b: the first result must be its minuend
        if second.dpu_kind is DpuKind.SUB and ins[0] != mid:
            return None
        return i

    def chain(self, i: int) -> None:
        first = self.layers[i]
        if not self.binary(first):
            return
        assert first is not None
        si = self.second_of(first)
        if si is None:
            return
        second = self.layers[si]
        assert second is not None and second.dpu_kind is not None
        node = self.g.node(second.name)
        other = next(t for t in node.present_inputs if t != first.outputs[0])
        extra = () if other not in second.inputs or other in first.inputs else (other,)
        fused = replace(
            first,
            inputs=first.inputs + extra,
            in_bytes=first.in_bytes + tuple(activation_bytes(self.g, t) for t in extra),
            outputs=second.outputs,
            out_bytes=second.out_bytes,
            fused=(second.name,),
            consts=first.consts + second.consts,
            then=DpuThen(second.dpu_kind.value),
        )
        # the fused layer runs where all its inputs are ready: the first layer's place when
        # the second's other operand is written before it, the second's otherwise
        oi = self.index_of_output(other) if other in second.inputs else None
        at = i if oi is None or oi < i else si
        self.layers[i] = self.layers[si] = None
        self.layers[at] = fused

    def run(self) -> tuple[LayerPlan, ...]:
        for i in range(len(self.layers)):
            self.chain(i)
        for i, layer in enumerate(self.layers):
            if not self.head(layer):
                continue
            assert layer is not None
            ai = self.activation_of(layer.outputs[0])
            if ai is None:
                continue
            act = self.layers[ai]
            assert act is not None
            # the activation reads only the op's output, so the op's place is where both run
            self.layers[i] = replace(
                layer,
                outputs=act.outputs,
                out_bytes=act.out_bytes,
                lut=LUT_OF[self.g.node(act.name).op],
                fused=(act.name,),
                consts=layer.consts + act.consts,
            )
            self.layers[ai] = None
        return tuple(layer for layer in self.layers if layer is not None)


def fuse_dpu_chains(
    layers: Sequence[LayerPlan], graph: Graph, program: QuantizedGraph | None
) -> tuple[LayerPlan, ...]:
    """``layers`` with every element-wise DPU op and the element-wise layer or activation
    that alone reads its result folded into one DPU layer (see the module docstring)."""
    return _DpuChains(layers, graph, program).run()


__all__ = ["CHAIN_KINDS", "THEN_KINDS", "fuse_dpu_chains"]
