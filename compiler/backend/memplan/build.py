"""The buffers of one memory plan (docs/architecture.md §5): what a plan is made from
(`PlanInputs`) and the builder that collects every buffer of an instance from its layers,
tilings and core layout: graph inputs and outputs, activations, constants, L1 tile
buffers, weight staging and the tasklist image, each with its liveness and home pool.
`plan` places them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aipusim.compiler.backend.common.layout import CoreLayout, Split
from aipusim.compiler.backend.common.target import Target
from aipusim.compiler.backend.imc.plan import LayerMapping
from aipusim.compiler.backend.lower.layer import LayerPlan, LayerUnit, activation_bytes, is_runtime
from aipusim.compiler.backend.memplan.buffers import (
    _LADDER,
    _POOL_OF,
    TILE_KINDS,
    Buffer,
    BufKind,
    const_buffer,
    io_slots,
)
from aipusim.compiler.backend.multicore.exchange import host_read_tensors
from aipusim.compiler.backend.pack.blobs import LayerConstants
from aipusim.compiler.backend.tile.tiler import FusionGroup, Tiling, psum_bytes
from aipusim.compiler.decoder import append_in_place, cache_state
from aipusim.isa.dpu_work import PSUM_BYTES
from aipusim.isa.tasks import Pool


class _Builder:
    """Collects the buffers of one instance from the layers, tilings and core layout."""

    def __init__(self, inputs: PlanInputs, spared: frozenset[str] = frozenset()) -> None:
        self.layers, self.groups = inputs.layers, inputs.groups
        self.g, self.cfg = inputs.graph, inputs.target.knobs
        self.spared = spared
        self.tilings, self.mappings = inputs.tilings, inputs.mappings
        self.constants = inputs.constants
        self.layout = inputs.layout
        self.tasklist_bytes = inputs.tasklist_bytes
        self.buffers: dict[str, Buffer] = {}
        self.tensor_buffer: dict[tuple[int, str], str] = {}
        self.step_of_layer = {li: g.index for g in inputs.groups for li in g.layers}
        self.last = max(len(inputs.groups) - 1, 0)

    def add(self, buf: Buffer) -> Buffer:
        assert buf.name not in self.buffers, f"duplicate buffer {buf.name}"
        if self.layout.pipeline and buf.allowed != (Pool.L1,) and buf.kind not in TILE_KINDS:
            local = (buf.kind is BufKind.ACTIVATION and buf.allowed == _LADDER) or (
                buf.kind is BufKind.L2_STAGE
            )
            if local:
                # reused only within its stage: other stages run other frames meanwhile
                buf.stage = buf.core
            else:
                # read by two stages (or all): held for the whole frame
                buf.start, buf.end = 0, self.last
        elif self.layout.replicate and self.layout.cores > 1 and buf.allowed != (Pool.L1,):
            # batch: every core runs its own frame at its own pace and nothing orders one
            # core's buffers after another's, so L2/DDR bytes are reused within a core only
            buf.stage = buf.core
        self.buffers[buf.name] = buf
        return buf

    def frame_cores(self) -> list[int]:
        """Cores owning separate copies of frame data (-1: one shared copy)."""
        return self.layout.all_cores if self.layout.replicate else [-1]

    def build(self) -> tuple[dict[str, Buffer], dict[tuple[int, str], str]]:
        cfg = self.cfg
        io_home = _POOL_OF[cfg.io_memory_pool]
        ws_home = _POOL_OF[cfg.workspace_memory_pool]
        slots = io_slots(cfg.double_buffer, self.layout)
        fused = {t for g in self.groups for t in g.intermediates}
        host_side = (Pool.DDR, Pool.L2)  # the host writes/reads them over PCIe
        # a tensor whose buffer a graph output aliases (a final Reshape) is read by the host
        host_read = host_read_tensors(self.layers, self.g.outputs)
        # a decoder's KV cache (past inputs, present outputs) lives in DDR between steps
        cache = cache_state(self.g)
        kv = set(cache) | set(cache.values())
        # a cache grown in place: one buffer, the present's size, holds the past in its
        # first bytes and takes the step's rows after them; one slot, since a sequence's
        # cache is one state that a step reads and grows (`decoder.append_in_place`)
        grown = append_in_place(self.g)
        for c in self.frame_cores():
            for name in self.g.inputs:
                size = activation_bytes(self.g, name)
                home = Pool.DDR if name in kv else io_home if io_home in host_side else Pool.L2
                held = activation_bytes(self.g, grown[name]) if name in grown else size
                b = self.add(
                    Buffer(
                        f"in:{name}{_sfx(c)}",
                        BufKind.INPUT,
                        held * (1 if name in grown else slots),
                        # the host writes the next frame's slot while this frame runs:
                        # I/O buffers are never reused within a frame
                        0,
                        self.last,
                        home,
                        max(c, 0),
                        accesses=size,
                        allowed=(Pool.DDR,) if name in kv else host_side,
                        tensor_bytes=held,
                    )
                )
                self.tensor_buffer[(c, name)] = b.name
                if name in grown:
                    self.tensor_buffer[(c, grown[name])] = b.name
        for li, layer in enumerate(self.layers):
            step = self.step_of_layer[li]
            owner = self.layout.core_of_group.get(step, 0)
            for c in self.frame_cores():
                for t in layer.inputs:
                    bname = self.tensor_buffer.get((c, t))
                    if bname:
                        buf = self.buffers[bname]
                        buf.end = max(buf.end, step)
                        buf.accesses += self.g.tensor(t).size
                if layer.unit is LayerUnit.ALIAS and (c, layer.inputs[0]) in self.tensor_buffer:
                    for o in layer.outputs:
                        self.tensor_buffer[(c, o)] = self.tensor_buffer[(c, layer.inputs[0])]
                    continue
                for o in layer.outputs:
                    if o in fused or o in grown.values():
                        continue  # (a cache grown in place: its past's buffer)
                    size = activation_bytes(self.g, o)
                    is_out = o in host_read
                    shared = o in self.layout.shared_tensors or self.layout.cooperative
                    allowed = host_side if (is_out or shared) else _LADDER
                    home = io_home if is_out else ws_home
                    if home not in allowed:
                        home = Pool.L2
                    if is_out and o in kv:
                        allowed, home = (Pool.DDR,), Pool.DDR
                    copies: tuple[int, ...] = ()
                    if o in self.layout.l1_exchange:
                        # a copy in every core's L1, else the shared pools (`exchange`)
                        allowed, home, copies = _LADDER, Pool.L1, tuple(self.layout.all_cores)
                    b = self.add(
                        Buffer(
                            f"act:{o}{_sfx(c)}",
                            BufKind.OUTPUT if is_out else BufKind.ACTIVATION,
                            size * (slots if is_out else 1),
                            0 if is_out else step,
                            self.last if is_out else step,
                            home,
                            max(c, 0) if c >= 0 else owner,
                            layer.name,
                            accesses=size,
                            allowed=allowed,
                            tensor_bytes=size,
                            l1_cores=copies,
                        )
                    )
                    self.tensor_buffer[(c, o)] = b.name
            self.add_constants(li, owner)
            for c in self.layout.group_cores(step):
                self.add_tiles(li, step, c)
        if not cfg.elf_in_ddr and not cfg.stream_tasklist:
            self.add(
                Buffer(
                    "tasklist",
                    BufKind.TASKLIST,
                    self.tasklist_bytes,
                    0,
                    self.last,
                    Pool.L2,
                    allowed=(Pool.L2,),
                )
            )
        return self.buffers, self.tensor_buffer

    def add_constants(self, li: int, core: int) -> None:
        """The layer's constant blobs (`constants.LayerConstants`): the weight image in the
        constant pool, parameters and constant operands in the DPU constants' home."""
        cfg = self.cfg
        layer, consts = self.layers[li], self.constants[li]
        # several cores read them: keep them where every core can (L2/DDR)
        shared = self.layout.cores > 1 and not self.layout.pipeline
        allowed = (Pool.DDR, Pool.L2) if shared else _LADDER
        for prefix, size, kind, knob in (
            ("weights", len(consts.weights), BufKind.WEIGHT, cfg.constant_memory_pool),
            ("params", len(consts.params), BufKind.DPU_CONST, cfg.dpu_constants_home),
            ("operand", len(consts.operand), BufKind.DPU_CONST, cfg.dpu_constants_home),
        ):
            if not size:
                continue
            home = _POOL_OF[knob]
            if home not in allowed:
                home = Pool.L2
            self.add(
                Buffer(
                    const_buffer(prefix, layer.name),
                    kind,
                    size,
                    0,
                    self.last,
                    home,
                    core,
                    layer.name,
                    accesses=size,
                    allowed=allowed,
                )
            )

    def add_tiles(self, li: int, step: int, core: int) -> None:
        layer, t, mapping = self.layers[li], self.tilings[li], self.mappings[li]
        consts = self.constants[li]
        l1 = (Pool.L1,)
        sfx = f"@{core}"

        def tile(name: str, kind: BufKind, size: int) -> None:
            self.add(
                Buffer(name + sfx, kind, size, step, step, Pool.L1, core, layer.name, allowed=l1)
            )

        for k, size in enumerate(t.in_tile_bytes):
            # (an input in every core's L1 is read in place: `plan_memory`)
            spared = layer.inputs[k] in self.spared and not (k == 0 and t.fused_input)
            if size and not spared:
                tile(f"tile_in{k}:{layer.name}", BufKind.TILE_IN, size * t.slots)
                self.serve(layer.inputs[k], core, f"tile_in{k}:{layer.name}{sfx}")
        if t.out_tile_bytes and (t.fused_output or layer.outputs[0] not in self.spared):
            tile(f"tile_out:{layer.name}", BufKind.TILE_OUT, t.out_tile_bytes * t.slots)
            if not t.fused_output:  # (a fused output tile is what the next layer reads)
                self.serve(layer.outputs[0], core, f"tile_out:{layer.name}{sfx}")
        if t.psum_bytes:
            size = t.psum_bytes
            if mapping is not None and layer.geometry is not None and t.out_rows:
                # the mappings the schedule uses (their ICR may differ from the tiler's)
                size = max(
                    [psum_bytes(t.out_rows, layer.geometry.out_w, tm.mapping)
                     for tm in mapping.tiles if tm.mapping.row_blocks > 1] or [size]
                )  # fmt: skip
            tile(f"psum:{layer.name}", BufKind.PSUM, size)
        elif self.layout.splits.get(li) is Split.INPUTS and layer.geometry is not None:
            # tensor parallel: every core's partial sums of every output channel, gathered
            # in the first core's buffer (the others use their own plane of theirs)
            tile(
                f"psum:{layer.name}",
                BufKind.PSUM,
                self.layout.cores * PSUM_BYTES * layer.geometry.cout,
            )
        if layer.unit is LayerUnit.MVM and not is_runtime(layer):
            assert mapping is not None, layer.name
            biggest = t.block_bytes or max(b.weight_bytes for b in mapping.whole.blocks)
            depth = (
                2
                if (self.cfg.imc_double_buffer_pipeline or self.cfg.imc_double_buffer_sequential)
                else 1
            )
            tile(
                f"wstage:{layer.name}",
                BufKind.WEIGHT_STAGE,
                max(t.weight_stage_bytes, depth * biggest),
            )
            if self.cfg.use_sysdma and core == self.layout.group_cores(step)[0]:
                self.add(
                    Buffer(
                        f"l2stage:{layer.name}",
                        BufKind.L2_STAGE,
                        len(consts.weights),
                        step,
                        step,
                        Pool.L2,
                        core,
                        layer.name,
                        allowed=(Pool.L2,),
                    )
                )
        if layer.unit is LayerUnit.DWPU and len(consts.weights):
            tile(f"wstage:{layer.name}", BufKind.WEIGHT_STAGE, len(consts.weights))
        staged = len(consts.params) + len(consts.operand)
        if staged:
            tile(f"dconst:{layer.name}", BufKind.DPU_CONST_STAGE, staged)

    def serve(self, tensor: str, core: int, tile_name: str) -> None:
        """Note that L1 tile buffer ``tile_name`` of ``core`` only copies ``tensor``: the
        schedule reads and writes a tensor in L1 in place (`tiles.TileEmitter`), so the
        tile is needless when this core's copy of the tensor lies in this core's L1."""
        name = self.tensor_buffer.get((core if self.layout.replicate else -1, tensor))
        buf = self.buffers.get(name) if name else None
        if buf is not None and buf.core == core and Pool.L1 in buf.allowed:
            buf.serves += (tile_name,)


def _sfx(core: int) -> str:
    return f"@{core}" if core >= 0 else ""


@dataclass(frozen=True)
class PlanInputs:
    """What one memory plan is made from: the packed IR's layers, tilings, fusion groups,
    IMC mappings and constants, the graph, the target and the core layout, the tasklist
    image's estimated size and which try this is (`plan_memory`).

    >>> PlanInputs([], [], [], [], [], None, None).attempt
    1
    """

    layers: Sequence[LayerPlan]
    tilings: Sequence[Tiling]
    groups: Sequence[FusionGroup]
    mappings: Sequence[LayerMapping | None]
    constants: Sequence[LayerConstants]
    graph: Any
    target: Target
    layout: CoreLayout = field(default_factory=CoreLayout)
    tasklist_bytes: int = 0
    attempt: int = 1


__all__ = [
    "PlanInputs",
]
