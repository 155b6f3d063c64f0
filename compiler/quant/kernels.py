"""Integer kernels of the int8 reference, computed the way the AIPU computes them.

Conventions (the hardware's, docs/architecture.md §5, stage 4):

- A quantized value is ``real = scale * (q - zero_point)``; activations are int8 with a
  zero point, weights int8 symmetric (zero point 0, per output channel), biases int32 with
  scale ``s_in * s_w``.
- MAC ops subtract the input zero point, multiply int8 x int8 and accumulate in int32.
  The matrix products run as float32 BLAS GEMMs on the zero-point-centred integers, over
  slices of at most `EXACT_F32_TERMS` = 512 inputs: every product (|q - zp| <= 255,
  |w| <= 127) and every partial sum of a slice (<= 512 * 32385 < 2**24) is an integer that
  float32 holds exactly, in any summation order; the slices are then summed in float64
  (exact below 2**53). The result is bit-identical to an int32 accumulator, at BLAS speed.
  `conv_acc_reference` is the slow int64 loop the tests compare against.
- Requantize (DPU): ``q_out = clamp(zp_out + ((acc + bias) * m + 2**(n-1)) >> n)`` with a
  fixed-point multiplier m in [2**30, 2**31) and a right shift n, i.e. round half up
  (towards +inf) after the multiply. `quantize_multiplier` turns a real multiplier into
  (m, n).
- Non-linear functions are 256-entry int8 lookup tables (`build_lut`), built from the
  float function and the input/output quantization, indexed by ``q + 128``.

Window kernels (im2col, depthwise, pooling) are numba-jitted (``cache=True``) and generic
over dtype: the float reference executor (`calibrate.run_fp32`) reuses them in float32.

Example:
    >>> import numpy as np
    >>> m, n = quantize_multiplier(np.array([0.5]))
    >>> int(m[0]), int(n[0])
    (1073741824, 31)
    >>> requantize(np.array([[[3, -3]]]), np.zeros(1, np.int64), m, n, np.zeros(1, np.int64))
    array([[[ 2, -1]]], dtype=int8)
"""

from __future__ import annotations

import numba
import numpy as np

from aipusim.compiler.quant.fixedpoint import (  # numba-free, shared with the quantizer
    MAX_SHIFT,
    MULT_BITS,
    QMAX,
    QMIN,
    RESIZE_WEIGHT_BITS,
    SOFTMAX_EXP_BITS,
    Int8Lut,
    build_lut,
    quantize_multiplier,
)

#: Most products one float32 GEMM may sum and stay exact: 512 * 255 * 127 < 2**24.
EXACT_F32_TERMS = 512


# ----------------------------------------------------------------------- fixed point


@numba.njit(cache=True)
def _requantize(acc, bias, mult, shift, zp, lo, hi, out):  # pragma: no cover - jitted
    nb, nc, nl = acc.shape
    for b in range(nb):
        for c in range(nc):
            m = mult[c]
            s = shift[c]
            rnd = np.int64(1) << (s - 1)
            off = bias[c]
            z = zp[c]
            for i in range(nl):
                v = ((acc[b, c, i] + off) * m + rnd) >> s
                v += z
                if v < lo:
                    v = lo
                elif v > hi:
                    v = hi
                out[b, c, i] = v


def requantize(
    acc: np.ndarray,
    bias: np.ndarray,
    mult: np.ndarray,
    shift: np.ndarray,
    zp_out: np.ndarray,
    lo: int = QMIN,
    hi: int = QMAX,
) -> np.ndarray:
    """int32 accumulators (batch, channel, positions) -> int8, per-channel parameters.

    ``bias``, ``mult``, ``shift``, ``zp_out`` have one entry per channel (axis 1);
    ``lo``/``hi`` clamp in the int8 domain (a fused Relu/Clip narrows them).
    """
    acc3 = np.ascontiguousarray(acc, dtype=np.int64)
    assert acc3.ndim == 3, acc3.shape
    out = np.empty(acc3.shape, np.int8)
    c = acc3.shape[1]
    _requantize(
        acc3,
        np.broadcast_to(np.asarray(bias, np.int64), (c,)).copy(),
        np.broadcast_to(np.asarray(mult, np.int64), (c,)).copy(),
        np.broadcast_to(np.asarray(shift, np.int64), (c,)).copy(),
        np.broadcast_to(np.asarray(zp_out, np.int64), (c,)).copy(),
        np.int64(lo),
        np.int64(hi),
        out,
    )
    return out


def rounding_shift(v: np.ndarray, shift: int) -> np.ndarray:
    """``(v + 2**(shift-1)) >> shift`` on int64: the requantize unit's rounding.

    >>> rounding_shift(np.array([5, -5, 6]), 1)
    array([ 3, -2,  3])
    """
    return (v.astype(np.int64) + (np.int64(1) << (shift - 1))) >> shift


def saturate_int8(v: np.ndarray) -> np.ndarray:
    return np.clip(v, QMIN, QMAX).astype(np.int8)


def saturate_int16(v: np.ndarray) -> np.ndarray:
    """The DPU adders' 16-bit outputs (`quantize.wide_tensors`)."""
    return np.clip(v, -32768, 32767).astype(np.int16)


# ----------------------------------------------------------------------- windows


@numba.njit(cache=True)
def _im2col(x, kh, kw, sh, sw, pt, pl, dh, dw, ho, wo, out):  # pragma: no cover - jitted
    c_in, h, w = x.shape
    for c in range(c_in):
        for i in range(kh):
            for j in range(kw):
                row = (c * kh + i) * kw + j
                for oy in range(ho):
                    iy = oy * sh - pt + i * dh
                    base = oy * wo
                    if iy < 0 or iy >= h:
                        for ox in range(wo):
                            out[row, base + ox] = 0
                        continue
                    for ox in range(wo):
                        ix = ox * sw - pl + j * dw
                        if ix < 0 or ix >= w:
                            out[row, base + ox] = 0
                        else:
                            out[row, base + ox] = x[c, iy, ix]


@numba.njit(cache=True)
def _depthwise(x, w, mult, sh, sw, pt, pl, dh, dw, out):  # pragma: no cover - jitted
    n_b, c_out, ho, wo = out.shape
    h, wi = x.shape[2], x.shape[3]
    kh, kw = w.shape[2], w.shape[3]
    for b in range(n_b):
        for co in range(c_out):
            c = co // mult
            for oy in range(ho):
                for ox in range(wo):
                    acc = out[b, co, oy, ox]
                    for i in range(kh):
                        iy = oy * sh - pt + i * dh
                        if iy < 0 or iy >= h:
                            continue
                        for j in range(kw):
                            ix = ox * sw - pl + j * dw
                            if ix >= 0 and ix < wi:
                                acc += x[b, c, iy, ix] * w[co, 0, i, j]
                    out[b, co, oy, ox] = acc


@numba.njit(cache=True)
def _maxpool(x, kh, kw, sh, sw, pt, pl, dh, dw, out):  # pragma: no cover - jitted
    n_b, c_n, ho, wo = out.shape
    h, wi = x.shape[2], x.shape[3]
    for b in range(n_b):
        for c in range(c_n):
            for oy in range(ho):
                for ox in range(wo):
                    m = out[b, c, oy, ox]
                    for i in range(kh):
                        iy = oy * sh - pt + i * dh
                        if iy < 0 or iy >= h:
                            continue
                        for j in range(kw):
                            ix = ox * sw - pl + j * dw
                            if ix >= 0 and ix < wi and x[b, c, iy, ix] > m:
                                m = x[b, c, iy, ix]
                    out[b, c, oy, ox] = m


@numba.njit(cache=True)
def _pool_sum(x, kh, kw, sh, sw, pt, pl, include_pad, out, count):  # pragma: no cover
    n_b, c_n, ho, wo = out.shape
    h, wi = x.shape[2], x.shape[3]
    for oy in range(ho):
        for ox in range(wo):
            k = 0
            for i in range(kh):
                iy = oy * sh - pt + i
                for j in range(kw):
                    ix = ox * sw - pl + j
                    inside = iy >= 0 and iy < h and ix >= 0 and ix < wi
                    if inside or include_pad:
                        k += 1
            count[oy, ox] = k
    for b in range(n_b):
        for c in range(c_n):
            for oy in range(ho):
                for ox in range(wo):
                    acc = out[b, c, oy, ox]
                    for i in range(kh):
                        iy = oy * sh - pt + i
                        if iy < 0 or iy >= h:
                            continue
                        for j in range(kw):
                            ix = ox * sw - pl + j
                            if ix >= 0 and ix < wi:
                                acc += x[b, c, iy, ix]
                    out[b, c, oy, ox] = acc


def exact_int_matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``a @ b`` of integer-valued float32 matrices (|a| <= 255, |b| <= 127), exactly, in
    float64: float32 GEMMs over slices of `EXACT_F32_TERMS` of the inner dimension.

    >>> a = np.full((1, 2000), 255, np.float32); b = np.full((2000, 1), -127, np.float32)
    >>> int(exact_int_matmul(a, b)[0, 0]) == 2000 * 255 * -127
    True
    """
    k = a.shape[-1]
    shape = (*a.shape[:-1], b.shape[-1])
    res = np.zeros(shape, np.float64) if out is None else out
    if out is not None:
        res[...] = 0
    for k0 in range(0, k, EXACT_F32_TERMS):
        k1 = min(k0 + EXACT_F32_TERMS, k)
        res += np.matmul(a[..., k0:k1], b[k0:k1])
    return res


def exact_int_batch_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` (numpy matmul broadcasting over leading dims) of integer arrays with
    |a| <= 255 and |b| <= 128, exactly, as int64: float32 GEMMs over slices of 512 inner
    terms (every partial sum < 2**24), summed in float64.

    >>> a = np.full((2, 1, 700), -255); b = np.full((2, 700, 3), 128)
    >>> int(exact_int_batch_matmul(a, b)[1, 0, 2]) == 700 * -255 * 128
    True
    """
    k = a.shape[-1]
    af, bf = a.astype(np.float32), b.astype(np.float32)
    total = None
    for k0 in range(0, k, EXACT_F32_TERMS):
        part = np.matmul(af[..., k0 : k0 + EXACT_F32_TERMS], bf[..., k0 : k0 + EXACT_F32_TERMS, :])
        total = part.astype(np.float64) if total is None else total + part
    assert total is not None
    return np.rint(total).astype(np.int64)


def conv_accumulate(
    x: np.ndarray,
    w: np.ndarray,
    *,
    strides: tuple[int, int],
    pads: tuple[int, int, int, int],
    dilations: tuple[int, int],
    group: int,
    out_hw: tuple[int, int],
    acc_dtype: type,
) -> np.ndarray:
    """Conv2d sums ``sum(x * w)`` with zero padding, NCHW, any group count.

    ``x`` must already be centred (zero point subtracted) so that padding with 0 is
    padding with real zero. ``acc_dtype`` float64 gives exact integer sums of int8 operands
    (float32 GEMM slices, see the module
    docstring), float32 the float reference.
    """
    n_b, c_in, _, _ = x.shape
    c_out, cpg, kh, kw = w.shape
    ho, wo = out_hw
    sh, sw = strides
    pt, pl = pads[0], pads[1]
    dh, dw = dilations
    exact = np.dtype(acc_dtype) == np.float64
    # Exact integer mode computes in float32 slices; the float reference in float32 too.
    work = np.float32
    if group > 1 and cpg == 1:
        # At most kh*kw products per output: float32 is exact for int8 operands.
        out = np.zeros((n_b, c_out, ho, wo), work)
        xs = np.ascontiguousarray(x, work)
        ws = np.ascontiguousarray(w, work)
        _depthwise(xs, ws, c_out // c_in, sh, sw, pt, pl, dh, dw, out)
        assert not exact or kh * kw <= EXACT_F32_TERMS
        return out.astype(acc_dtype, copy=False)
    out = np.empty((n_b, c_out, ho * wo), acc_dtype)
    opg = c_out // group
    wmat = np.ascontiguousarray(w, work).reshape(group, opg, cpg * kh * kw)
    pointwise = kh == kw == 1 and sh == sw == 1 and not any(pads)
    cols = None if pointwise else np.empty((cpg * kh * kw, ho * wo), work)
    xs = np.ascontiguousarray(x, work)
    for b in range(n_b):
        for g in range(group):
            xg = xs[b, g * cpg : (g + 1) * cpg]
            if pointwise:
                mat = xg.reshape(cpg, ho * wo)
            else:
                _im2col(xg, kh, kw, sh, sw, pt, pl, dh, dw, ho, wo, cols)
                mat = cols
            dst = out[b, g * opg : (g + 1) * opg]
            if exact:
                exact_int_matmul(wmat[g], mat, out=dst)
            else:
                np.matmul(wmat[g], mat, out=dst)
    return out.reshape(n_b, c_out, ho, wo)


def conv_acc_reference(
    xc: np.ndarray,
    w: np.ndarray,
    strides: tuple[int, int],
    pads: tuple[int, int, int, int],
    dilations: tuple[int, int],
    group: int,
) -> np.ndarray:
    """Slow, obviously-correct int64 conv sums (for tests): pad, then loop over taps."""
    n_b, _c_in, h, wi = xc.shape
    c_out, cpg, kh, kw = w.shape
    xp = np.pad(xc.astype(np.int64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    ho = (h + pads[0] + pads[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    wo = (wi + pads[1] + pads[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    out = np.zeros((n_b, c_out, ho, wo), np.int64)
    opg = c_out // group
    for co in range(c_out):
        g = co // opg
        for ci in range(cpg):
            for i in range(kh):
                for j in range(kw):
                    ys = i * dilations[0]
                    xs = j * dilations[1]
                    patch = xp[
                        :,
                        g * cpg + ci,
                        ys : ys + strides[0] * (ho - 1) + 1 : strides[0],
                        xs : xs + strides[1] * (wo - 1) + 1 : strides[1],
                    ]
                    out[:, co] += patch * np.int64(w[co, ci, i, j])
    return out


def conv_transpose_accumulate(
    x: np.ndarray,
    w: np.ndarray,
    *,
    strides: tuple[int, int],
    pads: tuple[int, int, int, int],
    dilations: tuple[int, int],
    group: int,
    out_hw: tuple[int, int],
    acc_dtype: type,
) -> np.ndarray:
    """ConvTranspose2d sums, NCHW; ``w`` is ONNX's (Cin, Cout/group, kh, kw).

    Per group, one GEMM ``w_g^T @ x_g`` gives every tap's contribution of every input
    pixel (col2im's columns); each of the kh*kw taps is then scattered with stride into
    the full output, which is cropped by ``pads`` (top, left) to ``out_hw`` (anything
    beyond the full extent, from ``output_padding``, stays 0). ``acc_dtype`` float64 with
    centred int8 operands is exact (float32 GEMM slices, float64 tap sums of at most
    kh*kw*Cin/group products); float32 is the float reference.
    """
    n_b, c_in, h, wi = x.shape
    _, opg, kh, kw = w.shape
    cpg = c_in // group
    c_out = opg * group
    ho, wo = out_hw
    sh, sw = strides
    dh, dw = dilations
    pt, pl = pads[0], pads[1]
    full_h = max(pt + ho, (h - 1) * sh + (kh - 1) * dh + 1)
    full_w = max(pl + wo, (wi - 1) * sw + (kw - 1) * dw + 1)
    exact = np.dtype(acc_dtype) == np.float64
    out = np.zeros((n_b, c_out, full_h, full_w), acc_dtype)
    # (group, opg*kh*kw, cpg): the transposed weight of each group, a GEMM left operand.
    wt = np.ascontiguousarray(
        np.asarray(w, np.float32).reshape(group, cpg, opg * kh * kw).transpose(0, 2, 1)
    )
    xs = np.ascontiguousarray(x, np.float32)
    for b in range(n_b):
        for g in range(group):
            xg = xs[b, g * cpg : (g + 1) * cpg].reshape(cpg, h * wi)
            cols = exact_int_matmul(wt[g], xg) if exact else wt[g] @ xg
            cols = cols.reshape(opg, kh, kw, h, wi)
            dst = out[b, g * opg : (g + 1) * opg]
            for i in range(kh):
                for j in range(kw):
                    y0, x0 = i * dh, j * dw
                    dst[:, y0 : y0 + (h - 1) * sh + 1 : sh, x0 : x0 + (wi - 1) * sw + 1 : sw] += (
                        cols[:, i, j]
                    )
    return out[:, :, pt : pt + ho, pl : pl + wo]


def conv_transpose_acc_reference(
    xc: np.ndarray,
    w: np.ndarray,
    strides: tuple[int, int],
    pads: tuple[int, int, int, int],
    dilations: tuple[int, int],
    group: int,
    output_padding: tuple[int, int] = (0, 0),
) -> np.ndarray:
    """Slow int64 ConvTranspose sums (for tests), by the textbook identity: a conv with
    the flipped, transposed kernel over the zero-upsampled input padded by the dilated
    kernel extent, cropped by ``pads``."""
    n_b, c_in, h, wi = xc.shape
    _, opg, kh, kw = w.shape
    cpg = c_in // group
    sh, sw = strides
    eh, ew = (kh - 1) * dilations[0], (kw - 1) * dilations[1]
    up = np.zeros((n_b, c_in, (h - 1) * sh + 1, (wi - 1) * sw + 1), np.int64)
    up[:, :, ::sh, ::sw] = xc
    # (Cin, opg, kh, kw) -> conv layout (Cout, Cin/group, kh, kw), taps reversed.
    wc = w.astype(np.int64).reshape(group, cpg, opg, kh, kw).transpose(0, 2, 1, 3, 4)
    wc = wc.reshape(group * opg, cpg, kh, kw)[:, :, ::-1, ::-1]
    full = conv_acc_reference(
        up, wc, (1, 1), (eh, ew, eh + output_padding[0], ew + output_padding[1]), dilations, group
    )
    ho = full.shape[2] - pads[0] - pads[2]
    wo = full.shape[3] - pads[1] - pads[3]
    return full[:, :, pads[0] : pads[0] + ho, pads[1] : pads[1] + wo]


def max_pool(
    x: np.ndarray,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    pads: tuple[int, int, int, int],
    dilations: tuple[int, int],
    out_hw: tuple[int, int],
) -> np.ndarray:
    """Max over windows (padding never wins); int8 or float, NCHW."""
    lowest = np.iinfo(x.dtype).min if x.dtype.kind == "i" else -np.inf
    out = np.full((x.shape[0], x.shape[1], *out_hw), lowest, x.dtype)
    _maxpool(np.ascontiguousarray(x), *kernel, *strides, pads[0], pads[1], *dilations, out)
    return out


def pool_sum(
    x: np.ndarray,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    pads: tuple[int, int, int, int],
    out_hw: tuple[int, int],
    *,
    count_include_pad: bool,
    acc_dtype: type,
) -> tuple[np.ndarray, np.ndarray]:
    """Window sums (NCHW) and the element count of each output position."""
    out = np.zeros((x.shape[0], x.shape[1], *out_hw), acc_dtype)
    count = np.zeros(out_hw, np.int64)
    xs = np.ascontiguousarray(x, acc_dtype)
    _pool_sum(xs, *kernel, *strides, pads[0], pads[1], count_include_pad, out, count)
    return out, count


# ----------------------------------------------------------------------- element-wise


def rescale_sum(
    terms: list[tuple[np.ndarray, int, float]],
    out_scale: float,
    out_zp: int,
    out_shape: tuple[int, ...],
) -> np.ndarray:
    """``zp_out + round(sum_i s_i/s_out * (q_i - zp_i))`` in fixed point, saturated to int8.

    Each term is (int8 array, zero point, scale, broadcastable to `out_shape`). All terms
    share one shift so that the sum is rounded once, as a DPU adder would (Add, Sub with a
    negative scale, Concat's rescale with one term).
    """
    reals = np.array([abs(s) / out_scale for _, _, s in terms])
    _m, n = quantize_multiplier(reals.max())
    shift = int(n[0])
    total = np.zeros(out_shape, np.int64)
    for (q, zp, s), real in zip(terms, reals, strict=True):
        mi = np.int64(np.rint(real * 2.0**shift)) * (1 if s >= 0 else -1)
        total += (q.astype(np.int64) - zp) * mi
    return saturate_int8(rounding_shift(total, shift) + out_zp)


def requantize_tensor(
    acc: np.ndarray, real_multiplier: float, out_zp: int, lo: int = QMIN, hi: int = QMAX
) -> np.ndarray:
    """Requantize an int64 array of any shape with one real multiplier (per tensor)."""
    m, n = quantize_multiplier(real_multiplier)
    v = rounding_shift(acc.astype(np.int64) * m[0], int(n[0])) + out_zp
    return np.clip(v, lo, hi).astype(np.int8)


# ----------------------------------------------------------------------- lookup tables


def apply_lut(x: np.ndarray, lut: Int8Lut) -> np.ndarray:
    """Look every int8 value up in a 256-entry table."""
    return lut[x.astype(np.int16) + 128]


# ----------------------------------------------------------------------- softmax


def softmax_int(
    x: np.ndarray, axis: int, in_scale: float, out_scale: float, out_zp: int
) -> np.ndarray:
    """Softmax on int8: exp table of (q - max) in Q15, integer sum, integer division.

    The DPU-style approximation: ``e_i = round(2**15 * exp(s_in * (q_i - q_max)))`` from a
    256-entry table, then ``q_out = zp + round(e_i / sum(e) / s_out)`` with the division in
    integers (a Q16 reciprocal of the output scale).
    """
    table = np.rint(np.exp(in_scale * np.arange(-255, 1)) * (1 << SOFTMAX_EXP_BITS))
    table = table.astype(np.int64)
    d = x.astype(np.int64) - x.max(axis=axis, keepdims=True).astype(np.int64)
    e = table[d + 255]
    total = e.sum(axis=axis, keepdims=True)
    recip = np.int64(np.rint((1 << 16) / out_scale))
    v = rounding_shift((e * recip) // total, 16) + out_zp
    return saturate_int8(v)


# ----------------------------------------------------------------------- resize


def resize_linear_int(
    xc: np.ndarray,
    coords: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    axes: list[int] | None = None,
) -> np.ndarray:
    """Separable linear interpolation in fixed point over ``axes`` (default: the trailing
    ``len(coords)`` axes).

    ``coords`` holds, per resized axis (in the order of ``axes``), the lower source index,
    the upper source index and the weight of the upper one (float in [0, 1]); weights are
    rounded to `RESIZE_WEIGHT_BITS` bits. Returns int64 sums scaled by 2**(bits * axes).
    """
    one = 1 << RESIZE_WEIGHT_BITS
    v = xc.astype(np.int64)
    if axes is None:
        axes = list(range(v.ndim - len(coords), v.ndim))
    for ax, (i0, i1, frac) in zip(axes, coords, strict=True):
        wq = np.rint(frac * one).astype(np.int64)
        shape = [1] * v.ndim
        shape[ax] = len(wq)
        wq = wq.reshape(shape)
        v = np.take(v, i0, axis=ax) * (one - wq) + np.take(v, i1, axis=ax) * wq
    return v


__all__ = [
    "MAX_SHIFT",
    "MULT_BITS",
    "QMAX",
    "QMIN",
    "RESIZE_WEIGHT_BITS",
    "SOFTMAX_EXP_BITS",
    "Int8Lut",
    "apply_lut",
    "build_lut",
    "conv_acc_reference",
    "conv_accumulate",
    "conv_transpose_acc_reference",
    "conv_transpose_accumulate",
    "exact_int_batch_matmul",
    "exact_int_matmul",
    "max_pool",
    "pool_sum",
    "quantize_multiplier",
    "requantize",
    "requantize_tensor",
    "rescale_sum",
    "resize_linear_int",
    "rounding_shift",
    "saturate_int8",
    "saturate_int16",
    "softmax_int",
]
