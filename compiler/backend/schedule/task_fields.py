"""The complete fields of a compute task: where its data lies and how it is laid out.

The schedule decides which rows and channels a task computes, where its input and output
tiles are (`Place`) and where its constants are; these functions turn that into the fields
of `aipusim.isa.tasks.Mvm`, `DwpuOp` and `DpuOp`, exactly as their docstrings define them,
so that the functional simulator computes the network from the tasklist alone.

>>> Place(0x100, 16, 16 * 8).at(row=2, pixel=1, channel=3)
531
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from aipusim.compiler.backend.imc.mapper import ImcBlock, ImcMapping
from aipusim.compiler.backend.lower.layer import ConvGeometry
from aipusim.compiler.backend.tile.regions import RowWindow
from aipusim.isa.tasks import DwpuKind, LutKind, PostOp


@dataclass(frozen=True)
class Place:
    """A tile in L1: the address of its first pixel's first channel, the bytes from one
    pixel to the next and from one row to the next."""

    addr: int
    pitch: int
    row_pitch: int

    def at(self, *, row: int = 0, pixel: int = 0, channel: int = 0) -> int:
        return self.addr + row * self.row_pitch + pixel * self.pitch + channel

    def shifted(self, nbytes: int) -> Place:
        return Place(self.addr + nbytes, self.pitch, self.row_pitch)


def u8(value: int) -> int:
    """An int8 value as the 8-bit field stores it (two's complement)."""
    return int(value) & 0xFF


def mvm_fields(
    geo: ConvGeometry,
    m: ImcMapping,
    blk: ImcBlock,
    *,
    rows: int,
    window: RowWindow,
    src: Place,
    dst: Place,
    array_rows: int,
    fill: int,
    psum_addr: int,
    param_addr: int,
    lut_addr: int,
    lut: LutKind,
    weight_set: int,
    residual: Place | None = None,
    add_param_addr: int = 0,
    lut_before_add: bool = False,
    partial: bool = False,
) -> dict[str, Any]:
    """An `Mvm` of weight block ``blk`` over ``rows`` output rows; ``dst``, ``residual`` (the
    operand of a fused residual add) and ``param_addr`` are those of the block's first
    output channel; ``lut_before_add``: the table is the conv's own, the add comes after;
    ``partial``: the last row block too leaves int32 partial sums (`Split.INPUTS`)."""
    last_row = blk.row_block == m.row_blocks - 1 and not partial
    post = PostOp.NONE
    if last_row and residual is not None and lut_before_add:
        post = PostOp.REQUANT_LUT_ADD
    elif last_row and residual is not None:
        post = PostOp.REQUANT_ADD_LUT if lut is not LutKind.NONE else PostOp.REQUANT_ADD
    elif last_row:
        post = PostOp.REQUANT_LUT if lut is not LutKind.NONE else PostOp.REQUANT
    add: dict[str, int] = {}
    if residual is not None and last_row:
        add = dict(
            add_addr=residual.addr,
            add_param_addr=add_param_addr,
            add_pitch=residual.pitch,
            add_row_pitch=residual.row_pitch,
        )
    return dict(
        weight_set=weight_set,
        in_addr=src.addr,
        out_addr=dst.addr,
        vectors=max(1, rows * math.ceil(geo.out_w / m.icr)),
        rows_used=blk.rows_used,
        cols_used=blk.cols_used,
        icr=m.icr,
        accumulate=int(blk.row_block > 0),
        post=post,
        lut=lut,
        psum_addr=psum_addr,
        param_addr=param_addr,
        lut_addr=lut_addr,
        in_w=geo.src_cols,
        in_rows=window.rows,
        in_pitch=src.pitch,
        in_row_pitch=src.row_pitch,
        cin=geo.cin,
        cpad=m.cin_padded,
        kh=geo.kh,
        kw=geo.kw,
        stride_h=geo.stride_h,
        stride_w=geo.stride_w,
        pad_top=window.pad_top,
        pad_left=geo.pad_left,
        dilation=geo.dilation_h,
        upsample=geo.upsample,
        swicr=int(m.swicr),
        row0=blk.row_block * array_rows,
        fill=u8(fill),
        out_w=geo.out_w,
        out_pitch=dst.pitch,
        out_row_pitch=dst.row_pitch,
        **add,
    )


def dwpu_fields(
    kind: DwpuKind,
    geo: ConvGeometry,
    *,
    rows: int,
    channels: int,
    window: RowWindow,
    src: Place,
    dst: Place,
    fill: int,
    count_include_pad: bool,
    weight_addr: int,
    param_addr: int,
    lut_addr: int,
    lut: LutKind,
) -> dict[str, Any]:
    """A `DwpuOp` over ``rows`` output rows of ``channels`` channels."""
    return dict(
        kind=kind,
        in_addr=src.addr,
        out_addr=dst.addr,
        channels=max(1, channels),
        h=max(1, window.rows),
        w=geo.src_cols,
        out_h=max(1, rows),
        out_w=geo.out_w,
        kh=geo.kh,
        kw=geo.kw,
        stride=geo.stride_h,
        lut=lut,
        weight_addr=weight_addr,
        param_addr=param_addr,
        lut_addr=lut_addr,
        stride_w=geo.stride_w,
        pad_top=window.pad_top,
        pad_left=geo.pad_left,
        fill=u8(fill),
        count_include_pad=int(count_include_pad),
        in_pitch=src.pitch,
        in_row_pitch=src.row_pitch,
        out_pitch=dst.pitch,
        out_row_pitch=dst.row_pitch,
    )


__all__ = ["Place", "dwpu_fields", "mvm_fields", "u8"]
