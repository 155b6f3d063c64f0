"""Pass 9, schedule: per-core task order and hardware tokens (DESIGN.md §3, §4).

The builder walks the fusion groups in order and, for every core that works on a group,
every tile and every layer of the group, creates steps: DMA of the input tile (unless the
tensor is L1-resident or a fused intermediate), DMA of streamed weights into L1 staging
(through L2 by the system DMA when ``use_sysdma``), IMC weight-set loads, the compute task,
DMA of the output tile. Each step records the steps it depends on: producers of its data,
the last user of a buffer slot or weight set it overwrites (write-after-read), and the
knob-driven fences below. Tokens are derived from these dependencies last.

Knobs:
- ``pipeline_spatial_tiles`` / ``pipeline_channel_tiles``: two buffer slots per tile stream,
  so the DMA of tile i+1 runs while tile i computes; off: one slot, strictly in turn.
- ``inter_operator_async``: off puts a fence before each group (its tasks wait for every
  task of the previous group).
- ``unroll_prologue_epilogue``: off keeps each group's prologue (first input DMA and weight
  fetch) behind the previous group's epilogue (its last compute and output DMA).
- ``imc_double_buffer_pipeline`` / ``_sequential``: a weight set may load while another
  computes (tiled / untiled layers); off, a load waits for the array to go idle.
- ``group_ifdw_tasks``: weight-set loads are hoisted: they wait only for a free set, not
  for the layer's input, so they run during the previous layer.
- ``use_list_scheduler``: the stream is ordered by critical path (longest remaining
  estimated cycles first) instead of program order, subject to the dependencies.
- ``dma_dual_channel``: activations on ``dma0``, weights and constants on ``dma1``; off,
  everything on ``dma0``.
- ``use_sysdma``: DDR -> L2 weight transfers on ``sysdma``, L2 -> L1 on the core DMA.

Tokens are derived from the dependencies last (`aipusim.compiler.backend.tokens`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aipusim.arch import Arch
from aipusim.compiler.backend.imc_plan import LayerMapping, part_range
from aipusim.compiler.backend.layout import CoreLayout, Split
from aipusim.compiler.backend.lower import ConstKind, LayerPlan, LayerUnit, is_runtime
from aipusim.compiler.backend.memplan import Buffer, MemPlan
from aipusim.compiler.backend.runtime_mvm import RuntimeMvmMixin
from aipusim.compiler.backend.tile import FusionGroup, Tiling
from aipusim.compiler.backend.tokens import Schedule, Step, TokenMixin
from aipusim.isa.cost import cost_model
from aipusim.isa.tasks import (
    Barrier,
    DmaCopy,
    DpuKind,
    DpuOp,
    DwpuOp,
    HostTransfer,
    Mvm,
    Phase,
    Pool,
    PostOp,
    Task,
    Unit,
    WeightLoad,
)
from aipusim.isa.tasks import Direction as Dir


@dataclass
class _WeightState:
    """What one core's IMC weight sets hold while the frame is emitted."""

    holds: list[Any]
    last_user: list[int | None]
    lru: list[int]


class ScheduleBuilder(RuntimeMvmMixin, TokenMixin):
    def __init__(
        self,
        layers: Sequence[LayerPlan],
        tilings: Sequence[Tiling],
        groups: Sequence[FusionGroup],
        mappings: Sequence[LayerMapping | None],
        plan: MemPlan,
        graph: Any,
        config: Any,
        arch: Arch,
        layout: CoreLayout,
    ) -> None:
        self.layers, self.groups, self.plan = layers, groups, plan
        self.tilings, self.mappings = tilings, mappings
        self.index = {layer.name: i for i, layer in enumerate(layers)}
        self.cost = cost_model(arch, int(config.frequency), float(config.mvm_utilization_limit))
        self.g, self.cfg, self.arch, self.layout = graph, config, arch, layout
        self.steps: list[Step] = []
        self.produced: dict[tuple[int, str], list[int]] = defaultdict(list)
        self.tile_steps: dict[tuple[int, str, int], int] = {}
        self.buf_access: dict[str, list[int]] = defaultdict(list)
        self.slot_user: dict[tuple[str, int], list[int]] = defaultdict(list)
        self.weights: dict[int, _WeightState] = {}
        self.resident: dict[Any, int] = {}
        self.stage_counter: dict[tuple[int, str], int] = defaultdict(int)
        self.group_steps: dict[tuple[int, int], list[int]] = defaultdict(list)
        self.fence: dict[int, set[int]] = defaultdict(set)
        self.current_group = 0
        self.act_dma = Unit.DMA0
        self.wt_dma = Unit.DMA1 if config.dma_dual_channel else Unit.DMA0
        self.dconst_loaded: set[tuple[int, str]] = set()
        self.barrier_id = 0
        self.last_mvm: dict[int, int | None] = {}  # newest Mvm step per core
        self.last_fetch: dict[Any, int] = {}  # batch: the multicast fetch of a weight block
        self.slot_fill: dict[Any, set[int]] = {}  # tile slot -> the DMA that filled it
        self.tile_steps_buf: dict[Any, Any] = {}  # fused output -> (buffer, slots, bytes)
        self.dconst_steps: dict[Any, set[int]] = {}
        self.pending_slot: Any = None  # the weight staging slot the next load reads
        self.deferred: dict[int, list[Any]] = defaultdict(list)  # held-back output stores
        self.flushed: dict[int, list[int]] = defaultdict(list)

    def tiling_of(self, layer: LayerPlan) -> Tiling:
        return self.tilings[self.index[layer.name]]

    def mapping_of(self, layer: LayerPlan) -> LayerMapping:
        mapping = self.mappings[self.index[layer.name]]
        assert mapping is not None, f"{layer.name}: no IMC mapping"
        return mapping

    # -- steps -----------------------------------------------------------------------
    def add(
        self,
        core: int,
        unit: Unit,
        kind: type[Task],
        fields: dict[str, Any],
        *,
        layer: str,
        tile: int = 0,
        deps: set[int] | None = None,
        phase: Phase = Phase.FRAME,
        touches: tuple[str, ...] = (),
    ) -> int:
        sid = len(self.steps)
        deps = set(deps or ())
        if phase is Phase.FRAME:
            deps |= self.fence[core]
        slot = core if self.layout.replicate else 0
        # what the task will cost, by the model the simulator runs it with (the list
        # scheduler ranks steps by it)
        cycles = self.cost.task(kind(unit=unit, layer=layer, **fields)).cycles
        self.steps.append(
            Step(sid, core, unit, kind, fields, layer, tile, phase, slot, deps, max(1, cycles))
        )
        for name in touches:
            self.buf_access[name].append(sid)
        if phase is Phase.FRAME:
            self.group_steps[(core, self.current_group)].append(sid)
        return sid

    def copy_key(self, core: int) -> int:
        return core if self.layout.replicate else -1

    def buffer(self, tensor: str, core: int) -> Buffer:
        buf = self.plan.buffer_of(tensor, self.copy_key(core))
        assert buf is not None, f"tensor {tensor} has no buffer"
        return buf

    def tile_buffer(self, prefix: str, layer: LayerPlan, core: int) -> Buffer | None:
        return self.plan.buffers.get(f"{prefix}:{layer.name}@{core}")

    def dma(
        self,
        core: int,
        unit: Unit,
        src: tuple[Pool, int],
        dst: tuple[Pool, int],
        nbytes: int,
        *,
        layer: str,
        tile: int,
        deps: set[int],
        touches: tuple[str, ...],
        mask: int = 0,
        phase: Phase = Phase.FRAME,
    ) -> int:
        fields = dict(
            src_pool=src[0],
            src_addr=src[1],
            dst_pool=dst[0],
            dst_addr=dst[1],
            bytes=max(1, nbytes),
            dst_core_mask=mask,
        )
        return self.add(
            core,
            unit,
            DmaCopy,
            fields,
            layer=layer,
            tile=tile,
            deps=deps,
            phase=phase,
            touches=touches,
        )

    # -- INIT: constants on chip --------------------------------------------------------
    def plan_weights(self) -> bool:
        """True when every weight set of the model fits the IMC: load them all in INIT."""
        keys = []
        for layer in self.layers:
            if layer.unit is LayerUnit.MVM and not is_runtime(layer):
                for tile_map, oi in self.tile_maps(layer, 0):
                    keys += [(layer.name, oi, b) for b in range(len(tile_map.blocks))]
        # run-time weights (attention) need sets of their own every frame: two, so that the
        # next head loads while one computes
        runtime = any(is_runtime(layer) for layer in self.layers)
        return len(keys) + (2 if runtime else 0) <= self.arch.mvm.weight_sets

    def emit_init(self, resident: bool) -> None:
        cores = self.layout.all_cores
        for buf in self.plan.buffers.values():
            if buf.kind.value in ("weight", "dpu_const") and buf.pool is not Pool.DDR:
                # the constant image arrives in DDR with the model; bring it on chip once
                owner = buf.core if buf.pool is Pool.L1 else 0
                self.dma(
                    owner,
                    self.wt_dma,
                    (Pool.DDR, 0),
                    (buf.pool, buf.addr),
                    buf.size_bytes,
                    layer=buf.layer,
                    tile=0,
                    deps=set(),
                    touches=(buf.name,),
                    phase=Phase.INIT,
                )
        if not resident:
            return
        set_index = 0
        for layer in self.layers:
            if layer.unit is not LayerUnit.MVM or is_runtime(layer):
                continue
            for tile_map, oi in self.tile_maps(layer, 0):
                offset = 0
                for b, blk in enumerate(tile_map.blocks):
                    for core in cores:
                        src = self.weight_source(
                            layer,
                            core,
                            offset,
                            blk.weight_bytes,
                            tile=0,
                            phase=Phase.INIT,
                            extra=set(),
                        )
                        self.add(
                            core,
                            Unit.WLOAD,
                            WeightLoad,
                            dict(
                                weight_set=set_index,
                                src_addr=src[0],
                                bytes=blk.weight_bytes,
                                rows_used=blk.rows_used,
                                cols_used=blk.cols_used,
                            ),
                            layer=layer.name,
                            deps=src[1],
                            phase=Phase.INIT,
                        )
                    self.resident[(layer.name, oi, b)] = set_index
                    set_index += 1
                    offset += blk.weight_bytes

    # -- weights -------------------------------------------------------------------------
    def tile_maps(self, layer: LayerPlan, part: int) -> list[tuple[Any, int]]:
        """The IMC mapping of each output-channel tile of ``layer`` for this core's part (as
        the imc pass decided it)."""
        return [(t.mapping, t.oc_tile) for t in self.mapping_of(layer).of_part(part)]

    def weight_source(
        self,
        layer: LayerPlan,
        core: int,
        offset: int,
        nbytes: int,
        *,
        tile: int,
        phase: Phase,
        extra: set[int],
    ) -> tuple[int, set[int]]:
        """L1 address the weight block is read from, and the steps that put it there."""
        wname = next(c.name for c in layer.consts if c.kind is ConstKind.WEIGHT)
        wbuf = self.plan.buffers[f"const:{wname}"]
        if wbuf.pool is Pool.L1:
            return wbuf.addr + offset, set()
        stage = self.tile_buffer("wstage", layer, core)
        assert stage is not None, f"{layer.name}: no weight staging buffer"
        biggest = self.tiling_of(layer).block_bytes or max(
            b.weight_bytes for b in self.mapping_of(layer).whole.blocks
        )
        depth = max(1, stage.size_bytes // max(1, biggest))
        counter_key = (core, layer.name)
        slot = self.stage_counter[counter_key] % depth
        self.stage_counter[counter_key] += 1
        dst = stage.addr + slot * biggest
        slot_key = (stage.name, slot)
        # batch: one fetch, multicast to every core's staging slot
        fetch_core = 0 if self.layout.replicate else core
        deps = set(extra) | set(self.slot_user[slot_key])
        self.pending_slot = (slot_key, None)
        if self.layout.replicate:
            for c in self.layout.all_cores:
                deps |= set(self.slot_user[(f"wstage:{layer.name}@{c}", slot)])
            if core != fetch_core:
                return dst, {self.last_fetch[(layer.name, offset, tile)]}
        mask = 0
        if self.layout.replicate and self.layout.cores > 1:
            mask = (1 << self.layout.cores) - 1
        src = (wbuf.pool, wbuf.addr + offset)
        l2stage = self.plan.buffers.get(f"l2stage:{layer.name}")
        if self.cfg.use_sysdma and wbuf.pool is Pool.DDR and l2stage is not None:
            hop = self.dma(
                fetch_core,
                Unit.SYSDMA,
                src,
                (Pool.L2, l2stage.addr + offset),
                nbytes,
                layer=layer.name,
                tile=tile,
                deps=set(self.slot_user[(l2stage.name, offset)]),
                touches=(l2stage.name,),
                phase=phase,
            )
            deps.add(hop)
            src = (Pool.L2, l2stage.addr + offset)
        sid = self.dma(
            fetch_core,
            self.wt_dma,
            src,
            (Pool.L1, dst),
            nbytes,
            layer=layer.name,
            tile=tile,
            deps=deps,
            touches=(wbuf.name, stage.name),
            mask=mask,
            phase=phase,
        )
        self.last_fetch[(layer.name, offset, tile)] = sid
        if src[0] is Pool.L2 and l2stage is not None and src[1] == l2stage.addr + offset:
            self.slot_user[(l2stage.name, offset)] = [sid]  # the L2 copy has been read
        self.pending_slot = (slot_key, None)
        return dst, {sid}

    def ensure_weights(
        self,
        core: int,
        layer: LayerPlan,
        key: Any,
        blk: Any,
        offset: int,
        tile: int,
        pinned: set[int],
        input_deps: set[int],
        tiled: bool,
    ) -> tuple[int, set[int]]:
        """The weight set holding block ``key`` on ``core`` (loading it if needed)."""
        if key in self.resident:
            return self.resident[key], set()
        st = self.weights[core]
        if key in st.holds:
            s = st.holds.index(key)
            st.lru.remove(s)
            st.lru.append(s)
            return s, set()
        # least recently used, preferring a set this tile does not need any more
        s = self.claim_set(core, pinned)
        extra: set[int] = set()
        if not self.cfg.group_ifdw_tasks:
            extra |= input_deps  # the load belongs to its layer: not before its input
        self.pending_slot = None
        src_addr, src_deps = self.weight_source(
            layer, core, offset, blk.weight_bytes, tile=tile, phase=Phase.FRAME, extra=extra
        )
        deps = set(src_deps) | extra
        if st.last_user[s] is not None:
            deps.add(st.last_user[s])  # the set's previous block is no longer read
        double = (
            self.cfg.imc_double_buffer_pipeline
            if tiled
            else (self.cfg.imc_double_buffer_sequential)
        )
        if not double and self.last_mvm.get(core) is not None:
            deps.add(self.last_mvm[core])  # no free set to load into while the array works
        sid = self.add(
            core,
            Unit.WLOAD,
            WeightLoad,
            dict(
                weight_set=s,
                src_addr=src_addr,
                bytes=blk.weight_bytes,
                rows_used=blk.rows_used,
                cols_used=blk.cols_used,
            ),
            layer=layer.name,
            tile=tile,
            deps=deps,
        )
        if self.pending_slot is not None:
            slot_key, _ = self.pending_slot
            self.slot_user[slot_key] = [sid]
        st.holds[s] = key
        st.last_user[s] = None
        return s, {sid}

    # -- layers ------------------------------------------------------------------------
    def part_of(self, layer_index: int, core: int) -> tuple[int, int, Split]:
        """(part index, part count, split) of ``core`` for a layer."""
        split = self.layout.splits.get(layer_index, Split.NONE)
        if split is Split.NONE:
            return 0, 1, split
        return self.layout.all_cores.index(core), self.layout.cores, split

    def input_source(
        self,
        core: int,
        layer: LayerPlan,
        k: int,
        tensor: str,
        h: int,
        rows: tuple[int, int],
        tile_no: int,
        need: bool,
    ) -> tuple[int, set[int]]:
        """L1 address of input ``k`` for this tile and the steps it waits for."""
        t = self.tiling_of(layer)
        if t.fused_input:
            prev = self.tile_steps[(core, tensor, tile_no)]
            out_buf = self.tile_steps_buf[(core, tensor)]
            slot = tile_no % out_buf[1]
            return out_buf[0].addr + slot * out_buf[2], {prev}
        buf = self.buffer(tensor, core)
        producers = set(self.produced.get((self.copy_key(core), tensor), ()))
        # run-time weight layers are cut by heads, the outer dims of both operands
        height = layer.geometry.in_h if is_runtime(layer) else self._height(tensor)
        row_bytes = max(1, buf.tensor_bytes // max(1, height))
        if layer.geometry is None and height != layer.rows:
            rows = (0, height)  # a broadcast operand: the whole tensor every tile
        rows = (min(rows[0], height), min(rows[1], height))
        if buf.pool is Pool.L1:
            return buf.addr + rows[0] * row_bytes, producers
        tin = self.tile_buffer(f"tile_in{k}", layer, core)
        assert tin is not None, f"{layer.name}: no input tile buffer"
        slot = h % t.slots
        per = tin.size_bytes // t.slots
        dst = tin.addr + slot * per
        if not need:
            return dst, set(self.slot_fill.get((tin.name, slot), ()))
        nbytes = min(per, max(1, (rows[1] - rows[0]) * row_bytes))
        deps = producers | set(self.slot_user[(tin.name, slot)])
        sid = self.dma(
            core,
            self.act_dma,
            (buf.pool, buf.addr + rows[0] * row_bytes),
            (Pool.L1, dst),
            nbytes,
            layer=layer.name,
            tile=tile_no,
            deps=deps,
            touches=(buf.name, tin.name),
        )
        self.slot_fill[(tin.name, slot)] = {sid}
        self.flush_stores(core)
        return dst, {sid}

    def _height(self, tensor: str) -> int:
        shape = self.g.shape(tensor)
        return shape[2] if len(shape) >= 4 else 1

    def output_target(
        self, core: int, layer: LayerPlan, h: int
    ) -> tuple[int, Buffer | None, set[int]]:
        """Where the compute task writes its output tile, the buffer to DMA it to (None when
        written in place) and the steps that must have read that place first."""
        t = self.tiling_of(layer)
        out = layer.outputs[0]
        tout = self.tile_buffer("tile_out", layer, core)
        if not t.fused_output:
            buf = self.buffer(out, core)
            if buf.pool is Pool.L1 or tout is None:
                return buf.addr, None, set()
        assert tout is not None, f"{layer.name}: no output tile buffer"
        slot = h % t.slots
        per = tout.size_bytes // t.slots
        self.tile_steps_buf[(core, out)] = (tout, t.slots, per)
        return tout.addr + slot * per, tout, set(self.slot_user[(tout.name, slot)])

    def emit_layer_tile(
        self, li: int, layer: LayerPlan, core: int, hi: int, tile_no: int, prologue: set[int]
    ) -> list[int]:
        """Emit one (row tile x all channel tiles) of ``layer`` on ``core``; returns the
        compute steps."""
        t = self.tiling_of(layer)
        part, parts, split = self.part_of(li, core)
        if self.layout.cooperative and split is Split.NONE and core != 0:
            return []  # too small to split: core 0 runs it alone
        geo = layer.geometry
        out_h = geo.out_h if geo else layer.rows
        rlo, rhi = part_range(out_h, t.h_tiles, hi)
        if split is Split.ROWS:
            span = rhi - rlo
            a, b = part_range(span, parts, part)
            rlo, rhi = rlo + a, rlo + b
        if rhi <= rlo:
            return []
        if geo is not None:
            in_lo = rlo * geo.stride_h
            in_hi = min(geo.in_h, (rhi - 1) * geo.stride_h + geo.kh)
        else:
            in_lo, in_hi = rlo, rhi
        computes: list[int] = []
        in_addrs, in_deps = [], set(prologue)
        for k, tensor in enumerate(layer.inputs):
            addr, deps = self.input_source(
                core, layer, k, tensor, hi, (in_lo, in_hi), tile_no, need=True
            )
            in_addrs.append(addr)
            in_deps |= deps
        out_addr, out_dma_buf, out_war = self.output_target(core, layer, hi)
        dconst = self.load_dpu_consts(core, layer, in_deps)
        rows = rhi - rlo
        if layer.unit is LayerUnit.MVM and is_runtime(layer):
            psum = self.tile_buffer("psum", layer, core)
            computes = self.emit_runtime_mvm(
                core, layer, (rlo, rhi), tile_no, in_addrs, out_addr,
                psum.addr if psum is not None else None, in_deps | out_war | dconst,
            )  # fmt: skip
        elif layer.unit is LayerUnit.MVM:
            computes = self.emit_mvm(
                core, layer, part, rows, tile_no, in_addrs[0], out_addr, in_deps | out_war | dconst
            )
        elif layer.unit is LayerUnit.DWPU:
            computes = [
                self.emit_dwpu(
                    core,
                    layer,
                    part,
                    parts,
                    split,
                    rows,
                    in_hi - in_lo,
                    tile_no,
                    in_addrs[0],
                    out_addr,
                    in_deps | out_war | dconst,
                )
            ]
        else:
            computes = [
                self.emit_dpu(
                    core,
                    layer,
                    parts,
                    t.h_tiles,
                    tile_no,
                    in_addrs,
                    out_addr,
                    in_deps | out_war | dconst,
                )
            ]
        touches_in = [
            self.buffer(x, core).name
            for x in layer.inputs
            if not t.fused_input and self.plan.buffer_of(x, self.copy_key(core))
        ]
        for sid in computes:
            for name in touches_in:
                self.buf_access[name].append(sid)
        # input tile slots are free once the computes have read them
        for k, _ in enumerate(layer.inputs):
            tin = self.tile_buffer(f"tile_in{k}", layer, core)
            if tin is not None:
                self.slot_user[(tin.name, hi % t.slots)] = list(computes)
        out = layer.outputs[0]
        if t.fused_output:
            self.tile_steps[(core, out, tile_no)] = computes[-1]
            self.slot_user[(out_dma_buf.name, hi % t.slots)] = []
            return computes
        if out_dma_buf is None:
            buf = self.buffer(out, core)
            self.buf_access[buf.name] += computes
            self.produced[(self.copy_key(core), out)] += computes
            return computes
        buf = self.buffer(out, core)
        row_bytes = max(1, self.g.tensor(out).size // max(1, out_h))
        nbytes = max(1, rows * row_bytes // (parts if split is Split.CHANNELS else 1))

        def store() -> int:
            sid = self.dma(
                core,
                self.act_dma,
                (Pool.L1, out_addr),
                (buf.pool, buf.addr + rlo * row_bytes),
                nbytes,
                layer=layer.name,
                tile=tile_no,
                deps=set(computes),
                touches=(out_dma_buf.name, buf.name),
            )
            self.slot_user[(out_dma_buf.name, hi % t.slots)] = [sid]
            self.produced[(self.copy_key(core), out)].append(sid)
            return sid

        if t.slots > 1:
            # software pipelining: the next tile's input DMA goes ahead of this store on
            # the in-order DMA queue, so it overlaps this tile's compute
            self.deferred[core].append(store)
            return computes
        return [*computes, store()]

    def flush_stores(self, core: int) -> None:
        """Emit the output DMAs held back for software pipelining."""
        for store in self.deferred.pop(core, []):
            self.flushed[core].append(store())

    def load_dpu_consts(self, core: int, layer: LayerPlan, deps: set[int]) -> set[int]:
        """Bring the layer's DPU constants (bias, scales, operands) into L1 once per frame."""
        stage = self.tile_buffer("dconst", layer, core)
        if stage is None:
            return set()
        key = (core, layer.name)
        if key in self.dconst_loaded:
            return set(self.dconst_steps[key])
        self.dconst_loaded.add(key)
        sids: set[int] = set()
        offset = 0
        for c in layer.consts:
            if c.kind is not ConstKind.DPU_CONST:
                continue
            buf = self.plan.buffers[f"const:{c.name}"]
            if buf.pool is Pool.L1:
                continue
            unit = self.wt_dma
            sids.add(
                self.dma(
                    core,
                    unit,
                    (buf.pool, buf.addr),
                    (Pool.L1, stage.addr + offset),
                    c.size_bytes,
                    layer=layer.name,
                    tile=0,
                    deps=set(self.slot_user[(stage.name, 0)]) | set(self.fence[core]),
                    touches=(buf.name, stage.name),
                )
            )
            offset += c.size_bytes
        self.dconst_steps[key] = sids
        return sids

    def emit_mvm(
        self,
        core: int,
        layer: LayerPlan,
        part: int,
        rows: int,
        tile_no: int,
        in_addr: int,
        out_addr: int,
        deps: set[int],
    ) -> list[int]:
        geo = layer.geometry
        t = self.tiling_of(layer)
        psum = self.tile_buffer("psum", layer, core)
        computes = []
        offset = 0
        tiled = t.tiles > 1
        for tile_map, oi in self.tile_maps(layer, part):
            pinned: set[int] = set()
            vectors = rows * math.ceil(geo.out_w / tile_map.icr)
            for b, blk in enumerate(tile_map.blocks):
                key = (layer.name, oi, b)
                s, wdeps = self.ensure_weights(
                    core, layer, key, blk, offset, tile_no, pinned, deps, tiled
                )
                pinned.add(s)
                offset += blk.weight_bytes
                last_row = blk.row_block == tile_map.row_blocks - 1
                post = PostOp.REQUANT_LUT if layer.lut.value != "none" else PostOp.REQUANT
                target = out_addr if last_row or psum is None else psum.addr
                sid = self.add(
                    core,
                    Unit.MVM,
                    Mvm,
                    dict(
                        weight_set=s,
                        in_addr=in_addr,
                        out_addr=target,
                        vectors=max(1, vectors),
                        rows_used=blk.rows_used,
                        cols_used=blk.cols_used,
                        icr=tile_map.icr,
                        accumulate=int(blk.row_block > 0),
                        post=post if last_row else PostOp.NONE,
                        lut=layer.lut,
                    ),
                    layer=layer.name,
                    tile=tile_no,
                    deps=deps | wdeps,
                )
                self.weights[core].last_user[s] = sid
                self.last_mvm[core] = sid
                computes.append(sid)
        return computes

    def emit_dwpu(
        self,
        core: int,
        layer: LayerPlan,
        part: int,
        parts: int,
        split: Split,
        rows: int,
        in_rows: int,
        tile_no: int,
        in_addr: int,
        out_addr: int,
        deps: set[int],
    ) -> int:
        geo = layer.geometry
        channels = geo.cout
        if split is Split.CHANNELS:
            lo, hi = part_range(geo.cout, parts, part)
            channels = hi - lo
        wdeps: set[int] = set()
        if layer.weight_bytes:
            wdeps = self.dwpu_weights(core, layer, deps)
        fields = dict(
            kind=layer.dwpu_kind,
            in_addr=in_addr,
            out_addr=out_addr,
            channels=max(1, channels),
            h=max(1, in_rows),
            w=geo.in_w,
            out_h=rows,
            out_w=geo.out_w,
            kh=geo.kh,
            kw=geo.kw,
            stride=geo.stride_h,
            lut=layer.lut,
        )
        return self.add(
            core,
            Unit.DWPU,
            DwpuOp,
            fields,
            layer=layer.name,
            tile=tile_no,
            deps=deps | wdeps,
        )

    def dwpu_weights(self, core: int, layer: LayerPlan, deps: set[int]) -> set[int]:
        key = (core, "dw:" + layer.name)
        if key in self.dconst_loaded:
            return set(self.dconst_steps[key])
        self.dconst_loaded.add(key)
        wname = next(c.name for c in layer.consts if c.kind is ConstKind.WEIGHT)
        wbuf = self.plan.buffers[f"const:{wname}"]
        stage = self.tile_buffer("wstage", layer, core)
        if wbuf.pool is Pool.L1 or stage is None:
            self.dconst_steps[key] = set()
            return set()
        sid = self.dma(
            core,
            self.wt_dma,
            (wbuf.pool, wbuf.addr),
            (Pool.L1, stage.addr),
            wbuf.size_bytes,
            layer=layer.name,
            tile=0,
            deps=set(self.fence[core]) | (set() if self.cfg.group_ifdw_tasks else deps),
            touches=(wbuf.name, stage.name),
        )
        self.dconst_steps[key] = {sid}
        return {sid}

    def emit_dpu(
        self,
        core: int,
        layer: LayerPlan,
        parts: int,
        h_tiles: int,
        tile_no: int,
        in_addrs: list[int],
        out_addr: int,
        deps: set[int],
    ) -> int:
        elements = max(1, math.ceil(layer.elements / (h_tiles * parts)))
        fields = dict(
            kind=layer.dpu_kind or DpuKind.COPY,
            in_addr0=in_addrs[0] if in_addrs else 0,
            in_addr1=in_addrs[1] if len(in_addrs) > 1 else 0,
            out_addr=out_addr,
            elements=elements,
            operands=max(1, min(2, len(in_addrs))),
            lut=layer.lut,
        )
        return self.add(
            core,
            Unit.DPU,
            DpuOp,
            fields,
            layer=layer.name,
            tile=tile_no,
            deps=deps,
        )

    def emit_dma_layer(self, core: int, layer: LayerPlan, deps: set[int]) -> list[int]:
        """Concat/Split/Slice/Transpose/Pad: copies between the tensors' buffers."""
        sids = []
        key = self.copy_key(core)
        ins = [(t, self.buffer(t, core)) for t in layer.inputs]
        outs = [(t, self.buffer(t, core)) for t in layer.outputs]
        producers = set(deps)
        for t, _ in ins:
            producers |= set(self.produced.get((key, t), ()))
        if len(ins) >= len(outs):  # concat-like: each input lands at its offset
            dst_t, dst = outs[0]
            offset = 0
            for t, src in ins:
                n = min(self.g.tensor(t).size, dst.size_bytes - offset)
                sids.append(
                    self.dma(
                        core,
                        self.act_dma,
                        (src.pool, src.addr),
                        (dst.pool, dst.addr + offset),
                        max(1, n),
                        layer=layer.name,
                        tile=0,
                        deps=producers,
                        touches=(src.name, dst.name),
                    )
                )
                offset = min(dst.size_bytes - 1, offset + max(0, n))
            self.produced[(key, dst_t)] += sids
        else:  # split-like: each output comes from its offset
            _, src = ins[0]
            offset = 0
            for t, dst in outs:
                n = self.g.tensor(t).size
                sid = self.dma(
                    core,
                    self.act_dma,
                    (src.pool, src.addr + offset),
                    (dst.pool, dst.addr),
                    max(1, n),
                    layer=layer.name,
                    tile=0,
                    deps=producers,
                    touches=(src.name, dst.name),
                )
                self.produced[(key, t)].append(sid)
                sids.append(sid)
                offset = min(src.size_bytes - 1, offset + n)
        return sids

    # -- the frame -------------------------------------------------------------------------
    def emit_frame(self) -> None:
        cores = self.layout.all_cores
        for core in cores if self.layout.replicate else [0]:
            for name in self.g.inputs:
                buf = self.buffer(name, core)
                sid = self.add(
                    core,
                    Unit.CTRL,
                    HostTransfer,
                    dict(
                        direction=Dir.H2D,
                        pool=buf.pool,
                        addr=buf.addr,
                        bytes=self.g.tensor(name).size,
                    ),
                    layer="input",
                    touches=(buf.name,),
                )
                self.produced[(self.copy_key(core), name)].append(sid)
        if self.layout.cooperative and len(cores) > 1:
            self.current_group = -1
            self.emit_barriers(None)
        prev_by_core: dict[int, list[int]] = {}
        for g in self.groups:
            self.current_group = g.index
            for core in self.layout.group_cores(g.index):
                self.emit_group(g, core, prev_by_core)
            if self.layout.cooperative and len(cores) > 1:
                self.emit_barriers(g)
        for core in cores:
            if self.layout.pipeline and core != self.layout.core_of_group.get(
                self.groups[-1].index, 0
            ):
                continue
            if self.layout.cooperative and core != 0:
                continue
            for name in self.g.outputs:
                buf = self.buffer(name, core)
                self.add(
                    core,
                    Unit.CTRL,
                    HostTransfer,
                    dict(
                        direction=Dir.D2H,
                        pool=buf.pool,
                        addr=buf.addr,
                        bytes=self.g.tensor(name).size,
                    ),
                    layer="output",
                    deps=set(self.produced.get((self.copy_key(core), name), ())),
                    touches=(buf.name,),
                )

    def emit_group(self, g: FusionGroup, core: int, prev_by_core: dict[int, list[int]]) -> None:
        prev = prev_by_core.get(core, [])
        prologue: set[int] = set()
        if not self.cfg.inter_operator_async and prev:
            self.fence[core] = set(prev)
        elif not self.cfg.unroll_prologue_epilogue and prev:
            prologue = set(prev[-2:])  # the previous group's epilogue
        emitted: list[int] = []
        first_layer = self.layers[g.layers[0]]
        if first_layer.unit in (LayerUnit.DMA, LayerUnit.ALIAS):
            if first_layer.unit is LayerUnit.DMA and (
                core == 0 or self.layout.replicate or self.layout.pipeline
            ):
                emitted = self.emit_dma_layer(core, first_layer, prologue)
        else:
            for hi in range(g.h_tiles):
                for li in g.layers:
                    layer = self.layers[li]
                    emitted += self.emit_layer_tile(li, layer, core, hi, hi, prologue)
                prologue = set()
            self.flush_stores(core)
            emitted += self.flushed.pop(core, [])
        if emitted:
            prev_by_core[core] = emitted
        self.fence[core] = set()

    def emit_barriers(self, g: FusionGroup | None) -> None:
        """Cooperative: every core reaches the barrier after its part of group ``g`` (None:
        the input transfer); the next group's tasks wait for it."""
        self.barrier_id += 1
        mask = (1 << self.layout.cores) - 1
        index = g.index if g is not None else -1
        name = self.layers[g.layers[-1]].name if g is not None else "input"
        for core in self.layout.all_cores:
            mine = self.group_steps.get((core, index), [])
            sid = self.add(
                core,
                Unit.CTRL,
                Barrier,
                dict(barrier_id=self.barrier_id, core_mask=mask),
                layer=name,
                deps=set(mine),
            )
            self.fence[core] = {sid}

    # -- tokens --------------------------------------------------------------------------
    def add_memory_war(self) -> None:
        """A buffer that reuses the address range of an earlier, dead buffer on the same
        core is written only after the earlier one's last accesses."""
        for st in self.plan.pools.values():
            bufs = sorted(st.placed, key=lambda b: b.addr)
            for i, a in enumerate(bufs):
                a_acc = [
                    s for s in self.buf_access.get(a.name, ()) if self.steps[s].phase is Phase.FRAME
                ]
                if not a_acc:
                    continue
                a_end = a.addr + a.size_bytes
                for b in bufs[i + 1 :] + bufs[:i]:
                    if b.addr >= a_end or b.addr + b.size_bytes <= a.addr or b.start <= a.end:
                        continue
                    for sid in self.buf_access.get(b.name, ()):
                        step = self.steps[sid]
                        if step.phase is not Phase.FRAME:
                            continue
                        same_core = [
                            x for x in a_acc if self.steps[x].core == step.core and x < sid
                        ]
                        if same_core:
                            step.deps.add(max(same_core, key=lambda x: x))
                            step.deps.update(self._last_per_unit(same_core))

    def _last_per_unit(self, sids: list[int]) -> set[int]:
        last: dict[Unit, int] = {}
        for s in sids:
            u = self.steps[s].unit
            if s > last.get(u, -1):
                last[u] = s
        return set(last.values())

    def run(self) -> Schedule:
        resident = self.plan_weights()
        for core in self.layout.all_cores:
            n = self.arch.mvm.weight_sets
            self.weights[core] = _WeightState([None] * n, [None] * n, list(range(n)))
        self.emit_init(resident)
        for st in self.weights.values():  # frame loads (run-time weights) use the others
            st.lru = [x for x in st.lru if x not in set(self.resident.values())]
        self.emit_frame()
        self.add_memory_war()
        self.anchor_frames()
        return self.tokens(self.order())

    def anchor_frames(self) -> None:
        """Tie every FRAME step that depends on nothing to its core's first FRAME step (the
        input transfer on the core that receives it). The ctrl queue runs frame f's output
        transfer before frame f+1's input, so frame f+1 cannot overwrite buffers, slots or
        weight sets that frame f still uses."""
        anchors: dict[int, int] = {}
        for step in self.steps:
            if step.phase is not Phase.FRAME:
                continue
            anchor = anchors.setdefault(step.core, step.id)
            if not step.deps and step.id != anchor:
                step.deps.add(anchor)


def build_schedule(
    layers: Sequence[LayerPlan],
    tilings: Sequence[Tiling],
    groups: Sequence[FusionGroup],
    mappings: Sequence[LayerMapping | None],
    plan: MemPlan,
    graph: Any,
    config: Any,
    arch: Arch,
    layout: CoreLayout | None = None,
) -> Schedule:
    """Per-core tasks with tokens for a tiled, mapped, memory-planned layer list."""
    builder = ScheduleBuilder(
        layers, tilings, groups, mappings, plan, graph, config, arch, layout or CoreLayout()
    )
    return builder.run()


__all__ = ["Schedule", "ScheduleBuilder", "Step", "build_schedule"]
