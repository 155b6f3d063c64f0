"""`DwpuOp`: depthwise conv, pooling and resize over a channels-last L1 tile (numba).

Per `aipusim.isa.tasks.DwpuOp`; the parameter blocks are those of `aipusim.isa.params`
(``dwconv``: a `CHANNEL` per channel with its ``zi``; ``avgpool``: a `SCALAR` then its `COUNT`
records; ``globalpool`` and ``resize_linear``: a `SCALAR`). Readings the ISA leaves open:

- ``dwconv`` sums ``(x - zi) * w`` over the window's pixels in the tile: a pixel outside
  it reads its channel's ``zi`` and adds nothing, as padding at the input's zero point does
  (a per-channel input zero point, MobileNetV2's ``quantize_dw_channel_wise``, has no one
  ``fill``);
- a max pool whose window holds no pixel of the tile gives -128; an average pool whose
  window holds none (without ``count_include_pad``) gives ``zo``;
- the global kinds reduce the whole ``h x w`` tile to one pixel (``out_h = out_w = 1``);
- a ``lut`` relu/clip is the clamp of the kind's record (``lo``/``hi`` of its `CHANNEL` or
  `SCALAR`); the max pools and ``resize_nearest`` have no record, so they refuse it; any
  other ``lut`` is the table at ``lut_addr``;
- results are clamped to int8 after the record's ``[lo, hi]``; a requantize with ``shift``
  0 adds no rounding term.
"""

from __future__ import annotations

import numba
import numpy as np

from aipusim.isa import params as P
from aipusim.isa.tasks import CLAMP_LUTS, DwpuKind, DwpuOp, LutKind, Pool
from aipusim.simulator.functional.context import TaskRun
from aipusim.simulator.functional.footprint import merge, runs

_MODES = {
    DwpuKind.DWCONV: 0,
    DwpuKind.MAXPOOL: 1,
    DwpuKind.AVGPOOL: 2,
    DwpuKind.GLOBALPOOL: 3,
    DwpuKind.GLOBALMAX: 4,
}
_GLOBAL = frozenset({DwpuKind.GLOBALPOOL, DwpuKind.GLOBALMAX})
_NO_RECORD = frozenset({DwpuKind.MAXPOOL, DwpuKind.GLOBALMAX, DwpuKind.RESIZE_NEAREST})


# Numba caches a kernel with the helpers it calls compiled in, and re-compiles only when
# the kernel's own file changes: so the helpers of this file's kernels live here.
@numba.njit(cache=True)
def _rshift(v, s):  # pragma: no cover - jitted
    """``(v + 2**(s-1)) >> s`` (round half up); a shift of 0 rounds nothing."""
    return (v + ((np.int64(1) << s) >> 1)) >> s


@numba.njit(cache=True)
def _finish(r, lo, hi, lut, use_lut):  # pragma: no cover - jitted
    """The record's clamp, then int8, then the table."""
    r = min(max(r, lo, -128), hi, 127)
    return lut[r + 128] if use_lut else r


@numba.njit(cache=True)
def _windows(mem, geo, out, mode, wts, ch, counts, lut, use_lut):  # pragma: no cover - jitted
    """Every output pixel and channel of a window kind (``mode`` as `_MODES`).

    ``geo``: in base, in_pitch, in_row_pitch, h, w, channels, out base, out_pitch,
    out_row_pitch, out_h, out_w, kh, kw, stride_h, stride_w, pad_top, pad_left, fill,
    count_include_pad. ``ch`` per channel: bias, mult, shift, zo, lo, hi, zi (pools: row 0
    holds m0 as mult, shift, zo, lo, hi and za as zi)."""
    base, pitch, row_pitch, h, w, chans = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5]
    obase, opitch, orow, out_h, out_w = geo[6], geo[7], geo[8], geo[9], geo[10]
    # geo[17], fill, is read by no kind: padding adds nothing to a sum and never wins a max
    kh, kw, sh, sw, pt, pl, include_pad = (
        geo[11], geo[12], geo[13], geo[14], geo[15], geo[16], geo[18],
    )  # fmt: skip
    if mode >= 3:  # global: the whole tile is the window
        kh, kw, sh, sw, pt, pl = h, w, 1, 1, 0, 0
    for oy in range(out_h):
        for ox in range(out_w):
            y0 = oy * sh - pt
            x0 = ox * sw - pl
            for c in range(chans):
                rec = c if mode == 0 else 0
                acc = np.int64(0)
                best = np.int64(-129)
                n = 0
                for i in range(kh):
                    y = y0 + i
                    for j in range(kw):
                        x = x0 + j
                        inside = y >= 0 and y < h and x >= 0 and x < w
                        if mode == 0:
                            v = ch[c, 6]  # padding adds nothing, whatever the channel's zi
                            if inside:
                                v = np.int64(mem[base + y * row_pitch + x * pitch + c])
                            acc += (v - ch[c, 6]) * wts[c, i * kw + j]
                        elif inside:
                            v = np.int64(mem[base + y * row_pitch + x * pitch + c])
                            n += 1
                            if v > best:
                                best = v
                            acc += v - ch[0, 6]
                if mode == 0:
                    r = _rshift((acc + ch[rec, 0]) * ch[rec, 1], ch[rec, 2]) + ch[rec, 3]
                elif mode == 1 or mode == 4:
                    r = best if n > 0 else np.int64(-128)
                elif mode == 2:
                    k = kh * kw if include_pad else n
                    if k == 0:
                        r = ch[0, 3]
                    else:
                        r = _rshift(acc * counts[k - 1, 0], counts[k - 1, 1]) + ch[0, 3]
                else:
                    r = _rshift(acc * ch[0, 1], ch[0, 2]) + ch[0, 3]
                out[obase + oy * orow + ox * opitch + c] = _finish(
                    r, ch[rec, 4], ch[rec, 5], lut, use_lut
                )


@numba.njit(cache=True)
def _resize(mem, geo, out, rows, cols, linear, ch, lut, use_lut):  # pragma: no cover - jitted
    """Every output pixel of a resize; ``rows``/``cols``: i0, i1, w per output row/column."""
    base, pitch, row_pitch, chans = geo[0], geo[1], geo[2], geo[5]
    obase, opitch, orow, out_h, out_w = geo[6], geo[7], geo[8], geo[9], geo[10]
    one = np.int64(1) << 10
    za = ch[0, 6]
    for oy in range(out_h):
        r0, r1, wr = rows[oy, 0], rows[oy, 1], rows[oy, 2]
        for ox in range(out_w):
            c0, c1, wc = cols[ox, 0], cols[ox, 1], cols[ox, 2]
            for c in range(chans):
                if not linear:
                    r = np.int64(mem[base + r0 * row_pitch + c0 * pitch + c])
                else:
                    p00 = np.int64(mem[base + r0 * row_pitch + c0 * pitch + c]) - za
                    p10 = np.int64(mem[base + r1 * row_pitch + c0 * pitch + c]) - za
                    p01 = np.int64(mem[base + r0 * row_pitch + c1 * pitch + c]) - za
                    p11 = np.int64(mem[base + r1 * row_pitch + c1 * pitch + c]) - za
                    left = p00 * (one - wr) + p10 * wr
                    right = p01 * (one - wr) + p11 * wr
                    v = left * (one - wc) + right * wc
                    r = _rshift(v * ch[0, 1], ch[0, 2]) + ch[0, 3]
                out[obase + oy * orow + ox * opitch + c] = _finish(
                    r, ch[0, 4], ch[0, 5], lut, use_lut
                )


def _touched(n_out: int, stride: int, pad: int, k: int, size: int) -> np.ndarray:
    """Input rows (or columns) the windows of ``n_out`` outputs reach inside ``[0, size)``."""
    hit = np.zeros(max(size, 0), bool)
    for o in range(n_out):
        lo = max(o * stride - pad, 0)
        hit[lo : max(o * stride - pad + k, lo)] = True
    return np.flatnonzero(hit)


def _pixels(addr: int, row_pitch: int, pitch: int, ys: np.ndarray, xs: np.ndarray, chans: int):
    starts = (addr + ys[:, None] * row_pitch + xs[None, :] * pitch).reshape(-1)
    return merge(starts, starts + chans)


def _records(run: TaskRun, t: DwpuOp) -> tuple[np.ndarray, np.ndarray]:
    """(per-channel or row-0 parameter matrix, COUNT records) of the task's kind."""
    ch = np.zeros((max(t.channels, 1), 7), np.int64)
    ch[:, 4], ch[:, 5] = -128, 127
    counts = np.zeros((1, 2), np.int64)
    if t.kind is DwpuKind.DWCONV:
        rec = run.records(t.param_addr, P.CHANNEL, t.channels)
        for i, f in enumerate(("bias", "mult", "shift", "zo", "lo", "hi", "zi")):
            ch[:, i] = rec[f]
    elif t.kind in (DwpuKind.AVGPOOL, DwpuKind.GLOBALPOOL, DwpuKind.RESIZE_LINEAR):
        n = t.kh * t.kw if t.kind is DwpuKind.AVGPOOL else 0
        sc = run.records(t.param_addr, P.SCALAR, 1)[0]
        for i, f in ((1, "m0"), (2, "shift"), (3, "zo"), (4, "lo"), (5, "hi"), (6, "za")):
            ch[0, i] = sc[f]
        if n:
            data, at = run.block(t.param_addr + P.SCALAR.itemsize, n * P.COUNT.itemsize)
            cnt = P.read(data, at, P.COUNT, n)
            counts = np.stack([cnt["mult"], cnt["shift"]], axis=1).astype(np.int64)
    return ch, counts


def _coords(run: TaskRun, t: DwpuOp) -> tuple[np.ndarray, np.ndarray]:
    """The COORD tables of a resize (i0, i1, w per output row, then per column), checked."""
    table = run.records(t.weight_addr, P.COORD, t.out_h + t.out_w)
    mat = np.stack([table["i0"], table["i1"], table["w"]], axis=1).astype(np.int64)
    rows, cols = mat[: t.out_h], mat[t.out_h :]
    if t.kind is DwpuKind.RESIZE_NEAREST:
        rows[:, 1], cols[:, 1] = rows[:, 0], cols[:, 0]
    for what, m, size in (("row", rows, t.h), ("column", cols, t.w)):
        if len(m) and (m[:, :2].min() < 0 or m[:, :2].max() >= size):
            raise run.fail(
                f"resize source {what}s must lie in 0-{size - 1}, not "
                f"{int(m[:, :2].min())}..{int(m[:, :2].max())}"
            )
    return rows, cols


def execute_dwpu(run: TaskRun) -> None:
    t = run.task
    assert isinstance(t, DwpuOp)
    if min(t.channels, t.h, t.w, t.out_h, t.out_w) < 1:
        raise run.fail("channels, h, w, out_h and out_w must be >= 1")
    if t.kind in _GLOBAL and (t.out_h, t.out_w) != (1, 1):
        raise run.fail(f"a {t.kind.value} makes one pixel: out_h x out_w must be 1 x 1")
    clamp = t.lut in CLAMP_LUTS
    if clamp and t.kind in _NO_RECORD:
        raise run.fail(f"lut {t.lut.value} needs a clamp record, which a {t.kind.value} has not")
    use_lut = t.lut is not LutKind.NONE and not clamp
    lut = run.table(t.lut_addr) if use_lut else np.zeros(1, np.int64)
    ch, counts = _records(run, t)
    sw = t.stride_w or t.stride
    resize = t.kind in (DwpuKind.RESIZE_NEAREST, DwpuKind.RESIZE_LINEAR)
    if resize:
        rows, cols = _coords(run, t)
        ys = np.unique(rows[:, :2] if t.kind is DwpuKind.RESIZE_LINEAR else rows[:, 0])
        xs = np.unique(cols[:, :2] if t.kind is DwpuKind.RESIZE_LINEAR else cols[:, 0])
    elif t.kind in _GLOBAL:
        ys, xs = np.arange(t.h), np.arange(t.w)
    else:
        if min(t.kh, t.kw, t.stride, sw) < 1:
            raise run.fail("kh, kw and the strides of a window kind must be >= 1")
        ys = _touched(t.out_h, t.stride, t.pad_top, t.kh, t.h)
        xs = _touched(t.out_w, sw, t.pad_left, t.kw, t.w)
    s, e = _pixels(t.in_addr, t.in_row_pitch, t.in_pitch, ys, xs, t.channels)
    data, d_in = run.operand(Pool.L1, s, e, write=False) if len(s) else (run.mem.data[0], 0)
    wts = np.zeros((1, 1), np.int64)
    if t.kind is DwpuKind.DWCONV:
        wdata, wat = run.block(t.weight_addr, t.channels * t.kh * t.kw)
        n = t.channels * t.kh * t.kw
        wts = wdata[wat : wat + n].view(np.int8).astype(np.int64).reshape(t.channels, -1)
    s, e = runs(t.out_addr, t.channels, [(t.out_h, t.out_row_pitch), (t.out_w, t.out_pitch)])
    odata, d_out = run.operand(Pool.L1, s, e, write=True)
    geo = np.array(
        [t.in_addr + d_in, t.in_pitch, t.in_row_pitch, t.h, t.w, t.channels, t.out_addr + d_out,
         t.out_pitch, t.out_row_pitch, t.out_h, t.out_w, t.kh, t.kw, t.stride, sw, t.pad_top,
         t.pad_left, t.fill - 256 if t.fill >= 128 else t.fill, t.count_include_pad],
        np.int64,
    )  # fmt: skip
    mem8, out8 = data.view(np.int8), odata.view(np.int8)
    if resize:
        linear = t.kind is DwpuKind.RESIZE_LINEAR
        _resize(mem8, geo, out8, rows, cols, linear, ch, lut, use_lut)
    else:
        _windows(mem8, geo, out8, _MODES[t.kind], wts, ch, counts, lut, use_lut)


__all__ = ["execute_dwpu"]
