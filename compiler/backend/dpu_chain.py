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

>>> from aipusim.compiler.backend.lower import lower_graph
>>> from aipusim.compiler.ir import Graph, Node, Op, Tensor
>>> g = Graph("g", (Node("a", Op.ADD, ("x", "y"), ("s",)), Node("r", Op.RELU, ("s",), ("z",))),
...     {n: Tensor(n, (1, 4, 2, 2)) for n in "xysz"}, {}, ("x", "y"), ("z",))
>>> [(p.name, p.outputs, p.fused, p.lut.value) for p in fuse_dpu_chains(lower_graph(g), g, None)]
[('a', ('z',), ('r',), 'relu')]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from aipusim.compiler.backend.lower import LUT_OF, LayerPlan, LayerUnit
from aipusim.compiler.backend.residual import LayerChains
from aipusim.compiler.ir import DType, Graph
from aipusim.compiler.quant.quantize import QuantizedGraph
from aipusim.isa.tasks import DpuKind, LutKind

#: The element-wise kinds whose result the DPU can pass on to a table in the same task.
CHAIN_KINDS = frozenset({DpuKind.ADD, DpuKind.SUB, DpuKind.MUL, DpuKind.MIN, DpuKind.MAX})
#: Integer steps of those kinds that end in one int8 record (not a float constant's table).
_CHAIN_STEPS = frozenset({"rescale", "mul"})


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

    def run(self) -> tuple[LayerPlan, ...]:
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
    """``layers`` with every element-wise DPU op and the activation that alone reads its
    result folded into one DPU layer (see the module docstring)."""
    return _DpuChains(layers, graph, program).run()


__all__ = ["CHAIN_KINDS", "fuse_dpu_chains"]
