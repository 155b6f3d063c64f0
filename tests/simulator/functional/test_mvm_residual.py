"""The fused residual add of an Mvm (``requant_add``, ``requant_add_lut``): a hand-computed
case, and the same sums as a stand-alone DPU ``add`` (and a table) after a plain conv."""

from __future__ import annotations

import numpy as np
from functional_helpers import (
    RNG,
    Image,
    chain,
    channel_params,
    dma,
    int8,
    io,
    preload,
    program,
    requant_ref,
    run,
)

from aipusim.compiler.quant import kernels as K
from aipusim.isa import params as P
from aipusim.isa.tasks import LutKind, Mvm, Phase, Pool, PostOp, Unit, WeightLoad

IN, SHORT, OUT, STAGE, PARAMS, ADD, LUT = 0, 0x1000, 0x2000, 0x3000, 0x20000, 0x21000, 0x22000
X_DDR, B_DDR, Y_DDR = 0x100000, 0x180000, 0x200000
CPAD = 64


def fused_on_sim(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray,
    rec: np.ndarray,
    add: np.ndarray,
    *,
    lut: LutKind = LutKind.NONE,
    table: np.ndarray | None = None,
    lut_first: bool = False,
) -> np.ndarray:
    """One 1x1 conv (x: 1 x cin x h x w) with the residual add of ``b`` (1 x cout x h x w)
    on its output stream; returns the int8 output (1 x cout x h x w)."""
    _, cin, h, wd = x.shape
    cout = w.shape[0]
    m = np.zeros((CPAD, cout), np.int8)
    m[:cin] = w[:, :, 0, 0].T
    img = Image()
    init = [
        *preload(img, [(m, STAGE), (rec, PARAMS), (add, ADD), (table, LUT)]),
        WeightLoad(unit=Unit.WLOAD, weight_set=0, src_addr=STAGE, bytes=m.size,
                   rows_used=CPAD, cols_used=cout, phase=Phase.INIT),
    ]  # fmt: skip
    post = PostOp.REQUANT_ADD_LUT if lut is not LutKind.NONE else PostOp.REQUANT_ADD
    if lut_first:
        post = PostOp.REQUANT_LUT_ADD
    frame = [
        dma(Pool.DDR, X_DDR, Pool.L1, IN, x.size, layer="in"),
        dma(Pool.DDR, B_DDR, Pool.L1, SHORT, b.size, layer="in"),
        Mvm(unit=Unit.MVM, layer="conv", weight_set=0, in_addr=IN, out_addr=OUT,
            vectors=h * wd, rows_used=CPAD, cols_used=cout, post=post, lut=lut,
            param_addr=PARAMS, lut_addr=LUT, in_w=wd, in_rows=h, in_pitch=cin,
            in_row_pitch=wd * cin, cin=cin, cpad=CPAD, out_w=wd, out_pitch=cout,
            out_row_pitch=wd * cout, add_addr=SHORT, add_param_addr=ADD, add_pitch=cout,
            add_row_pitch=wd * cout),
        dma(Pool.L1, OUT, Pool.DDR, Y_DDR, h * wd * cout, unit=Unit.DMA1, layer="out"),
    ]  # fmt: skip
    tasks = {0: chain(init) + chain(frame, 16)}
    bufs = [
        io("x", "h2d", X_DDR, x.shape),
        io("b", "h2d", B_DDR, b.shape),
        io("y", "d2h", Y_DDR, (1, cout, h, wd)),
    ]
    res = run(program(tasks, img, io_bufs=bufs), tasks, img, inputs={"x": x, "b": b})
    return res.outputs["y"]


def test_hand_computed_add_and_relu() -> None:
    # pixel 0 = (1, 2), pixel 1 = (3, -1); out0 = x0 + x1, out1 = 2 x0: sums (3, 2), (2, 6);
    # the requantize keeps them and adds zo 1: r = (4, 3), (3, 7)
    x = np.array([[[[1, 3]], [[2, -1]]]], np.int8)
    w = np.array([[1, 1], [2, 0]], np.int8).reshape(2, 2, 1, 1)
    rec = P.channel_records(bias=[0, 0], mult=[1 << 30] * 2, shift=[30] * 2, zo=1)
    # the add: (3 (r - 1) + 2 (b + 2) + 2) >> 2, - 5
    add = P.scalar_record(m0=3, m1=2, shift=2, za=1, zb=-2, zo=-5)
    b = np.array([[[[10, 0]], [[-20, 127]]]], np.int8)
    # (9 + 24 + 2) >> 2 = 8 -> 3; (6 - 36 + 2) >> 2 = -7 -> -12; (6 + 4 + 2) >> 2 = 3 -> -2;
    # (18 + 258 + 2) >> 2 = 69 -> 64
    y = fused_on_sim(x, w, b, rec, add)
    assert y.reshape(2, 2).tolist() == [[3, -2], [-12, 64]]
    relu = P.scalar_record(m0=3, m1=2, shift=2, za=1, zb=-2, zo=-5, lo=0, hi=60)
    y = fused_on_sim(x, w, b, rec, relu, lut=LutKind.RELU)  # the record's clamp: no table
    assert y.reshape(2, 2).tolist() == [[3, 0], [0, 60]]


def test_equals_the_conv_then_the_dpu_add_then_the_table() -> None:
    x, w, b = int8(1, 16, 3, 5), int8(8, 16, 1, 1), int8(1, 8, 3, 5)
    rec = channel_params(8)
    add = P.scalar_record(m0=1 << 20, m1=3 << 19, shift=21, za=3, zb=-7, zo=2)
    table = RNG.integers(-128, 128, 256).astype(np.int8)
    y = fused_on_sim(x, w, b, rec, add, lut=LutKind.SIGMOID, table=table)
    acc = K.conv_acc_reference(x.astype(np.int64), w.astype(np.int64), (1, 1), (0,) * 4, (1, 1), 1)
    r = requant_ref(acc, rec).astype(np.int64)  # the conv's own int8 output
    total = (1 << 20) * (r - 3) + (3 << 19) * (b.astype(np.int64) + 7)
    s = np.clip(K.rounding_shift(total, 21) + 2, -128, 127)  # the DPU add, stand-alone
    assert np.array_equal(y, K.apply_lut(s.astype(np.int8), table))


def test_hand_computed_table_then_add() -> None:
    # as above, r = (4, 3), (3, 7); the table doubles: (8, 6), (6, 14); then the add
    x = np.array([[[[1, 3]], [[2, -1]]]], np.int8)
    w = np.array([[1, 1], [2, 0]], np.int8).reshape(2, 2, 1, 1)
    rec = P.channel_records(bias=[0, 0], mult=[1 << 30] * 2, shift=[30] * 2, zo=1)
    add = P.scalar_record(m0=3, m1=2, shift=2, za=1, zb=-2, zo=-5)
    b = np.array([[[[10, 0]], [[-20, 127]]]], np.int8)
    table = np.clip(2 * (np.arange(256) - 128), -128, 127).astype(np.int8)
    # (21 + 24 + 2) >> 2 = 11 -> 6; (15 - 36 + 2) >> 2 = -5 -> -10; (15 + 4 + 2) >> 2 = 5
    # -> 0; (39 + 258 + 2) >> 2 = 74 -> 69
    y = fused_on_sim(x, w, b, rec, add, lut=LutKind.SILU, table=table, lut_first=True)
    assert y.reshape(2, 2).tolist() == [[6, 0], [-10, 69]]


def test_table_then_add_equals_the_conv_with_its_lut_then_the_dpu_add() -> None:
    x, w, b = int8(1, 16, 3, 5), int8(8, 16, 1, 1), int8(1, 8, 3, 5)
    rec = channel_params(8)
    add = P.scalar_record(m0=1 << 20, m1=3 << 19, shift=21, za=3, zb=-7, zo=2, lo=-50, hi=90)
    table = RNG.integers(-128, 128, 256).astype(np.int8)
    y = fused_on_sim(x, w, b, rec, add, lut=LutKind.SILU, table=table, lut_first=True)
    acc = K.conv_acc_reference(x.astype(np.int64), w.astype(np.int64), (1, 1), (0,) * 4, (1, 1), 1)
    r = K.apply_lut(requant_ref(acc, rec), table).astype(np.int64)  # conv + SiLU, int8
    total = (1 << 20) * (r - 3) + (3 << 19) * (b.astype(np.int64) + 7)
    assert np.array_equal(y, np.clip(K.rounding_shift(total, 21) + 2, -50, 90).astype(np.int8))
