"""The compute steps of one tile of a compute layer, by unit: the `Mvm`s of each IMC
channel tile and weight block, a depthwise layer's `DwpuOp`s per channel tile, a DPU
layer's `DpuOp` (a Concat's rescales, a reduction's or a product's geometry, a second
element-wise step), an MVM with run-time weights (`runtime_mvm`).

Each function takes the build's `tiles.TileEmitter`, which says where the tile's inputs,
outputs and constants lie (fetching and storing them) and records what every step must
follow; these functions fill in the compute tasks' fields and the steps between them.
`emit_layer_tile` picks the unit's function.
"""

from __future__ import annotations

import math
from dataclasses import replace

from aipusim.compiler.backend.common.layout import Split
from aipusim.compiler.backend.lower.layer import LayerPlan, LayerUnit, activation_bytes, memory_rows
from aipusim.compiler.backend.lower.layout_dma import broadcast_pattern, physical_axes
from aipusim.compiler.backend.lower.reduction import (
    REDUCTION_KINDS,
    matrices,
    reduced_axes,
    reduction_geometry,
)
from aipusim.compiler.backend.memplan.buffers import Buffer, const_buffer
from aipusim.compiler.backend.pack.dpu import dpu_operands
from aipusim.compiler.backend.schedule.inputs import interleaved
from aipusim.compiler.backend.schedule.runtime_mvm import (
    MAX_CHAN_PITCH,
    RuntimePlaces,
    emit_runtime_mvm,
)
from aipusim.compiler.backend.schedule.task_fields import Place, dwpu_fields, mvm_fields
from aipusim.compiler.backend.schedule.tiles import TileEmitter, TileWork
from aipusim.compiler.backend.tile.regions import RowWindow, input_rows, part_range, runtime_shared
from aipusim.compiler.ir import Op
from aipusim.isa import params as P
from aipusim.isa.dpu_work import PSUM_BYTES
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


def lut_of(em: TileEmitter, layer: LayerPlan) -> tuple[LutKind, int]:
    """The task's ``lut`` and the table's offset in the parameter blob (-1: none): a
    Relu or Clip between unequal grids is a table, not a clamp."""
    offset = em.inp.consts_of(layer).table_offset
    lut = layer.lut
    if offset >= 0 and lut in CLAMP_LUTS:
        lut = LutKind.TABLE
    return lut, offset


def emit_layer_tile(
    em: TileEmitter,
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
    consts = em.inp.consts_of(layer)
    if consts.incomplete:
        em.mark_incomplete(layer, consts.incomplete)
    w = TileWork(li, layer, core, tile_no, rows, prologue)
    if layer.unit is LayerUnit.MVM and layer.runtime is not None:
        return runtime_tile(em, w)
    if layer.unit is LayerUnit.MVM:
        return mvm_tile(em, w)
    if layer.unit is LayerUnit.DWPU:
        return dwpu_tile(em, w)
    return dpu_tile(em, w)


def mvm_tile(em: TileEmitter, w: TileWork) -> list[int]:
    li, layer, core, tile_no, rows, prologue = w
    geo = layer.geometry
    assert geo is not None
    part, parts, split = em.inp.part_of(li, core)
    if split is Split.INPUTS:
        return partial_tile(em, w)
    if geo.dilation_h != geo.dilation_w:
        em.mark_incomplete(layer, "unequal dilations")
    window = input_rows(layer, *rows)
    reads: list[tuple[str, int]] = []
    src, in_deps = em.fetch_input(core, layer, 0, window, tile_no, reads)
    shortcut: Place | None = None
    add_deps: set[int] = set()
    if layer.residual:  # the fused add's operand: this tile's output rows of it
        shortcut, add_deps = em.fetch_input(core, layer, 1, RowWindow(*rows, 0), tile_no, reads)
    params, _, cdeps = em.const_addrs(core, layer)
    add_params = params + em.inp.consts_of(layer).add_offset
    lut, table = lut_of(em, layer)
    psum = em.inp.tile_buffer("psum", layer, core)
    fill = em.inp.zero_point(layer.inputs[0])
    tiled = em.inp.tiling_of(layer).tiles > 1
    base = part_range(geo.cout, parts, part)[0] if split is Split.CHANNELS else 0
    out: list[int] = []
    for tm in em.inp.mapping_of(layer).of_part(part):
        m = tm.mapping
        c_lo, c_hi = base + tm.cout_lo, base + tm.cout_hi
        dst, store, war, slot = em.out_place(core, layer, rows, (c_lo, c_hi), tile_no)
        deps = in_deps | war | cdeps | prologue | add_deps
        computes: list[int] = []
        pinned: set[int] = set()
        for b, blk in enumerate(m.blocks):
            key = (layer.name, tm.oc_tile, b)
            s, wdeps = em.wts.ensure_weights(
                core, layer, key, blk, (part, tm.oc_tile, b), tile_no, pinned, in_deps, tiled
            )
            pinned.add(s)
            first = blk.col_block * m.block_cols  # the block's first channel of the tile
            fields = mvm_fields(
                geo, m, blk, rows=rows[1] - rows[0], window=window, src=src,
                dst=dst.shifted(first), array_rows=em.inp.arch.mvm.rows, fill=fill,
                psum_addr=psum.addr if psum is not None else 0,
                param_addr=params + (c_lo + first) * P.CHANNEL.itemsize,
                lut_addr=params + table if table >= 0 else 0, lut=lut, weight_set=s,
                residual=shortcut.shifted(c_lo + first) if shortcut is not None else None,
                add_param_addr=add_params, lut_before_add=layer.lut_before_add,
            )  # fmt: skip
            sid = em.log.add(
                core, Unit.MVM, Mvm, fields, layer=layer.name, tile=tile_no, deps=deps | wdeps
            )
            em.wts.computed(core, s, sid)
            computes.append(sid)
        if psum is not None:
            em.log.touch(computes, psum.name)
        em.log.touch(computes, *const_names(em, layer, core))
        out += em.finish(core, layer, computes, reads, store, slot, dst, tile_no)
    return out


def partial_tile(em: TileEmitter, w: TileWork) -> list[int]:
    """A one-row MVM layer split by input channels (`Split.INPUTS`) on one core: its
    `Mvm`s multiply the core's part of the input by its rows of the weights into int32
    partial sums of every output channel (post none), at plane ``part`` of the layer's
    partial-sum buffer; a core other than the first copies its plane into the first core's
    buffer. The last core to emit adds the reduction (`reduce_partials`) to the first core.
    """
    li, layer, core, tile_no, rows, prologue = w
    geo = layer.geometry
    assert geo is not None and rows == (0, 1), f"{layer.name}: a one-row layer only"
    part, parts, _ = em.inp.part_of(li, core)
    k_lo, k_hi = part_range(geo.cin, parts, part)
    sub = replace(geo, cin=k_hi - k_lo)
    window = input_rows(layer, *rows)
    reads: list[tuple[str, int]] = []
    src, in_deps = em.fetch_input(core, layer, 0, window, tile_no, reads, (k_lo, k_hi))
    psum = em.inp.tile_buffer("psum", layer, core)
    first = em.inp.tile_buffer("psum", layer, em.inp.layout.all_cores[0])
    assert psum is not None and first is not None, f"{layer.name}: no partial-sum buffer"
    plane = geo.cout * PSUM_BYTES
    mine = psum.addr + part * plane
    computes: list[int] = []
    for tm in em.inp.mapping_of(layer).of_part(part):
        m = tm.mapping
        pinned: set[int] = set()
        for b, blk in enumerate(m.blocks):
            key = (layer.name, tm.oc_tile, b)
            s, wdeps = em.wts.ensure_weights(
                core, layer, key, blk, (part, tm.oc_tile, b), tile_no, pinned, in_deps, False
            )
            pinned.add(s)
            col = tm.cout_lo + blk.col_block * m.block_cols  # the block's first channel
            at = Place(mine + col * PSUM_BYTES, 0, 0)
            fields = mvm_fields(
                sub, m, blk, rows=1, window=window, src=src, dst=at,
                array_rows=em.inp.arch.mvm.rows, fill=em.inp.zero_point(layer.inputs[0]),
                psum_addr=at.addr, param_addr=0,
                lut_addr=0, lut=LutKind.NONE, weight_set=s, partial=True,
            )  # fmt: skip
            sid = em.log.add(
                core, Unit.MVM, Mvm, fields, layer=layer.name, tile=tile_no,
                deps=in_deps | prologue | wdeps,
            )  # fmt: skip
            em.wts.computed(core, s, sid)
            computes.append(sid)
    if not computes:
        return []
    em.log.touch(computes, psum.name)
    for key in reads:
        if key[1] >= 0:
            em.slot_user[key] = list(computes)
        em.log.touch(computes, key[0])
    out = list(computes)
    parts_of = em.partials.setdefault((layer.name, tile_no), [])
    if psum is first:
        parts_of += computes
    else:  # this core's plane into the first core's buffer
        sid = em.log.dma(
            core, em.inp.act_dma, (Pool.L1, mine), (Pool.L1, first.addr + part * plane),
            plane, layer=layer.name, tile=tile_no, deps=set(computes),
            touches=(psum.name, first.name), mask=1 << em.inp.layout.all_cores[0],
        )  # fmt: skip
        parts_of.append(sid)
        out.append(sid)
    if core == em.inp.layout.all_cores[-1]:
        reduce_partials(em, w, first, parts)
    return out


def reduce_partials(em: TileEmitter, w: TileWork, psum: Buffer, parts: int) -> None:
    """The one reduction of a layer split by input channels, on the first core: a ``psum``
    `DpuOp` sums the cores' partial-sum planes and requantizes them with the layer's
    records (and table), then the output goes where a layer not split would put it."""
    layer, tile_no, rows = w.layer, w.tile, w.rows
    geo = layer.geometry
    assert geo is not None
    core = em.inp.layout.all_cores[0]
    params, _, cdeps = em.const_addrs(core, layer)
    lut, table = lut_of(em, layer)
    dst, store, war, slot = em.out_place(core, layer, rows, None, tile_no)
    fields = dict(
        kind=DpuKind.PSUM, in_addr0=psum.addr, out_addr=dst.addr, elements=geo.cout,
        operands=parts, k_stride=geo.cout, in_elem=PSUM_BYTES, out_elem=1, param_addr=params,
        p_div=1, p_mod=geo.cout, lut=lut, lut_addr=params + table if table >= 0 else 0,
    )  # fmt: skip
    deps = set(em.partials.pop((layer.name, tile_no))) | cdeps | war
    sid = em.log.add(core, Unit.DPU, DpuOp, fields, layer=layer.name, tile=tile_no, deps=deps)
    em.log.touch([sid], psum.name, *const_names(em, layer, core))
    em.finish(core, layer, [sid], [], store, slot, dst, tile_no)
    em.flush_stores(core)


def const_names(em: TileEmitter, layer: LayerPlan, core: int) -> list[str]:
    """The buffers a layer's computes read their constants from."""
    names = []
    for prefix in ("params", "operand", "weights"):
        buf = em.inp.plan.buffers.get(const_buffer(prefix, layer.name))
        if buf is not None and buf.pool is Pool.L1:
            names.append(buf.name)
    for prefix in ("dconst", "wstage"):
        stage = em.inp.tile_buffer(prefix, layer, core)
        if stage is not None:
            names.append(stage.name)
    return names


def dwpu_tile(em: TileEmitter, w: TileWork) -> list[int]:
    li, layer, core, tile_no, rows, prologue = w
    geo = layer.geometry
    assert geo is not None
    kind = layer.dwpu_kind
    assert kind is not None
    t = em.inp.tiling_of(layer)
    part, parts, split = em.inp.part_of(li, core)
    lo, hi = part_range(geo.cout, parts, part) if split is Split.CHANNELS else (0, geo.cout)
    if geo.dilation_h != 1 or geo.dilation_w != 1:
        em.mark_incomplete(layer, "a dilated depthwise window")
    window = input_rows(layer, *rows)
    params, _, cdeps = em.const_addrs(core, layer)
    lut, table = lut_of(em, layer)
    consts = em.inp.consts_of(layer)
    fill = em.inp.zero_point(layer.inputs[0])
    if kind in (DwpuKind.MAXPOOL, DwpuKind.GLOBALMAX):
        fill = -128  # padding never wins a maximum
    node = em.inp.graph.node(layer.name)
    out: list[int] = []
    for oi in range(t.oc_tiles):
        a, b = part_range(hi - lo, t.oc_tiles, oi)
        c_lo, c_hi = lo + a, lo + b
        if c_hi <= c_lo:
            continue
        reads: list[tuple[str, int]] = []
        src, in_deps = em.fetch_input(core, layer, 0, window, tile_no, reads, (c_lo, c_hi))
        wdeps: set[int] = set()
        weight_addr = 0
        if len(consts.weights):
            weight_addr, wdeps = em.dwpu_weights(core, layer, in_deps)
        param_addr = params
        if kind is DwpuKind.DWCONV:
            weight_addr += c_lo * geo.kh * geo.kw
            param_addr += c_lo * P.CHANNEL.itemsize
        dst, store, war, slot = em.out_place(core, layer, rows, (c_lo, c_hi), tile_no)
        fields = dwpu_fields(
            kind, geo, rows=rows[1] - rows[0], channels=c_hi - c_lo, window=window, src=src,
            dst=dst, fill=fill, count_include_pad=bool(node.attr("count_include_pad", 0)),
            weight_addr=weight_addr, param_addr=param_addr,
            lut_addr=params + table if table >= 0 else 0, lut=lut,
        )  # fmt: skip
        sid = em.log.add(
            core,
            Unit.DWPU,
            DwpuOp,
            fields,
            layer=layer.name,
            tile=tile_no,
            deps=in_deps | war | cdeps | wdeps | prologue,
        )
        em.log.touch([sid], *const_names(em, layer, core))
        out += em.finish(core, layer, [sid], reads, store, slot, dst, tile_no)
    return out


def dpu_tile(em: TileEmitter, w: TileWork) -> list[int]:
    _, layer, core, tile_no, rows, prologue = w
    node = em.inp.graph.node(layer.name)
    if node.op is Op.CONCAT:
        return concat_tile(em, w)
    names, _ = dpu_operands(node, em.inp.graph, em.inp.program)
    kind, table_lut = executed_kind(em, layer, len(names))
    part, parts, split = em.inp.part_of(w.li, core)
    by_heads = split is Split.HEADS
    heads = em.inp.layout.heads.get(w.li, 1)
    chans: tuple[int, int] | None = None
    if by_heads:  # this core's heads: the channels of one row of interleaved heads
        chans = part_range(heads, parts, part)
        if chans[1] <= chans[0]:
            return []
    share = chans[1] - chans[0] if chans is not None else heads
    geometry: dict[str, int] = {}
    if kind in REDUCTION_KINDS:
        geometry = reduction_fields(em, layer, rows)
        if by_heads:  # the softmax's groups are the heads
            geometry["groups"] = share
    elif kind is DpuKind.MATMUL:
        geometry = product_fields(em, layer)
        if by_heads and geometry:
            geometry["outer"] = share
    elif not layer.rowwise:
        em.mark_incomplete(layer, f"DPU {kind.value} over whole tensors is timed only")
    out_t = layer.outputs[0]
    _, row_bytes, _ = em.inp.rows_of(layer, out_t, None)
    e_out = em.inp.elem(out_t)
    row_elems = row_bytes // e_out
    e0, n = rows[0] * row_elems, (rows[1] - rows[0]) * row_elems
    if split is Split.CHANNELS:  # tensor parallel: one row, this core's run of channels
        assert rows[1] - rows[0] == 1, f"{layer.name}: a channel part of one row only"
        chans = part_range(row_elems, parts, part)
        e0, n = e0 + chans[0], chans[1] - chans[0]
    if by_heads:  # element-wise: rows of this core's heads, a whole pixel apart
        n = n // heads * share
        if kind not in REDUCTION_KINDS and kind is not DpuKind.MATMUL:
            geometry = dict(row_len=share, in_row_pitch=heads * em.inp.elem(layer.inputs[0]),
                            out_row_pitch=heads * e_out)  # fmt: skip
    out_shape = tuple(em.inp.graph.shape(out_t))
    params, operand_addr, cdeps = em.const_addrs(core, layer)
    lut, table = lut_of(em, layer)
    lut = table_lut or lut
    reads: list[tuple[str, int]] = []
    addrs: list[int] = []
    elems: list[int] = []
    deps = set(cdeps) | prologue
    b_div, b_mod = 1, max(1, n)
    for j, name in enumerate(names or list(layer.inputs)):
        elems.append(em.inp.elem(name))
        addr, pattern, in_deps = dpu_operand(
            em, w, name, j == 0, (e0, n), operand_addr, reads, chans, by_heads
        )
        addrs.append(addr)
        deps |= in_deps
        if j == 1:
            b_div, b_mod = pattern
    if layer.then is not DpuThen.NONE:
        geometry = then_fields(em, w, (e0, n), operand_addr, reads, deps)
    p_div, p_mod = param_pattern(em, layer, out_shape)
    dst, store, war, slot = em.out_place(core, layer, rows, chans, tile_no, keep_pitch=by_heads)
    if not layer.rowwise:
        n = layer.elements // heads * share  # whole tensors (a product: its multiply-accumulates)
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
    sid = em.log.add(core, Unit.DPU, DpuOp, fields, layer=layer.name, tile=tile_no, deps=deps | war)
    em.log.touch([sid], *const_names(em, layer, core))
    return em.finish(core, layer, [sid], reads, store, slot, dst, tile_no)


def dpu_operand(
    em: TileEmitter,
    w: TileWork,
    name: str,
    first_operand: bool,
    elements: tuple[int, int],
    const_addr: int,
    reads: list[tuple[str, int]],
    chans: tuple[int, int] | None = None,
    by_heads: bool = False,
) -> tuple[int, tuple[int, int], set[int]]:
    """(L1 address, ``(div, mod)`` broadcast, steps it waits for) of operand ``name`` of
    a DPU tile over output ``elements`` ``(e0, n)``: an input's rows (fetched), or the
    constant operand at ``const_addr``, whole; ``chans``: a core's channels of a one-row
    input of the output's shape (tensor parallel), fetched alone; ``by_heads``: ``chans``
    are a core's heads (`Split.HEADS`) of any input, fetched at their offsets."""
    _, layer, core, tile_no, rows, _ = w
    e0, n = elements
    out_shape = tuple(em.inp.graph.shape(layer.outputs[0]))
    total = math.prod(out_shape)
    shape = tuple(em.inp.graph.shape(name))
    if name in layer.inputs:
        k = layer.inputs.index(name)
        whole = not layer.rowwise or shape != out_shape
        window = RowWindow(0, memory_rows(shape), 0) if whole else RowWindow(*rows, 0)
        part = chans if chans is not None and (shape == out_shape or by_heads) else None
        place, deps = em.fetch_input(core, layer, k, window, tile_no, reads, part, by_heads)
        if not layer.rowwise or shape == out_shape:  # (whole tensors: timed only)
            return place.addr, (1, max(1, n)), deps
        base = place.addr  # an activation broadcast over the output
        pattern = broadcast_pattern(out_shape, shape)
    else:  # the constant operand, whole (spread to the output when it must be)
        base, deps = const_addr, set()
        pattern = broadcast_pattern(out_shape, shape) or (1, total)
    if pattern is None or (first_operand and pattern[1] != total):
        em.mark_incomplete(layer, f"operand {name} is broadcast unlike (e // d) % m")
        pattern = (1, total)
    first = broadcast_offset(em, layer, pattern, e0, n)
    return base + first * em.inp.elem(name), (pattern[0], pattern[1] - first), deps


def then_fields(
    em: TileEmitter,
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
    mid = em.inp.graph.node(layer.name).outputs[0]
    other = next(t for t in em.inp.graph.node(layer.fused[0]).present_inputs if t != mid)
    at = operand_addr + max(0, em.inp.consts_of(layer).then_offset)
    addr, (c_div, c_mod), in_deps = dpu_operand(em, w, other, False, elements, at, reads)
    deps |= in_deps
    return dict(
        then=layer.then, in_addr2=addr, in2_elem=em.inp.elem(other), c_div=c_div,
        c_mod=max(1, c_mod),
    )  # fmt: skip


def concat_tile(em: TileEmitter, w: TileWork) -> list[int]:
    """A Concat's output rows ``rows``: per part a ``rescale`` onto the output's grid
    (its `SCALAR` in part order), written into its share of the output (runs of the
    part's share of the axis and what follows it in memory order; channels-last, a
    channel slice of every pixel). A placed channel Concat runs by row tiles, reading
    each part's same rows; one with a constant part whole. A KV cache grown in place
    (`decoder.append_in_place`) already holds its past in the output's buffer: only the
    new rows are rescaled and stored, after it."""
    _, layer, core, tile_no, rows, prologue = w
    node = em.inp.graph.node(layer.name)
    out_t = layer.outputs[0]
    out_shape = tuple(em.inp.graph.shape(out_t))
    order = physical_axes(out_shape)
    at = order.index(int(node.attr("axis", 0)) % len(out_shape))
    outer = math.prod(out_shape[a] for a in order[:at])
    row_elems = math.prod(out_shape) // max(1, outer)  # of the output, per outer row
    tile_outer, first_outer = outer, 0
    if layer.rowwise:  # the tile's outer rows (pixels): its memory rows' share
        per_row = outer // layer.rows
        tile_outer, first_outer = (rows[1] - rows[0]) * per_row, rows[0] * per_row
    params, operand_addr, cdeps = em.const_addrs(core, layer)
    reads: list[tuple[str, int]] = []
    deps = set(cdeps) | prologue
    e_out = em.inp.elem(out_t)
    kept = node.present_inputs[0] if node.present_inputs[0] in em.inp.grown else None
    span = None
    if kept is not None:  # one run: the past's bytes, then the new rows (outer == 1)
        kept_bytes = math.prod(em.inp.graph.shape(kept)) * e_out
        span = (kept_bytes, row_elems * e_out)
    dst, store, war, slot = em.out_place(core, layer, rows, None, tile_no, span)
    sids: list[int] = []
    offset = const_offset = 0
    for j, name in enumerate(node.present_inputs):
        shape = tuple(em.inp.graph.shape(name))
        part = math.prod(shape) // max(1, outer)  # the part's elements per outer row
        e_in = em.inp.elem(name)
        if name == kept and j == 0:
            offset += part
            continue
        if em.inp.graph.is_constant(name):
            src, in_deps = operand_addr + const_offset + first_outer * part * e_in, set()
            const_offset += math.prod(shape)
        else:
            k = layer.inputs.index(name)
            window = RowWindow(*rows, 0) if layer.rowwise else RowWindow(0, memory_rows(shape), 0)
            place, in_deps = em.fetch_input(core, layer, k, window, tile_no, reads)
            src = place.addr
        fields = dict(
            kind=DpuKind.RESCALE, in_addr0=src, out_addr=dst.addr + offset * e_out,
            elements=tile_outer * part, param_addr=params + j * P.SCALAR.itemsize,
            in_elem=e_in, out_elem=e_out,
        )  # fmt: skip
        if outer > 1:
            fields.update(row_len=part, in_row_pitch=part * e_in,
                          out_row_pitch=row_elems * e_out)  # fmt: skip
        sid = em.log.add(
            core, Unit.DPU, DpuOp, fields, layer=layer.name, tile=tile_no,
            deps=deps | in_deps | war,
        )  # fmt: skip
        sids.append(sid)
        offset += part
    em.log.touch(sids, *const_names(em, layer, core))
    return em.finish(core, layer, sids, reads, store, slot, dst, tile_no)


def executed_kind(
    em: TileEmitter, layer: LayerPlan, operands: int
) -> tuple[DpuKind, LutKind | None]:
    """The kind a DPU layer's tasks run as, from its integer step: a binary op with a
    float constant scales its one operand (``rescale``) or looks it up in its table
    (``lut``, then also the table's ``lut``); ReduceMax is ``reduce_max``."""
    kind = layer.dpu_kind or DpuKind.COPY
    node = em.inp.graph.node(layer.name)
    if node.op is Op.REDUCE_MAX:
        return DpuKind.REDUCE_MAX, None
    step = em.inp.program.steps.get(layer.name) if em.inp.program is not None else None
    if step is None or operands != 1 or kind not in _BINARY_KINDS:
        return kind, None
    if step.kind == "rescale":
        return DpuKind.RESCALE, None
    if step.kind == "lut":
        return DpuKind.LUT, LutKind.TABLE
    return kind, None


def reduction_fields(em: TileEmitter, layer: LayerPlan, rows: tuple[int, int]) -> dict[str, int]:
    """``outer, groups, n`` and strides of a reduction kind's task over ``rows`` of its
    input (all of them unless the layer runs by rows)."""
    node = em.inp.graph.node(layer.name)
    shape = tuple(em.inp.graph.shape(node.inputs[0]))
    geo = reduction_geometry(shape, reduced_axes(node, em.inp.graph))
    if geo is None:
        em.mark_incomplete(layer, "reduced axes that are not neighbours in memory")
        return {}
    if layer.rowwise:
        geo = geo.rows(rows[1] - rows[0], memory_rows(shape))
    return geo._asdict()


def product_fields(em: TileEmitter, layer: LayerPlan) -> dict[str, int]:
    """Heads, sizes and strides of a product of two activations on the DPU."""
    node = em.inp.graph.node(layer.name)
    a, b, out = (matrices(em.inp.graph.shape(t)) for t in (*node.inputs[:2], node.outputs[0]))
    shape_a, shape_b = (
        em.inp.graph.shape(node.inputs[0]),
        em.inp.graph.shape(node.inputs[1]),
    )
    steps = {m.step for m in (a, b, out) if m is not None}
    if a is None or b is None or out is None or len(steps) != 1:
        em.mark_incomplete(layer, "product operands with unlike layouts")
        return {}
    return dict(
        outer=out.heads, groups=shape_a[-2], n=shape_a[-1], b_mod=shape_b[-1],
        o_stride=a.head_stride, k_stride=b.head_stride, out_row_pitch=out.head_stride,
        g_stride=steps.pop(),
    )  # fmt: skip


def broadcast_offset(
    em: TileEmitter, layer: LayerPlan, pattern: tuple[int, int], e0: int, n: int
) -> int:
    """Operand-1 element the tile starting at output element ``e0`` reads first; the
    tile must not wrap around the operand (`mark_incomplete` otherwise)."""
    div, mod = pattern
    if mod == 1:
        return 0  # one operand value for every element: any tile reads element 0
    if e0 % div:
        em.mark_incomplete(layer, "a row tile starts inside a broadcast period")
        return 0
    first = (e0 // div) % mod
    if first and first + math.ceil(n / div) > mod:
        em.mark_incomplete(layer, "a row tile wraps around its broadcast operand")
    return first


def param_pattern(em: TileEmitter, layer: LayerPlan, out_shape: tuple[int, ...]) -> tuple[int, int]:
    """``(p_div, p_mod)`` of per-channel parameter records (one record: (1, 1))."""
    consts = em.inp.consts_of(layer)
    if layer.dpu_kind not in (DpuKind.REQUANT, DpuKind.LUT) or consts.table_offset >= 0:
        return 1, 1
    records = len(consts.params) // P.CHANNEL.itemsize
    if records <= 1 or len(out_shape) < 2 or out_shape[1] != records:
        return 1, 1
    shape = [1] * len(out_shape)
    shape[1] = records
    return broadcast_pattern(out_shape, tuple(shape)) or (1, records)


def runtime_tile(em: TileEmitter, w: TileWork) -> list[int]:
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
        if runtime_shared(layer, k, activation_bytes(em.inp.graph, tensor)):
            window, chans = RowWindow(0, 1, 0), None
        else:
            window, chans = head_cut(em, tensor, heads)
        place, in_deps = em.fetch_input(core, layer, k, window, tile_no, reads, chans)
        places.append(place)
        deps |= in_deps
    params, _, cdeps = em.const_addrs(core, layer)
    lut, table = lut_of(em, layer)
    window, chans = head_cut(em, layer.outputs[0], heads)
    dst, store, war, slot = em.out_place(core, layer, (window.lo, window.hi), chans, tile_no)
    places.append(dst)
    psum = em.inp.tile_buffer("psum", layer, core)
    strides = runtime_head_strides(em, layer, [p.pitch for p in places])
    runtime = RuntimePlaces(
        *(p.addr for p in places), *strides, *(p.pitch for p in places),
        psum.addr if psum is not None else 0, params,
        params + table if table >= 0 else 0, lut, em.inp.zero_point(layer.inputs[0]),
    )  # fmt: skip
    computes = emit_runtime_mvm(
        em.inp, em.log, em.wts, core, layer, heads, tile_no, runtime, deps | war | cdeps
    )
    return em.finish(core, layer, computes, reads, store, slot, dst, tile_no)


def head_cut(
    em: TileEmitter, tensor: str, heads: tuple[int, int]
) -> tuple[RowWindow, tuple[int, int] | None]:
    """The rows and channels of a run-time MVM operand that hold heads ``heads``: rows
    where each head's matrix is contiguous, channels where the heads are interleaved."""
    if interleaved(em.inp.graph.shape(tensor)):
        return RowWindow(0, 1, 0), heads
    return RowWindow(*heads, 0), None


def runtime_head_strides(em: TileEmitter, layer: LayerPlan, pitches: list[int]) -> tuple[int, ...]:
    """Bytes from one head to the next of A, B and the output in their tiles (B shared:
    0); ``pitches``: the bytes between neighbouring elements there."""
    tensors = (*layer.inputs[:2], layer.outputs[0])
    found = [matrices(tuple(em.inp.graph.shape(t))) for t in tensors]
    if any(f is None for f in found):
        em.mark_incomplete(layer, "run-time weights whose operands are not matrices")
        return (0, 0, 0)
    if max(pitches) > MAX_CHAN_PITCH:
        em.mark_incomplete(layer, f"run-time weights over more than {MAX_CHAN_PITCH} heads")
    imc = em.inp.mapping_of(layer).whole
    if imc.icr > 1 and imc.row_blocks > 1:
        em.mark_incomplete(layer, "run-time weights with ICR over several row blocks")
    # interleaved heads lie one element apart however many of them a tile holds
    return tuple(f.head_stride * em.inp.elem(t) for f, t in zip(found, tensors, strict=True) if f)


__all__ = ["emit_layer_tile"]
