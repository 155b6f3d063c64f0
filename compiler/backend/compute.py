"""Schedule steps of one tile of a compute layer: its input DMA, its constants, the compute
tasks with their complete fields, and the output DMA.

A mixin of `schedule.ScheduleBuilder`. For a tile it is given the output rows to compute
(`regions`: this core's share of a row tile, with the halo rows of a fusion group) and:

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

import math
from collections.abc import Callable
from typing import Any, NamedTuple

from aipusim.compiler.backend.constants import dpu_operands
from aipusim.compiler.backend.exchange import part_destinations
from aipusim.compiler.backend.layout import Split
from aipusim.compiler.backend.layout_dma import broadcast_pattern, physical_axes
from aipusim.compiler.backend.lower import (
    LayerPlan,
    LayerUnit,
    activation_bytes,
    is_shortcut,
    memory_rows,
)
from aipusim.compiler.backend.memplan import Buffer, const_buffer
from aipusim.compiler.backend.reduction import (
    REDUCTION_KINDS,
    matrices,
    reduced_axes,
    reduction_geometry,
)
from aipusim.compiler.backend.regions import RowWindow, input_rows, part_range, runtime_shared
from aipusim.compiler.backend.runtime_mvm import MAX_CHAN_PITCH, RuntimePlaces
from aipusim.compiler.backend.target import Knobs
from aipusim.compiler.backend.task_fields import Place, dwpu_fields, mvm_fields
from aipusim.compiler.ir import Op
from aipusim.isa import params as P
from aipusim.isa.tasks import (
    CLAMP_LUTS,
    DpuKind,
    DpuOp,
    DpuThen,
    DwpuKind,
    DwpuOp,
    LutKind,
    Mvm,
    Pool,
    Unit,
)

#: The DPU kinds of binary ops (one operand when the other is a float constant).
_BINARY_KINDS = frozenset(
    {DpuKind.ADD, DpuKind.SUB, DpuKind.MUL, DpuKind.DIV, DpuKind.MIN, DpuKind.MAX, DpuKind.POW}
)

#: What a tile's stores are: a function of the compute steps that writes the output DMA
#: (into a cooperative tensor's L1 copies: the multicasts, `ComputeMixin.share_part`).
Store = Callable[[list[int]], Any]


class TileWork(NamedTuple):
    """One tile of one layer on one core: output rows ``rows`` of row tile ``tile``."""

    li: int
    layer: LayerPlan
    core: int
    tile: int
    rows: tuple[int, int]
    prologue: set[int]


class ComputeMixin:
    """Tile emission of MVM, DWPU and DPU layers (see the module docstring)."""

    # the builder's state this mixin reads and writes (`schedule.ScheduleBuilder`)
    layers: Any
    g: Any
    program: Any
    cfg: Knobs
    arch: Any
    layout: Any
    plan: Any
    steps: Any
    produced: Any
    slot_user: Any
    buf_access: Any
    deferred: Any
    flushed: Any
    fence: Any
    weights: Any
    last_mvm: Any
    dconst_loaded: Any
    dconst_steps: Any
    act_dma: Unit
    wt_dma: Unit
    spread_fetches: bool
    add: Any
    dma: Any
    buffer: Any
    tile_buffer: Any
    tiling_of: Any
    consts_of: Any
    mapping_of: Any
    copy_key: Any
    lands_on: Any
    part_of: Any
    ensure_weights: Any
    emit_runtime_mvm: Any
    zero_point: Any
    elem: Any
    exchange_needs: Any

    def init_compute(self) -> None:
        self.slot_next: dict[str, int] = {}
        self.pending: dict[tuple[str, int], int] = {}  # slot -> deferred stores into it
        #: (core, tensor, tile) -> where a fused intermediate tile lies, its producers and
        #: its slot (the consumer reads it there)
        self.fused_out: dict[tuple[int, str, int], tuple[Place, list[int], tuple[str, int]]] = {}
        #: layers whose tasks do not say all their data (layer -> why), for the functional
        #: check to name
        self.incomplete: dict[str, str] = {}

    # -- bookkeeping -----------------------------------------------------------------------
    def touch(self, sids: list[int], *names: str) -> None:
        for name in names:
            self.buf_access[name].extend(sids)

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

    # -- tensors as rows --------------------------------------------------------------------
    def rows_of(self, layer: LayerPlan, tensor: str, k: int | None) -> tuple[int, int, int]:
        """(memory rows, bytes per row, bytes per pixel) of a tensor a layer reads (input
        ``k``) or writes (``k`` None), as the layer's geometry sees it (a PWORD-padded
        input is the unpadded tensor in memory)."""
        geo = layer.geometry
        e = self.elem(tensor)
        if geo is not None and layer.runtime is None:
            if k is None or is_shortcut(layer, k):  # (a shortcut is laid out as the output)
                return geo.out_h, geo.out_w * geo.cout * e, geo.cout * e
            return geo.src_rows, geo.src_cols * geo.cin * e, geo.cin * e
        if geo is not None:  # run-time weights: rows are heads (an operand shared by
            nbytes = activation_bytes(self.g, tensor)  # every head: one row)
            if runtime_shared(layer, k, nbytes):
                return 1, nbytes, e
            if interleaved(self.g.shape(tensor)):  # heads are the channels of one row
                return 1, nbytes, geo.in_h * e
            return geo.in_h, -(-nbytes // geo.in_h), e
        rows = memory_rows(self.g.shape(tensor))
        nbytes = activation_bytes(self.g, tensor)
        shape = self.g.shape(tensor)
        pixel = (shape[1] if len(shape) == 4 else shape[-1] if shape else 1) * e
        return rows, nbytes // max(1, rows), pixel

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
    ) -> tuple[Place, set[int]]:
        """Where input ``k``'s rows ``window`` (channels ``chans`` of a depthwise tile) lie
        in L1 for this tile, and the steps that put them there. Slots the computes will read
        are appended to ``reads``."""
        t = self.tiling_of(layer)
        tensor = layer.inputs[k]
        _, row_bytes, pixel = self.rows_of(layer, tensor, k)
        e = self.elem(tensor)
        c_lo, c_hi = chans if chans is not None else (0, pixel // e)
        if k == 0 and t.fused_input:
            place, producers, slot_key = self.fused_out[(core, tensor, tile_no)]
            reads.append(slot_key)
            return place.shifted(c_lo * e), set(producers)
        buf = self.buffer(tensor, core)
        producers = set(self.produced.get((self.copy_key(core), tensor), ()))
        if buf.pool is Pool.L1:
            if buf.l1_cores:  # this core's copy: its own part and what others multicast in
                producers = {s for s in producers if self.lands_on(s, core)}
            reads.append((buf.name, -1))  # read in place: the computes access the tensor
            base = buf.addr + window.lo * row_bytes + c_lo * e
            return Place(base, pixel, row_bytes), producers
        tin = self.tile_buffer(f"tile_in{k}", layer, core)
        assert tin is not None, f"{layer.name}: no tile buffer for input {k}"
        slot, key = self.claim_slot(tin, core, t.slots)
        reads.append(key)
        width = (c_hi - c_lo) * e
        pixels = row_bytes // max(1, pixel)
        sliced = width < pixel
        place = Place(
            slot.addr, width if sliced else pixel, pixels * width if sliced else row_bytes
        )
        nbytes = window.rows * place.row_pitch
        if nbytes <= 0:
            return place, producers  # the tile reads padding only
        assert nbytes <= tin.size_bytes // t.slots, f"{layer.name}: input tile overflows"
        src = buf.addr + window.lo * row_bytes + c_lo * e
        fields: dict[str, Any] = {}
        if sliced:  # a channel slice of every pixel
            fields = dict(rows=window.rows * pixels, src_stride=pixel, dst_stride=width)
        sid = self.dma(
            core,
            self.act_dma,
            (buf.pool, src),
            (Pool.L1, slot.addr),
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
    ) -> tuple[Place, Store | None, set[int], tuple[str, int] | None]:
        """Where a compute writes output rows ``rows`` x channels ``chans`` (None: all):
        the place of the first one, the store to the output tensor (None: written in
        place), the steps to wait for before writing, and the slot written (None: the
        tensor itself)."""
        t = self.tiling_of(layer)
        out = layer.outputs[0]
        _, row_bytes, pixel = self.rows_of(layer, out, None)
        e = self.elem(out)
        c_lo, c_hi = chans if chans is not None else (0, pixel // e)
        tout = self.tile_buffer("tile_out", layer, core)
        if t.fused_output:
            assert tout is not None, f"{layer.name}: no output tile buffer"
            slot, key = self.claim_slot(tout, core, t.slots)
            place = Place(slot.addr, pixel, row_bytes)
            return place.shifted(c_lo * e), None, set(self.slot_user[key]), key
        buf = self.buffer(out, core)
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
        place = Place(slot.addr, pixel if whole else width, row_bytes if whole else pixels * width)
        nbytes = (rows[1] - rows[0]) * place.row_pitch
        assert nbytes <= tout.size_bytes // t.slots, f"{layer.name}: output tile overflows"
        dst = buf.addr + rows[0] * row_bytes + c_lo * e
        fields: dict[str, Any] = {}
        if not whole:  # this tile's channels of every pixel
            fields = dict(rows=(rows[1] - rows[0]) * pixels, src_stride=width, dst_stride=pixel)

        def store(computes: list[int]) -> int:
            sid = self.dma(
                core,
                self.act_dma,
                (Pool.L1, slot.addr),
                (buf.pool, dst),
                nbytes,
                layer=layer.name,
                tile=tile_no,
                deps=set(computes),
                touches=(tout.name, buf.name),
                **fields,
            )
            self.slot_user[key] = [sid]
            self.produced[(self.copy_key(core), out)].append(sid)
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
            self.touch(computes, key[0])
        out = layer.outputs[0]
        t = self.tiling_of(layer)
        if t.fused_output:
            assert slot is not None
            self.fused_out[(core, out, tile_no)] = (place, list(computes), slot)
            self.slot_user[slot] = []  # the consumer's computes will read it
            self.touch(computes, slot[0])
            return computes
        if store is None or slot is None:
            buf = self.buffer(out, core)
            self.touch(computes, buf.name)
            self.produced[(self.copy_key(core), out)] += computes
            if store is not None:  # shared with the other cores' copies (`share_part`)
                return [*computes, *store(computes)]
            return computes
        assert slot is not None
        self.touch(computes, slot[0])
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
        _, row_bytes, pixel = self.rows_of(layer, out, None)
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
                sid = self.dma(
                    core, self.act_dma, (Pool.L1, addr), (Pool.L1, addr), nbytes,
                    layer=layer.name, tile=tile_no, deps=set(computes), touches=(buf.name,),
                    mask=mask, **fields,
                )  # fmt: skip
                self.produced[(self.copy_key(core), out)].append(sid)
                sids.append(sid)
            return sids

        return share

    # -- constants ----------------------------------------------------------------------------
    def const_addrs(self, core: int, layer: LayerPlan) -> tuple[int, int, set[int]]:
        """L1 addresses of the layer's parameter blob and constant operand, and the steps
        that brought them (once per frame and core) into its L1 stage."""
        for other in self.hoisted_cores(core, (core, layer.name)):
            self.const_addrs(other, layer)
        consts = self.consts_of(layer)
        stage = self.tile_buffer("dconst", layer, core)
        addrs = []
        sids: set[int] = set()
        key = (core, layer.name)
        first = key not in self.dconst_loaded
        self.dconst_loaded.add(key)
        offset = 0
        for prefix, size in (("params", len(consts.params)), ("operand", len(consts.operand))):
            buf = self.plan.buffers.get(const_buffer(prefix, layer.name))
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
                    self.dma(
                        core,
                        self.wt_dma,
                        (buf.pool, buf.addr),
                        (Pool.L1, stage.addr + offset),
                        size,
                        layer=layer.name,
                        tile=0,
                        deps=set(self.slot_user[(stage.name, 0)]) | set(self.fence[core]),
                        touches=(buf.name, stage.name),
                    )
                )
            offset += size
        if first:
            self.dconst_steps[key] = sids
        return addrs[0], addrs[1], set(self.dconst_steps.get(key, ()))

    def hoisted_cores(self, core: int, key: tuple[int, str]) -> list[int]:
        """The cores whose copy of a layer's constants ``core`` stages with its own: in batch
        with the weight multicasts spread over the cores (`spread_fetches`), the first core
        stages every core's, so that they queue on each core's weight channel ahead of the
        layer's multicasts (a multicast waiting for a core's load of the one before it must
        not sit in front of what that load needs). ``key``: ``core``'s entry in
        ``dconst_loaded``."""
        cores = self.layout.all_cores
        if not self.spread_fetches or core != cores[0] or key in self.dconst_loaded:
            return []
        return cores[1:]

    def dwpu_weights(self, core: int, layer: LayerPlan, deps: set[int]) -> tuple[int, set[int]]:
        """L1 address of a depthwise layer's weights (or a resize's tables) and the step
        that staged them (once per frame and core)."""
        buf = self.plan.buffers.get(const_buffer("weights", layer.name))
        if buf is None:
            return 0, set()
        stage = self.tile_buffer("wstage", layer, core)
        if buf.pool is Pool.L1 or stage is None:
            return buf.addr, set()
        key = (core, "dw:" + layer.name)
        for other in self.hoisted_cores(core, key):
            self.dwpu_weights(other, layer, set())  # (not waiting for that core's input)
        if key not in self.dconst_loaded:
            self.dconst_loaded.add(key)
            sid = self.dma(
                core,
                self.wt_dma,
                (buf.pool, buf.addr),
                (Pool.L1, stage.addr),
                buf.size_bytes,
                layer=layer.name,
                tile=0,
                deps=set(self.fence[core]) | (set() if self.cfg.group_ifdw_tasks else deps),
                touches=(buf.name, stage.name),
            )
            self.dconst_steps[key] = {sid}
        return stage.addr, set(self.dconst_steps[key])

    def lut_of(self, layer: LayerPlan) -> tuple[LutKind, int]:
        """The task's ``lut`` and the table's offset in the parameter blob (-1: none): a
        Relu or Clip between unequal grids is a table, not a clamp."""
        offset = self.consts_of(layer).table_offset
        lut = layer.lut
        if offset >= 0 and lut in CLAMP_LUTS:
            lut = LutKind.TABLE
        return lut, offset

    # -- the tile ------------------------------------------------------------------------------
    def emit_layer_tile(
        self,
        li: int,
        layer: LayerPlan,
        core: int,
        tile_no: int,
        rows: tuple[int, int],
        prologue: set[int],
    ) -> list[int]:
        """Emit output rows ``rows`` of ``layer`` on ``core`` (all its channel tiles);
        returns the compute steps (and stores not held back)."""
        if rows[1] <= rows[0]:
            return []
        consts = self.consts_of(layer)
        if consts.incomplete:
            self.mark_incomplete(layer, consts.incomplete)
        w = TileWork(li, layer, core, tile_no, rows, prologue)
        if layer.unit is LayerUnit.MVM and layer.runtime is not None:
            return self.runtime_tile(w)
        if layer.unit is LayerUnit.MVM:
            return self.mvm_tile(w)
        if layer.unit is LayerUnit.DWPU:
            return self.dwpu_tile(w)
        return self.dpu_tile(w)

    def mvm_tile(self, w: TileWork) -> list[int]:
        li, layer, core, tile_no, rows, prologue = w
        geo = layer.geometry
        assert geo is not None
        part, parts, split = self.part_of(li, core)
        if geo.dilation_h != geo.dilation_w:
            self.mark_incomplete(layer, "unequal dilations")
        window = input_rows(layer, *rows)
        reads: list[tuple[str, int]] = []
        src, in_deps = self.fetch_input(core, layer, 0, window, tile_no, reads)
        shortcut: Place | None = None
        add_deps: set[int] = set()
        if layer.residual:  # the fused add's operand: this tile's output rows of it
            shortcut, add_deps = self.fetch_input(
                core, layer, 1, RowWindow(*rows, 0), tile_no, reads
            )
        params, _, cdeps = self.const_addrs(core, layer)
        add_params = params + self.consts_of(layer).add_offset
        lut, table = self.lut_of(layer)
        psum = self.tile_buffer("psum", layer, core)
        fill = self.zero_point(layer.inputs[0])
        tiled = self.tiling_of(layer).tiles > 1
        base = part_range(geo.cout, parts, part)[0] if split is Split.CHANNELS else 0
        out: list[int] = []
        for tm in self.mapping_of(layer).of_part(part):
            m = tm.mapping
            c_lo, c_hi = base + tm.cout_lo, base + tm.cout_hi
            dst, store, war, slot = self.out_place(core, layer, rows, (c_lo, c_hi), tile_no)
            deps = in_deps | war | cdeps | prologue | add_deps
            computes: list[int] = []
            pinned: set[int] = set()
            for b, blk in enumerate(m.blocks):
                key = (layer.name, tm.oc_tile, b)
                s, wdeps = self.ensure_weights(
                    core, layer, key, blk, (part, tm.oc_tile, b), tile_no, pinned, in_deps, tiled
                )
                pinned.add(s)
                first = blk.col_block * m.block_cols  # the block's first channel of the tile
                fields = mvm_fields(
                    geo, m, blk, rows=rows[1] - rows[0], window=window, src=src,
                    dst=dst.shifted(first), array_rows=self.arch.mvm.rows, fill=fill,
                    psum_addr=psum.addr if psum is not None else 0,
                    param_addr=params + (c_lo + first) * P.CHANNEL.itemsize,
                    lut_addr=params + table if table >= 0 else 0, lut=lut, weight_set=s,
                    residual=shortcut.shifted(c_lo + first) if shortcut is not None else None,
                    add_param_addr=add_params, lut_before_add=layer.lut_before_add,
                )  # fmt: skip
                sid = self.add(
                    core, Unit.MVM, Mvm, fields, layer=layer.name, tile=tile_no, deps=deps | wdeps
                )
                self.weights[core].last_user[s] = sid
                self.last_mvm[core] = sid
                computes.append(sid)
            if psum is not None:
                self.touch(computes, psum.name)
            self.touch(computes, *self.const_names(layer, core))
            out += self.finish(core, layer, computes, reads, store, slot, dst, tile_no)
        return out

    def const_names(self, layer: LayerPlan, core: int) -> list[str]:
        """The buffers a layer's computes read their constants from."""
        names = []
        for prefix in ("params", "operand", "weights"):
            buf = self.plan.buffers.get(const_buffer(prefix, layer.name))
            if buf is not None and buf.pool is Pool.L1:
                names.append(buf.name)
        for prefix in ("dconst", "wstage"):
            stage = self.tile_buffer(prefix, layer, core)
            if stage is not None:
                names.append(stage.name)
        return names

    def dwpu_tile(self, w: TileWork) -> list[int]:
        li, layer, core, tile_no, rows, prologue = w
        geo = layer.geometry
        assert geo is not None
        kind = layer.dwpu_kind
        assert kind is not None
        t = self.tiling_of(layer)
        part, parts, split = self.part_of(li, core)
        lo, hi = part_range(geo.cout, parts, part) if split is Split.CHANNELS else (0, geo.cout)
        if geo.dilation_h != 1 or geo.dilation_w != 1:
            self.mark_incomplete(layer, "a dilated depthwise window")
        window = input_rows(layer, *rows)
        params, _, cdeps = self.const_addrs(core, layer)
        lut, table = self.lut_of(layer)
        consts = self.consts_of(layer)
        fill = self.zero_point(layer.inputs[0])
        if kind in (DwpuKind.MAXPOOL, DwpuKind.GLOBALMAX):
            fill = -128  # padding never wins a maximum
        node = self.g.node(layer.name)
        out: list[int] = []
        for oi in range(t.oc_tiles):
            a, b = part_range(hi - lo, t.oc_tiles, oi)
            c_lo, c_hi = lo + a, lo + b
            if c_hi <= c_lo:
                continue
            reads: list[tuple[str, int]] = []
            src, in_deps = self.fetch_input(core, layer, 0, window, tile_no, reads, (c_lo, c_hi))
            wdeps: set[int] = set()
            weight_addr = 0
            if len(consts.weights):
                weight_addr, wdeps = self.dwpu_weights(core, layer, in_deps)
            param_addr = params
            if kind is DwpuKind.DWCONV:
                weight_addr += c_lo * geo.kh * geo.kw
                param_addr += c_lo * P.CHANNEL.itemsize
            dst, store, war, slot = self.out_place(core, layer, rows, (c_lo, c_hi), tile_no)
            fields = dwpu_fields(
                kind, geo, rows=rows[1] - rows[0], channels=c_hi - c_lo, window=window, src=src,
                dst=dst, fill=fill, count_include_pad=bool(node.attr("count_include_pad", 0)),
                weight_addr=weight_addr, param_addr=param_addr,
                lut_addr=params + table if table >= 0 else 0, lut=lut,
            )  # fmt: skip
            sid = self.add(
                core,
                Unit.DWPU,
                DwpuOp,
                fields,
                layer=layer.name,
                tile=tile_no,
                deps=in_deps | war | cdeps | wdeps | prologue,
            )
            self.touch([sid], *self.const_names(layer, core))
            out += self.finish(core, layer, [sid], reads, store, slot, dst, tile_no)
        return out

    def dpu_tile(self, w: TileWork) -> list[int]:
        _, layer, core, tile_no, rows, prologue = w
        node = self.g.node(layer.name)
        if node.op is Op.CONCAT:
            return self.concat_tile(w)
        names, _ = dpu_operands(node, self.g, self.program)
        kind, table_lut = self.executed_kind(layer, len(names))
        geometry: dict[str, int] = {}
        if kind in REDUCTION_KINDS:
            geometry = self.reduction_fields(layer, rows)
        elif kind is DpuKind.MATMUL:
            geometry = self.product_fields(layer)
        elif not layer.rowwise:
            self.mark_incomplete(layer, f"DPU {kind.value} over whole tensors is timed only")
        out_t = layer.outputs[0]
        _, row_bytes, _ = self.rows_of(layer, out_t, None)
        e_out = self.elem(out_t)
        row_elems = row_bytes // e_out
        e0, n = rows[0] * row_elems, (rows[1] - rows[0]) * row_elems
        out_shape = tuple(self.g.shape(out_t))
        params, operand_addr, cdeps = self.const_addrs(core, layer)
        lut, table = self.lut_of(layer)
        lut = table_lut or lut
        reads: list[tuple[str, int]] = []
        addrs: list[int] = []
        elems: list[int] = []
        deps = set(cdeps) | prologue
        b_div, b_mod = 1, max(1, n)
        for j, name in enumerate(names or list(layer.inputs)):
            elems.append(self.elem(name))
            addr, pattern, in_deps = self.dpu_operand(w, name, j == 0, (e0, n), operand_addr, reads)
            addrs.append(addr)
            deps |= in_deps
            if j == 1:
                b_div, b_mod = pattern
        if layer.then is not DpuThen.NONE:
            geometry = self.then_fields(w, (e0, n), operand_addr, reads, deps)
        p_div, p_mod = self.param_pattern(layer, out_shape)
        dst, store, war, slot = self.out_place(core, layer, rows, None, tile_no)
        if not layer.rowwise:
            n = layer.elements  # whole tensors (a product: its multiply-accumulates)
        fields = dict(
            kind=kind,
            in_addr0=addrs[0] if addrs else 0,
            in_addr1=addrs[1] if len(addrs) > 1 else 0,
            out_addr=dst.addr,
            elements=max(1, n),
            operands=max(1, min(2, len(addrs))),
            lut=lut,
            param_addr=params,
            lut_addr=params + table if table >= 0 else 0,
            in_elem=elems[0] if elems else 1,
            in1_elem=elems[1] if len(elems) > 1 else 1,
            out_elem=e_out,
            b_div=b_div,
            b_mod=max(1, b_mod),
            p_div=p_div,
            p_mod=p_mod,
        )
        fields.update(geometry)
        sid = self.add(
            core, Unit.DPU, DpuOp, fields, layer=layer.name, tile=tile_no, deps=deps | war
        )
        self.touch([sid], *self.const_names(layer, core))
        return self.finish(core, layer, [sid], reads, store, slot, dst, tile_no)

    def dpu_operand(
        self,
        w: TileWork,
        name: str,
        first_operand: bool,
        elements: tuple[int, int],
        const_addr: int,
        reads: list[tuple[str, int]],
    ) -> tuple[int, tuple[int, int], set[int]]:
        """(L1 address, ``(div, mod)`` broadcast, steps it waits for) of operand ``name`` of
        a DPU tile over output ``elements`` ``(e0, n)``: an input's rows (fetched), or the
        constant operand at ``const_addr``, whole."""
        _, layer, core, tile_no, rows, _ = w
        e0, n = elements
        out_shape = tuple(self.g.shape(layer.outputs[0]))
        total = math.prod(out_shape)
        shape = tuple(self.g.shape(name))
        if name in layer.inputs:
            k = layer.inputs.index(name)
            whole = not layer.rowwise or shape != out_shape
            window = RowWindow(0, memory_rows(shape), 0) if whole else RowWindow(*rows, 0)
            place, deps = self.fetch_input(core, layer, k, window, tile_no, reads)
            if not layer.rowwise or shape == out_shape:  # (whole tensors: timed only)
                return place.addr, (1, max(1, n)), deps
            base = place.addr  # an activation broadcast over the output
            pattern = broadcast_pattern(out_shape, shape)
        else:  # the constant operand, whole (spread to the output when it must be)
            base, deps = const_addr, set()
            pattern = broadcast_pattern(out_shape, shape) or (1, total)
        if pattern is None or (first_operand and pattern[1] != total):
            self.mark_incomplete(layer, f"operand {name} is broadcast unlike (e // d) % m")
            pattern = (1, total)
        first = self.broadcast_offset(layer, pattern, e0, n)
        return base + first * self.elem(name), (pattern[0], pattern[1] - first), deps

    def then_fields(
        self,
        w: TileWork,
        elements: tuple[int, int],
        operand_addr: int,
        reads: list[tuple[str, int]],
        deps: set[int],
    ) -> dict[str, int]:
        """The fields of a second element-wise step (`dpu_chain`): its other operand, an
        input or the constant after the first step's in the operand blob. Adds the steps
        that fetch it to ``deps``."""
        layer = w.layer
        mid = self.g.node(layer.name).outputs[0]
        other = next(t for t in self.g.node(layer.fused[0]).present_inputs if t != mid)
        at = operand_addr + max(0, self.consts_of(layer).then_offset)
        addr, (c_div, c_mod), in_deps = self.dpu_operand(w, other, False, elements, at, reads)
        deps |= in_deps
        return dict(
            then=layer.then, in_addr2=addr, in2_elem=self.elem(other), c_div=c_div,
            c_mod=max(1, c_mod),
        )  # fmt: skip

    def concat_tile(self, w: TileWork) -> list[int]:
        """A Concat's output rows ``rows``: per part a ``rescale`` onto the output's grid
        (its `SCALAR` in part order), written into its share of the output (runs of the
        part's share of the axis and what follows it in memory order; channels-last, a
        channel slice of every pixel). A placed channel Concat runs by row tiles, reading
        each part's same rows; one with a constant part whole."""
        _, layer, core, tile_no, rows, prologue = w
        node = self.g.node(layer.name)
        out_t = layer.outputs[0]
        out_shape = tuple(self.g.shape(out_t))
        order = physical_axes(out_shape)
        at = order.index(int(node.attr("axis", 0)) % len(out_shape))
        outer = math.prod(out_shape[a] for a in order[:at])
        row_elems = math.prod(out_shape) // max(1, outer)  # of the output, per outer row
        tile_outer, first_outer = outer, 0
        if layer.rowwise:  # the tile's outer rows (pixels): its memory rows' share
            per_row = outer // layer.rows
            tile_outer, first_outer = (rows[1] - rows[0]) * per_row, rows[0] * per_row
        params, operand_addr, cdeps = self.const_addrs(core, layer)
        reads: list[tuple[str, int]] = []
        deps = set(cdeps) | prologue
        dst, store, war, slot = self.out_place(core, layer, rows, None, tile_no)
        e_out = self.elem(out_t)
        sids: list[int] = []
        offset = const_offset = 0
        for j, name in enumerate(node.present_inputs):
            shape = tuple(self.g.shape(name))
            part = math.prod(shape) // max(1, outer)  # the part's elements per outer row
            e_in = self.elem(name)
            if self.g.is_constant(name):
                src, in_deps = operand_addr + const_offset + first_outer * part * e_in, set()
                const_offset += math.prod(shape)
            else:
                k = layer.inputs.index(name)
                window = (
                    RowWindow(*rows, 0) if layer.rowwise else RowWindow(0, memory_rows(shape), 0)
                )
                place, in_deps = self.fetch_input(core, layer, k, window, tile_no, reads)
                src = place.addr
            fields = dict(
                kind=DpuKind.RESCALE, in_addr0=src, out_addr=dst.addr + offset * e_out,
                elements=tile_outer * part, param_addr=params + j * P.SCALAR.itemsize,
                in_elem=e_in, out_elem=e_out,
            )  # fmt: skip
            if outer > 1:
                fields.update(row_len=part, in_row_pitch=part * e_in,
                              out_row_pitch=row_elems * e_out)  # fmt: skip
            sid = self.add(
                core, Unit.DPU, DpuOp, fields, layer=layer.name, tile=tile_no,
                deps=deps | in_deps | war,
            )  # fmt: skip
            sids.append(sid)
            offset += part
        self.touch(sids, *self.const_names(layer, core))
        return self.finish(core, layer, sids, reads, store, slot, dst, tile_no)

    def executed_kind(self, layer: LayerPlan, operands: int) -> tuple[DpuKind, LutKind | None]:
        """The kind a DPU layer's tasks run as, from its integer step: a binary op with a
        float constant scales its one operand (``rescale``) or looks it up in its table
        (``lut``, then also the table's ``lut``); ReduceMax is ``reduce_max``."""
        kind = layer.dpu_kind or DpuKind.COPY
        node = self.g.node(layer.name)
        if node.op is Op.REDUCE_MAX:
            return DpuKind.REDUCE_MAX, None
        step = self.program.steps.get(layer.name) if self.program is not None else None
        if step is None or operands != 1 or kind not in _BINARY_KINDS:
            return kind, None
        if step.kind == "rescale":
            return DpuKind.RESCALE, None
        if step.kind == "lut":
            return DpuKind.LUT, LutKind.TABLE
        return kind, None

    def reduction_fields(self, layer: LayerPlan, rows: tuple[int, int]) -> dict[str, int]:
        """``outer, groups, n`` and strides of a reduction kind's task over ``rows`` of its
        input (all of them unless the layer runs by rows)."""
        node = self.g.node(layer.name)
        shape = tuple(self.g.shape(node.inputs[0]))
        geo = reduction_geometry(shape, reduced_axes(node, self.g))
        if node.op is Op.MASKED_SOFTMAX:
            self.mark_incomplete(layer, "a masked softmax (no mask operand in the task)")
        if geo is None:
            self.mark_incomplete(layer, "reduced axes that are not neighbours in memory")
            return {}
        if layer.rowwise:
            geo = geo.rows(rows[1] - rows[0], memory_rows(shape))
        return geo._asdict()

    def product_fields(self, layer: LayerPlan) -> dict[str, int]:
        """Heads, sizes and strides of a product of two activations on the DPU."""
        node = self.g.node(layer.name)
        a, b, out = (matrices(self.g.shape(t)) for t in (*node.inputs[:2], node.outputs[0]))
        shape_a, shape_b = self.g.shape(node.inputs[0]), self.g.shape(node.inputs[1])
        steps = {m.step for m in (a, b, out) if m is not None}
        if a is None or b is None or out is None or len(steps) != 1:
            self.mark_incomplete(layer, "product operands with unlike layouts")
            return {}
        return dict(
            outer=out.heads, groups=shape_a[-2], n=shape_a[-1], b_mod=shape_b[-1],
            o_stride=a.head_stride, k_stride=b.head_stride, out_row_pitch=out.head_stride,
            g_stride=steps.pop(),
        )  # fmt: skip

    def broadcast_offset(self, layer: LayerPlan, pattern: tuple[int, int], e0: int, n: int) -> int:
        """Operand-1 element the tile starting at output element ``e0`` reads first; the
        tile must not wrap around the operand (`mark_incomplete` otherwise)."""
        div, mod = pattern
        if mod == 1:
            return 0  # one operand value for every element: any tile reads element 0
        if e0 % div:
            self.mark_incomplete(layer, "a row tile starts inside a broadcast period")
            return 0
        first = (e0 // div) % mod
        if first and first + math.ceil(n / div) > mod:
            self.mark_incomplete(layer, "a row tile wraps around its broadcast operand")
        return first

    def param_pattern(self, layer: LayerPlan, out_shape: tuple[int, ...]) -> tuple[int, int]:
        """``(p_div, p_mod)`` of per-channel parameter records (one record: (1, 1))."""
        consts = self.consts_of(layer)
        if layer.dpu_kind not in (DpuKind.REQUANT, DpuKind.LUT) or consts.table_offset >= 0:
            return 1, 1
        records = len(consts.params) // P.CHANNEL.itemsize
        if records <= 1 or len(out_shape) < 2 or out_shape[1] != records:
            return 1, 1
        shape = [1] * len(out_shape)
        shape[1] = records
        return broadcast_pattern(out_shape, tuple(shape)) or (1, records)

    def runtime_tile(self, w: TileWork) -> list[int]:
        """An MVM layer with run-time weights over heads ``heads``: its operands' heads lie
        ``matrices``' strides apart. Heads interleaved as channels are the channels of one
        memory row: some of them (a tile, a core's share) are gathered into the tile slot
        and stored from it by strided DMA rows, packed there as that many interleaved heads
        (`fetch_input`, `out_place` with ``chans``)."""
        li, layer, core, tile_no, heads, prologue = w
        del li
        reads: list[tuple[str, int]] = []
        places, deps = [], set(prologue)
        for k, tensor in enumerate(layer.inputs):
            if runtime_shared(layer, k, activation_bytes(self.g, tensor)):
                window, chans = RowWindow(0, 1, 0), None
            else:
                window, chans = self.head_cut(tensor, heads)
            place, in_deps = self.fetch_input(core, layer, k, window, tile_no, reads, chans)
            places.append(place)
            deps |= in_deps
        params, _, cdeps = self.const_addrs(core, layer)
        lut, table = self.lut_of(layer)
        window, chans = self.head_cut(layer.outputs[0], heads)
        dst, store, war, slot = self.out_place(core, layer, (window.lo, window.hi), chans, tile_no)
        places.append(dst)
        psum = self.tile_buffer("psum", layer, core)
        strides = self.runtime_head_strides(layer, [p.pitch for p in places])
        runtime = RuntimePlaces(
            *(p.addr for p in places), *strides, *(p.pitch for p in places),
            psum.addr if psum is not None else 0, params,
            params + table if table >= 0 else 0, lut, self.zero_point(layer.inputs[0]),
        )  # fmt: skip
        computes = self.emit_runtime_mvm(core, layer, heads, tile_no, runtime, deps | war | cdeps)
        return self.finish(core, layer, computes, reads, store, slot, dst, tile_no)

    def head_cut(
        self, tensor: str, heads: tuple[int, int]
    ) -> tuple[RowWindow, tuple[int, int] | None]:
        """The rows and channels of a run-time MVM operand that hold heads ``heads``: rows
        where each head's matrix is contiguous, channels where the heads are interleaved."""
        if interleaved(self.g.shape(tensor)):
            return RowWindow(0, 1, 0), heads
        return RowWindow(*heads, 0), None

    def runtime_head_strides(self, layer: LayerPlan, pitches: list[int]) -> tuple[int, ...]:
        """Bytes from one head to the next of A, B and the output in their tiles (B shared:
        0); ``pitches``: the bytes between neighbouring elements there."""
        tensors = (*layer.inputs[:2], layer.outputs[0])
        found = [matrices(tuple(self.g.shape(t))) for t in tensors]
        if any(f is None for f in found):
            self.mark_incomplete(layer, "run-time weights whose operands are not matrices")
            return (0, 0, 0)
        if max(pitches) > MAX_CHAN_PITCH:
            self.mark_incomplete(layer, f"run-time weights over more than {MAX_CHAN_PITCH} heads")
        imc = self.mapping_of(layer).whole
        if imc.icr > 1 and imc.row_blocks > 1:
            self.mark_incomplete(layer, "run-time weights with ICR over several row blocks")
        # interleaved heads lie one element apart however many of them a tile holds
        return tuple(f.head_stride * self.elem(t) for f, t in zip(found, tensors, strict=True) if f)


def interleaved(shape: tuple[int, ...] | list[int]) -> bool:
    """Whether a tensor's matrices are interleaved as channels (`matrices` step > 1)."""
    found = matrices(tuple(shape))
    return found is not None and found.step > 1


__all__ = ["ComputeMixin", "Store"]
