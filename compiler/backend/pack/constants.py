"""Pass ``pack``: every constant byte a layer's tasks read, in the layout the tasks read it.

From the integer program (`aipusim.compiler.quant.QuantizedGraph`) and the IMC mappings,
each layer gets at most three constant blobs (`LayerConstants`), which the memory plan
places and the emit pass writes into the constants image:

- ``weights``: an MVM layer's IMC image, the weight blocks of every (core part, channel
  tile; a split by input channels: the part's rows of the weights) one after the other,
  each ``rows_used x cols_used`` row-major as its `WeightLoad`
  writes it (rows in the `Mvm` row space: taps, PWORD channels, swICR packing, ICR copies
  shifted by the stride); a depthwise conv's ``kh * kw`` weights per channel; a resize's
  coordinate tables;
- ``params``: the parameter records (`aipusim.isa.params`): per-channel requantize records
  for MVM and depthwise layers (with the input zero point folded into the bias, since the
  array sums raw int8 products), then a fused residual add's `SCALAR` (``add_offset``), a
  `SCALAR` for the element-wise kinds, a pool's `COUNT` table; then the layer's table (LUT
  or softmax exponentials) at ``table_offset``;
- ``operand``: a constant operand of an element-wise op (int8, in its tensor's layout).

Without an integer program (the back end run on a float graph, for timing) the blobs have
their sizes and hold zeros.

>>> weight_rows(kh=3, width=3, cin=3, cpad=64, swicr=False), weight_rows(3, 3, 3, 64, True)
(576, 192)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from aipusim.arch import Arch
from aipusim.compiler.backend.common.layout import CoreLayout, Split
from aipusim.compiler.backend.imc.mapper import ImcMapping
from aipusim.compiler.backend.imc.plan import LayerMapping, TileMapping, part_range
from aipusim.compiler.backend.lower.layer import LayerPlan, LayerUnit
from aipusim.compiler.backend.lower.layout_dma import (
    copy_plan,
)
from aipusim.compiler.backend.pack.blobs import LayerConstants, _bytes, _one_range, _zp
from aipusim.compiler.backend.pack.dpu import DpuPacker
from aipusim.compiler.ir import DType, Graph, Op
from aipusim.compiler.quant import opsupport as S
from aipusim.compiler.quant.quantize import QStep, QuantizedGraph
from aipusim.isa import params as P
from aipusim.isa.tasks import DwpuKind


def weight_rows(kh: int, width: int, cin: int, cpad: int, swicr: bool) -> int:
    """Rows of the MVM row space of a ``kh`` x ``width`` window of ``cin`` channels."""
    if swicr:
        return kh * (-(-width * cin // cpad) * cpad)
    return kh * width * cpad


def weight_row(ky: int, j: int, c: int, width: int, cin: int, cpad: int, swicr: bool) -> int:
    """The row of tap ``(ky, j)`` channel ``c`` (see `aipusim.isa.tasks.Mvm`)."""
    if swicr:
        return ky * (-(-width * cin // cpad) * cpad) + j * cin + c
    return (ky * width + j) * cpad + c


class _Packer(DpuPacker):
    def __init__(
        self, graph: Graph, program: QuantizedGraph | None, layout: CoreLayout, arch: Arch
    ) -> None:
        super().__init__(graph, program)
        self.layout, self.arch = layout, arch

    # -- output stage of MVM and DWPU layers -----------------------------------------------
    def activation(self, layer: LayerPlan, mid: str, out: str) -> tuple[Any, Any, np.ndarray]:
        """(lo, hi, table) of a layer's fused activation, from the intermediate grid
        ``mid`` (what the requantize produces) to ``out``."""
        lo: Any = -128
        hi: Any = 127
        table = np.zeros(0, np.uint8)
        if not layer.fused:
            return lo, hi, table
        # the conv's own activation (before a fused add), else the last one fused
        step = self.step(layer.fused[0] if layer.lut_before_add else layer.fused[-1])
        if layer.residual and not layer.lut_before_add and step is not None and step.kind != "lut":
            return lo, hi, table  # the conv's own range (a clamp after the add: its record)
        assert step is not None
        if step.kind == "clamp":
            lo, hi = step.params["lo"], step.params["hi"]
        elif step.kind == "lut":
            table = np.asarray(step.params["table"], np.int8).view(np.uint8).copy()
        return lo, hi, table

    def requant_records(
        self, layer: LayerPlan, step: QStep, x: str, mid: str, bias: np.ndarray, zi: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per-channel records of a MAC layer and its table (fused LUT)."""
        p = step.params
        cout = len(np.atleast_1d(p["mult"]))
        zo = _zp(self.program, mid)
        lo, hi, table = self.activation(layer, mid, layer.outputs[0])
        rec = P.channel_records(
            bias=bias,
            mult=p["mult"],
            shift=p["shift"],
            zo=np.broadcast_to(zo, (cout,)),
            lo=lo,
            hi=hi,
            zi=zi,
        )
        return _bytes(rec), table

    # -- MVM -------------------------------------------------------------------------------
    def mvm(self, i: int, layer: LayerPlan, mapping: LayerMapping) -> LayerConstants:
        geo = layer.geometry
        assert geo is not None
        if layer.runtime is not None:
            # the operand is written at run time; only the requantize of the products
            return self.runtime_mvm(layer, mapping)
        split = self.layout.splits.get(i, Split.NONE)
        parts = self.layout.cores if split is not Split.NONE else 1
        w = self.conv_weights(layer) if self.program is not None else None
        # [kh, kw, cin, cout] int8: a tap's (channels x output channels) slab is contiguous
        taps = (
            None
            if w is None
            else np.ascontiguousarray(w.astype(np.int8, copy=False).transpose(2, 3, 1, 0))
        )
        blocks: dict[tuple[int, int, int], int] = {}
        chunks: list[np.ndarray] = []
        offset = 0
        for tm in mapping.tiles:
            if split is Split.ROWS and tm.part > 0:
                # every core of a row split loads the same blocks: share part 0's bytes
                for b in range(len(tm.mapping.blocks)):
                    blocks[(tm.part, tm.oc_tile, b)] = blocks[(0, tm.oc_tile, b)]
                continue
            lo = self.channel_lo(geo.cout, split, parts, tm)
            part_geo, part_taps = geo, taps
            if split is Split.INPUTS:  # this core's rows of the weights (its input channels)
                k_lo, k_hi = part_range(geo.cin, parts, tm.part)
                part_geo = replace(geo, cin=k_hi - k_lo)
                part_taps = None if taps is None else taps[:, :, k_lo:k_hi, :]
            # the row blocks of one column block slice the same columns: build them once
            columns: dict[int, np.ndarray] = {}
            for b, blk in enumerate(tm.mapping.blocks):
                blocks[(tm.part, tm.oc_tile, b)] = offset
                if w is None:
                    chunks.append(np.zeros(blk.weight_bytes, np.uint8))
                else:
                    if blk.col_block not in columns:
                        columns[blk.col_block] = self.imc_columns(
                            part_taps, part_geo, tm.mapping, b, lo
                        )
                    start = blk.row_block * self.arch.mvm.rows
                    block = columns[blk.col_block][start : start + blk.rows_used]
                    chunks.append(block.view(np.uint8).reshape(-1))
                offset += blk.weight_bytes
        weights = np.concatenate(chunks) if chunks else np.zeros(0, np.uint8)
        params, table, incomplete = self.mvm_params(layer, geo.cout, w)
        add_offset = -1
        if layer.residual:
            add_offset = len(params)
            params = np.concatenate([params, self.residual_add(layer)])
        out = np.concatenate([params, table]) if len(table) else params
        return LayerConstants(
            weights=weights,
            params=out,
            blocks=blocks,
            table_offset=len(params) if len(table) else -1,
            add_offset=add_offset,
            incomplete=incomplete,
        )

    def residual_add(self, layer: LayerPlan) -> np.ndarray:
        """The `SCALAR` record of a fused residual add, the conv's output (or its own
        activation's, `LayerPlan.lut_before_add`) as operand ``a`` (m0, za) and the shortcut
        as ``b``: the DPU ``add`` of the stand-alone Add, with the activation after it, a
        clamp, folded into its range (`residual`)."""
        step = self.step(layer.residual)
        if step is None:
            return np.zeros(P.SCALAR.itemsize, np.uint8)
        node = self.g.node(layer.residual)
        # the Add's input that is not the shortcut (the pass fused no Add of x + x)
        mid = next(t for t in node.inputs if t != layer.inputs[1])
        mults = [int(m) for m in np.asarray(step.params["mults"], np.int64)]
        if node.inputs[0] != mid:  # the conv's output is the Add's second input
            mults = mults[::-1]
        lo, hi = -128, 127
        after = layer.fused[-1] if layer.fused[-1] != layer.residual else None
        act = self.step(after) if after is not None else None
        if act is not None and act.kind == "clamp":
            lo, hi = _one_range(act)
        rec = P.scalar_record(
            m0=mults[0], m1=mults[1], shift=int(step.params["shift"]),
            za=int(_zp(self.program, mid)[0]), zb=int(_zp(self.program, layer.inputs[1])[0]),
            zo=int(_zp(self.program, node.outputs[0])[0]), lo=lo, hi=hi,
        )  # fmt: skip
        return _bytes(rec)

    def channel_lo(self, cout: int, split: Split, parts: int, tm: TileMapping) -> int:
        """First output channel (of the layer) of a tile mapping."""
        base = part_range(cout, parts, tm.part)[0] if split is Split.CHANNELS else 0
        return base + tm.cout_lo

    def conv_weights(self, layer: LayerPlan) -> np.ndarray | None:
        """The layer's int8 weights as [cout, cin, kh, kw] (a Gemm/MatMul: 1 x 1)."""
        step = self.step(layer.name)
        if step is None or step.kind != "mac" or not step.params.get("weight"):
            return None
        # in its stored int8 (an int64 copy of llama_1b's LM head alone is 2.1 GB); the
        # weight sums taken of it accumulate in the platform integer all the same
        w = np.asarray(self.g.const(step.params["weight"]))
        node = self.g.node(layer.name)
        if node.op is Op.CONV_TRANSPOSE:
            # the array runs a stride-1 conv of the flipped kernel over the upsampled input
            group = int(node.attr("group", 1))
            cin, cpg_out, kh, kw = w.shape
            w = w.reshape(group, cin // group, cpg_out, kh, kw).transpose(0, 2, 1, 3, 4)
            w = w.reshape(group * cpg_out, cin // group, kh, kw)[:, :, ::-1, ::-1]
        elif w.ndim == 2:
            w = (w if int(step.params["weight_axis"]) == 0 else w.T)[:, :, None, None]
        return np.ascontiguousarray(w)

    def imc_columns(
        self, taps: np.ndarray, geo: Any, m: ImcMapping, b: int, ch_lo: int
    ) -> np.ndarray:
        """Every row (``rows_needed``) of the columns of weight block ``b``, int8, in the row
        space of `aipusim.isa.tasks.Mvm` (see the module docstring); its row blocks are
        slices of it. ``taps``: the layer's int8 weights as [kh, kw, cin, cout]; ``ch_lo``:
        the tile's first output channel."""
        blk = m.blocks[b]
        icr = m.icr
        cout_t = blk.cols_used // icr
        c0 = ch_lo + blk.col_block * m.block_cols  # first channel of this column block
        width = geo.kw + (icr - 1) * geo.stride_w
        cin = geo.cin  # the channels memory holds (PWORD pads are zero rows)
        cout = taps.shape[3]
        cpg = taps.shape[2]  # input channels per group
        opg = max(1, cout // geo.groups)
        full = np.zeros((m.rows_needed, blk.cols_used), np.int8)
        n_oc = max(0, min(cout_t, cout - c0))  # the block's columns that hold a channel
        if n_oc == 0:
            return full
        n_c = min(cpg, cin)  # input channels per group the rows can hold
        # runs of the block's channels in one group; a tap's channels are consecutive rows,
        # so each (run, copy, tap) is one rectangle of the block
        runs = [(0, n_oc, 0)]
        if geo.groups > 1:
            group = (c0 + np.arange(n_oc)) // opg
            starts = np.flatnonzero(np.diff(group, prepend=-1))
            ends = [*starts[1:], n_oc]
            runs = [
                (int(a), int(e), int(group[a]) * cpg) for a, e in zip(starts, ends, strict=True)
            ]
        for o_lo, o_hi, c_base in runs:
            held = min(n_c, cin - c_base)
            if held <= 0:
                continue
            for q in range(icr):
                cols = slice(q * cout_t + o_lo, q * cout_t + o_hi)
                for ky in range(geo.kh):
                    for kx in range(geo.kw):
                        j = kx + q * geo.stride_w
                        r0 = weight_row(ky, j, c_base, width, cin, m.cin_padded, m.swicr)
                        full[r0 : r0 + held, cols] = taps[ky, kx, :held, c0 + o_lo : c0 + o_hi]
        return full

    def mvm_params(
        self, layer: LayerPlan, cout: int, w: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, str]:
        """CHANNEL records (+ table) of an MVM layer with constant weights."""
        step = self.step(layer.name)
        if self.program is None or step is None or w is None:
            return np.zeros(cout * P.CHANNEL.itemsize, np.uint8), np.zeros(0, np.uint8), ""
        node = self.g.node(layer.name)
        x = node.inputs[0]
        mid = node.outputs[0]
        zp_in = _zp(self.program, x)
        if zp_in.size != 1:
            return self.mvm_params_zero(cout), np.zeros(0, np.uint8), "per-channel MVM input"
        # sum(x * w) over raw int8 inputs = sum((x - zp) * w) + zp * sum(w): fold it in,
        # over the channels memory holds (the rows of PWORD pad channels are zero)
        bias = np.asarray(step.params["bias"], np.int64).reshape(-1)
        held = w if layer.geometry.groups > 1 else w[:, : layer.geometry.cin]
        bias = bias - int(zp_in[0]) * held.reshape(w.shape[0], -1).sum(axis=1)
        rec, table = self.requant_records(layer, step, x, mid, bias, 0)
        return rec, table, ""

    def mvm_params_zero(self, cout: int) -> np.ndarray:
        return np.zeros(cout * P.CHANNEL.itemsize, np.uint8)

    def runtime_mvm(self, layer: LayerPlan, mapping: LayerMapping) -> LayerConstants:
        mm = layer.runtime
        assert mm is not None
        step = self.step(layer.name)
        if step is None:
            return LayerConstants(params=self.mvm_params_zero(mm.n))
        node = self.g.node(layer.name)
        mid = node.outputs[0]
        lo, hi, table = self.activation(layer, mid, layer.outputs[0])
        rec = P.channel_records(
            bias=np.zeros(mm.n, np.int64),
            mult=np.broadcast_to(np.asarray(step.params["mult"]).reshape(-1)[:1], (mm.n,)),
            shift=np.broadcast_to(np.asarray(step.params["shift"]).reshape(-1)[:1], (mm.n,)),
            zo=int(_zp(self.program, mid)[0]),
            lo=lo,
            hi=hi,
        )
        # the input zero point is not in the bias: the Mvm offsets its inputs by it
        # (``offset_fill``, from the column sums its WeightLoad kept)
        params = _bytes(rec)
        out = np.concatenate([params, table]) if len(table) else params
        return LayerConstants(params=out, table_offset=len(params) if len(table) else -1)

    # -- DWPU ------------------------------------------------------------------------------
    def dwpu(self, layer: LayerPlan) -> LayerConstants:
        geo = layer.geometry
        assert geo is not None
        kind = layer.dwpu_kind
        step = self.step(layer.name)
        if kind is DwpuKind.DWCONV:
            return self.dwconv(layer, step)
        if kind in (DwpuKind.RESIZE_NEAREST, DwpuKind.RESIZE_LINEAR):
            return self.resize(layer, step)
        if kind in (DwpuKind.AVGPOOL, DwpuKind.GLOBALPOOL):
            return self.avg(layer, step)
        return LayerConstants()  # max pools need nothing

    def dwconv(self, layer: LayerPlan, step: QStep | None) -> LayerConstants:
        geo = layer.geometry
        n_w = geo.cout * geo.kh * geo.kw
        if self.program is None or step is None:
            return LayerConstants(
                weights=np.zeros(n_w, np.uint8),
                params=np.zeros(geo.cout * P.CHANNEL.itemsize, np.uint8),
            )
        # in its stored int8 (an int64 copy of llama_1b's LM head alone is 2.1 GB); the
        # weight sums taken of it accumulate in the platform integer all the same
        w = np.asarray(self.g.const(step.params["weight"]))
        node = self.g.node(layer.name)
        x, mid = node.inputs[0], node.outputs[0]
        zi = np.broadcast_to(_zp(self.program, x), (geo.cout,))
        bias = np.asarray(step.params["bias"], np.int64).reshape(-1)
        rec, table = self.requant_records(layer, step, x, mid, bias, zi)
        weights = w.reshape(geo.cout, geo.kh * geo.kw).astype(np.int8).view(np.uint8)
        out = np.concatenate([rec, table]) if len(table) else rec
        return LayerConstants(
            weights=weights.reshape(-1).copy(),
            params=out,
            table_offset=len(rec) if len(table) else -1,
        )

    def avg(self, layer: LayerPlan, step: QStep | None) -> LayerConstants:
        geo = layer.geometry
        counts = geo.kh * geo.kw if layer.dwpu_kind is DwpuKind.AVGPOOL else 0
        size = P.SCALAR.itemsize + counts * P.COUNT.itemsize
        if self.program is None or step is None:
            return LayerConstants(params=np.zeros(size, np.uint8))
        node = self.g.node(layer.name)
        za = int(_zp(self.program, node.inputs[0])[0])
        zo = int(_zp(self.program, node.outputs[0])[0])
        mult = np.asarray(step.params["mult"], np.int64).reshape(-1)
        shift = np.asarray(step.params["shift"], np.int64).reshape(-1)
        if layer.dwpu_kind is DwpuKind.GLOBALPOOL:
            rec = P.scalar_record(m0=mult[0], shift=shift[0], za=za, zo=zo)
            return LayerConstants(params=_bytes(rec))
        table = np.zeros(counts, P.COUNT)
        table["mult"], table["shift"] = mult[:counts], shift[:counts]
        rec = P.scalar_record(za=za, zo=zo)
        return LayerConstants(
            params=np.concatenate([_bytes(rec), _bytes(table)]), count_offset=P.SCALAR.itemsize
        )

    def resize(self, layer: LayerPlan, step: QStep | None) -> LayerConstants:
        geo = layer.geometry
        n = geo.out_h + geo.out_w
        weights = np.zeros(n * P.COORD.itemsize, np.uint8)
        if self.program is None or step is None:
            return LayerConstants(weights=weights, cols_offset=geo.out_h * P.COORD.itemsize,
                                  params=np.zeros(P.SCALAR.itemsize, np.uint8))  # fmt: skip
        node = self.g.node(layer.name)
        in_shape, out_shape = self.g.shape(node.inputs[0]), self.g.shape(node.outputs[0])
        tables = []
        for ax, length in ((2, geo.out_h), (3, geo.out_w)):
            rec = np.zeros(length, P.COORD)
            if in_shape[ax] == out_shape[ax]:
                rec["i0"] = rec["i1"] = np.arange(length)
            elif layer.dwpu_kind is DwpuKind.RESIZE_NEAREST:
                idx = S.resize_nearest_index(node, self.g, ax, in_shape[ax], out_shape[ax])
                rec["i0"] = rec["i1"] = idx
            else:
                i0, i1, frac = S.resize_linear_coords(node, self.g, ax, in_shape[ax], out_shape[ax])
                rec["i0"], rec["i1"] = i0, i1
                rec["w"] = np.rint(frac * (1 << P.RESIZE_WEIGHT_BITS)).astype(np.int64)
            tables.append(_bytes(rec))
        params = np.zeros(P.SCALAR.itemsize, np.uint8)
        if step.kind == "resize_linear":
            za = int(_zp(self.program, node.inputs[0])[0])
            zo = int(_zp(self.program, node.outputs[0])[0])
            rec = P.scalar_record(
                m0=int(np.asarray(step.params["mult"]).reshape(-1)[0]),
                shift=int(np.asarray(step.params["shift"]).reshape(-1)[0]),
                za=za,
                zo=zo,
            )
            params = _bytes(rec)
        return LayerConstants(
            weights=np.concatenate(tables),
            params=params,
            cols_offset=geo.out_h * P.COORD.itemsize,
        )

    # -- layout layers (DMA) -----------------------------------------------------------------
    def layout_copies(self, layer: LayerPlan) -> LayerConstants:
        """A layout layer's copies and its fill bytes."""
        node = self.g.node(layer.name)
        try:
            plans = tuple((k, tuple(c)) for k, c in copy_plan(node, self.g))
        except NotImplementedError as exc:  # timed as whole-tensor copies
            return LayerConstants(incomplete=str(exc))
        fill_run = max((c.run for _, cs in plans for c in cs if c.src < 0), default=0)
        step = self.step(layer.name)
        why = ""
        if step is not None and step.kind != "share":
            why = f"a {node.op_type} that changes the values' grid ({step.kind})"
        pad = int(step.params.get("pad_value", 0)) if step is not None else 0
        wide = self.g.tensor(layer.outputs[0]).dtype is DType.INT16
        fill = np.full(fill_run, pad, "<i2" if wide else np.int8).view(np.uint8).copy()
        return LayerConstants(operand=fill, copies=plans, incomplete=why)


def pack_constants(
    layers: Sequence[LayerPlan],
    mappings: Sequence[LayerMapping | None],
    graph: Graph,
    program: QuantizedGraph | None,
    layout: CoreLayout,
    arch: Arch,
) -> tuple[LayerConstants, ...]:
    """Every layer's constant blobs (index-aligned with ``layers``)."""
    packer = _Packer(graph, program, layout, arch)
    out = []
    for i, (layer, mapping) in enumerate(zip(layers, mappings, strict=True)):
        if layer.unit is LayerUnit.MVM:
            assert mapping is not None, layer.name
            out.append(packer.mvm(i, layer, mapping))
        elif layer.unit is LayerUnit.DWPU:
            out.append(packer.dwpu(layer))
        elif layer.unit is LayerUnit.DPU:
            out.append(packer.dpu(layer))
        elif layer.unit is LayerUnit.DMA:
            out.append(packer.layout_copies(layer))
        else:
            out.append(LayerConstants())
    return tuple(out)


def ceil_to(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


__all__ = [
    "ceil_to",
    "pack_constants",
    "weight_row",
    "weight_rows",
]
