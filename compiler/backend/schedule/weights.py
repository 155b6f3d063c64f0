"""The schedule's weight steps: constants and resident weight sets brought on chip in
INIT, streamed weight blocks fetched into L1 staging and loaded into IMC weight sets.

`WeightStreamer` owns what a build knows about weights while it makes steps: what each
core's weight sets hold (least recently used first), which staging slot a fetch writes and
who last read it, the multicast fetches of a batch or a cooperative row split and the
per-core gates and loads that order them. It appends its steps to the build's `StepLog`;
the tile steps (`tiles.TileEmitter`) ask it for the weight set of a block
(`ensure_weights`) and tell it which step computed with a set (`computed`).

Knobs: ``imc_double_buffer_pipeline`` / ``_sequential`` (a load may overlap compute),
``group_ifdw_tasks`` (a load waits only for a free set), ``use_sysdma`` (DDR -> L2 on the
system DMA), ``dma_dual_channel`` (weights on their own DMA queue).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from aipusim.compiler.backend.common.layout import Split
from aipusim.compiler.backend.lower.layer import LayerPlan
from aipusim.compiler.backend.memplan.buffers import CONSTANT_KINDS, const_buffer
from aipusim.compiler.backend.schedule.inputs import ScheduleInputs
from aipusim.compiler.backend.schedule.steps import Residency, StepLog, residency_of
from aipusim.compiler.backend.schedule.weight_plan import WeightPlan
from aipusim.isa.tasks import Phase, Pool, TokenWait, Unit, WeightLoad


@dataclass
class WeightState:
    """What one core's IMC weight sets hold while the frame is emitted."""

    holds: list[Any]
    last_user: list[int | None]
    lru: list[int]


class WeightStreamer:
    """Weight and constant steps of one build (see the module docstring)."""

    def __init__(self, inp: ScheduleInputs, log: StepLog, wplan: WeightPlan) -> None:
        self.inp, self.log, self.wplan = inp, log, wplan
        self.spread_fetches = wplan.spread_fetches
        n = inp.arch.mvm.weight_sets
        #: core -> its weight sets
        self.weights = {c: WeightState([None] * n, [None] * n, list(range(n)))
                        for c in inp.layout.all_cores}  # fmt: skip
        #: weight-set key -> the set it stays in from INIT
        self.resident: dict[Any, int] = {}
        #: (staging buffer, slot) -> the steps to wait for before writing it
        self.slot_user: dict[tuple[str, int], list[int]] = defaultdict(list)
        self.stage_counter: dict[tuple[int, str], int] = defaultdict(int)
        self.last_mvm: dict[int, int | None] = {}  # newest Mvm step per core
        self.last_fetch: dict[Any, int] = {}  # batch: the multicast fetch of a weight block
        self.slot_fetches: dict[tuple[str, int], list[int]] = defaultdict(list)
        self.fetch_slot: dict[int, tuple[str, int]] = {}
        #: multicast fetch -> core -> the core's first load of it
        self.fetch_loads: dict[int, dict[int, int]] = defaultdict(dict)
        self.fetch_cycles: dict[int, int] = defaultdict(int)  # batch: fetch work per core
        self.gate_steps: set[int] = set()
        self.gates: dict[tuple[int, int], int] = {}  # (multicast, core) -> the core's gate
        self.pending_slot: Any = None  # the weight staging slot the next load reads
        self.init_copies: dict[str, int] = {}  # constant buffer -> its INIT copy on chip

    def computed(self, core: int, weight_set: int, sid: int) -> None:
        """Step ``sid`` (an `Mvm` of ``core``) computes with ``weight_set``: the next load
        into that set waits for it."""
        self.weights[core].last_user[weight_set] = sid
        self.last_mvm[core] = sid

    def load(
        self,
        core: int,
        weight_set: int,
        src_addr: int,
        blk: Any,
        layer: str,
        tile: int,
        deps: set[int],
        phase: Phase,
    ) -> int:
        """A `WeightLoad` of block ``blk`` from L1 ``src_addr`` into ``weight_set``."""
        fields = dict(
            weight_set=weight_set,
            src_addr=src_addr,
            bytes=blk.weight_bytes,
            rows_used=blk.rows_used,
            cols_used=blk.cols_used,
        )
        return self.log.add(
            core, Unit.WLOAD, WeightLoad, fields, layer=layer, tile=tile, deps=deps, phase=phase
        )

    def claim_set(self, core: int, pinned: set[int]) -> int:
        """The least recently used weight set of ``core`` that the current tile does not
        still need (any, if all are pinned), marked as just used."""
        st = self.weights[core]
        s = next((x for x in st.lru if x not in pinned), st.lru[0])
        st.lru.remove(s)
        st.lru.append(s)
        return s

    def emit_init(self) -> None:
        """INIT: the constants brought on chip, the resident layers' weight sets loaded;
        the sets left over are the ones frame loads take turns in."""
        residency = self.wplan.residency
        for buf in self.inp.plan.buffers.values():
            if buf.kind in CONSTANT_KINDS and buf.pool is not Pool.DDR:
                # the constants image arrives in DDR with the model; bring it on chip once
                owner = buf.core if buf.pool is Pool.L1 else 0
                self.init_copies[buf.name] = self.log.dma(
                    owner,
                    self.inp.wt_dma,
                    (Pool.DDR, self.inp.plan.source_addr(buf.name)),
                    (buf.pool, buf.addr),
                    buf.size_bytes,
                    layer=buf.layer,
                    tile=0,
                    deps=set(),
                    touches=(buf.name,),
                    phase=Phase.INIT,
                )
        keys = self.wplan.keys
        set_index = 0
        # INIT loads read their staging slot in L1; the staging buffers of different layers
        # may share addresses (they live at different FRAME steps), so a later INIT fetch
        # into the same bytes waits for those loads: (core, first byte, end, load)
        staged_reads: list[tuple[int, int, int, int]] = []
        for li, layer in enumerate(self.inp.layers):
            if residency_of(residency, layer.name) is not Residency.RESIDENT:
                continue
            for key in keys[layer.name]:
                _, oi, b = key
                for core in self.inp.layout.group_cores(self.inp.tiling_of(layer).group):
                    part = self.inp.part_of(li, core)[0]
                    blk = next(
                        (t.mapping.blocks[b] for t in self.inp.mapping_of(layer).of_part(part)
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
                    sid = self.load(core, set_index, src[0], blk, layer.name, 0, src[1],
                                    Phase.INIT)  # fmt: skip
                    if self.pending_slot is not None:  # the next fetch into it waits for this
                        self.slot_user[self.pending_slot[0]] = [sid]
                        staged_reads.append((core, src[0], src[0] + blk.weight_bytes, sid))
                self.resident[key] = set_index
                set_index += 1
        kept = set(self.resident.values())
        for st in self.weights.values():  # frame loads (run-time weights) use the others
            st.lru = [x for x in st.lru if x not in kept]

    def init_stage_war(
        self, layer: LayerPlan, core: int, staged_reads: list[tuple[int, int, int, int]]
    ) -> set[int]:
        """What an INIT fetch of ``layer``'s weights into staging waits for: the earlier INIT
        loads of bytes it overwrites, on the fetching ``core`` directly; on the other cores a
        batch multicast writes, through a `TokenWait` on that core's weight-load queue
        waiting for them (the frame's fetches do the same, `fetch_gates`)."""
        wbuf = self.inp.plan.buffers[const_buffer("weights", layer.name)]
        if wbuf.pool is Pool.L1 or not staged_reads:
            return set()  # read in place: no staging
        cores = [core]
        if self.inp.layout.replicate and self.inp.layout.cores > 1:
            if core != self.inp.layout.all_cores[0]:
                return set()  # the first core's request made the one multicast fetch
            cores = list(self.inp.layout.all_cores)
        waits: set[int] = set()
        for c in cores:
            stage = self.inp.tile_buffer("wstage", layer, c)
            if stage is None:
                continue
            lo, hi = stage.addr, stage.addr + stage.size_bytes
            reads = {s for rc, a, e, s in staged_reads if rc == c and a < hi and lo < e}
            if not reads or c == core:
                waits |= reads
                continue
            gate = self.log.add(c, Unit.WLOAD, TokenWait, {}, layer=layer.name, deps=reads,
                            phase=Phase.INIT)  # fmt: skip
            waits.add(gate)
        return waits

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
        offset = self.inp.consts_of(layer).blocks[block]
        wbuf = self.inp.plan.buffers[const_buffer("weights", layer.name)]
        if wbuf.pool is Pool.L1:
            # an INIT load shares its phase with the copy that brought the weights on chip
            copy = self.init_copies.get(wbuf.name)
            return wbuf.addr + offset, set() if copy is None else {copy}
        stage = self.inp.tile_buffer("wstage", layer, core)
        assert stage is not None, f"{layer.name}: no weight staging buffer"
        biggest = self.inp.tiling_of(layer).block_bytes or max(
            b.weight_bytes for b in self.inp.mapping_of(layer).whole.blocks
        )
        depth = max(1, stage.size_bytes // max(1, biggest))
        counter_key = (core, layer.name)
        slot = self.stage_counter[counter_key] % depth
        self.stage_counter[counter_key] += 1
        dst = stage.addr + slot * biggest
        slot_key = (stage.name, slot)
        deps = set(self.slot_user[slot_key])
        self.pending_slot = (slot_key, None)
        shared = self.inp.layout.replicate or self.shares_weights(layer, phase)
        if shared:
            for c in self.inp.layout.all_cores:
                deps |= set(self.slot_user[(f"wstage:{layer.name}@{c}", slot)])
            if core != self.inp.layout.all_cores[0]:
                # the first core's request made the one multicast fetch
                fetch = self.last_fetch[(layer.name, offset, tile)]
                assert self.log.steps[fetch].fields["dst_addr"] == dst, f"{layer.name}: staging"
                return dst, {fetch}
        mask = 0
        if shared and self.inp.layout.cores > 1:
            mask = (1 << self.inp.layout.cores) - 1
        src = (wbuf.pool, wbuf.addr + offset)
        l2stage = self.inp.plan.buffers.get(f"l2stage:{layer.name}")
        hop_via_l2 = self.inp.cfg.use_sysdma and wbuf.pool is Pool.DDR and l2stage is not None
        fetch_core = core
        if mask and phase is Phase.FRAME and self.inp.layout.replicate:
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
            hop = self.log.dma(
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
            staged = [f"wstage:{layer.name}@{c}" for c in self.inp.layout.all_cores]
        sid = self.log.dma(
            fetch_core,
            self.inp.wt_dma,
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
            self.gates[(sid, self.log.steps[gate].core)] = gate
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
        (`memdeps.add_memory_war`, `barriers.choose_barriers`)."""
        if not self.inp.layout.cooperative or self.inp.layout.cores < 2 or phase is not Phase.FRAME:
            return False
        return (
            self.inp.part_of(self.inp.index[layer.name], self.inp.layout.all_cores[0])[2]
            is Split.ROWS
        )

    def fetch_core_for(self, src_pool: Pool, nbytes: int) -> int:
        """The core whose weight DMA issues a batch's multicast fetch: the one with the
        fewest fetch cycles so far (the cost model's `dma_cycles`), so that the cores share
        the fetch work; the first core when ``src_pool`` streams no faster than a channel
        (DDR: a second channel would only split its bandwidth)."""
        if self.inp.target.cost.stream_bw(src_pool) < self.inp.target.cost.channel_bw:
            return self.inp.layout.all_cores[0]
        core = min(self.inp.layout.all_cores, key=lambda c: (self.fetch_cycles[c], c))
        self.fetch_cycles[core] += self.inp.target.cost.dma_cycles(
            self.inp.wt_dma, src_pool, Pool.L1, nbytes
        )
        return core

    def fetch_gates(self, layer: LayerPlan, fetch_core: int, tile: int) -> set[int]:
        """A `TokenWait` on the weight-load queue of every core but ``fetch_core``, for a
        multicast ``fetch_core`` issues into every core's L1: each gathers, through its
        core's local tokens, the accesses on that core of the bytes the fetch overwrites
        (`memdeps.add_memory_war`), so that a fetch waits on one global token per core and unit
        pair (weight load -> weight DMA) whichever core issues it: the instance has only
        ``arch.tokens.global_count``. Returns the gates."""
        gates = set()
        for c in self.inp.layout.all_cores:
            if c == fetch_core:
                continue
            gate = self.log.add(c, Unit.WLOAD, TokenWait, {}, layer=layer.name, tile=tile)
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
        if not self.inp.cfg.group_ifdw_tasks:
            extra |= input_deps  # the load belongs to its layer: not before its input
        self.pending_slot = None
        src_addr, src_deps = self.weight_source(
            layer, core, block, blk.weight_bytes, tile=tile, phase=Phase.FRAME, extra=extra
        )
        deps = set(src_deps) | extra
        if st.last_user[s] is not None:
            deps.add(st.last_user[s])  # the set's previous block is no longer read
        double = (
            self.inp.cfg.imc_double_buffer_pipeline
            if tiled
            else (self.inp.cfg.imc_double_buffer_sequential)
        )
        if not double and self.last_mvm.get(core) is not None:
            deps.add(self.last_mvm[core])  # no free set to load into while the array works
        sid = self.load(core, s, src_addr, blk, layer.name, tile, deps, Phase.FRAME)
        if self.pending_slot is not None:
            slot_key, _ = self.pending_slot
            self.slot_user[slot_key] = [sid]
        for fetch in src_deps & self.fetch_slot.keys():
            self.fetch_loads[fetch].setdefault(core, sid)
            fetches = self.slot_fetches[self.fetch_slot[fetch]]
            later = fetches.index(fetch) + 1
            if later < len(fetches):
                self.log.steps[fetches[later]].deps.add(sid)
        st.holds[s] = key
        st.last_user[s] = None
        return s, {sid}


__all__ = ["WeightState", "WeightStreamer"]
