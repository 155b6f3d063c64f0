"""IMC mapping: row/column blocks, PWORD padding, weight sets, ICR and swICR."""

from __future__ import annotations

import math

from backend_helpers import ARCH, COST

from aipusim.compiler.backend.imc.mapper import ImcBlock, ImcOptions, block_posts, map_layer
from aipusim.compiler.backend.lower.layer import ConvGeometry
from aipusim.isa.cost import cost_model
from aipusim.isa.tasks import PostOp

MVM = ARCH.mvm


def conv(cin: int, cout: int, k: int = 3, out: int = 28, stride: int = 1) -> ConvGeometry:
    return ConvGeometry(cin, cout, k, k, stride, stride, out * stride, out * stride, out, out)


def test_blocks_follow_rows_and_active_columns() -> None:
    geo = conv(256, 1024)
    m = map_layer(geo, COST, ImcOptions(enable_icr=False), first_layer=False)
    rows = 3 * 3 * 256
    assert m.rows_needed == rows
    assert m.row_blocks == math.ceil(rows / MVM.rows)
    assert m.col_blocks == math.ceil(1024 / MVM.active_cols(1.0))
    assert m.weight_sets == m.row_blocks * m.col_blocks
    # one Mvm task per weight set, each with the pipeline fill the simulator charges
    per_set = 28 * 28 * MVM.cycles_per_vector + MVM.pipeline_latency_cycles
    assert m.compute_cycles == m.weight_sets * per_set
    assert all(b.rows_used <= MVM.rows and b.cols_used <= MVM.cols for b in m.blocks)


def test_column_blocks_share_the_channels_evenly() -> None:
    # 512 output channels at u = 0.875: 448 active columns -> two blocks of 256, not 448 + 64
    geo = conv(512, 512, k=1, out=7)
    opts = ImcOptions(enable_icr=False)
    m = map_layer(geo, cost_model(ARCH, None, 0.875), opts, first_layer=False)
    assert MVM.active_cols(0.875) == 448
    assert (m.col_blocks, m.block_cols) == (2, 256)
    assert [b.cols_used for b in m.blocks] == [256, 256]
    # an uneven count: 1000 channels at 512 active columns -> 500 + 500
    fc = map_layer(conv(512, 1000, k=1, out=1), COST, ImcOptions(), first_layer=False)
    assert [b.cols_used for b in fc.blocks] == [500, 500]
    # 1030 channels need three blocks of at most 512: 344 + 344 + 342
    odd = map_layer(conv(64, 1030, k=1, out=1), COST, ImcOptions(), first_layer=False)
    assert [b.cols_used for b in odd.blocks] == [344, 344, 342]


def test_pword_padding_rounds_input_channels() -> None:
    geo = conv(3 * 7, 64, k=1)
    padded = map_layer(geo, COST, ImcOptions(enable_icr=False), first_layer=False)
    raw = map_layer(
        geo, COST, ImcOptions(enable_icr=False, apply_pword_padding=False), first_layer=False
    )
    assert padded.rows_needed == MVM.pword_channels
    assert raw.rows_needed == 21


def test_swicr_packs_taps_of_a_first_layer() -> None:
    geo = conv(3, 64, k=7, out=112, stride=2)
    on = map_layer(geo, COST, ImcOptions(enable_icr=False), first_layer=True)
    off = map_layer(geo, COST, ImcOptions(enable_icr=False, enable_swicr=False), first_layer=True)
    assert on.swicr and not off.swicr
    assert on.rows_needed == 7 * MVM.pword_channels  # 7 taps x 3 channels fit one PWORD
    assert off.rows_needed == 7 * 7 * MVM.pword_channels
    assert on.row_blocks < off.row_blocks
    assert not map_layer(geo, COST, ImcOptions(), first_layer=False).swicr


def test_icr_replicates_small_layers_into_idle_columns() -> None:
    geo = conv(64, 64, k=1)
    m = map_layer(geo, COST, ImcOptions(), first_layer=False)
    assert 1 < m.icr <= 8
    assert m.icr * 64 <= MVM.active_cols(1.0)
    assert m.vectors == 28 * math.ceil(28 / m.icr)
    assert m.cols_used_max == 64 * m.icr


def test_icr_never_needs_more_row_blocks() -> None:
    geo = conv(64, 64, k=3)
    base = map_layer(geo, COST, ImcOptions(enable_icr=False), first_layer=False)
    m = map_layer(geo, COST, ImcOptions(), first_layer=False)
    assert m.icr > 1 and m.row_blocks == base.row_blocks


def test_wide_layers_get_no_icr() -> None:
    m = map_layer(conv(64, 512, k=1), COST, ImcOptions(), first_layer=False)
    assert m.icr == 1


def test_a_fused_residual_reads_its_operand_through_the_l1_port() -> None:
    # a 1x1 conv 64 -> 64 over 4 x 4 pixels, no ICR: one block, 16 vectors. The array takes
    # 16 * 8 = 128 cycles and streams 16 * 512 input bytes = 128 cycles of a 64 B/cycle
    # port; the fused add also reads its int8 operand, 16 * 64 bytes more: 9216 / 64 = 144
    # cycles, the port the bound. Both plus the pipeline's 16 cycles of fill.
    geo = ConvGeometry(64, 64, 1, 1, 1, 1, 4, 4, 4, 4)
    opts = ImcOptions(enable_icr=False)
    assert map_layer(geo, COST, opts, first_layer=False).compute_cycles == 144
    assert map_layer(geo, COST, opts, first_layer=False, residual=True).compute_cycles == 160


def test_only_the_last_row_block_carries_the_residual_add() -> None:
    blocks = tuple(ImcBlock(rb, cb, 512, 64) for cb in range(2) for rb in range(3))
    posts = block_posts(blocks, residual=True)
    assert [p.value for p in posts] == ["requant", "requant", "requant_add"] * 2
    assert set(block_posts(blocks, residual=False)) == {PostOp.REQUANT}
