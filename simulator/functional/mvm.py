"""`WeightLoad` and `Mvm`: the D-IMC array on real data.

A `WeightLoad` writes its ``rows_used x cols_used`` block into rows and columns from 0 of
its weight set (kept as float32): a row-major block, or a run-time operand read with its
strides and written as its ICR copies (`runtime_block`), with the block's column sums kept
when it says ``col_sums``; an `Mvm` that reads more rows or columns than the last load of
its set wrote is refused.

An `Mvm` gathers its input vectors from the L1 tile (`_gather`, numba: window, strides,
padding, dilation, upsampling, ICR copies, PWORD and swICR row layouts, the row block),
multiplies them by the set as one float32 BLAS GEMM (exact: every product of two int8 is
at most 2**14 and a block sums at most ``arch.mvm.rows`` = 512 of them, below float32's
2**24), then `_post` (numba) saturates each sum to ``arch.mvm.accumulator_bits``, adds the
partial sums it accumulates onto (saturating again), and writes int32 partial sums or the
requantized int8 outputs, with a residual add of an L1 operand (the DPU ``add`` of a
`SCALAR` record) when the post-op says so. Every clamped sum is counted: where the int8
reference (exact sums) and the hardware can differ.

Readings the ISA leaves open, taken as the hardware would do them:

- rows of the row block beyond the row space of the window (``kh * width * cpad``, or the
  swICR packing) read ``fill``, like padding channels;
- a requantize with ``shift`` 0 adds no rounding term; the result is clamped to the
  record's ``[lo, hi]`` and then to int8 before the table lookup and the store.
"""

from __future__ import annotations

import numba
import numpy as np

from aipusim.isa import params as P
from aipusim.isa.tasks import (
    ADD_POSTS,
    CLAMP_LUTS,
    LUT_POSTS,
    LutKind,
    Mvm,
    Pool,
    PostOp,
    WeightLoad,
)
from aipusim.simulator.functional.context import NotYetWritten, TaskRun
from aipusim.simulator.functional.footprint import Access, merge, span

#: Bytes of one partial sum.
PSUM_BYTES = 4


def execute_weight_load(run: TaskRun) -> None:
    t = run.task
    assert isinstance(t, WeightLoad)
    mvm = run.arch.mvm
    rows, cols = t.rows_used, t.cols_used
    if not (0 < rows <= mvm.rows and 0 < cols <= mvm.cols and 0 <= t.weight_set < mvm.weight_sets):
        raise run.fail(
            f"rows_used/cols_used/weight_set must be 1-{mvm.rows}/1-{mvm.cols}/"
            f"0-{mvm.weight_sets - 1}, not {rows}/{cols}/{t.weight_set}"
        )
    if t.bytes < rows * cols:
        raise run.fail(
            f"bytes must be at least rows_used x cols_used ({rows * cols}), not {t.bytes}"
        )
    if t.src_rows:
        block = runtime_block(run, t)
    else:
        data, at = run.block(t.src_addr, rows * cols)
        block = data[at : at + rows * cols].view(np.int8).reshape(rows, cols)
    pcore = run.where.pcore
    run.mem.weights[pcore][t.weight_set, :rows, :cols] = block
    run.mem.loaded[pcore][t.weight_set] = (rows, cols)
    sums = block.sum(axis=0, dtype=np.int64) if t.col_sums else None
    run.mem.col_sums[pcore][t.weight_set] = sums
    run.accesses.append(Access(run.mem.spaces.imc(pcore), *span(t.weight_set, 1), True))


def runtime_block(run: TaskRun, t: WeightLoad) -> np.ndarray:
    """The ``rows_used x cols_used`` block of a run-time operand: ``copies`` diagonal
    copies of its strided ``src_rows x cols_used / copies`` source, zeros elsewhere."""
    copies, rows, cols = t.copies, t.src_rows, t.cols_used // max(1, t.copies)
    if copies < 1 or t.cols_used % copies or (copies - 1) * t.copy_rows + rows > t.rows_used:
        raise run.fail(
            f"copies x (copy_rows, cols_used / copies) must fit {t.rows_used} x "
            f"{t.cols_used}, not {copies} x ({t.copy_rows}, {cols}) of {rows} rows"
        )
    pitch = max(1, t.src_pitch)
    row_pitch = t.src_row_pitch or cols * pitch
    starts = (t.src_addr + np.arange(rows, dtype=np.int64)[:, None] * row_pitch
              + np.arange(cols, dtype=np.int64)[None, :] * pitch).reshape(-1)  # fmt: skip
    s, e = merge(np.sort(starts), np.sort(starts) + 1)
    data, delta = run.operand(Pool.L1, s, e, write=False)
    src = data[starts + delta].view(np.int8).reshape(rows, cols)
    block = np.zeros((t.rows_used, t.cols_used), np.int8)
    for i in range(copies):
        block[i * t.copy_rows : i * t.copy_rows + rows, i * cols : (i + 1) * cols] = src
    return block


# ----------------------------------------------------------------------- geometry


@numba.njit(cache=True)
def _walk(g, vectors, row0, nrows, mem, base, x_out, lo, hi, gather, cpitch):  # pragma: no cover
    """Every (vector, tap) of the task: copy its channels into ``x_out`` (``gather``) or
    widen each tile pixel's touched channel range ``[lo, hi)`` (footprint). Channel ``c``
    of a pixel is ``c * cpitch`` bytes from its first.

    ``g``: out_w, icr, kw, stride_w, cin, cpad, in_rows, in_w, upsample, kh, stride_h,
    dilation, pad_top, pad_left, swicr, in_pitch, in_row_pitch."""
    out_w, icr, kw, sw, cin, cpad = g[0], g[1], g[2], g[3], g[4], g[5]
    in_rows, in_w, up, kh, sh, dil = g[6], g[7], g[8], g[9], g[10], g[11]
    pt, pl, swicr, pitch, row_pitch = g[12], g[13], g[14], g[15], g[16]
    vx = (out_w + icr - 1) // icr
    width = kw + (icr - 1) * sw
    ky_len = ((width * cin + cpad - 1) // cpad) * cpad  # a window row's rows with swICR
    span_h = (in_rows - 1) * up + 1  # the tile spread by the upsampling
    span_w = (in_w - 1) * up + 1
    nch = cin if swicr else min(cin, cpad)
    for v in range(vectors):
        oy = v // vx
        ox0 = (v % vx) * icr
        for ky in range(kh):
            yy = oy * sh + ky * dil - pt
            if yy < 0 or yy >= span_h or yy % up != 0:
                continue
            y = yy // up
            for j in range(width):
                xx = ox0 * sw + j * dil - pl
                if xx < 0 or xx >= span_w or xx % up != 0:
                    continue
                x = xx // up
                rb = ky * ky_len + j * cin if swicr else (ky * width + j) * cpad
                c0 = max(0, row0 - rb)
                c1 = min(nch, row0 + nrows - rb)
                if c1 <= c0:
                    continue
                if gather:
                    pix = base + y * row_pitch + x * pitch
                    dst = rb - row0
                    for c in range(c0, c1):
                        x_out[v, dst + c] = mem[pix + c * cpitch]
                else:
                    if c0 < lo[y, x]:
                        lo[y, x] = c0
                    if c1 > hi[y, x]:
                        hi[y, x] = c1


def _layout(t: Mvm) -> np.ndarray:
    return np.array(
        [t.out_w, t.icr, t.kw, t.stride_w, t.cin, t.cpad, t.in_rows, t.in_w, t.upsample, t.kh,
         t.stride_h, t.dilation, t.pad_top, t.pad_left, 1 if t.swicr else 0, t.in_pitch,
         t.in_row_pitch],
        np.int64,
    )  # fmt: skip


def input_runs(t: Mvm) -> tuple[np.ndarray, np.ndarray]:
    """The bytes of the L1 tile an Mvm reads (program addresses), exactly per pixel."""
    g = _layout(t)
    rows, cols = max(t.in_rows, 0), max(t.in_w, 0)
    lo = np.full((rows, cols), 1 << 30, np.int64)
    hi = np.zeros((rows, cols), np.int64)
    dummy = np.zeros((1, 1), np.float32)
    _walk(g, t.vectors, t.row0, t.rows_used, np.zeros(1, np.int8), 0, dummy, lo, hi, False, 1)
    y, x = np.nonzero(hi > lo)
    base = t.in_addr + y * t.in_row_pitch + x * t.in_pitch
    return channel_runs(base, lo[y, x], hi[y, x], t.in_chan_pitch)


def channel_runs(
    base: np.ndarray, lo: np.ndarray, hi: np.ndarray, pitch: int
) -> tuple[np.ndarray, np.ndarray]:
    """The bytes of channels ``[lo, hi)`` of pixels at ``base``, channels ``pitch`` apart."""
    if pitch <= 1:
        return merge(base + lo, base + hi)
    n = hi - lo
    at = np.repeat(base + lo * pitch, n) + pitch * (
        np.arange(n.sum()) - np.repeat(n.cumsum() - n, n)
    )
    at = np.sort(at)
    return merge(at, at + 1)


def output_runs(t: Mvm, cout: int) -> tuple[np.ndarray, np.ndarray]:
    """The output bytes of a requantizing Mvm: ``cout`` channels of every pixel it makes."""
    return pixel_runs(t, cout, t.out_addr, t.out_pitch, t.out_row_pitch, t.out_chan_pitch)


def add_runs(t: Mvm, cout: int) -> tuple[np.ndarray, np.ndarray]:
    """The bytes of the residual operand a ``requant_add`` Mvm reads: the same pixels and
    channels as its outputs, in the operand's layout."""
    return pixel_runs(t, cout, t.add_addr, t.add_pitch, t.add_row_pitch)


def pixel_runs(
    t: Mvm, cout: int, addr: int, pitch: int, row_pitch: int, chan_pitch: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """``cout`` channels (``chan_pitch`` apart) of every output pixel of ``t`` in a layout
    at ``addr``."""
    vx = -(-t.out_w // t.icr)
    v = np.arange(t.vectors, dtype=np.int64)
    oy = np.repeat(v // vx, t.icr)
    ox = (np.repeat((v % vx) * t.icr, t.icr) + np.tile(np.arange(t.icr), t.vectors)).astype(
        np.int64
    )
    keep = ox < t.out_w
    starts = addr + oy[keep] * row_pitch + ox[keep] * pitch
    if chan_pitch > 1:
        return channel_runs(starts, np.zeros_like(starts), np.full_like(starts, cout), chan_pitch)
    return merge(starts, starts + cout)


# ----------------------------------------------------------------------- sums and output


@numba.njit(cache=True)
def _post(acc, psum, accumulate, lo_acc, hi_acc, mode, px, chan, ch, lut, use_lut, out, base,
          pitch, row_pitch, out_w, icr, vx, psum_out, b_mem, b_geo,
          add, cpitch):  # pragma: no cover - jitted  # fmt: skip
    """Saturate, accumulate, then write partial sums (mode 0) or requantized int8 (mode
    1), or the requantized int8 plus a residual operand (mode 2; mode 3: the table before
    the add instead of after it).

    Column ``col`` is pixel ``ox0 + px[col]``, channel ``chan[col]``; ``ch`` holds per
    channel: bias, mult, shift, rounding term, zo, lo, hi. Mode 2 reads operand byte ``b_geo
    = (base, pitch, row_pitch)`` of ``b_mem`` and adds with ``add`` = m0, m1, shift,
    rounding term, za, zb, zo, lo, hi (the DPU ``add``). Channels are ``cpitch`` bytes
    apart. Returns the clamped sums."""
    vectors, cols = acc.shape
    clamped = 0
    for v in range(vectors):
        oy = v // vx
        ox0 = (v % vx) * icr
        row = base + oy * row_pitch
        for col in range(cols):
            a = np.int64(acc[v, col])
            clamped += (a < lo_acc) | (a > hi_acc)
            a = min(max(a, lo_acc), hi_acc)
            if accumulate:
                a += psum[v, col]
                clamped += (a < lo_acc) | (a > hi_acc)
                a = min(max(a, lo_acc), hi_acc)
            if mode == 0:
                psum_out[v, col] = a
                continue
            ox = ox0 + px[col]
            if ox >= out_w:
                continue
            k = chan[col]
            r = (((a + ch[0, k]) * ch[1, k] + ch[3, k]) >> ch[2, k]) + ch[4, k]
            r = min(max(r, ch[5, k], -128), ch[6, k], 127)  # the record's clamp, then int8
            if mode == 3 and use_lut:
                r = lut[r + 128]
            if mode >= 2:
                bv = np.int64(b_mem[b_geo[0] + oy * b_geo[2] + ox * b_geo[1] + k])
                s = (add[0] * (r - add[4]) + add[1] * (bv - add[5]) + add[3]) >> add[2]
                r = min(max(min(max(s + add[6], add[7]), add[8]), -128), 127)
            if use_lut and mode != 3:
                r = lut[r + 128]
            out[row + ox * pitch + k * cpitch] = r
    return clamped


def requant_table(rec: np.ndarray) -> np.ndarray:
    """`CHANNEL` records as rows bias, mult, shift, rounding term, zo, lo, hi (int64, one
    column per channel) for the kernels; a shift of 0 rounds nothing."""
    shift = rec["shift"].astype(np.int64)
    rnd = np.where(shift > 0, np.left_shift(1, np.maximum(shift - 1, 0)), 0)
    rows = [rec[f].astype(np.int64) for f in ("bias", "mult")]
    rows += [shift, rnd, *(rec[f].astype(np.int64) for f in ("zo", "lo", "hi"))]
    return np.ascontiguousarray(np.stack(rows))


def add_table(rec: np.ndarray) -> np.ndarray:
    """A DPU ``add`` `SCALAR` record as m0, m1, shift, rounding term, za, zb, zo, lo, hi
    (int64) for the kernel; a shift of 0 rounds nothing."""
    r = rec[0]
    shift = int(r["shift"])
    rnd = (1 << shift) >> 1
    return np.array(
        [r["m0"], r["m1"], shift, rnd, r["za"], r["zb"], r["zo"], r["lo"], r["hi"]], np.int64
    )


def _check(run: TaskRun, t: Mvm) -> int:
    """The task's output channels per pixel (``cols_used / icr``), after the checks."""
    mvm = run.arch.mvm
    if not (0 < t.rows_used <= mvm.rows and 0 < t.cols_used <= mvm.cols):
        raise run.fail(
            f"rows_used/cols_used must be 1-{mvm.rows}/1-{mvm.cols}, "
            f"not {t.rows_used}/{t.cols_used}"
        )
    if not 0 <= t.weight_set < mvm.weight_sets:
        raise run.fail(f"weight_set must be 0-{mvm.weight_sets - 1}, not {t.weight_set}")
    if t.icr < 1 or t.cols_used % t.icr:
        raise run.fail(f"icr must be >= 1 and divide cols_used ({t.cols_used}), not {t.icr}")
    if min(t.kh, t.kw, t.stride_h, t.stride_w, t.dilation, t.upsample) < 1:
        raise run.fail("kh, kw, stride_h, stride_w, dilation and upsample must be >= 1")
    if min(t.cin, t.cpad, t.in_w, t.in_rows) < 1:
        raise run.fail(
            f"cin, cpad, in_w and in_rows must be >= 1, not {t.cin}, {t.cpad}, {t.in_w} and "
            f"{t.in_rows}"
        )
    if t.in_chan_pitch < 1 or t.out_chan_pitch < 1:
        raise run.fail(
            f"in_chan_pitch and out_chan_pitch must be >= 1, not {t.in_chan_pitch} and "
            f"{t.out_chan_pitch}"
        )
    if t.out_w < 1 or t.vectors < 1:
        raise run.fail(f"out_w and vectors must be >= 1, not {t.out_w} and {t.vectors}")
    # the weight set is an access before it is read: a WeightLoad that nothing orders
    # before this task is reported as the hazard it is, not as a missing load
    run.accesses.append(Access(run.mem.spaces.imc(run.where.pcore), *span(t.weight_set, 1), False))
    rows, cols = run.mem.loaded[run.where.pcore][t.weight_set]
    if t.rows_used > rows or t.cols_used > cols:
        raise NotYetWritten(
            f"{run.where.label}: "
            f"reads {t.rows_used} x {t.cols_used} weights of set {t.weight_set}, but the last "
            f"WeightLoad of that set wrote {rows} x {cols}"
        )
    return t.cols_used // t.icr


def execute_mvm(run: TaskRun) -> None:
    t = run.task
    assert isinstance(t, Mvm)
    cout = _check(run, t)
    pcore = run.where.pcore
    # gather the input vectors
    x = np.empty((t.vectors, t.rows_used), np.float32)
    s, e = input_runs(t)
    if len(s):
        data, delta = run.operand(Pool.L1, s, e, write=False)
    else:
        data, delta = np.zeros(1, np.uint8), 0
    x.fill(t.fill - 256 if t.fill >= 128 else t.fill)  # an int8, two's complement
    g = _layout(t)
    dummy = np.zeros((1, 1), np.int64)
    _walk(g, t.vectors, t.row0, t.rows_used, data.view(np.int8), t.in_addr + delta, x,
          dummy, dummy, True, t.in_chan_pitch)  # fmt: skip
    w = run.mem.weights[pcore][t.weight_set, : t.rows_used, : t.cols_used]
    acc = x @ w
    if t.offset_fill:
        sums = run.mem.col_sums[pcore][t.weight_set]
        if sums is None:
            raise run.fail(
                f"offset_fill needs the column sums of weight set {t.weight_set}, but its last "
                f"WeightLoad kept none (col_sums 0)"
            )
        # the inputs less fill: exact in int64 (the float32 sum is exact, see above)
        fill = t.fill - 256 if t.fill >= 128 else t.fill
        acc = acc.astype(np.int64) - fill * sums[: t.cols_used]
    macs = t.vectors * t.rows_used * t.cols_used
    run.counters.mvm_macs += macs
    if run.value_aware:
        nz_in = np.count_nonzero(x, axis=0).astype(np.int64)
        nz_w = np.count_nonzero(w, axis=1).astype(np.int64)
        run.active = int(nz_in @ nz_w)
        run.counters.mvm_active += run.active
    # partial sums in, parameters, table
    n_psum = t.vectors * t.cols_used
    psum = np.zeros((1, 1), np.int64)
    if t.accumulate:
        pdata, pat = run.block(t.psum_addr, n_psum * PSUM_BYTES)
        raw = pdata[pat : pat + n_psum * PSUM_BYTES].view("<i4")
        psum = raw.astype(np.int64).reshape(t.vectors, t.cols_used)
    ch = np.zeros((7, 1), np.int64)
    lut = np.zeros(1, np.int64)
    use_lut = t.post in LUT_POSTS and t.lut not in CLAMP_LUTS and t.lut != LutKind.NONE
    if t.post != PostOp.NONE:
        ch = requant_table(run.records(t.param_addr, P.CHANNEL, cout))
        if use_lut:
            lut = run.table(t.lut_addr)
    b_mem, b_geo, add = np.zeros(1, np.int8), np.zeros(3, np.int64), np.zeros(9, np.int64)
    if t.post in ADD_POSTS:
        add = add_table(run.records(t.add_param_addr, P.SCALAR, 1))
        s, e = add_runs(t, cout)
        bdata, bdelta = run.operand(Pool.L1, s, e, write=False)
        b_mem = bdata.view(np.int8)
        b_geo = np.array([t.add_addr + bdelta, t.add_pitch, t.add_row_pitch], np.int64)
    cols = np.arange(t.cols_used, dtype=np.int64)
    lo_acc, hi_acc = run.arch.mvm.accumulator_range
    vx = -(-t.out_w // t.icr)
    if t.post == PostOp.NONE:
        out = np.zeros(1, np.int8)
        base = 0
        psum_out = np.empty((t.vectors, t.cols_used), np.int64)
    else:
        s, e = output_runs(t, cout)
        odata, delta = run.operand(Pool.L1, s, e, write=True)
        out, base = odata.view(np.int8), t.out_addr + delta
        psum_out = np.zeros((1, 1), np.int64)
    mode = 0 if t.post == PostOp.NONE else 2 if t.post in ADD_POSTS else 1
    if t.post == PostOp.REQUANT_LUT_ADD:
        mode = 3
    run.counters.saturations += _post(
        acc, psum, bool(t.accumulate), lo_acc, hi_acc, mode, cols // cout, cols % cout, ch, lut,
        use_lut, out, base, t.out_pitch, t.out_row_pitch, t.out_w, t.icr, vx, psum_out, b_mem,
        b_geo, add, t.out_chan_pitch,
    )  # fmt: skip
    if mode == 0:
        pdata, pat = run.block(t.psum_addr, n_psum * PSUM_BYTES, write=True)
        pdata[pat : pat + n_psum * PSUM_BYTES] = psum_out.astype("<i4").view(np.uint8).reshape(-1)


__all__ = [
    "add_runs",
    "add_table",
    "execute_mvm",
    "execute_weight_load",
    "input_runs",
    "output_runs",
    "pixel_runs",
    "requant_table",
    "runtime_block",
]
