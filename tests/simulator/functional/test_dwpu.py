"""DwpuOp on data: depthwise conv, max/average/global pools, resizes; against the int8
reference's kernels."""

from __future__ import annotations

import numpy as np
import pytest
from functional_helpers import RNG, Image, chain, channel_params, dma, int8, io, preload, program
from functional_helpers import requant_ref as channel_requant
from functional_helpers import run as run_sim

from aipusim.base.errors import SimulationError
from aipusim.compiler.quant import kernels as K
from aipusim.isa import params as P
from aipusim.isa.tasks import DwpuKind, DwpuOp, LutKind, Pool, Unit

IN, OUT, WTS, PRM, LUT = 0, 0x40000, 0x80000, 0x90000, 0xA0000
X, Y = 0x100000, 0x200000


def dwpu_on_sim(
    x: np.ndarray,
    out_hw: tuple[int, int],
    *,
    weights: np.ndarray | None = None,
    params: np.ndarray | None = None,
    table: np.ndarray | None = None,
    **fields,
) -> np.ndarray:
    _, c, h, w = x.shape
    oh, ow = out_hw
    img = Image()
    init = preload(img, ((weights, WTS), (params, PRM), (table, LUT)))
    op = DwpuOp(
        unit=Unit.DWPU,
        layer="dw",
        in_addr=IN,
        out_addr=OUT,
        channels=c,
        h=h,
        w=w,
        out_h=oh,
        out_w=ow,
        weight_addr=WTS,
        param_addr=PRM,
        lut_addr=LUT,
        in_pitch=c,
        in_row_pitch=w * c,
        out_pitch=c,
        out_row_pitch=ow * c,
        **{"kh": 1, "kw": 1, "stride": 1, **fields},
    )
    frame = [
        dma(Pool.DDR, X, Pool.L1, IN, x.size),
        op,
        dma(Pool.L1, OUT, Pool.DDR, Y, c * oh * ow, unit=Unit.DMA1),
    ]
    tasks = {0: chain(init) + chain(frame, 8)}
    bufs = [io("x", "h2d", X, x.shape), io("y", "d2h", Y, (1, c, oh, ow))]
    res = run_sim(program(tasks, img, io_bufs=bufs), tasks, img, inputs={"x": x})
    return res.outputs["y"]


def fixed(v: np.ndarray, m: int | np.ndarray, n: int | np.ndarray) -> np.ndarray:
    """The reference's ``(v * m + 2**(n-1)) >> n``."""
    m, n = np.asarray(m, np.int64), np.asarray(n, np.int64)
    return (v.astype(np.int64) * m + (np.int64(1) << (n - 1))) >> n


@pytest.mark.parametrize(("k", "stride", "pad"), [(3, 1, 1), (3, 2, 1), (5, 2, 2)])
def test_depthwise_conv(k: int, stride: int, pad: int) -> None:
    c, zi = 24, -3
    x = int8(1, c, 9, 8)
    w = int8(c, 1, k, k)
    rec = channel_params(c, acc_scale=0.01)
    rec["zi"] = zi
    oh, ow = (9 + 2 * pad - k) // stride + 1, (8 + 2 * pad - k) // stride + 1
    got = dwpu_on_sim(
        x,
        (oh, ow),
        weights=w.reshape(c, -1),
        params=rec,
        kind=DwpuKind.DWCONV,
        kh=k,
        kw=k,
        stride=stride,
        pad_top=pad,
        pad_left=pad,
        fill=zi & 0xFF,
    )
    acc = K.conv_acc_reference(
        x.astype(np.int64) - zi, w.astype(np.int64), (stride, stride), (pad,) * 4, (1, 1), c
    )
    assert np.array_equal(got, channel_requant(acc, rec))


def test_depthwise_padding_adds_nothing_with_per_channel_zero_points() -> None:
    """Each channel's padding reads its own ``zi``, whatever ``fill`` says (MobileNetV2's
    per-channel depthwise inputs): here fill 0, zi -20 ... 20."""
    c = 8
    x = int8(1, c, 5, 5)
    w = int8(c, 1, 3, 3)
    rec = channel_params(c, acc_scale=0.01)
    zi = np.linspace(-20, 20, c).astype(np.int64)
    rec["zi"] = zi
    got = dwpu_on_sim(
        x, (5, 5), weights=w.reshape(c, -1), params=rec, kind=DwpuKind.DWCONV, kh=3, kw=3,
        stride=1, pad_top=1, pad_left=1, fill=0,
    )  # fmt: skip
    centred = x.astype(np.int64) - zi.reshape(1, c, 1, 1)
    acc = K.conv_acc_reference(centred, w.astype(np.int64), (1, 1), (1,) * 4, (1, 1), c)
    assert np.array_equal(got, channel_requant(acc, rec))


def test_max_pool_padding_never_wins() -> None:
    x = int8(1, 16, 7, 7, lo=-128, hi=-100)  # all below any padding value
    got = dwpu_on_sim(
        x, (4, 4), kind=DwpuKind.MAXPOOL, kh=3, kw=3, stride=2, pad_top=1, pad_left=1, fill=0
    )
    want = K.max_pool(x, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), (4, 4))
    assert np.array_equal(got, want)


@pytest.mark.parametrize("include_pad", [0, 1])
def test_average_pool_counts(include_pad: int) -> None:
    x, za, zo = int8(1, 8, 6, 6), 5, -7
    counts = np.zeros(9, P.COUNT)
    for n in range(1, 10):
        frac, exp = np.frexp(0.9 / n)
        counts[n - 1] = (int(np.rint(frac * (1 << 31))), 31 - exp)
    params = np.concatenate([P.scalar_record(za=za, zo=zo).view(np.uint8), counts.view(np.uint8)])
    got = dwpu_on_sim(
        x,
        (3, 3),
        params=params,
        kind=DwpuKind.AVGPOOL,
        kh=3,
        kw=3,
        stride=2,
        pad_top=1,
        pad_left=1,
        fill=za,
        count_include_pad=include_pad,
    )
    sums, count = K.pool_sum(
        x.astype(np.int64) - za,
        (3, 3),
        (2, 2),
        (1, 1, 1, 1),
        (3, 3),
        count_include_pad=bool(include_pad),
        acc_dtype=np.int64,
    )
    want = K.saturate_int8(fixed(sums, counts["mult"][count - 1], counts["shift"][count - 1]) + zo)
    assert np.array_equal(got, want)


def test_global_pools() -> None:
    x, za, zo = int8(1, 32, 7, 7), 4, 2
    params = P.scalar_record(m0=1 << 30, shift=36, za=za, zo=zo)
    got = dwpu_on_sim(x, (1, 1), params=params, kind=DwpuKind.GLOBALPOOL)
    s = (x.astype(np.int64) - za).sum(axis=(2, 3), keepdims=True)
    assert np.array_equal(got, K.saturate_int8(fixed(s, 1 << 30, 36) + zo))
    got = dwpu_on_sim(x, (1, 1), kind=DwpuKind.GLOBALMAX)
    assert np.array_equal(got, x.max(axis=(2, 3), keepdims=True))


def coords(n_out: int, n_in: int, linear: bool) -> np.ndarray:
    scale = n_in / n_out
    rec = np.zeros(n_out, P.COORD)
    src = np.clip((np.arange(n_out) + 0.5) * scale - 0.5, 0, n_in - 1)
    rec["i0"] = np.floor(src) if linear else np.minimum(np.rint(src), n_in - 1)
    rec["i1"] = np.minimum(rec["i0"] + 1, n_in - 1)
    rec["w"] = np.rint((src - np.floor(src)) * (1 << P.RESIZE_WEIGHT_BITS)) if linear else 0
    return rec


def test_resize_nearest_and_linear() -> None:
    x = int8(1, 16, 5, 7)
    rows, cols = coords(10, 5, False), coords(14, 7, False)
    table = np.concatenate([rows, cols])
    got = dwpu_on_sim(x, (10, 14), weights=table, kind=DwpuKind.RESIZE_NEAREST)
    want = x[:, :, rows["i0"]][:, :, :, cols["i0"]]
    assert np.array_equal(got, want)
    rows, cols = coords(10, 5, True), coords(14, 7, True)
    za, zo = 3, -1
    params = P.scalar_record(m0=1 << 30, shift=50, za=za, zo=zo)
    got = dwpu_on_sim(
        x,
        (10, 14),
        weights=np.concatenate([rows, cols]),
        params=params,
        kind=DwpuKind.RESIZE_LINEAR,
    )
    frac = [(r["i0"], r["i1"], r["w"] / (1 << P.RESIZE_WEIGHT_BITS)) for r in (rows, cols)]
    v = K.resize_linear_int(x.astype(np.int64) - za, frac, [2, 3])
    assert np.array_equal(got, K.saturate_int8(fixed(v, 1 << 30, 50) + zo))


def test_fused_table_after_a_pool() -> None:
    x = int8(1, 8, 4, 4)
    table = RNG.integers(-128, 128, 256).astype(np.int8)
    got = dwpu_on_sim(
        x, (2, 2), table=table, kind=DwpuKind.MAXPOOL, kh=2, kw=2, stride=2, lut=LutKind.TANH
    )
    assert np.array_equal(
        got, K.apply_lut(K.max_pool(x, (2, 2), (2, 2), (0,) * 4, (1, 1), (2, 2)), table)
    )
    with pytest.raises(SimulationError, match="lut relu needs a clamp record, which a maxpool"):
        dwpu_on_sim(x, (2, 2), kind=DwpuKind.MAXPOOL, kh=2, kw=2, stride=2, lut=LutKind.RELU)


def test_resize_tables_out_of_the_tile_are_refused() -> None:
    x = int8(1, 4, 3, 3)
    rows, cols = coords(3, 3, False), coords(3, 3, False)
    rows["i0"][1] = 5
    with pytest.raises(SimulationError, match=r"resize source rows must lie in 0-2, not 0..5"):
        dwpu_on_sim(x, (3, 3), weights=np.concatenate([rows, cols]), kind=DwpuKind.RESIZE_NEAREST)
