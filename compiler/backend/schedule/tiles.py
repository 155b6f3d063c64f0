"""Schedule steps of one tile of a compute layer: its input DMA, its constants, the compute
tasks with their complete fields, and the output DMA.

`TileEmitter` owns the tile streams of one build (which slot of each tile buffer is next,
who last read it, the stores held back, a fused group's intermediate tiles, what each
tensor's writers are) and appends its steps to the build's `StepLog`; weight sets come
from its `weights.WeightStreamer`. The frame walk (`frame`) gives it, per tile, the output
rows to compute (`regions`: this core's share of a row tile, with the halo rows of a
fusion group) and:

- fetches each input's rows (`regions.input_rows`) into an L1 tile slot, or reads them
  where they are (an L1-resident tensor, or the previous layer's output tile in a fusion
  group); a depthwise layer's channel tile fetches its channels only;
- computes every output-channel tile (an MVM layer's IMC tiles, a depthwise layer's channel
  tiles) into an L1 output slot (or straight into an L1-resident output, or the tile a
  fused consumer reads) and stores each slot's channels and rows to the output tensor;
- records for every step what it must follow: the DMA that filled its input slot, the
  readers of a slot it overwrites, the store of an output slot it reuses.

With two slots per tile stream (software pipelining) a store is held back until the next
tile's input DMA is queued, so the DMA of tile i + 1 overlaps the compute of tile i.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any, NamedTuple

from aipusim.compiler.backend.common.layout import Split
from aipusim.compiler.backend.lower.layer import LayerPlan, activation_bytes, is_shortcut
from aipusim.compiler.backend.lower.layout_dma import Copy, copy_heads, copy_part
from aipusim.compiler.backend.memplan.buffers import Buffer, const_buffer
from aipusim.compiler.backend.multicore.exchange import part_destinations
from aipusim.compiler.backend.schedule.inputs import ScheduleInputs
from aipusim.compiler.backend.schedule.steps import ProducerMap, StepLog, lands_on
from aipusim.compiler.backend.schedule.task_fields import Place
from aipusim.compiler.backend.schedule.weights import WeightStreamer
from aipusim.compiler.backend.tile.regions import (
    RowWindow,
    group_rows,
    input_rows,
    out_rows,
    part_range,
)
from aipusim.isa.tasks import (
    Pool,
)

#: What a tile's stores are: a function of the compute steps that writes the output DMA
#: (into a cooperative tensor's L1 copies: the multicasts, `TileEmitter.share_part`).
Store = Callable[[list[int]], Any]


class TileWork(NamedTuple):
    """One tile of one layer on one core: output rows ``rows`` of row tile ``tile``."""

    li: int
    layer: LayerPlan
    core: int
    tile: int
    rows: tuple[int, int]
    prologue: set[int]


class TileEmitter:
    """Tile emission of MVM, DWPU and DPU layers and of layout layers (see the module
    docstring)."""

    def __init__(self, inp: ScheduleInputs, log: StepLog, wts: WeightStreamer) -> None:
        self.inp, self.log, self.wts = inp, log, wts
        #: (copy, tensor) -> the steps that write it
        self.produced = ProducerMap(inp.layers)
        #: (tile buffer, slot) -> the steps to wait for before writing it
        self.slot_user: dict[tuple[str, int], list[int]] = defaultdict(list)
        self.slot_next: dict[str, int] = {}
        self.pending: dict[tuple[str, int], int] = {}  # slot -> deferred stores into it
        self.deferred: dict[int, list[Any]] = defaultdict(list)  # held-back output stores
        self.flushed: dict[int, list[int]] = defaultdict(list)
        #: (core, tensor, tile) -> where a fused intermediate tile lies, its producers and
        #: its slot (the consumer reads it there)
        self.fused_out: dict[tuple[int, str, int], tuple[Place, list[int], tuple[str, int]]] = {}
        self.dconst_loaded: set[tuple[int, str]] = set()
        self.dconst_steps: dict[Any, set[int]] = {}
        self.needs: dict[str, list[list[tuple[int, int]]]] = {}  # `exchange_needs`
        #: (layer, tile) -> the steps that put the cores' partial sums of a layer split by
        #: input channels into the first core's buffer (`compute.partial_tile`)
        self.partials: dict[tuple[str, int], list[int]] = {}
        #: layers whose tasks do not say all their data (layer -> why), for the functional
        #: check to name
        self.incomplete: dict[str, str] = {}

    # -- bookkeeping -----------------------------------------------------------------------
    def mark_incomplete(self, layer: LayerPlan, why: str) -> None:
        self.incomplete.setdefault(layer.name, why)

    def claim_slot(self, buf: Buffer, core: int, slots: int) -> tuple[Place, tuple[str, int]]:
        """The next slot of a tile buffer (round robin): its address, and its key (whose
        ``slot_user`` are the steps to wait for before writing it)."""
        n = self.slot_next.get(buf.name, 0)
        self.slot_next[buf.name] = n + 1
        slot = n % max(1, slots)
        key = (buf.name, slot)
        if self.pending.get(key):
            self.flush_stores(core)  # its previous content still waits to be stored
        per = buf.size_bytes // max(1, slots)
        return Place(buf.addr + slot * per, 0, 0), key

    def flush_stores(self, core: int) -> None:
        """Emit the output DMAs held back for software pipelining."""
        for key, store in self.deferred.pop(core, []):
            self.pending[key] -= 1
            self.flushed[core].append(store())

    # -- inputs -------------------------------------------------------------------------------
    def fetch_input(
        self,
        core: int,
        layer: LayerPlan,
        k: int,
        window: RowWindow,
        tile_no: int,
        reads: list[tuple[str, int]],
        chans: tuple[int, int] | None = None,
        keep_pitch: bool = False,
    ) -> tuple[Place, set[int]]:
        """Where input ``k``'s rows ``window`` (channels ``chans`` of a depthwise tile) lie
        in L1 for this tile, and the steps that put them there. Slots the computes will read
        are appended to ``reads``. ``keep_pitch``: fetched channels land where they lie in
        the tensor's pixels, not packed (a core's heads of a head split, `Split.HEADS`:
        its tasks step over every head as a whole tensor's would)."""
        t = self.inp.tiling_of(layer)
        tensor = layer.inputs[k]
        _, row_bytes, pixel = self.inp.rows_of(layer, tensor, k)
        e = self.inp.elem(tensor)
        c_lo, c_hi = chans if chans is not None else (0, pixel // e)
        if k == 0 and t.fused_input:
            place, producers, slot_key = self.fused_out[(core, tensor, tile_no)]
            reads.append(slot_key)
            return place.shifted(c_lo * e), set(producers)
        buf = self.inp.buffer(tensor, core)
        producers = set(self.produced.get((self.inp.copy_key(core), tensor), ()))
        if tensor in self.inp.layout.local_tensors:  # each core reads the part it made
            producers = {s for s in producers if self.log.steps[s].core == core}
        if buf.pool is Pool.L1:
            if buf.l1_cores:  # this core's copy: its own part and what others multicast in
                producers = {s for s in producers if lands_on(self.log.steps, s, core)}
            reads.append((buf.name, -1))  # read in place: the computes access the tensor
            base = buf.addr + window.lo * row_bytes + c_lo * e
            return Place(base, pixel, row_bytes), producers
        tin = self.inp.tile_buffer(f"tile_in{k}", layer, core)
        assert tin is not None, f"{layer.name}: no tile buffer for input {k}"
        slot, key = self.claim_slot(tin, core, t.slots)
        reads.append(key)
        width = (c_hi - c_lo) * e
        pixels = row_bytes // max(1, pixel)
        sliced = width < pixel
        packed = sliced and not keep_pitch
        place = Place(
            slot.addr, width if packed else pixel, pixels * width if packed else row_bytes
        )
        nbytes = window.rows * (pixels * width if sliced else row_bytes)
        if nbytes <= 0:
            return place, producers  # the tile reads padding only
        assert window.rows * place.row_pitch <= tin.size_bytes // t.slots, (
            f"{layer.name}: input tile overflows"
        )
        src = buf.addr + window.lo * row_bytes + c_lo * e
        dst = slot.addr
        fields: dict[str, Any] = {}
        if sliced:  # a channel slice of every pixel
            fields = dict(rows=window.rows * pixels, src_stride=pixel, dst_stride=place.pitch)
        if sliced and keep_pitch:  # at its channels' offset of every pixel
            dst += c_lo * e
            place = place.shifted(c_lo * e)
        sid = self.log.dma(
            core,
            self.inp.act_dma,
            (buf.pool, src),
            (Pool.L1, dst),
            nbytes,
            layer=layer.name,
            tile=tile_no,
            deps=producers | set(self.slot_user[key]),
            touches=(buf.name, tin.name),
            **fields,
        )
        self.flush_stores(core)
        return place, {sid}

    # -- outputs ------------------------------------------------------------------------------
    def out_place(
        self,
        core: int,
        layer: LayerPlan,
        rows: tuple[int, int],
        chans: tuple[int, int] | None,
        tile_no: int,
        span: tuple[int, int] | None = None,
        keep_pitch: bool = False,
    ) -> tuple[Place, Store | None, set[int], tuple[str, int] | None]:
        """Where a compute writes output rows ``rows`` x channels ``chans`` (None: all):
        the place of the first one, the store to the output tensor (None: written in
        place), the steps to wait for before writing, and the slot written (None: the
        tensor itself). ``span``: the bytes ``[lo, hi)`` of the rows the computes write and
        the store moves (None: all of them; a KV cache grown in place stores its new
        rows only). ``keep_pitch``: a slot holds the channels where the tensor's pixels
        do, not packed (`fetch_input`)."""
        t = self.inp.tiling_of(layer)
        out = layer.outputs[0]
        _, row_bytes, pixel = self.inp.rows_of(layer, out, None)
        e = self.inp.elem(out)
        c_lo, c_hi = chans if chans is not None else (0, pixel // e)
        tout = self.inp.tile_buffer("tile_out", layer, core)
        if t.fused_output:
            assert tout is not None, f"{layer.name}: no output tile buffer"
            slot, key = self.claim_slot(tout, core, t.slots)
            place = Place(slot.addr, pixel, row_bytes)
            return place.shifted(c_lo * e), None, set(self.slot_user[key]), key
        buf = self.inp.buffer(out, core)
        if buf.l1_cores and buf.pool is Pool.L1:
            # written in this core's copy, then multicast to the cores that read it
            base = buf.addr + rows[0] * row_bytes + c_lo * e
            share = self.share_part(core, layer, buf, rows, (c_lo * e, c_hi * e), tile_no)
            return Place(base, pixel, row_bytes), share, set(), None
        if buf.pool is Pool.L1 or tout is None:
            base = buf.addr + rows[0] * row_bytes + c_lo * e
            return Place(base, pixel, row_bytes), None, set(), None
        slot, key = self.claim_slot(tout, core, t.slots)
        width = (c_hi - c_lo) * e
        pixels = row_bytes // max(1, pixel)
        whole = width == pixel
        packed = not whole and not keep_pitch
        place = Place(
            slot.addr, width if packed else pixel, pixels * width if packed else row_bytes
        )
        assert (rows[1] - rows[0]) * place.row_pitch <= tout.size_bytes // t.slots, (
            f"{layer.name}: output tile overflows"
        )
        nbytes = (rows[1] - rows[0]) * pixels * width
        dst = buf.addr + rows[0] * row_bytes + c_lo * e
        fields: dict[str, Any] = {}
        if not whole:  # this tile's channels of every pixel
            fields = dict(
                rows=(rows[1] - rows[0]) * pixels, src_stride=place.pitch, dst_stride=pixel
            )
        if not packed:
            place = place.shifted(c_lo * e)
        lo = 0
        if span is not None:
            assert whole and span[1] <= nbytes, f"{layer.name}: a span of whole rows only"
            lo, nbytes = span[0], span[1] - span[0]

        def store(computes: list[int]) -> int:
            sid = self.log.dma(
                core,
                self.inp.act_dma,
                (Pool.L1, place.addr + lo),
                (buf.pool, dst + lo),
                nbytes,
                layer=layer.name,
                tile=tile_no,
                deps=set(computes),
                touches=(tout.name, buf.name),
                **fields,
            )
            self.slot_user[key] = [sid]
            self.produced[(self.inp.copy_key(core), out)].append(sid)
            return sid

        return place, store, set(self.slot_user[key]), key

    def finish(
        self,
        core: int,
        layer: LayerPlan,
        computes: list[int],
        reads: list[tuple[str, int]],
        store: Store | None,
        slot: tuple[str, int] | None,
        place: Place,
        tile_no: int,
    ) -> list[int]:
        """After a tile's computes: free the slots they read, record or store the output."""
        if not computes:
            return []
        for key in reads:
            if key[1] >= 0:
                self.slot_user[key] = list(computes)
            self.log.touch(computes, key[0])
        out = layer.outputs[0]
        t = self.inp.tiling_of(layer)
        if t.fused_output:
            assert slot is not None
            self.fused_out[(core, out, tile_no)] = (place, list(computes), slot)
            self.slot_user[slot] = []  # the consumer's computes will read it
            self.log.touch(computes, slot[0])
            return computes
        if store is None or slot is None:
            buf = self.inp.buffer(out, core)
            self.log.touch(computes, buf.name)
            self.produced[(self.inp.copy_key(core), out)] += computes
            if store is not None:  # shared with the other cores' copies (`share_part`)
                return [*computes, *store(computes)]
            return computes
        assert slot is not None
        self.log.touch(computes, slot[0])
        if t.slots > 1:
            # software pipelining: the next tile's input DMA goes ahead of this store on
            # the in-order DMA queue, so it overlaps this tile's compute
            self.pending[slot] = self.pending.get(slot, 0) + 1
            self.deferred[core].append((slot, lambda c=list(computes): store(c)))
            return computes
        return [*computes, store(computes)]

    def share_part(
        self,
        core: int,
        layer: LayerPlan,
        buf: Buffer,
        rows: tuple[int, int],
        span: tuple[int, int],
        tile_no: int,
    ) -> Store:
        """The multicasts of output rows ``rows`` x bytes ``span`` of each pixel, computed
        into this core's L1 copy of a cooperative tensor, into the same place of the other
        cores' copies: each core gets the rows it reads (`exchange.part_destinations`),
        cores reading the same rows share one multicast."""
        out = layer.outputs[0]
        _, row_bytes, pixel = self.inp.rows_of(layer, out, None)
        masks: dict[tuple[int, int], int] = {}
        for c, need in part_destinations(self.exchange_needs(out), core, rows).items():
            masks[need] = masks.get(need, 0) | 1 << c
        width = span[1] - span[0]
        pixels = row_bytes // max(1, pixel)

        def share(computes: list[int]) -> list[int]:
            sids = []
            for (lo, hi), mask in sorted(masks.items()):
                addr = buf.addr + lo * row_bytes + span[0]
                fields: dict[str, Any] = {}
                nbytes = (hi - lo) * row_bytes
                if width < pixel:  # this core's channels of every pixel
                    nbytes = (hi - lo) * pixels * width
                    fields = dict(rows=(hi - lo) * pixels, src_stride=pixel, dst_stride=pixel)
                sid = self.log.dma(
                    core, self.inp.act_dma, (Pool.L1, addr), (Pool.L1, addr), nbytes,
                    layer=layer.name, tile=tile_no, deps=set(computes), touches=(buf.name,),
                    mask=mask, **fields,
                )  # fmt: skip
                self.produced[(self.inp.copy_key(core), out)].append(sid)
                sids.append(sid)
            return sids

        return share

    # -- constants ----------------------------------------------------------------------------
    def const_addrs(self, core: int, layer: LayerPlan) -> tuple[int, int, set[int]]:
        """L1 addresses of the layer's parameter blob and constant operand, and the steps
        that brought them (once per frame and core) into its L1 stage."""
        for other in self.hoisted_cores(core, (core, layer.name)):
            self.const_addrs(other, layer)
        consts = self.inp.consts_of(layer)
        stage = self.inp.tile_buffer("dconst", layer, core)
        addrs = []
        sids: set[int] = set()
        key = (core, layer.name)
        first = key not in self.dconst_loaded
        self.dconst_loaded.add(key)
        offset = 0
        for prefix, size in (("params", len(consts.params)), ("operand", len(consts.operand))):
            buf = self.inp.plan.buffers.get(const_buffer(prefix, layer.name))
            if buf is None or not size:
                addrs.append(0)
                continue
            if buf.pool is Pool.L1:
                addrs.append(buf.addr)
                continue
            assert stage is not None, f"{layer.name}: no L1 stage for its constants"
            addrs.append(stage.addr + offset)
            if first:
                sids.add(
                    self.log.dma(
                        core,
                        self.inp.wt_dma,
                        (buf.pool, buf.addr),
                        (Pool.L1, stage.addr + offset),
                        size,
                        layer=layer.name,
                        tile=0,
                        deps=set(self.slot_user[(stage.name, 0)]) | set(self.log.fence[core]),
                        touches=(buf.name, stage.name),
                    )
                )
            offset += size
        if first:
            self.dconst_steps[key] = sids
        return addrs[0], addrs[1], set(self.dconst_steps.get(key, ()))

    def hoisted_cores(self, core: int, key: tuple[int, str]) -> list[int]:
        """The cores whose copy of a layer's constants ``core`` stages with its own: in
        batch with the weight multicasts spread over the cores
        (`weight_plan.WeightPlan.spread_fetches`), the first core stages every core's, so
        that they queue on each core's weight channel ahead of the layer's multicasts (a
        multicast waiting for a core's load of the one before it must not sit in front of
        what that load needs). ``key``: ``core``'s entry in ``dconst_loaded``."""
        cores = self.inp.layout.all_cores
        if not self.wts.spread_fetches or core != cores[0] or key in self.dconst_loaded:
            return []
        return cores[1:]

    def dwpu_weights(self, core: int, layer: LayerPlan, deps: set[int]) -> tuple[int, set[int]]:
        """L1 address of a depthwise layer's weights (or a resize's tables) and the step
        that staged them (once per frame and core)."""
        buf = self.inp.plan.buffers.get(const_buffer("weights", layer.name))
        if buf is None:
            return 0, set()
        stage = self.inp.tile_buffer("wstage", layer, core)
        if buf.pool is Pool.L1 or stage is None:
            return buf.addr, set()
        key = (core, "dw:" + layer.name)
        for other in self.hoisted_cores(core, key):
            self.dwpu_weights(other, layer, set())  # (not waiting for that core's input)
        if key not in self.dconst_loaded:
            self.dconst_loaded.add(key)
            sid = self.log.dma(
                core,
                self.inp.wt_dma,
                (buf.pool, buf.addr),
                (Pool.L1, stage.addr),
                buf.size_bytes,
                layer=layer.name,
                tile=0,
                deps=set(self.log.fence[core]) | (set() if self.inp.cfg.group_ifdw_tasks else deps),
                touches=(buf.name, stage.name),
            )
            self.dconst_steps[key] = {sid}
        return stage.addr, set(self.dconst_steps[key])

    # -- cooperative reads ------------------------------------------------------------
    def exchange_needs(self, tensor: str) -> list[list[tuple[int, int]]]:
        """For every read of a cooperative L1 tensor (`exchange`), the rows of it each core
        reads (``(0, 0)``: none): a row split's windows over its tiles, a channel split all
        rows, a layer not split all rows on the first core only."""
        if tensor not in self.needs:
            self.needs[tensor] = [
                [self.rows_read(li, k, c) for c in self.inp.layout.all_cores]
                for li, layer in enumerate(self.inp.layers)
                for k, t in enumerate(layer.inputs)
                if t == tensor
            ]
        return self.needs[tensor]

    def rows_read(self, li: int, k: int, core: int) -> tuple[int, int]:
        """The rows of input ``k`` of layer ``li`` that ``core`` reads (`exchange_needs`)."""
        layer = self.inp.layers[li]
        if layer.inputs[k] in self.inp.layout.local_tensors:
            return 0, 0  # tensor parallel: each core reads the channels it computed
        total = self.inp.rows_of(layer, layer.inputs[k], k)[0]
        group = self.inp.group_of[self.inp.tilings[li].group]
        part, parts, split = self.inp.part_of(group.layers[-1], core)
        if split is Split.NONE:
            return (0, total) if core == self.inp.layout.all_cores[0] else (0, 0)
        if split is not Split.ROWS:
            return 0, total
        window = layer.geometry is not None and layer.runtime is None and k == 0
        own_rows = is_shortcut(layer, k) or (layer.geometry is None and total == out_rows(layer))
        if not (window or own_rows):
            return 0, total
        layers = [self.inp.layers[i] for i in group.layers]
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

    # -- layout layers ----------------------------------------------------------------
    def copy_parts(self, copy: Copy, pools: tuple[Pool, Pool], elem: int) -> int:
        """How many cores move a share of a layout ``copy`` of ``elem``-byte elements
        between ``pools`` (`CoreLayout.shared_copies`): one when an end is in L1 (a core's
        own memory) or in DDR (the cores' parts would share its sustained bandwidth and
        break its row locality: the simulator finds four parts of a 128 KiB cache copy from
        DDR each slower than the whole), or when the cost model says a part, moved while
        the other cores move theirs over the same links (`CostModel.shared_dma_cycles`),
        plus the global tokens that order it across cores (its input's, its reader's)
        takes no less than the whole; otherwise every core, up to one per row (or plane)
        of the copy."""
        parts = min(self.inp.layout.cores, max(copy.rows, copy.planes))
        if Pool.L1 in pools or Pool.DDR in pools or parts < 2:
            return 1
        cost = self.inp.target.cost
        nbytes = copy.planes * copy.rows * copy.run * elem
        whole = cost.dma_cycles(self.inp.act_dma, *pools, nbytes)
        part = cost.shared_dma_cycles(self.inp.act_dma, *pools, nbytes, parts)
        return parts if part + 2 * cost.token_latency_cycles(True) < whole else 1

    def emit_dma_layer(self, core: int, layer: LayerPlan, deps: set[int]) -> list[int]:
        """Concat/Split/Slice/Transpose/Pad (and a reshape that reorders bytes): the copies
        `layout_dma.copy_plan` found, between the tensors' buffers; padding comes from the
        layer's fill bytes in the constants image."""
        consts = self.inp.consts_of(layer)
        if consts.incomplete:
            self.mark_incomplete(layer, consts.incomplete)
        key = self.inp.copy_key(core)
        ins = [self.inp.buffer(t, core) for t in layer.inputs]
        li = self.inp.index[layer.name]
        part, parts, split = self.inp.part_of(li, core)
        heads = None  # a core's heads of a head split (`Split.HEADS`): it moves those alone
        if split is Split.HEADS:
            heads = part_range(self.inp.layout.heads[li], parts, part)
        producers = set(deps)
        for t in layer.inputs:
            mine = self.produced.get((key, t), ())
            if t in self.inp.layout.local_tensors:  # the heads this core computed
                mine = [s for s in mine if self.log.steps[s].core == core]
            producers |= set(mine)
        fill = self.inp.plan.buffers.get(const_buffer("operand", layer.name))
        sids: list[int] = []
        shared = self.inp.layout.shared_copies
        if not consts.copies and shared and core != 0:
            return sids  # timed-only whole copies stay on core 0
        if not consts.copies:  # no copy plan: each output copied whole (timed only)
            for out in layer.outputs:
                dst = self.inp.buffer(out, core)
                sid = self.log.dma(
                    core, self.inp.act_dma, (ins[0].pool, ins[0].addr), (dst.pool, dst.addr),
                    activation_bytes(self.inp.graph, out), layer=layer.name, tile=0, deps=producers,
                    touches=(ins[0].name, dst.name),
                )  # fmt: skip
                self.produced[(key, out)].append(sid)
                sids.append(sid)
            return sids
        for k, copies in consts.copies:
            out = layer.outputs[k]
            dst = self.inp.buffer(out, core)
            e = self.inp.elem(out)
            mine = []
            for whole in copies:
                src_buf = fill if whole.src < 0 else ins[whole.src]
                assert src_buf is not None, f"{layer.name}: no fill bytes"
                c: Copy | None = whole
                if heads is not None:
                    c = copy_heads(whole, self.inp.layout.heads[li], *heads)
                elif shared:  # this core's part of the copy (core 0: all of one not shared)
                    parts = self.copy_parts(whole, (src_buf.pool, dst.pool), e)
                    c = copy_part(whole, parts, core) if parts > 1 or core == 0 else None
                if c is None:
                    continue
                src_addr = src_buf.addr + c.src_off * e
                sid = self.log.dma(
                    core,
                    self.inp.act_dma,
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


__all__ = ["Store", "TileEmitter", "TileWork"]
