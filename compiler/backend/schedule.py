"""Pass 9, schedule: per-core task order and hardware tokens (docs/architecture.md §4, §5).

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
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aipusim.arch import Arch
from aipusim.base.errors import TasklistError
from aipusim.compiler.backend.barriers import choose_barriers, cross_core_spans
from aipusim.compiler.backend.compute import ComputeMixin
from aipusim.compiler.backend.constants import LayerConstants
from aipusim.compiler.backend.estimate import plan_cost
from aipusim.compiler.backend.imc_plan import LayerMapping
from aipusim.compiler.backend.layout import CoreLayout, Split
from aipusim.compiler.backend.lower import (
    LayerPlan,
    LayerUnit,
    activation_bytes,
    is_runtime,
    is_shortcut,
)
from aipusim.compiler.backend.memplan import CONSTANT_KINDS, Buffer, MemPlan, const_buffer
from aipusim.compiler.backend.regions import group_rows, input_rows, out_rows
from aipusim.compiler.backend.runtime_mvm import RuntimeMvmMixin
from aipusim.compiler.backend.tile import FusionGroup, Tiling
from aipusim.compiler.backend.tokens import (
    Residency,
    Schedule,
    Step,
    TokenMixin,
    WeightResidency,
    residency_of,
)
from aipusim.compiler.ir import DType
from aipusim.isa.cost import cost_model
from aipusim.isa.tasks import (
    Barrier,
    DmaCopy,
    HostTransfer,
    Phase,
    Pool,
    Task,
    TokenWait,
    Unit,
    WeightLoad,
)
from aipusim.isa.tasks import Direction as Dir


class ProducerMap(defaultdict[tuple[int, str], list[int]]):
    """(copy, tensor) -> the steps that write the tensor; an alias (a Reshape that moves no
    byte, a PWORD pad) is its source tensor, so a reader of the alias waits for the
    source's writers."""

    def __init__(self, layers: Sequence[LayerPlan]) -> None:
        super().__init__(list)
        self.alias: dict[str, str] = {}
        for layer in layers:
            if layer.unit is LayerUnit.ALIAS and layer.inputs:
                root = self.alias.get(layer.inputs[0], layer.inputs[0])
                for out in layer.outputs:
                    self.alias[out] = root

    def _key(self, key: tuple[int, str]) -> tuple[int, str]:
        return key[0], self.alias.get(key[1], key[1])

    def __getitem__(self, key: tuple[int, str]) -> list[int]:
        return super().__getitem__(self._key(key))

    def __setitem__(self, key: tuple[int, str], value: list[int]) -> None:
        super().__setitem__(self._key(key), value)

    def get(self, key: tuple[int, str], default: Any = None) -> Any:  # type: ignore[override]
        return super().get(self._key(key), default)


@dataclass
class _WeightState:
    """What one core's IMC weight sets hold while the frame is emitted."""

    holds: list[Any]
    last_user: list[int | None]
    lru: list[int]


#: Weight sets kept for the weights that stream every frame: the one computing and the one
#: loading beside it.
STREAM_SETS = 2

#: Cooperative: the tries at keeping more token pairs than every cross-core dependency
#: leaves room for (`build_schedule`); each builds the schedule once more.
COOPERATIVE_TOKEN_STEPS = 4

#: One access's write-after-read dependencies (`ScheduleBuilder.war_events`): its step, the
#: last earlier access of the overwritten bytes on each queue, and the core whose L1 it is
#: when a multicast's gate may stand in (None: a shared pool, or one core's own copies).
WarEvent = tuple[int, tuple[int, ...], int | None]


@dataclass(frozen=True)
class WarPlan:
    """The write-after-read analysis of a build and how many steps that build had."""

    events: list[WarEvent]
    steps: int


#: L1 write ports a batch needs before its cores share the weight multicasts
#: (`ScheduleBuilder.fetch_bound`): one for the MVM's results, one for the multicast that
#: streams the weights, one for a second multicast beside it. With fewer, the concurrent
#: multicasts hold the write ports the MVMs need.
SHARED_FETCH_WRITE_PORTS = 3


def choose_resident(layers: dict[str, tuple[int, int]], free_sets: int) -> list[str]:
    """The layers (name -> (weight sets, bytes loaded per frame)) whose weights stay in
    ``free_sets`` IMC sets across frames: the most bytes saved per set first, each layer
    whole or not at all, in model order.

    >>> choose_resident({"a": (2, 1000), "b": (1, 600), "c": (1, 300)}, 2)
    ['b', 'c']
    """
    by_gain = sorted(layers, key=lambda n: -layers[n][1] / max(1, layers[n][0]))
    chosen: set[str] = set()
    for name in by_gain:
        sets = layers[name][0]
        if sets <= free_sets:
            chosen.add(name)
            free_sets -= sets
    return [name for name in layers if name in chosen]


class ScheduleBuilder(ComputeMixin, RuntimeMvmMixin, TokenMixin):
    def __init__(
        self,
        layers: Sequence[LayerPlan],
        tilings: Sequence[Tiling],
        groups: Sequence[FusionGroup],
        mappings: Sequence[LayerMapping | None],
        constants: Sequence[LayerConstants],
        plan: MemPlan,
        graph: Any,
        config: Any,
        arch: Arch,
        layout: CoreLayout,
        program: Any = None,
        barrier_after: frozenset[int] = frozenset(),
    ) -> None:
        self.layers, self.groups, self.plan = layers, groups, plan
        # cooperative: the groups after which every core meets at a barrier
        # (`barriers.choose_barriers`); the input transfer is always followed by one
        self.barrier_after = barrier_after
        self.tilings, self.mappings, self.constants = tilings, mappings, constants
        self.program = program
        self.index = {layer.name: i for i, layer in enumerate(layers)}
        self.cost = cost_model(arch, int(config.frequency), float(config.mvm_utilization_limit))
        self.g, self.cfg, self.arch, self.layout = graph, config, arch, layout
        self.steps: list[Step] = []
        self.produced = ProducerMap(layers)
        self.buf_access: dict[str, list[int]] = defaultdict(list)
        self.slot_user: dict[tuple[str, int], list[int]] = defaultdict(list)
        self.weights: dict[int, _WeightState] = {}
        self.resident: dict[Any, int] = {}
        self.stage_counter: dict[tuple[int, str], int] = defaultdict(int)
        # (core, epoch) -> the core's FRAME steps since its last barrier (`emit_barriers`)
        self.epoch_steps: dict[tuple[int, int], list[int]] = defaultdict(list)
        self.fence: dict[int, set[int]] = defaultdict(set)
        self.current_group = 0
        self.act_dma = Unit.DMA0
        self.wt_dma = Unit.DMA1 if config.dma_dual_channel else Unit.DMA0
        # batch: the cores share the weight multicasts (`fetch_core_for`, `fetch_bound`)
        self.spread_fetches = layout.replicate and layout.cores > 1 and config.dma_dual_channel
        self.dconst_loaded: set[tuple[int, str]] = set()
        self.barrier_id = 0
        self.group_barriers: set[int] = set()  # the Barrier steps after a group
        self.war: WarPlan | None = None  # the write-after-read analysis (`build`)
        self.epoch = 0  # barriers emitted so far (`Step.epoch`)
        self.last_mvm: dict[int, int | None] = {}  # newest Mvm step per core
        self.last_fetch: dict[Any, int] = {}  # batch: the multicast fetch of a weight block
        self.slot_fetches: dict[tuple[str, int], list[int]] = defaultdict(list)
        self.fetch_slot: dict[int, tuple[str, int]] = {}
        self.fetch_loads: dict[int, dict[int, int]] = defaultdict(dict)  # multicast -> core's load
        self.fetch_cycles: dict[int, int] = defaultdict(int)  # batch: fetch work per core
        self.gate_steps: set[int] = set()
        self.gates: dict[tuple[int, int], int] = {}  # (multicast, core) -> the core's gate
        self.dconst_steps: dict[Any, set[int]] = {}
        self.pending_slot: Any = None  # the weight staging slot the next load reads
        self.deferred: dict[int, list[Any]] = defaultdict(list)  # held-back output stores
        self.flushed: dict[int, list[int]] = defaultdict(list)
        self.init_copies: dict[str, int] = {}  # constant buffer -> its INIT copy on chip
        self.needs: dict[str, list[list[tuple[int, int]]]] = {}  # `exchange_needs`
        self.group_of = {g.index: g for g in groups}
        self.init_compute()

    def tiling_of(self, layer: LayerPlan) -> Tiling:
        return self.tilings[self.index[layer.name]]

    def consts_of(self, layer: LayerPlan) -> LayerConstants:
        return self.constants[self.index[layer.name]]

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
        t = self.g.tensor(tensor)
        return 2 if t.dtype is DType.INT16 else 1

    def pixel_shape(self, tensor: str) -> tuple[int, int, int]:
        """(rows, pixels per row, channels) of a tensor as memory holds it: a 4-D tensor
        channels-last per image (images are more rows), any other rank a row-major
        [rows, 1, last axis] (the vectors a MatMul streams)."""
        shape = self.g.shape(tensor)
        if len(shape) == 4:
            n, c, h, w = shape
            return n * h, w, c
        if len(shape) <= 1:
            return 1, 1, max(1, math.prod(shape))
        return math.prod(shape[:-1]), 1, shape[-1]

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
            Step(sid, core, unit, kind, fields, layer, tile, phase, slot, deps, max(1, cycles),
                 self.current_group, self.epoch)
        )  # fmt: skip
        for name in touches:
            self.buf_access[name].append(sid)
        if phase is Phase.FRAME:
            self.epoch_steps[(core, self.epoch)].append(sid)
        return sid

    def lands_on(self, sid: int, core: int) -> bool:
        """Whether step ``sid`` may access ``core``'s L1: a step of that core or a
        multicast into it."""
        step = self.steps[sid]
        if step.core == core:
            return True
        mask = int(step.fields.get("dst_core_mask", 0)) if step.kind is DmaCopy else 0
        return bool(mask >> core & 1)

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
        **layout: int,
    ) -> int:
        """A `DmaCopy` of ``nbytes`` (``layout``: its rows, planes and strides)."""
        fields = dict(
            src_pool=src[0],
            src_addr=src[1],
            dst_pool=dst[0],
            dst_addr=dst[1],
            bytes=max(1, nbytes),
            dst_core_mask=mask,
            **layout,
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
    def resident_keys(self) -> dict[str, list[tuple[str, int, int]]]:
        """Per MVM layer with constant weights, the weight-set keys ``(layer, channel tile,
        block)`` any core loads (cores of a channel split may have fewer)."""
        keys: dict[str, list[tuple[str, int, int]]] = {}
        for li, layer in enumerate(self.layers):
            if layer.unit is not LayerUnit.MVM or is_runtime(layer):
                continue
            mine: set[tuple[str, int, int]] = set()
            for core in self.layout.all_cores:
                for tile_map, oi in self.tile_maps(layer, self.part_of(li, core)[0]):
                    mine.update((layer.name, oi, b) for b in range(len(tile_map.blocks)))
            keys[layer.name] = sorted(mine)
        return keys

    def plan_weights(self) -> dict[str, WeightResidency]:
        """Per MVM layer with constant weights, whether its weight sets stay in the IMC
        across frames (loaded once in INIT) or stream every frame, and why: every layer
        stays when all sets fit; else, on one core or in batch (where core 0 issues every
        INIT transfer), the sets left beside `STREAM_SETS` hold the layers that save the
        most bytes per set (`choose_resident`)."""
        keys = self.resident_keys()
        need = sum(len(k) for k in keys.values())
        have = self.arch.mvm.weight_sets
        sizes = f"weight sets: {need} needed, {have} in the array"
        # run-time weights (attention) need sets of their own every frame, as many as
        # streamed weights do
        runtime = any(is_runtime(layer) for layer in self.layers)
        if need + (STREAM_SETS if runtime else 0) <= have:
            return {name: WeightResidency(Residency.RESIDENT, sizes) for name in keys}
        if self.layout.cores > 1 and not self.layout.replicate:
            # all or nothing on several cores: a partial residency, whose INIT fetches and
            # frame streams would share the cores' weight DMA, is not planned (a cooperative
            # core's INIT fetch waits for core 0's copy into L2 by a token; docs/decisions.md)
            return {name: WeightResidency(Residency.STREAMED, sizes) for name in keys}
        free = max(0, have - STREAM_SETS)
        sets_bytes = {name: (len(k), self.frame_weight_bytes(name, k)) for name, k in keys.items()}
        chosen = choose_resident(sets_bytes, free)
        left = f"{sizes}, {STREAM_SETS} kept for streaming"
        kept = f"the most bytes per set of the {free} sets left ({left})"
        return {
            name: WeightResidency(Residency.RESIDENT, kept)
            if name in chosen
            else WeightResidency(Residency.STREAMED, left)
            for name in keys
        }

    def frame_weight_bytes(self, name: str, keys: list[tuple[str, int, int]]) -> int:
        """The bytes core 0 loads into the IMC per frame for ``keys`` of layer ``name``."""
        li = self.index[name]
        part = self.part_of(li, self.layout.all_cores[0])[0]
        blocks = {(tm.oc_tile, b): blk for tm in self.mapping_of(self.layers[li]).of_part(part)
                  for b, blk in enumerate(tm.mapping.blocks)}  # fmt: skip
        return sum(blocks[(oi, b)].weight_bytes for _, oi, b in keys if (oi, b) in blocks)

    def emit_init(self, residency: dict[str, WeightResidency]) -> None:
        """INIT: the constants brought on chip, the resident layers' weight sets loaded."""
        self.spread_fetches = self.spread_fetches and self.fetch_bound(residency)
        for buf in self.plan.buffers.values():
            if buf.kind in CONSTANT_KINDS and buf.pool is not Pool.DDR:
                # the constants image arrives in DDR with the model; bring it on chip once
                owner = buf.core if buf.pool is Pool.L1 else 0
                self.init_copies[buf.name] = self.dma(
                    owner,
                    self.wt_dma,
                    (Pool.DDR, self.plan.source_addr(buf.name)),
                    (buf.pool, buf.addr),
                    buf.size_bytes,
                    layer=buf.layer,
                    tile=0,
                    deps=set(),
                    touches=(buf.name,),
                    phase=Phase.INIT,
                )
        keys = self.resident_keys()
        set_index = 0
        # INIT loads read their staging slot in L1; the staging buffers of different layers
        # may share addresses (they live at different FRAME steps), so a later INIT fetch
        # into the same bytes waits for those loads: (core, first byte, end, load)
        staged_reads: list[tuple[int, int, int, int]] = []
        for li, layer in enumerate(self.layers):
            if residency_of(residency, layer.name) is not Residency.RESIDENT:
                continue
            for key in keys[layer.name]:
                _, oi, b = key
                for core in self.layout.group_cores(self.tiling_of(layer).group):
                    part = self.part_of(li, core)[0]
                    blk = next(
                        (t.mapping.blocks[b] for t in self.mapping_of(layer).of_part(part)
                         if t.oc_tile == oi and b < len(t.mapping.blocks)),
                        None,
                    )  # fmt: skip
                    if blk is None:
                        continue  # this core's part has no such block
                    self.pending_slot = None
                    src = self.weight_source(
                        layer, core, (part, oi, b), blk.weight_bytes,
                        tile=0, phase=Phase.INIT,
                        extra=self.init_stage_war(layer, core, staged_reads),
                    )  # fmt: skip
                    sid = self.add(
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
                    if self.pending_slot is not None:  # the next fetch into it waits for this
                        self.slot_user[self.pending_slot[0]] = [sid]
                        staged_reads.append((core, src[0], src[0] + blk.weight_bytes, sid))
                self.resident[key] = set_index
                set_index += 1

    def init_stage_war(
        self, layer: LayerPlan, core: int, staged_reads: list[tuple[int, int, int, int]]
    ) -> set[int]:
        """What an INIT fetch of ``layer``'s weights into staging waits for: the earlier INIT
        loads of bytes it overwrites, on the fetching ``core`` directly; on the other cores a
        batch multicast writes, through a `TokenWait` on that core's weight-load queue
        waiting for them (the frame's fetches do the same, `fetch_gates`)."""
        wbuf = self.plan.buffers[const_buffer("weights", layer.name)]
        if wbuf.pool is Pool.L1 or not staged_reads:
            return set()  # read in place: no staging
        cores = [core]
        if self.layout.replicate and self.layout.cores > 1:
            if core != self.layout.all_cores[0]:
                return set()  # the first core's request made the one multicast fetch
            cores = list(self.layout.all_cores)
        waits: set[int] = set()
        for c in cores:
            stage = self.tile_buffer("wstage", layer, c)
            if stage is None:
                continue
            lo, hi = stage.addr, stage.addr + stage.size_bytes
            reads = {s for rc, a, e, s in staged_reads if rc == c and a < hi and lo < e}
            if not reads or c == core:
                waits |= reads
                continue
            gate = self.add(c, Unit.WLOAD, TokenWait, {}, layer=layer.name, deps=reads,
                            phase=Phase.INIT)  # fmt: skip
            waits.add(gate)
        return waits

    # -- weights -------------------------------------------------------------------------
    def tile_maps(self, layer: LayerPlan, part: int) -> list[tuple[Any, int]]:
        """The IMC mapping of each output-channel tile of ``layer`` for this core's part (as
        the imc pass decided it)."""
        return [(t.mapping, t.oc_tile) for t in self.mapping_of(layer).of_part(part)]

    def weight_source(
        self,
        layer: LayerPlan,
        core: int,
        block: tuple[int, int, int],
        nbytes: int,
        *,
        tile: int,
        phase: Phase,
        extra: set[int],
    ) -> tuple[int, set[int]]:
        """L1 address weight block ``block`` (part, channel tile, block) is read from, and
        the steps that put it there."""
        offset = self.consts_of(layer).blocks[block]
        wbuf = self.plan.buffers[const_buffer("weights", layer.name)]
        if wbuf.pool is Pool.L1:
            # an INIT load shares its phase with the copy that brought the weights on chip
            copy = self.init_copies.get(wbuf.name)
            return wbuf.addr + offset, set() if copy is None else {copy}
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
        deps = set(self.slot_user[slot_key])
        self.pending_slot = (slot_key, None)
        shared = self.layout.replicate or self.shares_weights(layer, phase)
        if shared:
            for c in self.layout.all_cores:
                deps |= set(self.slot_user[(f"wstage:{layer.name}@{c}", slot)])
            if core != self.layout.all_cores[0]:
                # the first core's request made the one multicast fetch
                fetch = self.last_fetch[(layer.name, offset, tile)]
                assert self.steps[fetch].fields["dst_addr"] == dst, f"{layer.name}: staging"
                return dst, {fetch}
        mask = 0
        if shared and self.layout.cores > 1:
            mask = (1 << self.layout.cores) - 1
        src = (wbuf.pool, wbuf.addr + offset)
        l2stage = self.plan.buffers.get(f"l2stage:{layer.name}")
        hop_via_l2 = self.cfg.use_sysdma and wbuf.pool is Pool.DDR and l2stage is not None
        fetch_core = core
        if mask and phase is Phase.FRAME and self.layout.replicate:
            if self.spread_fetches and not hop_via_l2:  # (a hop's L2 copy: one core's)
                fetch_core = self.fetch_core_for(src[0], nbytes)
            # it serves every core: it waits for its slot, not for one core's layer input
            # (the loads do), so that it runs during the layers before
            deps |= self.fetch_gates(layer, fetch_core, tile)
        else:
            deps |= extra
        copy = self.init_copies.get(wbuf.name)
        if phase is Phase.INIT and copy is not None:
            # the INIT copy that brought the weights into L2 is core 0's; a cooperative core
            # fetching its own part reads it in the same phase, so it waits for it (a token)
            deps.add(copy)
        if hop_via_l2:
            assert l2stage is not None
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
        staged = [stage.name]
        if mask:  # the multicast writes every core's staging slot
            staged = [f"wstage:{layer.name}@{c}" for c in self.layout.all_cores]
        sid = self.dma(
            fetch_core,
            self.wt_dma,
            src,
            (Pool.L1, dst),
            nbytes,
            layer=layer.name,
            tile=tile,
            deps=deps,
            touches=(wbuf.name, *staged),
            mask=mask,
            phase=phase,
        )
        self.last_fetch[(layer.name, offset, tile)] = sid
        for gate in deps & self.gate_steps:
            self.gates[(sid, self.steps[gate].core)] = gate
        if mask:
            # a later multicast into this slot must wait for every core's load from it,
            # and the other cores' loads are emitted after this core's whole group
            self.slot_fetches[(layer.name, slot)].append(sid)
            self.fetch_slot[sid] = (layer.name, slot)
        if src[0] is Pool.L2 and l2stage is not None and src[1] == l2stage.addr + offset:
            self.slot_user[(l2stage.name, offset)] = [sid]  # the L2 copy has been read
        self.pending_slot = (slot_key, None)
        return dst, {sid}

    def shares_weights(self, layer: LayerPlan, phase: Phase) -> bool:
        """Cooperative: every core of a row split loads the same weight blocks, so the first
        core's fetch of a streamed block is multicast into every core's staging slot, as
        in a batch. Each core's load of it waits for the multicast, and the next multicast
        into the slot for the loads, through global tokens; the other cores' earlier
        accesses of the bytes it overwrites through tokens or a barrier
        (`add_memory_war`, `barriers.choose_barriers`)."""
        if not self.layout.cooperative or self.layout.cores < 2 or phase is not Phase.FRAME:
            return False
        return self.part_of(self.index[layer.name], self.layout.all_cores[0])[2] is Split.ROWS

    def fetch_core_for(self, src_pool: Pool, nbytes: int) -> int:
        """The core whose weight DMA issues a batch's multicast fetch: the one with the
        fewest fetch cycles so far (the cost model's `dma_cycles`), so that the cores share
        the fetch work; the first core when ``src_pool`` streams no faster than a channel
        (DDR: a second channel would only split its bandwidth)."""
        if self.cost.stream_bw(src_pool) < self.cost.channel_bw:
            return self.layout.all_cores[0]
        core = min(self.layout.all_cores, key=lambda c: (self.fetch_cycles[c], c))
        self.fetch_cycles[core] += self.cost.dma_cycles(self.wt_dma, src_pool, Pool.L1, nbytes)
        return core

    def fetch_bound(self, residency: dict[str, WeightResidency]) -> bool:
        """Batch: whether the cores share the weight multicasts (`fetch_core_for`): when one
        core's weight channel would take longer to fetch a frame's streamed weights than a
        core takes to compute the frame (both by the cost model), and a second multicast
        finds a write port of every core's L1 beside the MVM's results and the first one.
        Otherwise one queue keeps them in the order the layers need them, each with the
        whole bandwidth of its path (ResNet-50 on Metis, two write ports: sharing them was
        8 % slower, the concurrent multicasts holding the write ports the MVMs need)."""
        if self.arch.l1.write_ports < SHARED_FETCH_WRITE_PORTS:
            return False
        fetch = compute = 0
        for layer, tiling, mapping in zip(self.layers, self.tilings, self.mappings, strict=True):
            if mapping is None or tiling is None:
                continue
            plan = plan_cost(layer, mapping.whole, tiling, self.cfg, self.cost,
                             weights_double_buffered=False)  # fmt: skip
            compute += plan.compute_cycles
            wbuf = self.plan.buffers.get(const_buffer("weights", layer.name))
            streamed = residency_of(residency, layer.name) is Residency.STREAMED
            if streamed and wbuf is not None:
                fetch += max(1, tiling.h_tiles) * sum(
                    self.cost.dma_cycles(self.wt_dma, wbuf.pool, Pool.L1, b.weight_bytes)
                    for b in mapping.whole.blocks
                )
        return fetch > compute

    def fetch_gates(self, layer: LayerPlan, fetch_core: int, tile: int) -> set[int]:
        """A `TokenWait` on the weight-load queue of every core but ``fetch_core``, for a
        multicast ``fetch_core`` issues into every core's L1: each gathers, through its
        core's local tokens, the accesses on that core of the bytes the fetch overwrites
        (`add_memory_war`), so that a fetch waits on one global token per core and unit
        pair (weight load -> weight DMA) whichever core issues it: the instance has only
        ``arch.tokens.global_count``. Returns the gates."""
        gates = set()
        for c in self.layout.all_cores:
            if c == fetch_core:
                continue
            gate = self.add(c, Unit.WLOAD, TokenWait, {}, layer=layer.name, tile=tile)
            self.gate_steps.add(gate)
            gates.add(gate)
        return gates

    def ensure_weights(
        self,
        core: int,
        layer: LayerPlan,
        key: Any,
        blk: Any,
        block: tuple[int, int, int],
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
            layer, core, block, blk.weight_bytes, tile=tile, phase=Phase.FRAME, extra=extra
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
        for fetch in src_deps & self.fetch_slot.keys():
            self.fetch_loads[fetch].setdefault(core, sid)
            fetches = self.slot_fetches[self.fetch_slot[fetch]]
            later = fetches.index(fetch) + 1
            if later < len(fetches):
                self.steps[fetches[later]].deps.add(sid)
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

    def exchange_needs(self, tensor: str) -> list[list[tuple[int, int]]]:
        """For every read of a cooperative L1 tensor (`exchange`), the rows of it each core
        reads (``(0, 0)``: none): a row split's windows over its tiles, a channel split all
        rows, a layer not split all rows on the first core only."""
        if tensor not in self.needs:
            self.needs[tensor] = [
                [self.rows_read(li, k, c) for c in self.layout.all_cores]
                for li, layer in enumerate(self.layers)
                for k, t in enumerate(layer.inputs)
                if t == tensor
            ]
        return self.needs[tensor]

    def rows_read(self, li: int, k: int, core: int) -> tuple[int, int]:
        """The rows of input ``k`` of layer ``li`` that ``core`` reads (`exchange_needs`)."""
        layer = self.layers[li]
        total = self.rows_of(layer, layer.inputs[k], k)[0]
        group = self.group_of[self.tilings[li].group]
        part, parts, split = self.part_of(group.layers[-1], core)
        if split is Split.NONE:
            return (0, total) if core == self.layout.all_cores[0] else (0, 0)
        if split is not Split.ROWS:
            return 0, total
        window = layer.geometry is not None and layer.runtime is None and k == 0
        own_rows = is_shortcut(layer, k) or (layer.geometry is None and total == out_rows(layer))
        if not (window or own_rows):
            return 0, total
        layers = [self.layers[i] for i in group.layers]
        at = group.layers.index(li)
        lo, hi = total, 0
        for tile in range(group.h_tiles):
            span = group_rows(layers, tile, group.h_tiles, part, parts)[at]
            if span[1] <= span[0]:
                continue
            if window:
                need = input_rows(layer, *span)
                span = (need.lo, need.hi)
            lo, hi = min(lo, span[0]), max(hi, span[1])
        return (lo, hi) if lo < hi else (0, 0)

    # -- layout layers ---------------------------------------------------------------------
    def emit_dma_layer(self, core: int, layer: LayerPlan, deps: set[int]) -> list[int]:
        """Concat/Split/Slice/Transpose/Pad (and a reshape that reorders bytes): the copies
        `layout_dma.copy_plan` found, between the tensors' buffers; padding comes from the
        layer's fill bytes in the constants image."""
        consts = self.consts_of(layer)
        if consts.incomplete:
            self.mark_incomplete(layer, consts.incomplete)
        key = self.copy_key(core)
        ins = [self.buffer(t, core) for t in layer.inputs]
        producers = set(deps)
        for t in layer.inputs:
            producers |= set(self.produced.get((key, t), ()))
        fill = self.plan.buffers.get(const_buffer("operand", layer.name))
        sids: list[int] = []
        if not consts.copies:  # no copy plan: each output copied whole (timed only)
            for out in layer.outputs:
                dst = self.buffer(out, core)
                sid = self.dma(
                    core, self.act_dma, (ins[0].pool, ins[0].addr), (dst.pool, dst.addr),
                    activation_bytes(self.g, out), layer=layer.name, tile=0, deps=producers,
                    touches=(ins[0].name, dst.name),
                )  # fmt: skip
                self.produced[(key, out)].append(sid)
                sids.append(sid)
            return sids
        for k, copies in consts.copies:
            out = layer.outputs[k]
            dst = self.buffer(out, core)
            e = self.elem(out)
            mine = []
            for c in copies:
                if c.src < 0:
                    assert fill is not None, f"{layer.name}: no fill bytes"
                    src_buf, src_addr = fill, fill.addr + c.src_off * e
                else:
                    src_buf = ins[c.src]
                    src_addr = src_buf.addr + c.src_off * e
                sid = self.dma(
                    core,
                    self.act_dma,
                    (src_buf.pool, src_addr),
                    (dst.pool, dst.addr + c.dst_off * e),
                    c.planes * c.rows * c.run * e,
                    layer=layer.name,
                    tile=0,
                    deps=producers,
                    touches=(src_buf.name, dst.name),
                    rows=c.rows,
                    src_stride=c.src_row_stride * e,
                    dst_stride=c.dst_row_stride * e,
                    planes=c.planes,
                    src_plane_stride=c.src_plane_stride * e,
                    dst_plane_stride=c.dst_plane_stride * e,
                )
                mine.append(sid)
            self.produced[(key, out)] += mine
            sids += mine
        return sids

    # -- the frame -------------------------------------------------------------------------
    def emit_frame(self) -> None:
        cores = self.layout.all_cores
        self.current_group = -1  # the input transfers come before every group
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
                        bytes=activation_bytes(self.g, name),
                    ),
                    layer="input",
                    touches=(buf.name,),
                )
                self.produced[(self.copy_key(core), name)].append(sid)
        if self.layout.cooperative and len(cores) > 1:
            self.emit_barriers(None)
        prev_by_core: dict[int, list[int]] = {}
        for g in self.groups:
            self.current_group = g.index
            for core in self.layout.group_cores(g.index):
                self.emit_group(g, core, prev_by_core)
            if self.layout.cooperative and len(cores) > 1 and g.index in self.barrier_after:
                self.emit_barriers(g)
        self.current_group = len(self.groups)  # the output transfers, after every group
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
                        bytes=activation_bytes(self.g, name),
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
            part, parts, split = self.part_of(g.layers[-1], core)
            if self.layout.cooperative and split is Split.NONE and core != 0:
                parts = 0  # too small to split: core 0 runs it alone
            elif split is not Split.ROWS:
                part, parts = 0, 1  # channels are split inside the layer
            layers = [self.layers[li] for li in g.layers]
            for hi in range(g.h_tiles if parts else 0):
                rows = group_rows(layers, hi, g.h_tiles, part, parts)
                for li, layer, span in zip(g.layers, layers, rows, strict=True):
                    emitted += self.emit_layer_tile(li, layer, core, hi, span, prologue)
                prologue = set()
            self.flush_stores(core)
            emitted += self.flushed.pop(core, [])
        if emitted:
            prev_by_core[core] = emitted
        self.fence[core] = set()

    def emit_barriers(self, g: FusionGroup | None) -> None:
        """Cooperative: every core reaches the barrier after its steps since its last one,
        up to its part of group ``g`` (None: the input transfer); the later tasks wait for
        it."""
        self.barrier_id += 1
        mask = (1 << self.layout.cores) - 1
        name = self.layers[g.layers[-1]].name if g is not None else "input"
        for core in self.layout.all_cores:
            mine = self.epoch_steps.get((core, self.epoch), [])
            sid = self.add(
                core,
                Unit.CTRL,
                Barrier,
                dict(barrier_id=self.barrier_id, core_mask=mask),
                layer=name,
                deps=set(mine),
            )
            if g is not None:
                self.group_barriers.add(sid)
            self.fence[core] = {sid}
        self.epoch += 1

    # -- tokens --------------------------------------------------------------------------
    def add_memory_war(self, war: WarPlan | None = None) -> WarPlan:
        """A buffer that reuses the address range of an earlier, dead buffer is accessed
        only after the earlier one's last accesses (`war_events`). ``war``: the analysis of
        a build of the same layers with no barrier after any group, whose steps are this
        build's but for its barriers (where the barriers go changes no access, so the
        analysis is the same, its step ids shifted past the barriers); returns the
        analysis used."""
        if war is None:
            war = WarPlan(self.war_events(), len(self.steps))
            self.apply_war(war.events, None)
            return war
        ids = [s for s in range(len(self.steps)) if s not in self.group_barriers]
        assert len(ids) == war.steps, "the probe's steps are not this build's"
        self.apply_war(war.events, ids)
        return war

    def war_events(self) -> list[WarEvent]:
        """Which earlier accesses each access of a reused address range follows: by the
        same core in L2/DDR (each core's copies follow its own frame), by any core in one
        core's L1 (a batch's weight fetch multicasts into every core's L1; the core's own
        units learn that the multicast is done from their core's load of it, `_seen_by`).
        Cooperative cores share one frame and meet at no barrier between layer groups, so
        there every core's accesses count, each queue's last one (`_per_unit`), and in one
        core's L1 only the accesses of that L1 (`_in_pool`). Reads no dependency, so that
        `apply_war` may add the edges to another build's steps."""
        steps = self.steps
        coop = self.layout.cooperative and self.layout.cores > 1
        events: list[WarEvent] = []
        for st in self.plan.pools.values():
            any_core = st.pool is Pool.L1 or coop
            l1 = st.core if any_core else None
            bufs = sorted(st.placed, key=lambda b: b.addr)
            for i, a in enumerate(bufs):
                a_acc = [
                    s
                    for s in self.buf_access.get(a.name, ())
                    if self.steps[s].phase is Phase.FRAME and (not coop or self._in_pool(s, st))
                ]
                if not a_acc:
                    continue
                by_unit: dict[int | None, dict[Unit, list[int]]] = {}
                # a later step's dependencies on all of a's accesses, by (key, its core)
                after_all: dict[tuple[int | None, int], tuple[int, ...]] = {}
                a_last = a_acc[-1]
                a_end = a.addr + a.size_bytes
                for b in bufs[i + 1 :] + bufs[:i]:
                    if b.addr >= a_end or b.addr + b.size_bytes <= a.addr or b.start <= a.end:
                        continue
                    for sid in self.buf_access.get(b.name, ()):
                        step = steps[sid]
                        if step.phase is not Phase.FRAME or (coop and not self._in_pool(sid, st)):
                            continue
                        key = None if any_core else step.core
                        if sid > a_last and (key, step.core) in after_all:
                            last = after_all[(key, step.core)]
                        else:
                            if key not in by_unit:
                                by_unit[key] = self._per_unit(a_acc, key, by_core=coop)
                            last = self._last_before(by_unit[key], sid)
                            if sid > a_last:
                                after_all[(key, step.core)] = last
                        if last:
                            events.append((sid, last, l1))
        return events

    def apply_war(self, events: list[WarEvent], ids: Sequence[int] | None) -> None:
        """Add the edges of `war_events` (``ids``: this build's id of each step id in
        them; None: the same ids). Each event's steps are a set built as their first
        build built it, so that the edges are added in the order that build added them
        and every dependency set iterates as it did."""
        steps, gates = self.steps, self.gates
        # an event's targets by (its steps, the accessing core): most events share their
        # steps (every later access of a buffer follows the same last accesses)
        memo: dict[tuple[int, int], tuple[int, ...]] = {}
        for sid, found, l1 in events:
            if ids is not None:
                sid = ids[sid]
            step = steps[sid]
            core = step.core
            gate = gates.get((sid, l1)) if l1 is not None else None
            if gate is None:  # the hot path: about 110 k events for cooperative ResNet-50
                key = (id(found), core)
                targets = memo.get(key)
                if targets is None:
                    xs = self._war_set(found, ids)
                    targets = memo[key] = tuple(self._seen_by(x, core) for x in xs)
                step.deps.update(targets)  # adds them in this order
                continue
            for x in self._war_set(found, ids):
                if steps[x].core != core:
                    self._war_edge(sid, x, l1)
                else:
                    step.deps.add(x)

    @staticmethod
    def _war_set(found: tuple[int, ...], ids: Sequence[int] | None) -> set[int]:
        """The set of an event's steps (in this build's ids), built as it always was: its
        order of iteration is the order the edges are added in."""
        xs = found if ids is None else [ids[x] for x in found]
        return {max(xs)} | set(xs)

    def _war_edge(self, sid: int, x: int, l1_core: int | None) -> None:
        """Step ``sid`` follows step ``x`` (an earlier access of bytes it overwrites, in
        ``l1_core``'s L1 or, None, in a shared pool): a multicast into another core's L1
        waits through that core's gate (`fetch_gates`)."""
        step = self.steps[sid]
        gate = self.gates.get((sid, l1_core)) if l1_core is not None else None
        if gate is None or self.steps[x].core == step.core:
            step.deps.add(self._seen_by(x, step.core))
            return
        seen = self._seen_by(x, self.steps[gate].core)
        # a load the core's queue runs after the gate (of another multicast in this group):
        # the fetch waits on it itself, over the same pair (weight load -> weight DMA)
        self.steps[sid if seen > gate else gate].deps.add(seen)

    def _per_unit(
        self, sids: list[int], core: int | None, *, by_core: bool = False
    ) -> dict[Any, list[int]]:
        """``sids`` (ascending) of ``core`` (None: of any core) by unit (``by_core``: by
        core and unit, each queue apart), the units in the order of their first step."""
        out: dict[Any, list[int]] = {}
        for s in sids:
            step = self.steps[s]
            if core is None or step.core == core:
                out.setdefault((step.core, step.unit) if by_core else step.unit, []).append(s)
        return out

    def _in_pool(self, sid: int, st: Any) -> bool:
        """Whether step ``sid`` accesses pool ``st``: L2/DDR any step, one core's L1 that
        core's steps and the multicasts into it (`lands_on`)."""
        return st.pool is not Pool.L1 or self.lands_on(sid, st.core)

    @staticmethod
    def _last_before(per_unit: dict[Any, list[int]], sid: int) -> tuple[int, ...]:
        """Every unit's last step before ``sid``, in the unit order (`apply_war` makes the
        set of them)."""
        return tuple(steps[k - 1] for steps in per_unit.values() if (k := bisect_left(steps, sid)))

    def _seen_by(self, sid: int, core: int) -> int:
        """The step ``core`` waits on to know step ``sid`` is done: for another core's
        multicast into this core's L1, this core's first weight load of it (which waited
        for the multicast), so that the core's units follow it through local tokens; one
        global token per (unit, core) pair would exceed the instance's global tokens."""
        loads = self.fetch_loads.get(sid, {})
        if self.steps[sid].core != core and core in loads:
            return loads[core]
        return sid

    def run(self, war: WarPlan | None = None) -> Schedule:
        """Build (``war``: as `build`), order and assign tokens."""
        residency = self.build(war)
        schedule = self.tokens(self.order())
        schedule.incomplete = dict(self.incomplete)
        schedule.weight_residency = residency
        schedule.resident_weights = all(
            r.residency is Residency.RESIDENT for r in residency.values()
        )
        return schedule

    def build(self, war: WarPlan | None = None) -> dict[str, WeightResidency]:
        """Every step with its dependencies (no order, no tokens yet); returns the weight
        residency (`plan_weights`). ``war``: the write-after-read analysis of a build with
        no barrier after any group, reused (`add_memory_war`); the analysis used is kept
        in ``self.war``."""
        residency = self.plan_weights()
        for core in self.layout.all_cores:
            n = self.arch.mvm.weight_sets
            self.weights[core] = _WeightState([None] * n, [None] * n, list(range(n)))
        self.emit_init(residency)
        for st in self.weights.values():  # frame loads (run-time weights) use the others
            st.lru = [x for x in st.lru if x not in set(self.resident.values())]
        self.emit_frame()
        self.war = self.add_memory_war(war)
        self.anchor_frames()
        return residency

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
    constants: Sequence[LayerConstants],
    plan: MemPlan,
    graph: Any,
    config: Any,
    arch: Arch,
    layout: CoreLayout | None = None,
    program: Any = None,
) -> Schedule:
    """Per-core tasks with tokens for a tiled, mapped, packed, memory-planned layer list
    (``program``: the integer program, for zero points)."""
    layout = layout or CoreLayout()
    args = (layers, tilings, groups, mappings, constants, plan, graph, config, arch, layout,
            program)  # fmt: skip
    if not (layout.cooperative and layout.cores > 1):
        return ScheduleBuilder(*args).run()
    # the dependencies between cores with no barrier between groups decide where barriers
    # stay (`barriers.choose_barriers`); the schedule is then built again with them, each
    # time with the probe's write-after-read analysis (most of a build's time)
    probe = ScheduleBuilder(*args)
    probe.build()
    war = probe.war
    spans = cross_core_spans(probe.steps)
    count = arch.tokens.global_count
    barriers = choose_barriers(spans, count)
    # the token pass drops the waits other tokens imply, so more pairs usually fit: keep
    # more as tokens, half the instance's tokens a step, while the tokens fit; the
    # schedule with every pair counted (whose tokens fit) is built only if no try fits
    best: Schedule | None = None
    budget = count
    for _ in range(COOPERATIVE_TOKEN_STEPS):
        if not barriers or budget >= len(spans):
            break
        budget += max(1, count // 2)
        more = choose_barriers(spans, budget)
        if len(more) >= len(barriers):
            continue
        try:
            best = ScheduleBuilder(*args, barrier_after=more).run(war)
        except TasklistError:
            break  # more token pairs than the instance has
        barriers = more
    return best or ScheduleBuilder(*args, barrier_after=barriers).run(war)


__all__ = [
    "COOPERATIVE_TOKEN_STEPS",
    "SHARED_FETCH_WRITE_PORTS",
    "STREAM_SETS",
    "Schedule",
    "ScheduleBuilder",
    "Step",
    "WarEvent",
    "WarPlan",
    "build_schedule",
    "choose_resident",
]
