"""Pass ``pack``: every constant byte a layer's tasks read, in the layout the tasks read it.

From the integer program (`aipusim.compiler.quant.QuantizedGraph`) and the IMC mappings,
each layer gets at most three constant blobs (`LayerConstants`), which the memory plan
places and the emit pass writes into the constants image:

- ``weights``: an MVM layer's IMC image, the weight blocks of every (core part, channel
  tile) one after the other, each ``rows_used x cols_used`` row-major as its `WeightLoad`
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

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aipusim.arch import Arch
from aipusim.compiler.backend.common.layout import CoreLayout, Split
from aipusim.compiler.backend.imc.mapper import ImcMapping
from aipusim.compiler.backend.imc.plan import LayerMapping, TileMapping, part_range
from aipusim.compiler.backend.lower.layout_dma import (
    Copy,
    broadcast_pattern,
    copy_plan,
    physical_axes,
)
from aipusim.compiler.backend.lower.units import LayerPlan, LayerUnit
from aipusim.compiler.ir import DType, Graph, Op
from aipusim.compiler.quant import opsupport as S
from aipusim.compiler.quant.quantize import QStep, QuantizedGraph
from aipusim.isa import params as P
from aipusim.isa.float18 import FloatFormat
from aipusim.isa.tasks import DpuKind, DpuThen, DwpuKind

#: The integer program's float step kinds -> their parameter block (`isa.params.FLOAT_PARAMS`).
_FLOAT_KIND = {"layernorm": "layernorm", "div_fp": "div", "pow_fp": "pow"}


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


@dataclass(frozen=True)
class LayerConstants:
    """A layer's constant blobs (uint8 arrays) and where its weight blocks start."""

    weights: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    params: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    operand: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    #: ``(part, oc_tile, block)`` -> byte offset of that weight block in ``weights``.
    blocks: dict[tuple[int, int, int], int] = field(default_factory=dict)
    #: Byte offset of the layer's table in ``params`` (-1: none).
    table_offset: int = -1
    #: Byte offset of a fused residual add's `SCALAR` record in ``params`` (-1: none).
    add_offset: int = -1
    #: Byte offset of a second element-wise step's constant operand in ``operand``
    #: (`dpu_chain`; -1: none).
    then_offset: int = -1
    #: Byte offset of a pool's COUNT records in ``params`` (-1: none).
    count_offset: int = -1
    #: Byte offset of the output columns' coordinate table in ``weights`` (resize; -1: none).
    cols_offset: int = -1
    #: A layout layer's copies per output (`layout_dma.copy_plan`); fill copies read the
    #: ``operand`` blob (the pad value, as long as the longest fill run).
    copies: tuple[tuple[int, tuple[Copy, ...]], ...] = ()
    #: The part of the program these bytes could not express (empty: complete).
    incomplete: str = ""

    @property
    def nbytes(self) -> int:
        return len(self.weights) + len(self.params) + len(self.operand)


def _bytes(records: np.ndarray) -> np.ndarray:
    return np.frombuffer(np.ascontiguousarray(records).tobytes(), np.uint8).copy()


def _zp(program: QuantizedGraph, tensor: str) -> np.ndarray:
    return np.asarray(program.qparams(tensor).zero_point, np.int64).reshape(-1)


def _one_range(clamp: QStep) -> tuple[int, int]:
    """The one ``(lo, hi)`` of a clamp step that a fused op's record takes over:
    clamp(clamp(x, -128, 127), lo', hi') is clamp(x, lo', hi') when -128 <= lo' <= hi' <=
    127 (what the fusion passes checked)."""
    lo = int(np.asarray(clamp.params["lo"]).reshape(-1)[0])
    hi = int(np.asarray(clamp.params["hi"]).reshape(-1)[0])
    return lo, hi


class _Packer:
    def __init__(
        self, graph: Graph, program: QuantizedGraph | None, layout: CoreLayout, arch: Arch
    ) -> None:
        self.g, self.program, self.layout, self.arch = graph, program, layout, arch

    def step(self, name: str) -> QStep | None:
        return self.program.steps.get(name) if self.program is not None else None

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
        taps = None if w is None else np.ascontiguousarray(w.astype(np.int8).transpose(2, 3, 1, 0))
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
            # the row blocks of one column block slice the same columns: build them once
            columns: dict[int, np.ndarray] = {}
            for b, blk in enumerate(tm.mapping.blocks):
                blocks[(tm.part, tm.oc_tile, b)] = offset
                if w is None:
                    chunks.append(np.zeros(blk.weight_bytes, np.uint8))
                else:
                    if blk.col_block not in columns:
                        columns[blk.col_block] = self.imc_columns(taps, geo, tm.mapping, b, lo)
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
        w = np.asarray(self.g.const(step.params["weight"]), np.int64)
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
        w = np.asarray(self.g.const(step.params["weight"]), np.int64)
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

    # -- DPU -------------------------------------------------------------------------------
    def dpu(self, layer: LayerPlan) -> LayerConstants:
        step = self.step(layer.name)
        if self.program is None or step is None:
            return LayerConstants(params=np.zeros(self.dpu_size(layer), np.uint8))
        node = self.g.node(layer.name)
        out = node.outputs[0]
        q_out = self.program.qparams(out)
        lo, hi = (-32768, 32767) if q_out.dtype.value == "int16" else (-128, 127)
        zo = _zp(self.program, out)
        kind = step.kind
        names, swapped = dpu_operands(node, self.g, self.program)
        operand = self.const_operand(node, names)
        if node.op is Op.CONCAT:  # one SCALAR per part, the constant parts' bytes
            mults = np.asarray(step.params["mults"], np.int64).reshape(-1)
            recs = [
                P.scalar_record(m0=int(m), shift=int(step.params["shift"]), lo=lo, hi=hi,
                                za=int(_zp(self.program, name)[0]), zo=int(zo[0]))
                for name, m in zip(node.present_inputs, mults, strict=True)
            ]  # fmt: skip
            blob = np.concatenate([
                np.zeros(0, np.int8),  # (a placed Concat has no constant part)
                *(np.ascontiguousarray(
                    np.asarray(self.g.const(n)).reshape(self.g.shape(n))
                    .transpose(physical_axes(self.g.shape(n)))
                ).astype(np.int8).reshape(-1)
                for n in node.present_inputs if self.g.is_constant(n)),
            ])  # fmt: skip
            return LayerConstants(params=_bytes(np.concatenate(recs)), operand=blob.view(np.uint8))
        if kind in ("rescale", "mul"):
            if len(names) == 2 and swapped and layer.dpu_kind is DpuKind.SUB:
                why = "a subtraction whose first operand is broadcast"
                return LayerConstants(params=np.zeros(P.SCALAR.itemsize, np.uint8), incomplete=why)
            lo, hi, table = self.chained_activation(layer, lo, hi)
            rec = _bytes(self.binary_record(step, names, swapped, int(zo[0]), lo, hi))
            then_offset = -1
            if layer.then is not DpuThen.NONE:  # the second step's record and operand next
                rec2, operand2 = self.then_step(node, self.g.node(layer.fused[0]))
                rec, then_offset = np.concatenate([rec, rec2]), len(operand)
                operand = np.concatenate([operand, operand2])
            if len(table):  # the fused activation's table right after the record
                return LayerConstants(
                    params=np.concatenate([rec, table]),
                    operand=operand,
                    table_offset=P.SCALAR.itemsize,
                )
            return LayerConstants(params=rec, operand=operand, then_offset=then_offset)
        if kind == "mean":
            rec = P.scalar_record(
                m0=int(np.asarray(step.params["mult"]).reshape(-1)[0]),
                shift=int(np.asarray(step.params["shift"]).reshape(-1)[0]),
                za=int(_zp(self.program, node.inputs[0])[0]),
                zo=int(zo[0]),
            )
            return LayerConstants(params=_bytes(rec))
        if kind == "clamp":
            c = max(len(np.atleast_1d(step.params["lo"])), len(np.atleast_1d(step.params["hi"])))
            rec = P.channel_records(bias=np.zeros(c, np.int64), mult=0, shift=0, zo=0,
                                    lo=step.params["lo"], hi=step.params["hi"])  # fmt: skip
            return LayerConstants(params=_bytes(rec))
        if kind == "lut":
            table = np.asarray(step.params["table"], np.int8).view(np.uint8).copy()
            return LayerConstants(params=table, table_offset=0)
        if kind == "softmax":
            rec = _bytes(P.scalar_record(m0=int(step.params["recip"]), zo=int(zo[0])))
            table = np.asarray(step.params["exp_table"], np.int64).astype("<i4")
            return LayerConstants(
                params=np.concatenate([rec, _bytes(table)]),
                table_offset=len(rec),
                operand=operand,  # a masked softmax's keep mask, one byte an entry
            )
        if kind == "mac":  # BatchNormalization on the DPU: a per-channel scale
            p = step.params
            c = len(np.atleast_1d(p["mult"]))
            rec = P.channel_records(
                bias=p["bias"], mult=p["mult"], shift=p["shift"], zo=np.broadcast_to(zo, (c,)),
                zi=np.broadcast_to(_zp(self.program, node.inputs[0]), (c,)),
                scale=p["weight_q"],
            )  # fmt: skip
            return LayerConstants(params=_bytes(rec))
        if kind in ("layernorm", "div_fp", "pow_fp"):
            p = step.params
            fmt = FloatFormat(*(int(v) for v in p["fp_format"]))
            zs = [int(_zp(self.program, n)[0]) for n in names[:2]]
            rec = P.scalar_record(za=zs[0], zb=zs[1] if len(zs) > 1 else 0, zo=int(zo[0]),
                                  lo=lo, hi=hi)  # fmt: skip
            return LayerConstants(params=P.float_block(_FLOAT_KIND[kind], fmt, rec, p))
        if kind == "matmul":  # B has zero point 0 (an IMC operand's grid)
            rec = P.scalar_record(
                m0=int(np.asarray(step.params["mult"]).reshape(-1)[0]),
                shift=int(np.asarray(step.params["shift"]).reshape(-1)[0]),
                za=int(_zp(self.program, node.inputs[0])[0]), zo=int(zo[0]), lo=lo, hi=hi,
            )  # fmt: skip
            return LayerConstants(params=_bytes(rec))
        if kind == "share" and node.op is Op.REDUCE_MAX:
            return LayerConstants(params=np.zeros(0, np.uint8))  # nothing but the data
        return LayerConstants(
            params=np.zeros(self.dpu_size(layer), np.uint8),
            incomplete=f"DPU step {kind} has no functional parameters yet",
        )

    def binary_record(
        self, step: QStep, names: Sequence[str], swapped: bool, zo: int, lo: int, hi: int
    ) -> np.ndarray:
        """The `SCALAR` record of an element-wise ``rescale`` or ``mul`` step whose task reads
        ``names`` (``swapped``: in the reverse of the node's order)."""
        assert self.program is not None
        za, zb = (int(_zp(self.program, n)[0]) for n in (*names, names[0])[:2])
        if step.kind == "rescale":
            mults = [int(m) for m in np.asarray(step.params["mults"], np.int64)]
            if swapped:
                mults = mults[::-1]
            m1 = abs(mults[1]) if len(mults) > 1 else 0
            return P.scalar_record(m0=mults[0], m1=m1, shift=int(step.params["shift"]),
                                   za=za, zb=zb, zo=zo, lo=lo, hi=hi)  # fmt: skip
        return P.scalar_record(
            m0=int(np.asarray(step.params["mult"]).reshape(-1)[0]),
            shift=int(np.asarray(step.params["shift"]).reshape(-1)[0]),
            za=za, zb=zb, zo=zo, lo=lo, hi=hi,
        )  # fmt: skip

    def then_step(self, first: Any, second: Any) -> tuple[np.ndarray, np.ndarray]:
        """The record bytes and constant operand of a second element-wise step
        (`dpu_chain`): its operand a is the first node's result, b the other input."""
        mid = first.outputs[0]
        other = next(t for t in second.present_inputs if t != mid)
        step = self.step(second.name)
        assert self.program is not None and step is not None, second.name
        zo = int(_zp(self.program, second.outputs[0])[0])
        swapped = second.present_inputs[0] != mid
        rec = self.binary_record(step, [mid, other], swapped, zo, -128, 127)
        return _bytes(rec), self.const_operand(second, [other])

    def chained_activation(self, layer: LayerPlan, lo: int, hi: int) -> tuple[int, int, np.ndarray]:
        """(lo, hi, table) of an element-wise layer with its activation fused
        (`dpu_chain`): a one-range clamp narrows the record's range, a table follows the
        record."""
        chained = layer.fused and layer.then is DpuThen.NONE
        act = self.step(layer.fused[-1]) if chained else None
        if act is None:
            return lo, hi, np.zeros(0, np.uint8)
        if act.kind == "lut":
            return lo, hi, np.asarray(act.params["table"], np.int8).view(np.uint8).copy()
        assert act.kind == "clamp", f"{layer.name}: a fused {act.kind} step"
        return (*_one_range(act), np.zeros(0, np.uint8))

    def dpu_size(self, layer: LayerPlan) -> int:
        """Bytes of a DPU layer's parameters without a program (the largest case)."""
        return P.SCALAR.itemsize + P.SOFTMAX_TABLE_BYTES + layer.dpu_const_bytes

    def const_operand(self, node: Any, names: Sequence[str]) -> np.ndarray:
        """A constant operand of an element-wise op, int8 in its tensor's layout (spread
        to the output's shape when no ``(div, mod)`` broadcast can read it)."""
        out_shape = self.g.shape(node.outputs[0])
        for name in names:
            arr = self.g.const(name)
            if arr is None:
                continue
            q = np.asarray(arr)
            shape = self.g.shape(name)
            if broadcast_pattern(out_shape, shape) is None:
                q, shape = np.broadcast_to(q.reshape(shape), out_shape), out_shape
            q = np.ascontiguousarray(q.reshape(shape).transpose(physical_axes(shape)))
            return q.astype(np.int8).view(np.uint8).reshape(-1).copy()
        return np.zeros(0, np.uint8)


def dpu_operands(node: Any, graph: Graph, program: QuantizedGraph | None) -> tuple[list[str], bool]:
    """The tensors a DPU layer's task reads, in its operand order: activations and quantized
    constant operands, the one as large as the output first (``True``: swapped from the
    node's order, so that only operand 1 is ever broadcast)."""
    names = [
        i
        for i in node.present_inputs
        if not graph.is_constant(i)
        or (program is not None and i in graph.tensors and graph.tensor(i).quant is not None
            and np.asarray(graph.const(i)).dtype.kind != "f")
    ]  # fmt: skip
    if node.op is Op.MASKED_SOFTMAX:  # the scores, then the keep mask (a uint8 constant)
        return [node.inputs[0], node.inputs[1]], False
    if len(names) == 2 and node.op is not Op.MATMUL:  # (a product's factors keep order)
        n = math.prod(graph.shape(node.outputs[0]))
        if math.prod(graph.shape(names[0])) != n and math.prod(graph.shape(names[1])) == n:
            return [names[1], names[0]], True
    return names, False


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
    "LayerConstants",
    "ceil_to",
    "dpu_operands",
    "pack_constants",
    "weight_row",
    "weight_rows",
]
