"""DpuOp on data: every kind, broadcasts, row layouts, the int16 stream, the float18 kinds;
against the int8 reference's kernels."""

from __future__ import annotations

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
    preload,
    program,
    run,
)
from functional_helpers import requant_ref as channel_requant

from aipusim.arch import load_arch
from aipusim.base.errors import SimulationError
from aipusim.compiler.quant import kernels as K
from aipusim.isa import fp_kernels as FK
from aipusim.isa import params as P
from aipusim.isa.float18 import FloatFormat
from aipusim.isa.tasks import DpuKind, DpuOp, DpuThen, LutKind, Pool, Unit

A, B, OUT, PRM, LUT = 0, 0x40000, 0x80000, 0xC0000, 0xD0000
X, Y = 0x100000, 0x200000
FMT = FloatFormat.of(load_arch())


def dpu_on_sim(
    a: np.ndarray,
    out_shape: tuple[int, ...],
    *,
    b: np.ndarray | None = None,
    params: np.ndarray | None = None,
    table: np.ndarray | None = None,
    out_dtype: str = "int8",
    out_bytes: int | None = None,
    **fields,
) -> np.ndarray:
    """Operand ``a`` at L1 ``A`` (and ``b`` at ``B``), the op, the result from ``OUT``."""
    img = Image()
    init = preload(img, ((params, PRM), (table, LUT)))
    bufs = [io("a", "h2d", X, a.shape, layout="row_major", dtype=str(a.dtype))]
    frame = [dma(Pool.DDR, X, Pool.L1, A, a.nbytes)]
    inputs = {"a": a}
    if b is not None:
        bufs.append(io("b", "h2d", X + 0x40000, b.shape, layout="row_major", dtype=str(b.dtype)))
        frame.append(dma(Pool.DDR, X + 0x40000, Pool.L1, B, b.nbytes))
        inputs["b"] = b
    fields = {"elements": a.size, "operands": 2 if b is not None else 1, **fields}
    fields = {"in_addr0": A, "out_addr": OUT, **fields}
    op = dict(in_addr1=B, param_addr=PRM, lut_addr=LUT, **fields)
    frame.append(DpuOp(unit=Unit.DPU, layer="op", **op))
    size = np.dtype(out_dtype).itemsize * int(np.prod(out_shape))
    frame.append(dma(Pool.L1, OUT, Pool.DDR, Y, out_bytes or size, unit=Unit.DMA1))
    bufs.append(io("y", "d2h", Y, out_shape, layout="row_major", dtype=out_dtype))
    tasks = {0: chain(init) + chain(frame, 8)}
    return run(program(tasks, img, io_bufs=bufs), tasks, img, inputs=inputs).outputs["y"]


def fixed(v: np.ndarray, m: int, n: int) -> np.ndarray:
    return K.rounding_shift(v.astype(np.int64) * m, n)


def test_requant_per_channel() -> None:
    c = 16
    x = int8(5, 7, c)  # channels last: channel = e % c
    rec = channel_params(c, acc_scale=0.05)
    rec["zi"], rec["scale"] = 3, RNG.integers(-300, 300, c)
    got = dpu_on_sim(x, x.shape, params=rec, kind=DpuKind.REQUANT, p_mod=c)
    acc = (x.astype(np.int64) - 3) * rec["scale"].astype(np.int64)
    assert np.array_equal(got, channel_requant(acc, rec, channel_axis=2))


@pytest.mark.parametrize("kind", ["add", "sub"])
def test_add_sub_into_the_int16_stream(kind: str) -> None:
    a = int8(6, 32)
    b = RNG.integers(-3000, 3000, (6, 32)).astype(np.int16)
    rec = P.scalar_record(m0=1 << 20, m1=3 << 18, shift=20, za=-4, zb=10, zo=7, lo=-32768, hi=32767)
    got = dpu_on_sim(
        a,
        a.shape,
        b=b,
        params=rec,
        kind=DpuKind(kind),
        b_mod=a.size,
        in1_elem=2,
        out_elem=2,
        out_dtype="int16",
    )
    ta = (a.astype(np.int64) + 4) * (1 << 20)
    tb = (b.astype(np.int64) - 10) * (3 << 18)
    want = K.saturate_int16(K.rounding_shift(ta + tb if kind == "add" else ta - tb, 20) + 7)
    assert np.array_equal(got, want)


@pytest.mark.parametrize(
    ("b_shape", "b_div", "b_mod"),
    [((1,), 1, 1), ((16,), 1, 16), ((5,), 16, 5)],
    ids=["scalar", "per-channel", "per-row"],
)
def test_mul_min_max_rescale_with_broadcast(b_shape, b_div: int, b_mod: int) -> None:
    a, b = int8(5, 16), int8(*b_shape)
    bb = np.broadcast_to(b.reshape(-1, 1) if b_div > 1 else b, (5, 16)).astype(np.int64)
    rec = P.scalar_record(m0=3 << 28, m1=5 << 27, shift=30, za=2, zb=-6, zo=1)
    x = a.astype(np.int64)
    kw = dict(b=b, params=rec, b_div=b_div, b_mod=b_mod)
    got = dpu_on_sim(a, a.shape, kind=DpuKind.MUL, **kw)
    assert np.array_equal(got, K.saturate_int8(fixed((x - 2) * (bb + 6), 3 << 28, 30) + 1))
    ra = K.saturate_int8(fixed(x - 2, 3 << 28, 30) + 1)
    rb = K.saturate_int8(fixed(bb + 6, 5 << 27, 30) + 1)
    assert np.array_equal(dpu_on_sim(a, a.shape, kind=DpuKind.MIN, **kw), np.minimum(ra, rb))
    assert np.array_equal(dpu_on_sim(a, a.shape, kind=DpuKind.MAX, **kw), np.maximum(ra, rb))
    got = dpu_on_sim(a, a.shape, params=rec, kind=DpuKind.RESCALE)
    assert np.array_equal(got, ra)


def test_tables_and_clamps() -> None:
    x = int8(4, 64)
    table = RNG.integers(-128, 128, 256).astype(np.int8)
    got = dpu_on_sim(x, x.shape, table=table, kind=DpuKind.LUT, lut=LutKind.GELU)
    assert np.array_equal(got, K.apply_lut(x, table))
    lo = RNG.integers(-20, 0, 64)
    rec = P.channel_records(bias=np.zeros(64), mult=0, shift=0, zo=0, lo=lo, hi=90)
    got = dpu_on_sim(x, x.shape, params=rec, kind=DpuKind.LUT, lut=LutKind.CLIP, p_mod=64)
    assert np.array_equal(got, np.clip(x, lo, 90).astype(np.int8))


def test_a_table_after_an_element_wise_op_by_hand() -> None:
    # 1 * (a - 0) + 1 * (b - 0) with shift 0, clamped to [-2, 5], then table[v] = 2 * v
    a = np.array([[1, -3, 4, 2]], np.int8)
    b = np.array([[2, -1, 3, -1]], np.int8)
    rec = P.scalar_record(m0=1, m1=1, shift=0, lo=-2, hi=5)
    table = np.clip(2 * (np.arange(256) - 128), -128, 127).astype(np.int8)
    got = dpu_on_sim(a, a.shape, b=b, params=rec, table=table, kind=DpuKind.ADD,
                     lut=LutKind.SIGMOID, b_mod=a.size)  # fmt: skip
    # sums 3, -4, 7, 1 -> clamped 3, -2, 5, 1 -> doubled
    assert got.tolist() == [[6, -4, 10, 2]]
    # relu/clip: the record's clamp alone, no lookup
    got = dpu_on_sim(a, a.shape, b=b, params=rec, table=table, kind=DpuKind.ADD,
                     lut=LutKind.RELU, b_mod=a.size)  # fmt: skip
    assert got.tolist() == [[3, -2, 5, 1]]


@pytest.mark.parametrize("kind", [DpuKind.ADD, DpuKind.SUB, DpuKind.MUL, DpuKind.RESCALE])
def test_a_table_after_is_the_op_then_the_lut_task(kind: DpuKind) -> None:
    a, b = int8(6, 32), int8(6, 32)
    rec = P.scalar_record(m0=3 << 27, m1=5 << 26, shift=30, za=2, zb=-6, zo=1)
    table = RNG.integers(-128, 128, 256).astype(np.int8)
    two = kind is not DpuKind.RESCALE
    kw = dict(b=b, b_mod=a.size) if two else {}
    op = dpu_on_sim(a, a.shape, params=rec, kind=kind, **kw)
    got = dpu_on_sim(a, a.shape, params=rec, table=table, kind=kind, lut=LutKind.SILU, **kw)
    assert np.array_equal(got, K.apply_lut(op, table))


def test_a_second_step_by_hand() -> None:
    # (a - 0) * (b - 0) clamped to int8, then + c (c at LUT: the helper's third buffer)
    a = np.array([[100, -3, 4, 2]], np.int8)
    b = np.array([[2, -1, 3, -1]], np.int8)
    c = np.array([-100, 2, -20, 4], np.int8)
    rec = np.concatenate([P.scalar_record(m0=1), P.scalar_record(m0=1, m1=1)])
    got = dpu_on_sim(a, a.shape, b=b, params=rec, table=c, kind=DpuKind.MUL, b_mod=a.size,
                     then=DpuThen.ADD, in_addr2=LUT, c_mod=c.size)  # fmt: skip
    # products 200 (clamped to 127), 3, 12, -2; plus c
    assert got.tolist() == [[27, 5, -8, 2]]


@pytest.mark.parametrize("kind", [DpuKind.ADD, DpuKind.SUB, DpuKind.MUL])
@pytest.mark.parametrize("then", [DpuThen.ADD, DpuThen.SUB, DpuThen.MUL])
def test_a_second_step_is_the_two_tasks_one_after_the_other(kind: DpuKind, then: DpuThen) -> None:
    a, b = int8(6, 32), int8(6, 32)
    c = int8(32)  # per channel: c_div 1, c_mod 32 over 6 pixels of 32 channels
    rec = P.scalar_record(m0=3 << 27, m1=5 << 26, shift=30, za=2, zb=-6, zo=1)
    rec2 = P.scalar_record(m0=7 << 26, m1=3 << 27, shift=29, za=-3, zb=4, zo=-2, lo=-90, hi=100)
    first = dpu_on_sim(a, a.shape, b=b, params=rec, kind=kind, b_mod=a.size)
    second = dpu_on_sim(first, a.shape, b=c, params=rec2, kind=DpuKind(then.value), b_mod=32)
    got = dpu_on_sim(a, a.shape, b=b, params=np.concatenate([rec, rec2]), table=c, kind=kind,
                     b_mod=a.size, then=then, in_addr2=LUT, c_mod=32)  # fmt: skip
    assert np.array_equal(got, second)


def test_a_second_step_follows_only_a_binary_op() -> None:
    rec = np.concatenate([P.scalar_record(m0=1), P.scalar_record(m0=1)])
    with pytest.raises(SimulationError, match=r"then must be none after a rescale of 1 operands"):
        dpu_on_sim(int8(8), (8,), params=rec, kind=DpuKind.RESCALE, then=DpuThen.ADD)


def test_copy_a_channel_slice_of_every_pixel() -> None:
    # 12 pixels of 24 channels; channels 8..20 go to pixels of 32 channels at offset 4
    x = int8(12, 24)
    got = dpu_on_sim(
        x,
        (12, 32),
        kind=DpuKind.COPY,
        elements=12 * 12,
        row_len=12,
        in_row_pitch=24,
        out_row_pitch=32,
        in_addr0=A + 8,
        out_addr=OUT + 4,
    )
    assert np.array_equal(got[:, 4:16], x[:, 8:20])


def test_reductions_over_the_pixels_of_each_channel() -> None:
    h, w, c = 4, 5, 8
    x = int8(h, w, c)  # channels last: channel g's pixels are c apart
    rec = P.scalar_record(m0=1 << 30, shift=35, za=-2, zo=3)
    fields = dict(outer=1, groups=c, n=h * w, g_stride=1, k_stride=c)
    got = dpu_on_sim(x, (c,), params=rec, kind=DpuKind.REDUCE, **fields)
    s = (x.astype(np.int64) + 2).sum(axis=(0, 1))
    assert np.array_equal(got, K.saturate_int8(fixed(s, 1 << 30, 35) + 3))
    got = dpu_on_sim(x, (c,), kind=DpuKind.REDUCE_MAX, **fields)
    assert np.array_equal(got, x.max(axis=(0, 1)))


def test_softmax_rows() -> None:
    rows, n, s_in, s_out, zo = 6, 40, 0.08, 1 / 256, -128
    x = int8(rows, n)
    exp = np.rint(np.exp(s_in * np.arange(-255, 1)) * (1 << P.SOFTMAX_EXP_BITS)).astype("<i4")
    recip = int(np.rint((1 << 16) / s_out))
    got = dpu_on_sim(
        x,
        x.shape,
        params=P.scalar_record(m0=recip, zo=zo),
        table=exp,
        kind=DpuKind.SOFTMAX,
        outer=1,
        groups=rows,
        n=n,
        g_stride=n,
        k_stride=1,
    )
    assert np.array_equal(got, K.softmax_int(x, -1, s_in, s_out, zo))


def test_softmax_over_attention_scores_with_interleaved_heads() -> None:
    # scores [1, heads, T, T] lie channels-last as [T, T, heads]: row (o, g) of head g
    # starts at o * T * heads + g and steps over the heads (`backend.reduction`)
    heads, t, s_in, s_out, zo = 3, 10, 0.1, 1 / 256, -128
    scores = int8(heads, t, t)
    memory = np.ascontiguousarray(scores.transpose(1, 2, 0))
    exp = np.rint(np.exp(s_in * np.arange(-255, 1)) * (1 << P.SOFTMAX_EXP_BITS)).astype("<i4")
    recip = int(np.rint((1 << 16) / s_out))
    got = dpu_on_sim(
        memory,
        memory.shape,
        params=P.scalar_record(m0=recip, zo=zo),
        table=exp,
        kind=DpuKind.SOFTMAX,
        outer=t,
        groups=heads,
        n=t,
        o_stride=t * heads,
        g_stride=1,
        k_stride=heads,
    )
    want = K.softmax_int(scores, -1, s_in, s_out, zo).transpose(1, 2, 0)
    assert np.array_equal(got, want)


def test_a_masked_softmax_reads_its_keep_mask_as_operand_1() -> None:
    # causal scores [1, heads, T, T] channels-last [T, T, heads]; the keep mask [T, T] is
    # entry (e // heads) % (T * T) of element e
    heads, t, s_in, s_out, zo = 2, 6, 0.1, 1 / 256, -128
    scores = int8(heads, t, t)
    memory = np.ascontiguousarray(scores.transpose(1, 2, 0))
    keep = np.tril(np.ones((t, t), np.uint8))
    exp = np.rint(np.exp(s_in * np.arange(-255, 1)) * (1 << P.SOFTMAX_EXP_BITS)).astype("<i4")
    recip = int(np.rint((1 << 16) / s_out))
    got = dpu_on_sim(
        memory, memory.shape, b=keep.view(np.int8), params=P.scalar_record(m0=recip, zo=zo),
        table=exp, kind=DpuKind.SOFTMAX, outer=t, groups=heads, n=t, o_stride=t * heads,
        g_stride=1, k_stride=heads, b_div=heads, b_mod=t * t,
    )  # fmt: skip
    v = np.where(keep, scores.astype(np.int64), -128)
    e = np.where(keep, exp[v - v.max(axis=-1, keepdims=True) + 255].astype(np.int64), 0)
    want = K.rounding_shift((e * recip) // e.sum(axis=-1, keepdims=True), 16) + zo
    assert np.array_equal(got, K.saturate_int8(want).transpose(1, 2, 0))
    assert np.all(got.transpose(2, 0, 1)[:, ~keep.astype(bool)] == zo)


def test_layernorm_rows_through_float18() -> None:
    rows, n = 5, 48
    x = int8(rows, n)
    gamma = RNG.uniform(0.5, 1.5, n)
    prm = FK.layer_norm_params(FMT, n, s_in=0.05, eps=1e-5, gamma=gamma, beta=gamma / 4, s_out=0.03)
    block = P.float_block("layernorm", FMT, P.scalar_record(za=2, zo=-5), prm)
    got = dpu_on_sim(
        x,
        x.shape,
        params=block,
        kind=DpuKind.LAYERNORM,
        outer=1,
        groups=rows,
        n=n,
        g_stride=n,
        k_stride=1,
    )
    assert np.array_equal(got, FK.layer_norm_int(x, 2, prm, -5, FMT))


@pytest.mark.parametrize("kind", ["div", "pow"])
def test_div_and_pow_through_float18(kind: str) -> None:
    a, b = int8(4, 16), int8(16)  # b per channel
    if kind == "div":
        prm = FK.div_params(FMT, 0.1, 0.05, 0.2)
    else:
        prm = FK.pow_params(FMT, 0.05, 3, 0.02, 0.5)
    block = P.float_block(kind, FMT, P.scalar_record(za=3, zb=-1, zo=4), prm)
    got = dpu_on_sim(a, a.shape, b=b, params=block, kind=DpuKind(kind), b_mod=16)
    fn = FK.div_int if kind == "div" else FK.pow_int
    assert np.array_equal(got, fn(a, 3, b[None, :], -1, prm, 4, FMT))


@pytest.mark.parametrize("interleaved", [False, True], ids=["row_major", "channels_last"])
def test_matmul_of_two_activations_per_head(interleaved: bool) -> None:
    # row-major heads one after the other, or A [1, heads, g, n], B [1, heads, n, m] and
    # the result channels-last: head h of each is every heads-th element from element h
    heads, g, n, m, za = 3, 5, 24, 7, 6
    a, b = int8(heads, g, n), int8(heads, n, m)
    rec = P.scalar_record(m0=1 << 30, shift=40, za=za, zo=-2)
    lay = (1, 2, 0) if interleaved else (0, 1, 2)
    strides = dict(o_stride=g * n, k_stride=n * m)
    if interleaved:
        strides = dict(o_stride=1, k_stride=1, g_stride=heads, out_row_pitch=1)
    got = dpu_on_sim(
        np.ascontiguousarray(a.transpose(lay)),
        tuple(np.array((heads, g, m))[list(lay)]),
        b=np.ascontiguousarray(b.transpose(lay)),
        params=rec,
        kind=DpuKind.MATMUL,
        elements=heads * g * n * m,
        outer=heads,
        groups=g,
        n=n,
        b_mod=m,
        **strides,
    )
    prod = K.exact_int_batch_matmul(a.astype(np.int64) - za, b.astype(np.int64))
    assert np.array_equal(got, K.saturate_int8(fixed(prod, 1 << 30, 40) - 2).transpose(lay))


def test_gather_rows_by_index() -> None:
    table = int8(10, 12)
    idx = np.array([3, 0, 9, 3, -1], np.int64)
    got = dpu_on_sim(
        idx, (5, 12), b=table, kind=DpuKind.GATHER, elements=5, groups=5, n=12, b_mod=10
    )
    assert np.array_equal(got, table[idx])
    with pytest.raises(SimulationError, match=r"gather index must be >= 0 \(b_mod gives no"):
        dpu_on_sim(idx, (5, 12), b=table, kind=DpuKind.GATHER, elements=5, groups=5, n=12)


def test_operand_count_is_checked() -> None:
    with pytest.raises(SimulationError, match=r"operands must be 2 for add, not 1"):
        dpu_on_sim(int8(8), (8,), params=P.scalar_record(), kind=DpuKind.ADD)


def test_psum_sums_the_cores_partial_sums_then_requantizes() -> None:
    # four cores' int32 partial sums of 24 output channels, planes 32 elements apart
    cores, c, stride = 4, 24, 32
    parts = RNG.integers(-40_000, 40_000, (cores, stride)).astype(np.int32)
    rec = channel_params(c, acc_scale=2e-4)
    got = dpu_on_sim(
        parts, (c,), params=rec, kind=DpuKind.PSUM, elements=c, operands=cores, k_stride=stride,
        in_elem=4, p_mod=c,
    )  # fmt: skip
    acc = parts[:, :c].astype(np.int64).sum(axis=0)
    assert np.array_equal(got, channel_requant(acc, rec, channel_axis=0))
    # each add saturates to the accumulator as the array's accumulate does
    hi = load_arch().mvm.accumulator_range[1]
    big = np.full((2, c), hi - 5, np.int32)
    got = dpu_on_sim(
        big, (c,), params=rec, kind=DpuKind.PSUM, elements=c, operands=2, k_stride=c, in_elem=4,
        p_mod=c,
    )  # fmt: skip
    assert np.array_equal(got, channel_requant(np.full(c, hi, np.int64), rec, channel_axis=0))
