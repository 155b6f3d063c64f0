"""Which output rows a tile computes and which input rows it reads.

The tiler sizes the L1 tile buffers from these regions and the schedule emits its tasks
over them, so the buffers always hold what the tasks touch. Rows are memory rows: a 4-D
tensor lies channels-last, ``N * H`` rows of ``W`` pixels; any other tensor row-major, one
row per vector of its last axis (`LayerPlan.rows`).

- A window layer (conv, depthwise conv, pooling) computing output rows ``[lo, hi)`` reads
  input rows ``[lo * s - pad_top, (hi - 1) * s - pad_top + (kh - 1) * d + 1)`` clipped to
  the input; the rows above the first one read are padding the task fills itself
  (`RowWindow.pad_top`). A transposed conv (``upsample`` u) reads that range of its
  u-fold spread input: the real rows whose spread position falls inside.
- A layer whose output rows each depend on the same input row (element-wise DPU work) reads
  the rows it writes; a layer that needs every input row (global pooling, resize, a
  reduction across rows) reads them all.
- A fusion group computes the last layer's tile and, going backwards, every earlier
  layer's output rows that the next one reads: neighbouring tiles recompute the rows
  their windows share (the halo), as depth-first hardware schedules do.

>>> from aipusim.compiler.backend.lower.layer import ConvGeometry
>>> geo = ConvGeometry(8, 8, 3, 3, 2, 2, 16, 16, 8, 8, pad_top=1, pad_left=1)
>>> window_rows(geo, 0, 4), window_rows(geo, 4, 8)
(RowWindow(lo=0, hi=8, pad_top=1), RowWindow(lo=7, hi=16, pad_top=0))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from aipusim.compiler.backend.lower.layer import ConvGeometry, LayerPlan, LayerUnit
from aipusim.isa.tasks import DwpuKind


def part_range(total: int, parts: int, index: int) -> tuple[int, int]:
    """Range [lo, hi) of part ``index`` when ``total`` items are cut in ``parts``.

    >>> [part_range(7, 4, i) for i in range(4)]
    [(0, 2), (2, 4), (4, 6), (6, 7)]
    """
    per = math.ceil(total / parts)
    lo = min(total, index * per)
    return lo, min(total, lo + per)


@dataclass(frozen=True)
class RowWindow:
    """Input rows ``[lo, hi)`` a tile reads; ``pad_top``: rows of fill (in the spread
    space of a transposed conv) between the tile's first window row and row ``lo``."""

    lo: int
    hi: int
    pad_top: int

    @property
    def rows(self) -> int:
        return max(0, self.hi - self.lo)


#: DWPU kinds whose every output row reads every input row.
WHOLE_INPUT_DWPU = frozenset(
    {DwpuKind.GLOBALPOOL, DwpuKind.GLOBALMAX, DwpuKind.RESIZE_NEAREST, DwpuKind.RESIZE_LINEAR}
)


def window_rows(geo: ConvGeometry, lo: int, hi: int) -> RowWindow:
    """The input rows output rows ``[lo, hi)`` of a window layer read (module docstring)."""
    u = geo.upsample
    first = lo * geo.stride_h - geo.pad_top  # spread rows [first, last) feed the tile
    last = (hi - 1) * geo.stride_h - geo.pad_top + (geo.kh - 1) * geo.dilation_h + 1
    src_h = geo.src_rows
    r_lo = min(src_h, max(0, -(-first // u)))
    r_hi = min(src_h, max(r_lo, -(-last // u)))
    return RowWindow(r_lo, r_hi, r_lo * u - first)


def row_local(layer: LayerPlan) -> bool:
    """True when every output row of ``layer`` depends only on its own input row."""
    return layer.unit is LayerUnit.DPU and layer.rowwise


def out_rows(layer: LayerPlan) -> int:
    """Memory rows of the layer's output (what row tiles and row splits cut)."""
    return layer.geometry.out_h if layer.geometry is not None else layer.rows


def splittable_rows(layer: LayerPlan) -> bool:
    """True when ``layer`` can compute part of its output rows from part of its input."""
    if layer.unit in (LayerUnit.MVM, LayerUnit.DWPU):
        geo = layer.geometry
        return (
            geo is not None
            and geo.out_h > 1
            and layer.dwpu_kind not in WHOLE_INPUT_DWPU
            and layer.runtime is None
            # images of a batch are rows too: a window taller than a row would mix them
            and (geo.images == 1 or (geo.kh == 1 and geo.stride_h == 1 and geo.pad_top == 0))
        )
    return row_local(layer) and layer.rows > 1


def input_rows(layer: LayerPlan, lo: int, hi: int) -> RowWindow:
    """The input rows output rows ``[lo, hi)`` of ``layer`` read."""
    geo = layer.geometry
    if layer.unit is LayerUnit.DWPU and geo is not None and layer.dwpu_kind in WHOLE_INPUT_DWPU:
        return RowWindow(0, geo.src_rows, 0)
    if geo is not None and layer.runtime is None:
        return window_rows(geo, lo, hi)
    return RowWindow(lo, hi, 0)


def runtime_shared(layer: LayerPlan, k: int, nbytes: int) -> bool:
    """True for the second operand of a run-time-weight MVM when one matrix serves every
    head (it is not cut by heads)."""
    mm = layer.runtime
    return mm is not None and k == 1 and nbytes < mm.heads * mm.k * mm.n


def tile_rows(
    total: int, h_tiles: int, tile: int, part: int = 0, parts: int = 1
) -> tuple[int, int]:
    """Output rows of row tile ``tile`` on core part ``part`` (of ``parts`` sharing it)."""
    lo, hi = part_range(total, h_tiles, tile)
    a, b = part_range(hi - lo, parts, part)
    return lo + a, lo + b


def group_rows(
    layers: Sequence[LayerPlan], tile: int, h_tiles: int, part: int = 0, parts: int = 1
) -> list[tuple[int, int]]:
    """Output rows of every layer of a fusion group (in order) for one tile: the last
    layer's share of the tile, then backwards what each next layer reads (the halo)."""
    rows = [(0, 0)] * len(layers)
    lo, hi = tile_rows(out_rows(layers[-1]), h_tiles, tile, part, parts)
    rows[-1] = (lo, hi)
    for k in range(len(layers) - 2, -1, -1):
        if hi <= lo:
            rows[k] = (0, 0)
            continue
        need = input_rows(layers[k + 1], lo, hi)
        lo, hi = need.lo, need.hi
        rows[k] = (lo, hi)
    return rows


def max_tile_rows(layers: Sequence[LayerPlan], h_tiles: int) -> tuple[list[int], list[int]]:
    """For a fusion group (or one layer) cut in ``h_tiles``: the most output rows and the
    most input rows any tile of each layer has (what its tile buffers must hold)."""
    outs = [0] * len(layers)
    ins = [0] * len(layers)
    for tile in range(h_tiles):
        for k, (lo, hi) in enumerate(group_rows(layers, tile, h_tiles)):
            outs[k] = max(outs[k], hi - lo)
            if hi > lo:
                ins[k] = max(ins[k], input_rows(layers[k], lo, hi).rows)
    return outs, ins


__all__ = [
    "WHOLE_INPUT_DWPU",
    "RowWindow",
    "group_rows",
    "input_rows",
    "max_tile_rows",
    "out_rows",
    "part_range",
    "row_local",
    "runtime_shared",
    "splittable_rows",
    "tile_rows",
    "window_rows",
]
