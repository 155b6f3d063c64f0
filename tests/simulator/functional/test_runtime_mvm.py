"""Attention's product of two activations on the MVM, on data: per head a `WeightLoad` of
the second operand read with the heads' stride and written as its ICR copies, then an `Mvm`
gathering and scattering with that stride and offsetting its inputs by their zero point
(``offset_fill``, from the column sums the load kept); against numpy's product."""

from __future__ import annotations

import numpy as np
import pytest
from functional_helpers import (
    Image,
    chain,
    channel_params,
    dma,
    int8,
    io,
    program,
    requant_ref,
    run,
)

from aipusim.base.errors import SimulationError
from aipusim.isa.tasks import Mvm, Phase, Pool, PostOp, Unit, WeightLoad

H, M, K, N = 3, 5, 4, 6  # heads, vectors (rows of A), inner, columns of B
CPAD, ICR = 64, 2
A_L1, B_L1, OUT, PARAMS = 0x0, 0x1000, 0x2000, 0x3000
A_DDR, B_DDR, Y_DDR = 0x100000, 0x101000, 0x102000


def heads_product(a: np.ndarray, b: np.ndarray, za: int, *, col_sums: int = 1):
    """``a @ b`` of two [1, H, ., .] int8 tensors held channels-last (heads interleaved)
    through the simulator, ``za`` being a's zero point; returns (result, records)."""
    rec = channel_params(N)
    img = Image()
    init = [dma(Pool.DDR, img.put(rec), Pool.L1, PARAMS, rec.nbytes, phase=Phase.INIT)]
    frame = [
        dma(Pool.DDR, A_DDR, Pool.L1, A_L1, a.size, layer="in"),
        dma(Pool.DDR, B_DDR, Pool.L1, B_L1, b.size, layer="in"),
    ]
    for h in range(H):
        frame.append(
            WeightLoad(unit=Unit.WLOAD, layer="mm", weight_set=h, src_addr=B_L1 + h,
                       bytes=(CPAD + K) * ICR * N, rows_used=CPAD + K, cols_used=ICR * N,
                       src_rows=K, src_pitch=H, copies=ICR, col_sums=col_sums,
                       src_row_pitch=N * H, copy_rows=CPAD)
        )  # fmt: skip
        frame.append(
            Mvm(unit=Unit.MVM, layer="mm", weight_set=h, in_addr=A_L1 + h, out_addr=OUT + h,
                vectors=-(-M // ICR), rows_used=CPAD + K, cols_used=ICR * N, icr=ICR,
                post=PostOp.REQUANT, param_addr=PARAMS, in_w=M, in_rows=1, in_pitch=K * H,
                in_row_pitch=M * K * H, cin=K, cpad=CPAD, out_w=M, out_pitch=N * H,
                out_row_pitch=M * N * H, in_chan_pitch=H, out_chan_pitch=H, offset_fill=1,
                fill=za & 0xFF)
        )  # fmt: skip
    frame.append(dma(Pool.L1, OUT, Pool.DDR, Y_DDR, M * N * H, unit=Unit.DMA1, layer="out"))
    tasks = {0: chain(init) + chain(frame, 16)}
    bufs = [
        io("a", "h2d", A_DDR, a.shape),
        io("b", "h2d", B_DDR, b.shape),
        io("y", "d2h", Y_DDR, (1, H, M, N)),
    ]
    res = run(program(tasks, img, io_bufs=bufs), tasks, img, inputs={"a": a, "b": b})
    return res.outputs["y"], rec


@pytest.mark.parametrize("za", [0, -7, -128])
def test_interleaved_heads_with_the_input_zero_point(za: int) -> None:
    a, b = int8(1, H, M, K), int8(1, H, K, N, lo=-127)
    got, rec = heads_product(a, b, za)
    acc = (a.astype(np.int64) - za) @ b.astype(np.int64)
    np.testing.assert_array_equal(got, requant_ref(acc, rec, channel_axis=-1))


def test_a_hand_computed_head() -> None:
    """Zero point -1: every element of A counts one more. Head 1's row 2 is [1, 2, 3, 4]
    and B's column 5 of head 1 is [5, 6, 7, 8]; all else is 0."""
    a = np.zeros((1, H, M, K), np.int8)
    b = np.zeros((1, H, K, N), np.int8)
    a[0, 1, 2] = [1, 2, 3, 4]
    b[0, 1, :, 5] = [5, 6, 7, 8]
    got, rec = heads_product(a, b, za=-1)
    sums = np.zeros((1, H, M, N), np.int64)
    sums[0, 1, :, 5] = 5 + 6 + 7 + 8  # rows of zeros: 1 each
    sums[0, 1, 2, 5] = 2 * 5 + 3 * 6 + 4 * 7 + 5 * 8  # 96
    np.testing.assert_array_equal(got, requant_ref(sums, rec, channel_axis=-1))


def test_offset_fill_needs_the_column_sums() -> None:
    a, b = int8(1, H, M, K), int8(1, H, K, N, lo=-127)
    with pytest.raises(
        SimulationError,
        match=r"offset_fill needs the column sums of weight set 0, but its last WeightLoad "
        r"kept none \(col_sums 0\)",
    ):
        heads_product(a, b, -3, col_sums=0)
