"""What the schedule is built from: the earlier stages' results, read only.

`ScheduleInputs` holds the layers with their tilings, fusion groups, IMC mappings,
constants and memory plan, the graph, the target and the core layout, and answers the
look-ups every part of the schedule makes (a layer's tiling, a tensor's buffer on a core,
a core's part of a split layer). It is frozen: no part of the schedule changes it, so the
cooperative builds share one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aipusim.compiler.backend.common.layout import CoreLayout, Split
from aipusim.compiler.backend.common.target import Knobs, Target
from aipusim.compiler.backend.imc.plan import LayerMapping
from aipusim.compiler.backend.lower.layer import (
    LayerPlan,
    activation_bytes,
    is_shortcut,
    memory_rows,
)
from aipusim.compiler.backend.lower.reduction import matrices
from aipusim.compiler.backend.memplan.buffers import Buffer, MemPlan
from aipusim.compiler.backend.pack.blobs import LayerConstants
from aipusim.compiler.backend.tile.regions import runtime_shared
from aipusim.compiler.backend.tile.tiler import FusionGroup, Tiling
from aipusim.compiler.decoder import append_in_place
from aipusim.compiler.ir import DType
from aipusim.isa.tasks import Unit


@dataclass(frozen=True)
class ScheduleInputs:
    """The inputs of the `schedule` pass (``program``: the integer program, for zero
    points; None in tests that build a graph without one)."""

    layers: Sequence[LayerPlan]
    tilings: Sequence[Tiling]
    groups: Sequence[FusionGroup]
    mappings: Sequence[LayerMapping | None]
    constants: Sequence[LayerConstants]
    plan: MemPlan
    graph: Any
    target: Target
    layout: CoreLayout
    program: Any = None
    #: layer name -> its index in ``layers``
    index: dict[str, int] = field(init=False, repr=False, compare=False)
    #: fusion group index -> the group
    group_of: dict[int, FusionGroup] = field(init=False, repr=False, compare=False)
    #: a decoder's KV cache grown in place: past input -> present output
    #: (`decoder.append_in_place`; the memory plan gives both one buffer)
    grown: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "index", {layer.name: i for i, layer in enumerate(self.layers)})
        object.__setattr__(self, "group_of", {g.index: g for g in self.groups})
        object.__setattr__(self, "grown", append_in_place(self.graph))

    @property
    def cfg(self) -> Knobs:
        return self.target.knobs

    @property
    def arch(self) -> Any:
        return self.target.arch

    @property
    def act_dma(self) -> Unit:
        """The DMA queue of activations."""
        return Unit.DMA0

    @property
    def wt_dma(self) -> Unit:
        """The DMA queue of weights and constants: the second channel with
        ``dma_dual_channel``."""
        return Unit.DMA1 if self.cfg.dma_dual_channel else Unit.DMA0

    def tiling_of(self, layer: LayerPlan) -> Tiling:
        return self.tilings[self.index[layer.name]]

    def consts_of(self, layer: LayerPlan) -> LayerConstants:
        return self.constants[self.index[layer.name]]

    def mapping_of(self, layer: LayerPlan) -> LayerMapping:
        mapping = self.mappings[self.index[layer.name]]
        assert mapping is not None, f"{layer.name}: no IMC mapping"
        return mapping

    def tile_maps(self, layer: LayerPlan, part: int) -> list[tuple[Any, int]]:
        """The IMC mapping of each output-channel tile of ``layer`` for this core's part (as
        the imc pass decided it)."""
        return [(t.mapping, t.oc_tile) for t in self.mapping_of(layer).of_part(part)]

    def part_of(self, layer_index: int, core: int) -> tuple[int, int, Split]:
        """(part index, part count, split) of ``core`` for a layer."""
        split = self.layout.splits.get(layer_index, Split.NONE)
        if split is Split.NONE:
            return 0, 1, split
        return self.layout.all_cores.index(core), self.layout.cores, split

    def copy_key(self, core: int) -> int:
        """The copy of a tensor ``core`` uses (`MemPlan.buffer_of`): its own in a
        replicated layout, else the one shared copy (-1)."""
        return core if self.layout.replicate else -1

    def buffer(self, tensor: str, core: int) -> Buffer:
        buf = self.plan.buffer_of(tensor, self.copy_key(core))
        assert buf is not None, f"tensor {tensor} has no buffer"
        return buf

    def tile_buffer(self, prefix: str, layer: LayerPlan, core: int) -> Buffer | None:
        return self.plan.buffers.get(f"{prefix}:{layer.name}@{core}")

    def zero_point(self, tensor: str) -> int:
        """The int8 value that reads as real 0 in ``tensor`` (0 without a program)."""
        if self.program is None or tensor not in self.program.graph.tensors:
            return 0
        q = self.program.graph.tensor(tensor).quant
        if q is None or q.zero_point.size != 1:
            return 0
        return int(q.zero_point.reshape(-1)[0])

    def elem(self, tensor: str) -> int:
        """Bytes of one element of an activation (2 for the int16 residual stream)."""
        t = self.graph.tensor(tensor)
        return 2 if t.dtype is DType.INT16 else 1

    def rows_of(self, layer: LayerPlan, tensor: str, k: int | None) -> tuple[int, int, int]:
        """(memory rows, bytes per row, bytes per pixel) of a tensor a layer reads (input
        ``k``) or writes (``k`` None), as the layer's geometry sees it (a PWORD-padded
        input is the unpadded tensor in memory)."""
        geo = layer.geometry
        e = self.elem(tensor)
        g = self.graph
        if geo is not None and layer.runtime is None:
            if k is None or is_shortcut(layer, k):  # (a shortcut is laid out as the output)
                return geo.out_h, geo.out_w * geo.cout * e, geo.cout * e
            return geo.src_rows, geo.src_cols * geo.cin * e, geo.cin * e
        if geo is not None:  # run-time weights: rows are heads (an operand shared by
            nbytes = activation_bytes(g, tensor)  # every head: one row)
            if runtime_shared(layer, k, nbytes):
                return 1, nbytes, e
            if interleaved(g.shape(tensor)):  # heads are the channels of one row
                return 1, nbytes, geo.in_h * e
            return geo.in_h, -(-nbytes // geo.in_h), e
        rows = memory_rows(g.shape(tensor))
        nbytes = activation_bytes(g, tensor)
        shape = g.shape(tensor)
        pixel = (shape[1] if len(shape) == 4 else shape[-1] if shape else 1) * e
        return rows, nbytes // max(1, rows), pixel


def interleaved(shape: tuple[int, ...] | list[int]) -> bool:
    """Whether a tensor's matrices are interleaved as channels (`matrices` step > 1)."""
    found = matrices(tuple(shape))
    return found is not None and found.step > 1


__all__ = ["ScheduleInputs", "interleaved"]
