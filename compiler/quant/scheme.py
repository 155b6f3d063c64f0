"""The quantization schemes of the config reference and the arithmetic of quantization parameters.

=============================== ========================================= ==================
`QuantizationScheme`            activations                               weights
=============================== ========================================= ==================
per_tensor_histogram (default)  per tensor, `HistogramObserver` (range:   per channel min-max
                                ``histogram_range_method``)
per_tensor_min_max              per tensor, `MinMaxObserver`              per channel min-max
hybrid_per_tensor_per_channel   per tensor (histogram), except inputs of  per channel min-max
                                depthwise convs: per channel min-max
=============================== ========================================= ==================

The range of a histogram observer comes from the aipusim extension properties
(`observers.HistogramRange`):

=============================== ==========================================================
``histogram_range_method``      range of each histogram-observed activation
=============================== ==========================================================
mse (default)                   lowest estimated int8 MSE (`observers.mse_optimal_range`)
percentile                      two-sided ``histogram_percentile`` (99.99 by default)
                                quantiles (`observers.percentile_range`)
entropy                         smallest KL divergence between the clipped histogram and
                                its 256-level quantization, TensorRT-style
                                (`observers.entropy_range`)
=============================== ==========================================================

``per_tensor_min_max`` has no histogram: the method does not apply to it.

Activations are asymmetric int8 (a zero point, 0.0 exactly representable); weights are
symmetric int8 in [-127, 127] (zero point 0); biases are int32 with scale ``s_in * s_w``.

Trained weights (`weight_scale_floor`): a channel's weight scale ``max|w| / 127`` is raised
to a floor, the larger of

- the *resolution floor* ``s_out / (2**RESOLUTION_BITS * 255 * K * s_in)`` (K products per
  output, each input at most 255 input steps from its zero point): with it, rounding the
  channel's weights moves its output by at most ``2**-(RESOLUTION_BITS + 1)`` of an output
  step even in the worst case, which the int8 output cannot show, and the requantize shift
  stays bounded;
- the *bias floor* ``|b| / (s_in * bias_limit(K))``: the int32 bias ``b / (s_in * s_w)``
  fits with room for the input zero point the back end folds into it.

Near-dead channels (pruned, or BN-folded to weights ~1e-9) would otherwise get scales so
small that the int32 bias overflows. The rule for them: a channel whose max|w| is below half
its floor quantizes to all-zero weights, and its output is its bias requantized. A bias that
even so does not fit is saturated to int32 with a warning naming the layer and channel.
Depthwise conv weights are per tensor unless ``quantize_dw_channel_wise`` (the reference's
knob; their output channels are then scaled one by one). In the hybrid scheme, an input of
depthwise convs gets per-channel parameters only when every consumer is a depthwise conv and
its producer is a MAC op (which can requantize each channel to its own scale); otherwise it
stays per tensor.

>>> scale, zp = activation_qparams(-1.0, 3.0)
>>> round(float(scale), 6), int(zp)
(0.015686, -64)
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np

from aipusim.compiler.quant.observers import (
    BLOCK_BYTES,
    HistogramObserver,
    HistogramRange,
    MinMaxObserver,
    Observer,
)

QMIN, QMAX = -128, 127
#: The 16-bit grid of the DPU-only tensors kept wide (see `quantize.wide_tensors`).
WIDE_QMIN, WIDE_QMAX = -32768, 32767
#: Symmetric weight range (-127..127 keeps the grid symmetric around 0).
WEIGHT_QMAX = 127
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class Scheme(StrEnum):
    """Same values as `aipusim.compiler.config.QuantizationScheme`."""

    PER_TENSOR_HISTOGRAM = "per_tensor_histogram"
    PER_TENSOR_MIN_MAX = "per_tensor_min_max"
    HYBRID_PER_TENSOR_PER_CHANNEL = "hybrid_per_tensor_per_channel"


def make_observer(
    scheme: Scheme, per_channel: bool, histogram: HistogramRange | None = None
) -> Observer:
    """The activation observer a scheme uses (``per_channel``: a hybrid depthwise input);
    ``histogram`` chooses the range of histogram observers (default: MSE-optimal)."""
    if per_channel:
        assert scheme is Scheme.HYBRID_PER_TENSOR_PER_CHANNEL
        return MinMaxObserver(axis=1)
    if scheme is Scheme.PER_TENSOR_MIN_MAX:
        return MinMaxObserver()
    return HistogramObserver(chooser=histogram)


#: Significant bits an activation range keeps (`snap_range`).
RANGE_BITS = 8


def snap_range(
    lo: np.ndarray | float, hi: np.ndarray | float, bits: int = RANGE_BITS
) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi] widened to include 0 and rounded outward to ``bits`` significant bits.

    Calibration ranges come from float32 forward passes whose last bits depend on the
    summation order of the executor (onnxruntime, numpy's BLAS, the CPU's kernels). Rounding
    the range to 8 significant bits (a step of 0.4-0.8 % of it, at most one int8 level)
    makes the chosen parameters independent of that noise: two executors agree unless an
    extreme lies within a few ulps of a grid point.

    >>> lo, hi = snap_range(-1.0001, 2.9)
    >>> float(lo), float(hi)
    (-1.0078125, 2.90625)
    >>> [float(v) for v in snap_range(0.0, 6.0)]
    [0.0, 6.0]
    """

    def up(x: np.ndarray) -> np.ndarray:
        m, e = np.frexp(x)
        return np.ldexp(np.ceil(np.ldexp(m, bits)), e - bits)

    lo = np.minimum(np.asarray(lo, np.float64), 0.0)
    hi = np.maximum(np.asarray(hi, np.float64), 0.0)
    return -up(-lo), up(hi)


def activation_qparams(
    lo: np.ndarray | float, hi: np.ndarray | float, *, wide: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(scale float32, zero point int32) of an asymmetric int8 grid (int16 when ``wide``)
    covering [lo, hi] and 0."""
    qmin, qmax = (WIDE_QMIN, WIDE_QMAX) if wide else (QMIN, QMAX)
    lo = np.minimum(np.asarray(lo, np.float64), 0.0)
    hi = np.maximum(np.asarray(hi, np.float64), 0.0)
    span = hi - lo
    scale = np.where(span > 0, span / (qmax - qmin), 1.0).astype(np.float32)
    zp = np.clip(np.rint(qmin - lo / scale.astype(np.float64)), qmin, qmax).astype(np.int32)
    return scale, zp


def symmetric_qparams(lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """(scale, zero point 0) of a symmetric int8 grid [-127, 127] covering [lo, hi]: for
    activations that are written into the IMC as weights.

    >>> scale, zp = symmetric_qparams(-1.0, 2.54)
    >>> round(float(scale), 6), int(zp)
    (0.02, 0)
    """
    amax = max(abs(float(lo)), abs(float(hi)))
    return weight_scales(np.array(amax)), np.zeros((), np.int32)


def weight_scales(amax: np.ndarray) -> np.ndarray:
    """Symmetric weight scales (float32) from per-channel max |w| (all-zero channel -> 1)."""
    amax = np.asarray(amax, np.float64)
    return np.where(amax > 0, amax / WEIGHT_QMAX, 1.0).astype(np.float32)


#: Bits of output resolution kept below one output step by the weight rounding of a channel
#: whose scale is at the resolution floor (one int8 grid's worth, see the module doc).
RESOLUTION_BITS = 8


def bias_limit(fan_in: int) -> int:
    """Largest |int32 bias| of a channel summing ``fan_in`` products that leaves room for
    the input zero point the back end folds into it (``-zp_in * sum(w_q)``, at most 128 x
    127 per product). Beyond ~66,000 products half the int32 range is kept (the exact check
    of `quantize.saturate_bias` catches what is left).

    >>> bias_limit(9) == 2**31 - 1 - 128 * 127 * 9
    True
    """
    headroom = -QMIN * WEIGHT_QMAX * int(fan_in)
    return max(INT32_MAX - headroom, INT32_MAX // 2)


def weight_scale_floor(
    fan_in: int,
    s_in: np.ndarray | float,
    s_out: np.ndarray | float,
    bias: np.ndarray | float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(resolution floor, bias floor) of the weight scale of each output channel (see the
    module doc): ``s_in``, ``s_out``, ``bias`` per channel or scalar, ``fan_in`` the
    products one output sums.

    >>> res, b = weight_scale_floor(9, 0.02, 0.05, np.array([0.0, 1e3]))
    >>> float(res[0]) == 0.05 / (256 * 255 * 9 * 0.02), float(b[0]), float(b[1]) > 2e-5
    (True, 0.0, True)
    """
    s_in = np.asarray(s_in, np.float64)
    s_out = np.asarray(s_out, np.float64)
    bias = np.abs(np.asarray(bias, np.float64))
    products = (QMAX - QMIN) * max(int(fan_in), 1) * 2.0**RESOLUTION_BITS
    resolution = np.broadcast_to(s_out / (products * s_in), bias.shape if bias.ndim else ())
    return np.asarray(resolution, np.float64), bias / (s_in * bias_limit(fan_in))


def floored_weight_scales(
    amax: np.ndarray, resolution: np.ndarray, bias_floor: np.ndarray
) -> np.ndarray:
    """Symmetric weight scales (float32) of channels with max |w| ``amax``, raised to the
    floors of `weight_scale_floor` (all three arrays per channel).

    >>> s = floored_weight_scales(np.array([127.0, 1e-9, 0.0]), np.full(3, 1e-6),
    ...                           np.array([0.0, 0.0, 0.5]))
    >>> [float(v) for v in s], bool(s[1] >= 1e-6)
    ([1.0, 1.0000001111620804e-06, 0.5], True)
    """
    s = np.maximum(np.asarray(amax, np.float64) / WEIGHT_QMAX, resolution)
    s = np.maximum(s, bias_floor)
    # float32 rounds to nearest: step up where that fell below a floor
    s32 = s.astype(np.float32)
    low = s32.astype(np.float64) < s
    s32[low] = np.nextafter(s32[low], np.float32(np.inf))
    return s32


def weight_blocks(w: np.ndarray) -> tuple[int, list[slice]]:
    """(axis, slices along it) cutting ``w`` into blocks of at most about `BLOCK_BYTES` as
    float64, along its outermost axis in memory (the largest stride: each block is one
    stretch of memory, so a weight mapped from its file is read block by block). Element-wise
    work done block by block gives the whole array's result exactly, with temporaries the
    size of a block (llama_1b's LM head is 2.1 GB as float64).

    >>> weight_blocks(np.zeros((4, 3)))
    (0, [slice(0, 4, None)])
    """
    if w.ndim == 0 or w.size == 0:
        return 0, [slice(None)]
    spans = [abs(st) if n > 1 else 0 for st, n in zip(w.strides, w.shape, strict=True)]
    axis = int(np.argmax(spans))
    n = w.shape[axis]
    per = max(1, BLOCK_BYTES // max(1, (w.size // n) * 8))
    return axis, [slice(i, min(i + per, n)) for i in range(0, n, per)]


def quantize_weights(w: np.ndarray, scales: np.ndarray, axis: int) -> np.ndarray:
    """int8 weights ``round(w / s)`` with ``scales`` along ``axis`` (a scalar: per tensor),
    computed in float64 block by block (`weight_blocks`)."""
    shape = [1] * w.ndim
    s = np.asarray(scales, np.float64)
    if s.ndim:
        shape[axis] = s.size
        s = s.reshape(shape)
    out = np.empty(w.shape, np.int8)
    cut, blocks = weight_blocks(w)
    for block in blocks:
        at = (slice(None),) * cut + (block,)
        q = np.divide(w[at], s[at] if s.ndim and s.shape[cut] > 1 else s)
        # in place: no further float64 copies of the block
        np.rint(q, out=q)
        np.clip(q, -WEIGHT_QMAX, WEIGHT_QMAX, out=q)
        out[at] = q
    return out


def quantize_values(x: np.ndarray, scale: np.ndarray, zp: np.ndarray, axis: int | None = None):
    """Float -> int8 with given parameters (per tensor, or per channel along ``axis``)."""
    s = np.asarray(scale, np.float64)
    z = np.asarray(zp, np.float64)
    if axis is not None and s.ndim:
        shape = [1] * x.ndim
        shape[axis] = s.size
        s, z = s.reshape(shape), z.reshape(shape)
    return np.clip(np.rint(x / s) + z, QMIN, QMAX).astype(np.int8)


def dequantize_values(q: np.ndarray, scale: np.ndarray, zp: np.ndarray, axis: int | None = None):
    """int8 -> float32 ``scale * (q - zp)``."""
    s = np.asarray(scale, np.float32)
    z = np.asarray(zp, np.float32)
    if axis is not None and s.ndim:
        shape = [1] * q.ndim
        shape[axis] = s.size
        s, z = s.reshape(shape), z.reshape(shape)
    return ((q.astype(np.float32) - z) * s).astype(np.float32)


__all__ = [
    "WIDE_QMAX",
    "WIDE_QMIN",
    "Scheme",
    "activation_qparams",
    "bias_limit",
    "dequantize_values",
    "floored_weight_scales",
    "make_observer",
    "quantize_values",
    "quantize_weights",
    "snap_range",
    "symmetric_qparams",
    "weight_blocks",
    "weight_scale_floor",
    "weight_scales",
]
