"""IMC mapping of MVM layers: row/column blocks, weight sets, PWORD padding, ICR, swICR.

A layer with kernel kh x kw, Cin input and Cout output channels needs R = kh*kw*Cin' rows
(Cin' = Cin rounded up to PWORD when ``apply_pword_padding``) and Cout columns. Under
``mvm_utilization_limit`` u only ``arch.mvm.active_cols(u)`` columns are usable, so there are
nr = ceil(R / rows) row blocks (partial sums accumulate) and nc = ceil(Cout / active_cols)
column blocks; each (row block, column block) is one weight set. The column blocks share the
channels evenly (``block_cols`` = ceil(Cout / nc) each, the last one the rest), not the
first ones full and the last one the remainder: a block's `Mvm` lasts the longer of its
vector passes (the same for every block) and its output drain and L1 traffic (growing with
its columns), so for a fixed total of columns the even split is never slower; Cout = 512 at
448 active columns is 256 + 256, not 448 + 64.

ICR (``enable_icr``): a layer occupying at most ``icrx_parallel_block_threshold`` IMC blocks
(weight sets) copies its weights r times into idle columns, shifted by the stride along X,
so r neighbouring output pixels share one pass. A factor is feasible when r*Cout columns fit
the active columns and the widened input window kh*(kw + (r-1)*sx)*Cin' still fits the rows
the layer already occupies. Replication is not free: the r copies must be written into the
array, so r multiplies the weight bytes to load. Among the feasible factors up to
``icrx_max_factor`` the mapping takes the one with the fewest compute + weight-load cycles
(ties: the smaller r, which writes less); ``icrx_force`` takes the forced factor, capped at
the largest feasible one. Because fewer active columns (``mvm_utilization_limit``) only
remove feasible factors, throttling the array never lowers those cycles. When the weights
are fetched into L1 every frame (``fetch_bw``, the bytes per cycle the fetch gets), the
r-fold image must be fetched too, so the fetch not hidden behind compute counts as well;
that only ever narrows the factor (the fetch grows with r).

swICR (``enable_swicr``): a first layer with fewer than PWORD input channels packs the kw
taps of a kernel row into one PWORD (subwords) instead of padding each tap to PWORD, so
R = kh * ceil(kw*Cin / PWORD) * PWORD: rows instead of columns.

What a mapping costs comes from the one cost model (`aipusim.isa.cost`): each weight set is
one `Mvm` of Ho * ceil(Wo / r) vectors (its cycles include the pipeline fill the simulator
charges every task) and one `WeightLoad` of rows_used * cols_used bytes. A layer with a
fused residual add (``residual``) reads the add's operand from L1 on its last row block's
output stream (`block_posts`), which the L1 ports may make the bound.

>>> from aipusim.arch import load_arch
>>> from aipusim.compiler.backend.lower.layer import ConvGeometry
>>> geo = ConvGeometry(64, 64, 3, 3, 1, 1, 56, 56, 56, 56)
>>> from aipusim.isa.cost import cost_model
>>> m = map_layer(geo, cost_model(load_arch()), ImcOptions(), first_layer=False)
>>> m.rows_needed, m.row_blocks, m.col_blocks, m.icr, m.vectors
(960, 2, 1, 3, 1064)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aipusim.compiler.backend.common.target import Knobs
from aipusim.compiler.backend.lower.layer import ConvGeometry
from aipusim.isa.cost import CostModel
from aipusim.isa.tasks import PostOp


@dataclass(frozen=True)
class ImcOptions:
    """The config knobs the mapping reads (defaults = the reference defaults); the
    ``mvm_utilization_limit`` is the cost model's (`CostModel.active_cols`)."""

    apply_pword_padding: bool = True
    enable_icr: bool = True
    icrx_force: int = -1
    icrx_parallel_block_threshold: int = 4
    icrx_max_factor: int = 8
    enable_swicr: bool = True

    @classmethod
    def from_config(cls, config: Knobs) -> ImcOptions:
        return cls(**{name: getattr(config, name) for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class ImcBlock:
    """One weight set of a layer: which rows/columns of the array it occupies."""

    row_block: int
    col_block: int
    rows_used: int
    cols_used: int  # including ICR copies

    @property
    def weight_bytes(self) -> int:
        return self.rows_used * self.cols_used


@dataclass(frozen=True)
class ImcMapping:
    cin_padded: int
    rows_needed: int
    row_blocks: int
    col_blocks: int
    active_cols: int
    block_cols: int  # output channels of a full column block (before ICR copies)
    icr: int
    swicr: bool
    vectors: int  # input vectors per frame through EACH block
    blocks: tuple[ImcBlock, ...]
    compute_cycles: int
    weight_load_cycles: int

    @property
    def weight_sets(self) -> int:
        return len(self.blocks)

    @property
    def weight_bytes(self) -> int:
        """Bytes written into the array for the layer (ICR copies included)."""
        return sum(b.weight_bytes for b in self.blocks)

    @property
    def cols_used_max(self) -> int:
        return max(b.cols_used for b in self.blocks)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _rows(geo: ConvGeometry, cin: int, pword: int, packed: bool, width: int, pad: bool) -> int:
    """Rows for a window ``width`` taps wide along X (kw for r = 1)."""
    if packed:
        return geo.kh * _round_up(width * cin, pword)
    per_tap = _round_up(cin, pword) if pad else cin
    return geo.kh * width * per_tap


def block_posts(blocks: tuple[ImcBlock, ...], residual: bool) -> list[PostOp]:
    """The output-stream op of each block's `Mvm`: a fused residual add (``residual``)
    reads its operand on the last row block's stream; the others requantize.

    >>> blocks = (ImcBlock(0, 0, 512, 64), ImcBlock(1, 0, 448, 64))
    >>> [p.value for p in block_posts(blocks, residual=True)]
    ['requant', 'requant_add']
    """
    last = max((b.row_block for b in blocks), default=0)
    return [
        PostOp.REQUANT_ADD if residual and b.row_block == last else PostOp.REQUANT for b in blocks
    ]


def block_cycles(
    blocks: tuple[ImcBlock, ...], vectors: int, cost: CostModel, residual: bool
) -> list[int]:
    """Each block's `Mvm` cycles over ``vectors`` input vectors (`block_posts`)."""
    posts = block_posts(blocks, residual)
    return [
        cost.mvm_cycles(vectors, b.cols_used, post=post)
        for b, post in zip(blocks, posts, strict=True)
    ]


def _with_icr(
    geo: ConvGeometry,
    cost: CostModel,
    icr: int,
    cin: int,
    swicr: bool,
    pad: bool,
    nr: int,
    nc: int,
    block_cols: int,
    residual: bool,
) -> tuple[int, tuple[ImcBlock, ...], int, int, int]:
    """Blocks, vectors, compute and weight-load cycles of the layer at ICR factor ``icr``."""
    mvm = cost.arch.mvm
    rows_icr = _rows(geo, cin, mvm.pword_channels, swicr, geo.kw + (icr - 1) * geo.stride_w, pad)
    blocks = []
    for cb in range(nc):
        cols = min(block_cols, geo.cout - cb * block_cols) * icr
        for rb in range(nr):
            rows = min(mvm.rows, rows_icr - rb * mvm.rows)
            blocks.append(ImcBlock(rb, cb, rows, cols))
    vectors = geo.out_h * math.ceil(geo.out_w / icr)
    compute = sum(block_cycles(tuple(blocks), vectors, cost, residual))
    load = sum(cost.weight_load_cycles(b.weight_bytes) for b in blocks)
    return icr, tuple(blocks), vectors, compute, load


def _exposed_fetch_cycles(
    blocks: tuple[ImcBlock, ...], vectors: int, cost: CostModel, fetch_bw: float, residual: bool
) -> int:
    """Cycles of streamed weight fetches not hidden behind compute: the first block's fetch,
    then whatever of each later fetch outlasts the previous block's compute. A fetch gets
    ``fetch_bw`` bytes per cycle: the multicore pass's share of the shared link."""
    fetches = [cost.weight_fetch_cycles(b.weight_bytes, fetch_bw) for b in blocks]
    computes = block_cycles(blocks, vectors, cost, residual)
    hidden = zip(fetches[1:], computes, strict=False)
    return fetches[0] + sum(max(0, f - c) for f, c in hidden) if fetches else 0


def _frame_cycles(
    blocks: tuple[ImcBlock, ...],
    vectors: int,
    compute: int,
    load: int,
    cost: CostModel,
    fetch_bw: float | None,
    residual: bool = False,
) -> int:
    """Compute + weight-load cycles of a mapping, plus the exposed per-frame fetch."""
    if not fetch_bw:
        return compute + load
    return compute + load + _exposed_fetch_cycles(blocks, vectors, cost, fetch_bw, residual)


def frame_cycles(m: ImcMapping, cost: CostModel, fetch_bw: float | None = None) -> int:
    """What `map_layer` minimises over the ICR factors: compute + weight-load cycles, plus
    the weight fetch not hidden behind compute when the weights stream every frame."""
    return _frame_cycles(m.blocks, m.vectors, m.compute_cycles, m.weight_load_cycles, cost,
                         fetch_bw)  # fmt: skip


def map_layer(
    geo: ConvGeometry,
    cost: CostModel,
    opts: ImcOptions,
    *,
    first_layer: bool,
    fetch_bw: float | None = None,
    residual: bool = False,
) -> ImcMapping:
    """The IMC mapping of one MVM layer (see the module docstring); ``fetch_bw``: bytes per
    cycle of the per-frame weight fetch into L1 when the weights stream (None: on chip);
    ``residual``: a residual add is fused on its output stream; ``cost``: the cost model at
    the compiled ``mvm_utilization_limit``, whose active columns the mapping may use."""
    mvm = cost.arch.mvm
    pword = mvm.pword_channels
    cin = geo.cin  # grouped convs: block-diagonal weights use every input channel's rows
    swicr = (
        opts.enable_swicr
        and opts.apply_pword_padding
        and first_layer
        and cin < pword
        and geo.kw > 1
    )
    pad = opts.apply_pword_padding
    rows_needed = _rows(geo, cin, pword, swicr, geo.kw, pad)
    active = cost.active_cols
    nr = math.ceil(rows_needed / mvm.rows)
    nc = math.ceil(geo.cout / active)
    block_cols = math.ceil(geo.cout / nc)
    feasible = [1]
    # ICR lays the windows of neighbouring output pixels side by side, stride_w apart, as
    # one wider window of consecutive taps: a dilated window's taps are not consecutive.
    dilated = geo.dilation_h != 1 or geo.dilation_w != 1
    if (
        opts.enable_icr
        and not dilated
        and nr * nc <= opts.icrx_parallel_block_threshold
        and nc == 1
    ):
        limit = opts.icrx_force if opts.icrx_force != -1 else opts.icrx_max_factor
        for r in range(2, limit + 1):
            width = geo.kw + (r - 1) * geo.stride_w
            fits_cols = r * geo.cout <= active
            fits_rows = math.ceil(_rows(geo, cin, pword, swicr, width, pad) / mvm.rows) <= nr
            if not (fits_cols and fits_rows and r <= geo.out_w):
                break
            feasible.append(r)
    options = [
        _with_icr(geo, cost, r, cin, swicr, pad, nr, nc, block_cols, residual) for r in feasible
    ]
    if opts.icrx_force != -1:
        icr, blocks, vectors, compute, load = options[-1]
    else:
        icr, blocks, vectors, compute, load = min(
            options,
            key=lambda o: (_frame_cycles(*o[1:], cost, fetch_bw, residual), o[0]),
        )
    rows_icr = _rows(geo, cin, pword, swicr, geo.kw + (icr - 1) * geo.stride_w, pad)
    return ImcMapping(
        cin_padded=_round_up(cin, pword) if pad else cin,
        rows_needed=rows_icr,
        row_blocks=nr,
        col_blocks=nc,
        active_cols=active,
        block_cols=block_cols,
        icr=icr,
        swicr=swicr,
        vectors=vectors,
        blocks=tuple(blocks),
        compute_cycles=compute,
        weight_load_cycles=load,
    )


__all__ = [
    "ImcBlock",
    "ImcMapping",
    "ImcOptions",
    "block_cycles",
    "block_posts",
    "frame_cycles",
    "map_layer",
]
