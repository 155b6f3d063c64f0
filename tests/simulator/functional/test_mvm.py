"""Mvm and WeightLoad on data: the gather of every window layout, the row blocks with their
partial sums, saturation, the post-ops; against the int8 reference's conv sums."""

from __future__ import annotations

import math

import numpy as np
import pytest
from functional_helpers import (
    RNG,
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
from aipusim.compiler.quant import kernels as K
from aipusim.isa import params as P
from aipusim.isa.tasks import LutKind, Mvm, Phase, Pool, PostOp, Unit, WeightLoad

IN, OUT, STAGE, PSUM, PARAMS, LUT = 0, 0x80000, 0x100000, 0x200000, 0x300000, 0x310000
X_DDR, Y_DDR = 0x100000, 0x200000


def row_space(w: np.ndarray, *, icr: int, stride_w: int, cpad: int, swicr: bool) -> np.ndarray:
    """The IMC image of conv weights (cout, cin, kh, kw): row (ky, j, c) per the Mvm
    docstring, column q * cout + o (ICR copy q shifted by the stride)."""
    cout, cin, kh, kw = w.shape
    width = kw + (icr - 1) * stride_w
    per_ky = math.ceil(width * cin / cpad) * cpad
    rows = kh * per_ky if swicr else kh * width * cpad
    m = np.zeros((rows, icr * cout), np.int8)
    for q in range(icr):
        for ky in range(kh):
            for kx in range(kw):
                j = kx + q * stride_w
                for c in range(cin):
                    r = ky * per_ky + j * cin + c if swicr else (ky * width + j) * cpad + c
                    m[r, q * cout : (q + 1) * cout] = w[:, c, ky, kx]
    return m


def conv_on_sim(
    x: np.ndarray,
    w: np.ndarray,
    *,
    stride: int = 1,
    pad: int = 0,
    dil: int = 1,
    icr: int = 1,
    swicr: bool = False,
    upsample: int = 1,
    fill: int = 0,
    cpad: int | None = None,
    block_rows: int = 512,
    rec: np.ndarray | None = None,
    lut: LutKind = LutKind.NONE,
    table: np.ndarray | None = None,
    frames: int = 1,
):
    """Run one conv layer (every row block, accumulating) through the simulator."""
    _, cin, h, wd = x.shape
    cout, _, kh, kw = w.shape
    cpad = cpad or 64 * math.ceil(cin / 64)
    span_h, span_w = (h - 1) * upsample + 1, (wd - 1) * upsample + 1
    ho = (span_h + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    wo = (span_w + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    vx = math.ceil(wo / icr)
    vectors = ho * vx
    m = row_space(w, icr=icr, stride_w=stride, cpad=cpad, swicr=swicr)
    cols = icr * cout
    rec = channel_params(cout) if rec is None else rec
    img = Image()
    init, frame = [], []
    blocks = [(r0, min(block_rows, len(m) - r0)) for r0 in range(0, len(m), block_rows)]
    assert len(blocks) <= 4
    stage = STAGE
    for b, (r0, n) in enumerate(blocks):
        at = img.put(np.ascontiguousarray(m[r0 : r0 + n]))
        init.append(dma(Pool.DDR, at, Pool.L1, stage, n * cols, phase=Phase.INIT))
        init.append(
            WeightLoad(
                unit=Unit.WLOAD,
                phase=Phase.INIT,
                weight_set=b,
                src_addr=stage,
                bytes=n * cols,
                rows_used=n,
                cols_used=cols,
            )
        )
        stage += n * cols
    init.append(dma(Pool.DDR, img.put(rec), Pool.L1, PARAMS, cout * 24, phase=Phase.INIT))
    if table is not None:
        init.append(dma(Pool.DDR, img.put(table), Pool.L1, LUT, 256, phase=Phase.INIT))
    frame.append(dma(Pool.DDR, X_DDR, Pool.L1, IN, x.size, layer="in"))
    for b, (r0, n) in enumerate(blocks):
        last = b == len(blocks) - 1
        post = (
            (PostOp.REQUANT_LUT if lut is not LutKind.NONE else PostOp.REQUANT)
            if last
            else (PostOp.NONE)
        )
        frame.append(
            Mvm(
                unit=Unit.MVM,
                layer="conv",
                weight_set=b,
                in_addr=IN,
                out_addr=OUT,
                vectors=vectors,
                rows_used=n,
                cols_used=cols,
                icr=icr,
                accumulate=int(b > 0),
                post=post,
                lut=lut,
                psum_addr=PSUM,
                param_addr=PARAMS,
                lut_addr=LUT,
                in_w=wd,
                in_rows=h,
                in_pitch=cin,
                in_row_pitch=wd * cin,
                cin=cin,
                cpad=cpad,
                kh=kh,
                kw=kw,
                stride_h=stride,
                stride_w=stride,
                pad_top=pad,
                pad_left=pad,
                dilation=dil,
                upsample=upsample,
                swicr=int(swicr),
                row0=r0,
                fill=fill & 0xFF,
                out_w=wo,
                out_pitch=cout,
                out_row_pitch=wo * cout,
            )
        )
    frame.append(dma(Pool.L1, OUT, Pool.DDR, Y_DDR, ho * wo * cout, unit=Unit.DMA1, layer="out"))
    tasks = {0: chain(init) + chain(frame, 16)}
    bufs = [io("x", "h2d", X_DDR, x.shape), io("y", "d2h", Y_DDR, (1, cout, ho, wo))]
    res = run(program(tasks, img, io_bufs=bufs), tasks, img, inputs={"x": x}, frames=frames)
    return res, rec


def reference(x, w, rec, *, stride=1, pad=0, dil=1, lut=None):
    acc = K.conv_acc_reference(
        x.astype(np.int64), w.astype(np.int64), (stride, stride), (pad,) * 4, (dil, dil), 1
    )
    out = requant_ref(acc, rec)
    return out if lut is None else K.apply_lut(out, lut)


@pytest.mark.parametrize(
    "case",
    [
        dict(stride=1, pad=0, k=1),
        dict(stride=2, pad=1, k=3),
        dict(stride=1, pad=2, k=3, dil=2),
        dict(stride=2, pad=1, k=3, cin=3),  # 3 channels, PWORD padding to 64
        dict(stride=1, pad=1, k=3, icr=2),
        dict(stride=2, pad=1, k=3, icr=3),
        dict(stride=1, pad=1, k=3, cin=3, swicr=True),
        dict(stride=2, pad=3, k=7, cin=3, swicr=True, icr=2),
    ],
    ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()),
)
def test_conv_windows_match_the_reference(case: dict) -> None:
    cin, k = case.get("cin", 16), case["k"]
    x, w = int8(1, cin, 11, 10), int8(24, cin, k, k)
    args = {a: case[a] for a in ("stride", "pad", "dil") if a in case}
    res, rec = conv_on_sim(x, w, icr=case.get("icr", 1), swicr=case.get("swicr", False), **args)
    assert np.array_equal(res.outputs["y"], reference(x, w, rec, **args))
    assert res.functional["saturations"] == 0


def test_row_blocks_accumulate_partial_sums() -> None:
    # 128 channels x 3 x 3 = 1152 rows: blocks of 512, 512 and 128 through three weight sets
    x, w = int8(1, 128, 6, 7), int8(40, 128, 3, 3)
    res, rec = conv_on_sim(x, w, pad=1)
    assert np.array_equal(res.outputs["y"], reference(x, w, rec, pad=1))
    # a row block boundary inside a tap's channels (blocks of 96 rows, 2 ICR copies)
    x, w = int8(1, 64, 5, 6), int8(8, 64, 1, 2)
    res, rec = conv_on_sim(x, w, icr=2, block_rows=96)
    acc = K.conv_acc_reference(x.astype(np.int64), w.astype(np.int64), (1, 1), (0,) * 4, (1, 1), 1)
    assert np.array_equal(res.outputs["y"], requant_ref(acc, rec))


def test_transposed_conv_through_upsampling() -> None:
    # ConvTranspose stride 2, pads 1: a stride-1 conv of the flipped kernel over the input
    # spread 2-fold, padded by k - 1 - pad
    x = int8(1, 16, 5, 4)
    wt = int8(16, 12, 3, 3)  # ONNX (Cin, Cout, kh, kw)
    w = np.ascontiguousarray(wt.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1])
    res, rec = conv_on_sim(x, w, upsample=2, pad=1)
    acc = K.conv_transpose_acc_reference(
        x.astype(np.int64), wt.astype(np.int64), (2, 2), (1, 1, 1, 1), (1, 1), 1
    )
    assert np.array_equal(res.outputs["y"], requant_ref(acc, rec))


def test_fill_is_the_input_zero_point_with_the_bias_folded() -> None:
    # the array sums raw int8: padding reads the zero point, the bias carries -zp * sum(w)
    zp = 7
    x, w = int8(1, 8, 6, 6), int8(16, 8, 3, 3)
    rec = channel_params(16)
    folded = rec.copy()
    folded["bias"] = rec["bias"] - zp * w.astype(np.int64).sum(axis=(1, 2, 3))
    res, _ = conv_on_sim(x, w, pad=1, fill=zp, rec=folded)
    xc = x.astype(np.int64) - zp
    acc = K.conv_acc_reference(xc, w.astype(np.int64), (1, 1), (1,) * 4, (1, 1), 1)
    assert np.array_equal(res.outputs["y"], requant_ref(acc, rec))


def test_fused_table_and_clamp() -> None:
    x, w = int8(1, 16, 4, 4), int8(8, 16, 1, 1)
    table = RNG.integers(-128, 128, 256).astype(np.int8)
    res, rec = conv_on_sim(x, w, lut=LutKind.SIGMOID, table=table)
    assert np.array_equal(res.outputs["y"], reference(x, w, rec, lut=table))
    relu = channel_params(8)
    relu["lo"] = 3  # a fused Relu: the record's clamp, no table read
    res, _ = conv_on_sim(x, w, rec=relu, lut=LutKind.RELU)
    assert np.array_equal(res.outputs["y"], reference(x, w, relu))


def test_sums_saturate_to_the_accumulator_and_are_counted() -> None:
    # four row blocks of 512: 2048 products of 127 x 127 (33.0M) stay inside 26 bits
    rec = P.channel_records(bias=np.zeros(4), mult=[1 << 30] * 4, shift=[50] * 4, zo=0)
    x = np.full((1, 2048, 2, 2), 127, np.int8)
    w = np.full((4, 2048, 1, 1), 127, np.int8)
    res, _ = conv_on_sim(x, w, rec=rec)
    assert res.functional["saturations"] == 0
    assert (res.outputs["y"] == ((2048 * 127 * 127 * (1 << 30) + (1 << 49)) >> 50)).all()
    # 2048 products of -128 x -128 make 2**25: one past the top, in the last block
    x = np.full((1, 2048, 2, 2), -128, np.int8)
    w = np.full((4, 2048, 1, 1), -128, np.int8)
    res, _ = conv_on_sim(x, w, rec=rec)
    assert res.functional["saturations"] == 4 * 4  # every sum (4 pixels x 4 channels)
    top = (1 << 25) - 1
    assert (res.outputs["y"] == ((top * (1 << 30) + (1 << 49)) >> 50)).all()


def test_weights_not_loaded_are_refused() -> None:
    img = Image()
    mvm = Mvm(
        unit=Unit.MVM,
        layer="c",
        weight_set=1,
        in_addr=0,
        out_addr=0,
        vectors=1,
        rows_used=8,
        cols_used=8,
        post=PostOp.NONE,
        in_w=1,
        in_rows=1,
        cin=8,
        cpad=64,
        out_w=1,
    )
    tasks = {0: [mvm]}
    with pytest.raises(
        SimulationError,
        match=r"reads 8 x 8 weights of set 1, but the last "
        r"WeightLoad of that set wrote 0 x 0",
    ):
        run(program(tasks, img), tasks, img)


def test_a_full_size_resnet_layer() -> None:
    # ResNet-50's layer1 3x3 conv: 56 x 56 x 64, two row blocks (576 rows), 3136 vectors
    x, w = int8(1, 64, 56, 56), int8(64, 64, 3, 3)
    res, rec = conv_on_sim(x, w, pad=1)
    acc = K.conv_accumulate(
        x.astype(np.float32),
        w,
        strides=(1, 1),
        pads=(1, 1, 1, 1),
        dilations=(1, 1),
        group=1,
        out_hw=(56, 56),
        acc_dtype=np.float64,
    )
    assert np.array_equal(res.outputs["y"], requant_ref(np.rint(acc).astype(np.int64), rec))
