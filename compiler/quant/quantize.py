"""Pass 4, quantize: calibrate the float graph, then turn it into a `QuantizedGraph`.

The quantized graph keeps the float graph's structure (node for node, so lowering sees the
same layers) and annotates it: every activation tensor is int8 with `QuantParams`, weights
are int8 constants (per output channel), biases int32 constants, scalar/vector operands of
element-wise ops int8 constants. What the DPU needs beyond that (fixed-point requantize
multipliers and shifts, 256-entry LUTs, rescale factors) is in ``steps``: one `QStep` per
node, the integer program the int8 reference (`reference.run_int8`) executes.

Parameter sharing ("fusion by scales"): ops that only move values (layout ops, MaxPool,
nearest Resize) give their output the input's parameters; a Relu/Clip whose input has no
other reader gives its parameters to that input, so the producer's requantize clamps
directly into the activation's range (a fused activation) and the Relu/Clip itself is an
integer clamp. Graph inputs and outputs keep a float boundary unless
``remove_io_quantization``: then they are int8 and the host (de)quantizes.

Example:
    >>> import numpy as np
    >>> from aipusim.compiler.ir import Graph, Node, Op, Tensor
    >>> from aipusim.compiler.quant.data import random_calibration
    >>> g = Graph("g", (Node("r", Op.RELU, ("x",), ("y",)),),
    ...           {"x": Tensor("x", (1, 8)), "y": Tensor("y", (1, 8))}, {}, ("x",), ("y",))
    >>> q = quantize_graph(g, random_calibration({"x": (1, 8)}, samples=2))
    >>> q.graph.tensor("y").quant is not None, q.steps["r"].kind
    (True, 'lut')
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from aipusim.base.errors import QuantizationError
from aipusim.base.mapped import release
from aipusim.compiler.decoder import is_cache_input
from aipusim.compiler.ir import DType, Graph, Node, Op, QuantParams, Tensor, is_depthwise
from aipusim.compiler.passes.bn_fold import bn_scale_shift
from aipusim.compiler.quant import fixedpoint as K
from aipusim.compiler.quant import opsupport as S
from aipusim.compiler.quant.data import CalibrationData
from aipusim.compiler.quant.elementwise import scalar_operand, unary_function
from aipusim.compiler.quant.observers import (
    BLOCK_BYTES,
    HistogramRange,
    MinMaxObserver,
    Observer,
    weight_ranges_per_channel,
)
from aipusim.compiler.quant.ort_exec import OrtFloatSession
from aipusim.compiler.quant.scheme import (
    INT32_MAX,
    Scheme,
    activation_qparams,
    floored_weight_scales,
    make_observer,
    quantize_values,
    quantize_weights,
    snap_range,
    symmetric_qparams,
    weight_scale_floor,
)
from aipusim.isa import fp_kernels as FK
from aipusim.isa.float18 import FloatFormat

log = logging.getLogger("aipusim.compiler")


class FloatExecutor(StrEnum):
    """What runs calibration's float forward passes."""

    ONNXRUNTIME = "onnxruntime"
    NUMPY = "numpy"


#: Ops whose output carries the input's quantization unchanged.
SHARE_OPS = frozenset(
    {
        Op.RESHAPE,
        Op.FLATTEN,
        Op.SQUEEZE,
        Op.UNSQUEEZE,
        Op.IDENTITY,
        Op.CAST,
        Op.TRANSPOSE,
        Op.SLICE,
        Op.SPLIT,
        Op.PAD,
        Op.MAX_POOL,
        Op.GLOBAL_MAX_POOL,
        Op.REDUCE_MAX,
        Op.EXPAND,
        Op.TILE,
        Op.GATHER,  # of an activation by constant indices (a table lookup is `gather`)
    }
)
#: MAC ops: int8 x int8 -> int32, bias, per-channel requantize.
MAC_OPS = frozenset({Op.CONV, Op.CONV_TRANSPOSE, Op.GEMM, Op.MATMUL, Op.BATCH_NORM})
#: Activations that may be fused into their producer's requantize clamp.
CLAMP_OPS = frozenset({Op.RELU, Op.CLIP})
#: Element-wise ops evaluated through a 256-entry table.
TABLE_OPS = frozenset(
    {
        Op.RELU,
        Op.CLIP,
        Op.LEAKY_RELU,
        Op.SIGMOID,
        Op.SILU,
        Op.HARD_SIGMOID,
        Op.HARD_SWISH,
        Op.TANH,
        Op.ERF,
        Op.SQRT,
        Op.EXP,
        Op.LOG,
        Op.RECIPROCAL,
        Op.NEG,
        Op.GELU,
    }
)


@dataclass(frozen=True)
class QStep:
    """The integer program of one node: a kernel kind and its parameters.

    Kinds: ``mac`` (mult, shift, bias per output channel), ``clamp`` (lo, hi per channel),
    ``lut`` (table), ``rescale`` (Add/Sub/Concat/Min/Max: mults per input, shift),
    ``mul`` (mult, shift), ``pool_avg`` (mult, shift per window count), ``mean`` (mult,
    shift), ``resize_linear`` (mult, shift), ``softmax`` (exp table, recip), ``share``
    (no arithmetic).
    """

    kind: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class QuantizedGraph:
    """The quantized IR graph plus the integer program of each node (see module doc)."""

    graph: Graph
    steps: Mapping[str, QStep]
    scheme: str
    io_quantized: bool
    quantize_dw_channel_wise: bool
    calibration_source: str = ""
    calibration_samples: int = 0

    def qparams(self, tensor: str) -> QuantParams:
        q = self.graph.tensor(tensor).quant
        assert q is not None, f"tensor {tensor} is not quantized"
        return q


# ----------------------------------------------------------------------- planning


#: The version of the rules that give a graph its parameters (which tensors share a grid,
#: how a range becomes a grid): the quantization cache keys on it, so a change that moves
#: the parameters of an unchanged graph must raise it, else older entries are reused.
#: 2: a decoder's past shares its present's grid (`_share_plan`).
RULES_VERSION = 2


def _share_plan(graph: Graph) -> dict[str, str]:
    """Activation tensor -> the tensor whose observed range sets its parameters."""
    # integer inputs (indices) are not quantized
    src: dict[str, str] = {n: n for n in graph.inputs if graph.tensor(n).dtype.np.kind == "f"}
    boundary = set(graph.inputs) | set(graph.outputs)
    for node in graph.nodes:
        # Only real-valued tensors are quantized (not e.g. MaxPool's int64 indices).
        outs = [o for o in node.outputs if o and graph.tensor(o).dtype.np.kind == "f"]
        act_in = [i for i in node.present_inputs if not graph.is_constant(i)]
        if (node.op in SHARE_OPS and act_in and act_in[0] == node.inputs[0]) or (
            node.op in (Op.RESIZE, Op.UPSAMPLE) and S.resize_mode(node) == "nearest"
        ):
            for o in outs:
                src[o] = src[act_in[0]]
            continue
        for o in outs:
            src[o] = o
        if node.op is Op.CONCAT and act_in and is_cache_input(act_in[0]) and act_in[0] in src:
            # a decoder's KV cache: the past and the grown cache (present) on one grid, so
            # that the step appends rows and the next step reads the bytes as they are
            src[act_in[0]] = src[outs[0]]
        if node.op in CLAMP_OPS and act_in:
            x = act_in[0]
            producer = graph.producer(x)
            if (
                x not in boundary
                and len(graph.consumers(x)) == 1
                and producer is not None
                and producer.op not in SHARE_OPS
                and src[x] == x
            ):
                src[x] = outs[0]
    return src


def _per_channel_groups(graph: Graph, src: Mapping[str, str]) -> set[str]:
    """Observed tensors that get per-channel parameters in the hybrid scheme."""
    groups: dict[str, list[str]] = {}
    for t, s in src.items():
        groups.setdefault(s, []).append(t)
    boundary = set(graph.inputs) | set(graph.outputs)
    chosen = set()
    for s, members in groups.items():
        if len(graph.shape(s)) != 4 or boundary & set(members):
            continue
        member_set = set(members)
        ok = True
        has_dw = False
        for t in members:
            for c in graph.consumers(t):
                if is_depthwise(c, graph) and c.inputs[0] == t:
                    has_dw = True
                elif not (set(c.outputs) & member_set):
                    ok = False
            prod = graph.producer(t)
            if prod is not None and not (set(prod.present_inputs) & member_set):
                ok = ok and prod.op in (Op.CONV, Op.BATCH_NORM)
        if ok and has_dw:
            chosen.add(s)
    return chosen


# ----------------------------------------------------------------------- calibration


class Grid(StrEnum):
    """The integer grid of a tensor: asymmetric int8 (the default), symmetric int8 (an
    operand written into the IMC at run time: weights have no zero point) or asymmetric
    int16 (a residual stream only the DPU's adders and LayerNorms read)."""

    INT8 = "int8"
    SYMMETRIC = "symmetric"
    WIDE = "int16"


@dataclass(frozen=True)
class ObservedRange:
    """The range calibration found for one tensor, before `snap_range`: per tensor, or per
    channel along ``axis``; ``fixed`` for a range known a priori (used as it is)."""

    lo: np.ndarray
    hi: np.ndarray
    axis: int | None = None
    fixed: bool = False
    grid: Grid = field(default_factory=lambda: Grid.INT8)
    #: The observer that saw the tensor (None for a fixed range).
    observer: Observer | None = field(default=None, compare=False, repr=False)

    def qparams(self) -> QuantParams:
        """The tensor's parameters on its grid (observed ranges rounded by `snap_range`, so
        that they do not depend on the float executor's summation order)."""
        lo, hi = (self.lo, self.hi) if self.fixed else snap_range(self.lo, self.hi)
        if self.grid is Grid.SYMMETRIC:
            return QuantParams(*symmetric_qparams(float(lo), float(hi)))
        if self.grid is Grid.WIDE:
            return QuantParams(*activation_qparams(lo, hi, wide=True), DType.INT16)
        return QuantParams(*activation_qparams(lo, hi), axis=self.axis)


def observe_ranges(
    graph: Graph,
    calibration: CalibrationData,
    scheme: Scheme,
    *,
    progress: Any = None,
    executor: FloatExecutor | str = FloatExecutor.ONNXRUNTIME,
    histogram: HistogramRange | None = None,
) -> tuple[dict[str, str], dict[str, ObservedRange]]:
    """Run the float graph on the calibration samples; (the share plan: activation -> the
    tensor whose range sets its parameters, and the range of each such tensor).
    ``histogram`` chooses the range of the histogram observers (default: MSE-optimal).

    ``executor`` runs the float forward passes: onnxruntime (fast; the default) or the
    numpy executor (`run_fp32`, the oracle the tests compare with; also the fallback when
    onnxruntime cannot load the graph).
    """
    src = _share_plan(graph)
    per_channel = (
        _per_channel_groups(graph, src) if scheme is Scheme.HYBRID_PER_TENSOR_PER_CHANNEL else set()
    )
    observers: dict[str, Observer] = {
        s: make_observer(scheme, s in per_channel, histogram) for s in set(src.values())
    }

    def observe(name: str, value: np.ndarray) -> None:
        obs = observers.get(name)
        if obs is not None:
            try:
                obs.update(value)
            except QuantizationError as exc:
                raise QuantizationError(f"tensor {name}: {exc}") from None

    feed = _float_runner(graph, list(observers), FloatExecutor(executor), observe)
    for _ in feed(calibration.samples):
        if progress is not None:
            progress.update(1)
    del feed  # (and the float session with it)
    for value in graph.constants.values():
        release(value)  # weights mapped from their file: read again one by one when quantized
    bounds = _range_bounds(graph)
    wide = wide_tensors(graph, src)
    symmetric = symmetric_groups(graph, src)
    ranges: dict[str, ObservedRange] = {}
    for s, obs in observers.items():
        grid = Grid.SYMMETRIC if s in symmetric else Grid.WIDE if s in wide else Grid.INT8
        if grid is Grid.INT8 and isinstance(obs, MinMaxObserver) and obs.axis is not None:
            ranges[s] = ObservedRange(*obs.channel_ranges(), axis=1, observer=obs)
            continue
        lo, hi = (np.float64(v) for v in obs.range())
        if grid is Grid.INT8 and s in bounds:
            lo, hi = np.float64(max(lo, bounds[s][0])), np.float64(min(hi, bounds[s][1]))
        ranges[s] = ObservedRange(lo, hi, grid=grid, observer=obs)
    return src, ranges


def calibrate(
    graph: Graph,
    calibration: CalibrationData,
    scheme: Scheme,
    *,
    progress: Any = None,
    executor: FloatExecutor | str = FloatExecutor.ONNXRUNTIME,
    histogram: HistogramRange | None = None,
) -> tuple[dict[str, str], dict[str, QuantParams]]:
    """Run the float graph on the calibration samples and derive every activation's params
    (`observe_ranges`, then `ObservedRange.qparams`). A graph input that comes with
    `QuantParams` (an ONNX quantization annotation, `importer`) keeps them, and so does
    everything that shares its grid: a decoder's KV cache carried from an earlier step."""
    src, ranges = observe_ranges(
        graph, calibration, scheme, progress=progress, executor=executor, histogram=histogram
    )
    params = {s: r.qparams() for s, r in ranges.items()}
    for name in graph.inputs:
        pinned = graph.tensor(name).quant
        if pinned is not None and name in src:
            if src[name] in symmetric_groups(graph, src) and np.any(pinned.zero_point != 0):
                raise QuantizationError(
                    f"input {name}'s fixed grid must be symmetric (zero point 0: the tensor "
                    f"is an IMC operand), not zero point {pinned.zero_point}"
                )
            params[src[name]] = pinned
    return src, {t: params[s] for t, s in src.items()}


def symmetric_groups(graph: Graph, src: Mapping[str, str]) -> set[str]:
    """Sources of the parameter groups quantized symmetrically (`imc_operands`)."""
    return {src[t] for t in imc_operands(graph) if t in src}


def _float_runner(
    graph: Graph,
    observed: list[str],
    executor: FloatExecutor,
    observe: Callable[[str, np.ndarray], None],
) -> Callable[[Sequence[Mapping[str, np.ndarray]]], Iterator[None]]:
    """A function running the calibration samples in order, passing each one's observed
    tensors on, and yielding once per sample after they were observed."""
    if executor is FloatExecutor.ONNXRUNTIME:
        try:
            session = OrtFloatSession(graph, observed)
        except QuantizationError as exc:
            log.warning("%s; calibrating with the numpy float executor instead", exc)
        else:

            def run_ort(samples: Sequence[Mapping[str, np.ndarray]]) -> Iterator[None]:
                # Observers are independent, so the order across tensors does not matter;
                # each still sees the samples in calibration order. A tensor is dropped
                # once observed: the next sample's are being computed meanwhile.
                for values in session.run_all(samples):
                    while values:
                        observe(*values.popitem())
                    yield

            return run_ort
    from aipusim.compiler.quant.float_exec import run_fp32  # imports numba: only when used

    def run_numpy(samples: Sequence[Mapping[str, np.ndarray]]) -> Iterator[None]:
        for sample in samples:
            run_fp32(graph, sample, on_tensor=observe)
            yield

    return run_numpy


#: DPU ops that read a 16-bit operand (adders and LayerNorm's statistics).
_WIDE_READERS = frozenset({Op.ADD, Op.SUB, Op.LAYER_NORM})


def _dpu_adder(graph: Graph, node: Node) -> bool:
    """An Add/Sub of two tensors (a scalar operand makes it a LUT op) or a Concat."""
    if node.op is Op.CONCAT:
        return True
    return node.op in (Op.ADD, Op.SUB) and scalar_operand(node, graph) is None


def wide_tensors(graph: Graph, src: Mapping[str, str]) -> set[str]:
    """Sources of the parameter groups stored with 16 bits: the DPU's adders write them and
    only DPU adders and LayerNorms read them, never the MVM (which takes int8 only).

    That is a transformer's residual stream: a token whose values are far smaller than
    the others' (ViT's class token starts at about 1/200 of the patch tokens) has no int8
    step left of it, and LayerNorm, which rescales every token to unit size, would blow
    the rounding up. Reading and writing 16-bit operands costs the DPU twice the bytes
    (the back end counts them), not extra operations.
    """
    groups: dict[str, list[str]] = {}
    for t, s in src.items():
        groups.setdefault(s, []).append(t)
    boundary = set(graph.inputs) | set(graph.outputs)
    out = set()
    for s, members in groups.items():
        producer = graph.producer(s)
        if producer is None or not _dpu_adder(graph, producer) or boundary & set(members):
            continue
        ok = True
        for t in members:
            for reader in graph.consumers(t):
                if reader.op in SHARE_OPS and reader.outputs[0] in members:
                    continue
                if (
                    reader.op not in _WIDE_READERS
                    or (reader.op is not Op.LAYER_NORM and not _dpu_adder(graph, reader))
                    or (reader.op is Op.LAYER_NORM and reader.inputs[0] != t)
                ):
                    ok = False
        if ok and any(graph.consumers(t) for t in members):
            out.add(s)
    return out


def imc_operands(graph: Graph) -> set[str]:
    """Second operands of activation x activation MatMuls: the back end may write them into
    an IMC weight set at run time, and IMC weights have no zero point, so these tensors
    (with everything that shares their parameters) are quantized symmetrically."""
    return {
        n.inputs[1]
        for n in graph.nodes
        if n.op is Op.MATMUL and not any(graph.is_constant(i) for i in n.inputs)
    }


def _range_bounds(graph: Graph) -> dict[str, tuple[float, float]]:
    """Outputs whose range is bounded a priori: probabilities lie in [0, 1]. The observed
    range is clipped to the bound; attention probabilities over many tokens rarely exceed
    a few tenths, and a grid over [0, 1] would spend most of its 256 steps on nothing."""
    out = {}
    for node in graph.nodes:
        if node.op in (Op.SOFTMAX, Op.MASKED_SOFTMAX):
            out[node.outputs[0]] = (0.0, 1.0)
    return out


# ----------------------------------------------------------------------- the pass


_AFFINE_ATTRS = ("aipu_in_scale", "aipu_in_bias", "aipu_out_scale", "aipu_out_bias")


def lut_step(node: Node, graph: Graph, qi: QuantParams, qo: QuantParams) -> QStep:
    """The integer program of a one-input function from grid ``qi`` to grid ``qo``: a clamp
    in the int8 domain for Relu/Clip between equal grids, else a 256-entry table."""
    plain = not any(node.attr(k) is not None for k in _AFFINE_ATTRS)
    if node.op in CLAMP_OPS and plain and (qi is qo or _same(qi, qo)):
        s, z = qo.scale.astype(np.float64), qo.zero_point.astype(np.int64)
        lo, hi = (0.0, np.inf) if node.op is Op.RELU else _clip_range(node, graph)
        with np.errstate(over="ignore", invalid="ignore"):
            lo_q = np.clip(np.ceil(lo / s - 1e-9) + z, K.QMIN, K.QMAX)
            hi_q = np.clip(np.floor(hi / s + 1e-9) + z, K.QMIN, K.QMAX)
        return QStep("clamp", {"lo": lo_q.astype(np.int64), "hi": hi_q.astype(np.int64)})
    if qi.per_channel or qo.per_channel:
        raise S.unsupported(node, "a table needs per-tensor parameters on both sides")
    fn = unary_function(node, graph)
    si, zi, so, zo = float(qi.scale), int(qi.zero_point), float(qo.scale), int(qo.zero_point)
    return QStep("lut", {"table": K.build_lut(fn, si, zi, so, zo)})


class _Builder:
    def __init__(
        self,
        graph: Graph,
        qp: dict[str, QuantParams],
        dw_channel_wise: bool,
        fmt: FloatFormat,
    ) -> None:
        self.g = graph
        self.qp = qp
        self.dw_channel_wise = dw_channel_wise
        self.fmt = fmt
        self.editor = graph.edit()
        self.steps: dict[str, QStep] = {}

    # helpers ---------------------------------------------------------------
    def scales(self, t: str) -> tuple[np.ndarray, np.ndarray]:
        q = self.qp[t]
        return q.scale.astype(np.float64), q.zero_point.astype(np.int64)

    def zp_max(self, t: str) -> int:
        """Largest |zero point| of activation ``t``."""
        return int(np.abs(self.qp[t].zero_point.astype(np.int64)).max())

    def scalar(self, t: str, node: Node) -> tuple[float, int]:
        q = self.qp[t]
        if q.per_channel:
            raise S.unsupported(node, f"input {t} has per-channel parameters")
        return float(q.scale), int(q.zero_point)

    def set_const(self, name: str, arr: np.ndarray, quant: QuantParams | None) -> None:
        self.editor.set_constant(name, arr)
        t = self.editor.tensors[name]
        self.editor.tensors[name] = Tensor(name, t.shape, t.dtype, quant)

    def const_operand(self, name: str) -> None:
        """Quantize a constant operand of an element-wise op (per tensor, min-max)."""
        if name in self.qp:
            return
        arr = np.asarray(self.editor.constants[name], np.float64)
        scale, zp = activation_qparams(float(arr.min()), float(arr.max()))
        qp = QuantParams(scale, zp)
        self.qp[name] = qp
        self.set_const(name, quantize_values(arr, scale, zp), qp)

    # ops -------------------------------------------------------------------
    def mac(self, node: Node) -> QStep:
        g = self.g
        x, out = node.inputs[0], node.outputs[0]
        s_in, _ = self.scales(x)
        s_out, _zp_out = self.scales(out)
        if node.op is Op.BATCH_NORM:
            if any(g.const(i) is None for i in node.inputs[1:5]):
                raise S.unsupported(node, "BatchNormalization parameters must be constants")
            k, b = bn_scale_shift(*(g.const(i) for i in node.inputs[1:5]),  # type: ignore[misc]
                                  float(node.attr("epsilon", 1e-5)))  # fmt: skip
            w = k.reshape(-1, 1)
            axis, per_channel = 0, True
        else:
            w = g.const(node.inputs[1])
            if w is None:
                if node.op is Op.MATMUL:
                    return self.matmul_act(node)
                raise S.unsupported(node, "the weights must be a constant")
            # float weights stay in their type (llama_1b's LM head is 2.1 GB as float64):
            # |w|, max and w / s_w (float64) give the same values either way
            w = w if w.dtype.kind == "f" else np.asarray(w, np.float64)
            b = g.const(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
            if node.op is Op.GEMM:
                if node.attr("transA", 0):
                    raise S.unsupported(node, "transA=1 is not supported")
                w = np.asarray(w, np.float64) * float(node.attr("alpha", 1.0))
                if b is not None:
                    b = np.asarray(b, np.float64) * float(node.attr("beta", 1.0))
                axis = 0 if node.attr("transB", 0) else 1
            elif node.op is Op.MATMUL:
                if w.ndim != 2:
                    raise S.unsupported(node, "constant weights must be 2-D")
                axis = 1
            elif node.op is Op.CONV_TRANSPOSE:
                self.scalar(x, node)  # the transposed-conv kernel takes one input zero point
                w = np.asarray(w, np.float64)
                axis = 1
            else:
                axis = 0
            per_channel = not (is_depthwise(node, g) and not self.dw_channel_wise)
        group = int(node.attr("group", 1))
        n_out = w.shape[1] * group if node.op is Op.CONV_TRANSPOSE else w.shape[axis]
        has_bias = b is not None
        b = np.broadcast_to(
            np.asarray(b, np.float64).reshape(-1) if has_bias else np.zeros(1), (n_out,)
        )
        # The input scale of each output channel (per-channel inputs: depthwise only).
        s_in_c = np.broadcast_to(s_in if s_in.size == 1 else np.repeat(s_in, n_out // s_in.size),
                                 (n_out,))  # fmt: skip
        floors = weight_scale_floor(w.size // n_out, s_in_c, np.broadcast_to(s_out, (n_out,)), b)
        if node.op is Op.CONV_TRANSPOSE:
            s_w, s_w_out, axis = _conv_transpose_weight_scales(w, group, *floors)
        else:
            amax = weight_ranges_per_channel(w, axis)
            if per_channel:
                s_w = floored_weight_scales(amax, *floors)
            else:  # one scale: the finest resolution and the largest bias any channel needs
                one = floored_weight_scales(amax.max(keepdims=True), floors[0].min(keepdims=True),
                                            floors[1].max(keepdims=True))  # fmt: skip
                s_w = np.repeat(one, n_out)
            s_w_out = s_w
        w_q = quantize_weights(w, s_w, axis)
        release(w)  # a weight mapped from its file: its pages are not needed again
        bias_scale = (s_in_c * s_w_out.astype(np.float64)).astype(np.float64)
        bq = saturate_bias(node, b, bias_scale, _channel_abs_sums(node, w_q, axis), self.zp_max(x))
        w_qp = QuantParams(s_w, np.zeros(s_w.size, np.int32), axis=axis)
        extra: dict[str, Any] = {}
        if node.op is Op.BATCH_NORM:
            # BN keeps its float parameters in the graph (lowering sizes them); its integer
            # per-channel multiplier and bias live in the step.
            wname = ""
            extra["weight_q"] = w_q.reshape(-1)
        else:
            wname = node.inputs[1]
            self.set_const(wname, w_q, w_qp)
            bname = node.inputs[2] if has_bias and len(node.inputs) > 2 else ""
            if bname:
                self.set_const(
                    bname,
                    bq.reshape(self.g.shape(bname)),
                    QuantParams(bias_scale, np.zeros(n_out, np.int32), DType.INT32, 0),
                )
        s_out_c = np.broadcast_to(s_out, (n_out,))
        mult, shift = K.quantize_multiplier(bias_scale / s_out_c)
        return QStep(
            "mac",
            {
                "weight": wname,
                "weight_axis": axis,
                "bias": bq.astype(np.int32),
                "mult": mult,
                "shift": shift,
                **extra,
            },
        )

    def matmul_act(self, node: Node) -> QStep:
        """Two activations: int8 x int8 -> exact int32 sums (the second operand has zero
        point 0, see `imc_operands`), one requantize multiplier."""
        sa, _ = self.scalar(node.inputs[0], node)
        sb, zb = self.scalar(node.inputs[1], node)
        assert zb == 0, f"{node.name}: the IMC-side operand must be symmetric"
        so, _ = self.scalar(node.outputs[0], node)
        mult, shift = K.quantize_multiplier(sa * sb / so)
        return QStep("matmul", {"mult": mult, "shift": shift})

    def fp_format(self) -> np.ndarray:
        return np.array([self.fmt.exponent_bits, self.fmt.fraction_bits], np.int64)

    def layer_norm(self, node: Node) -> QStep:
        x, out = node.inputs[0], node.outputs[0]
        si, _ = self.scalar(x, node)
        so, _ = self.scalar(out, node)
        consts = [self.g.const(i) for i in node.present_inputs[1:]]
        if any(c is None for c in consts):
            raise S.unsupported(node, "scale and bias must be constants")
        shape = self.g.shape(x)
        axis = int(node.attr("axis", -1)) % len(shape)
        norm_shape = shape[axis:]
        gamma = np.broadcast_to(np.asarray(consts[0], np.float64), norm_shape)
        beta = (
            np.broadcast_to(np.asarray(consts[1], np.float64), norm_shape)
            if len(consts) > 1
            else None
        )
        params = FK.layer_norm_params(
            self.fmt,
            int(np.prod(norm_shape)),
            s_in=si,
            eps=float(node.attr("epsilon", 1e-5)),
            gamma=gamma,
            beta=beta,
            s_out=so,
        )
        return QStep("layernorm", {**params, "fp_format": self.fp_format()})

    def binary_fp(self, node: Node) -> QStep:
        """Div or Pow of two tensors on the DPU's float (constant operands as int8)."""
        a, b = node.inputs
        for i in (a, b):
            if self.g.is_constant(i):
                self.const_operand(i)
        sa, za = self.scalar(a, node)
        sb, _ = self.scalar(b, node)
        so, _ = self.scalar(node.outputs[0], node)
        if node.op is Op.DIV:
            params = FK.div_params(self.fmt, sa, sb, so)
            kind = "div_fp"
        else:
            params = FK.pow_params(self.fmt, sa, za, sb, so)
            kind = "pow_fp"
        return QStep(kind, {**params, "fp_format": self.fp_format()})

    def gather_table(self, node: Node) -> QStep:
        """A constant table looked up by computed indices: the table is stored in int8 on
        the output's grid, so the lookup itself is exact."""
        table = node.inputs[0]
        q = self.qp[node.outputs[0]]
        arr = np.asarray(self.editor.constants[table], np.float64)
        self.qp[table] = q
        self.set_const(table, quantize_values(arr, q.scale, q.zero_point), q)
        return QStep("gather")

    def table(self, node: Node) -> QStep:
        x, out = node.present_inputs[0], node.outputs[0]
        if self.g.is_constant(x):
            x = node.present_inputs[1]
        return lut_step(node, self.g, self.qp[x], self.qp[out])

    def rescale(self, node: Node, signs: list[float]) -> QStep:
        ins = node.present_inputs
        for i in ins:
            if self.g.is_constant(i):
                self.const_operand(i)
        so, _ = self.scalar(node.outputs[0], node)
        reals = np.array([self.scalar(i, node)[0] / so for i in ins])
        _m, n = K.quantize_multiplier(reals.max())
        shift = int(n[0])
        mults = np.rint(reals * 2.0**shift).astype(np.int64) * np.array(signs, np.int64)
        return QStep("rescale", {"mults": mults, "shift": np.int64(shift)})

    def mul(self, node: Node) -> QStep:
        a, b = node.inputs
        if node.op is Op.DIV:
            # Division by a constant is a multiplication by its reciprocal (as on the DPU):
            # the quantized graph says so, with the reciprocal as a new int8 constant.
            bc = self.g.const(b)
            if bc is None:
                return self.binary_fp(node)
            recip = (1.0 / np.asarray(bc, np.float64)).astype(np.float32)
            b = self.editor.add_constant(f"{b}_reciprocal", recip)
            self.editor.replace(node.name, node.with_(op=Op.MUL, inputs=(a, b)))
        for i in (a, b):
            if i in self.editor.constants:
                self.const_operand(i)
        sa, _ = self.scalar(a, node)
        sb, _ = self.scalar(b, node)
        so, _ = self.scalar(node.outputs[0], node)
        mult, shift = K.quantize_multiplier(sa * sb / so)
        return QStep("mul", {"mult": mult, "shift": shift})

    def mean(self, node: Node, count: int) -> QStep:
        si, _ = self.scalar(node.inputs[0], node)
        so, _ = self.scalar(node.outputs[0], node)
        mult, shift = K.quantize_multiplier(si / (so * count))
        return QStep("mean", {"mult": mult, "shift": shift})

    def avg_pool(self, node: Node) -> QStep:
        win = S.window_attrs(node, self.g.shape(node.inputs[0]), self.g.shape(node.outputs[0]))
        si, _ = self.scalar(node.inputs[0], node)
        so, _ = self.scalar(node.outputs[0], node)
        counts = np.arange(1, win.kernel[0] * win.kernel[1] + 1, dtype=np.float64)
        mult, shift = K.quantize_multiplier(si / (so * counts))
        return QStep("pool_avg", {"mult": mult, "shift": shift})

    def resize_linear(self, node: Node) -> QStep:
        axes = S.resized_axes(self.g.shape(node.inputs[0]), self.g.shape(node.outputs[0]))
        si, _ = self.scalar(node.inputs[0], node)
        so, _ = self.scalar(node.outputs[0], node)
        frac_bits = K.RESIZE_WEIGHT_BITS * len(axes)
        mult, shift = K.quantize_multiplier(si / so / 2.0**frac_bits)
        return QStep("resize_linear", {"mult": mult, "shift": shift})

    def softmax(self, node: Node) -> QStep:
        si, _ = self.scalar(node.inputs[0], node)
        so, _ = self.scalar(node.outputs[0], node)
        table = np.rint(np.exp(si * np.arange(-255, 1)) * (1 << K.SOFTMAX_EXP_BITS))
        return QStep(
            "softmax",
            {"exp_table": table.astype(np.int64), "recip": np.int64(np.rint((1 << 16) / so))},
        )

    def step(self, node: Node) -> QStep:
        op = node.op
        act_in = [i for i in node.present_inputs if not self.g.is_constant(i)]
        if op is Op.GATHER and self.g.is_constant(node.inputs[0]):
            return self.gather_table(node)
        if op in SHARE_OPS or (op in (Op.RESIZE, Op.UPSAMPLE) and S.resize_mode(node) == "nearest"):
            if op is Op.PAD:
                s, z = self.scalar(act_in[0], node)
                value = S.pad_constant(node, self.g)
                pad_q = int(np.clip(np.rint(value / s) + z, K.QMIN, K.QMAX))
                return QStep("share", {"pad_value": np.int64(pad_q)})
            return QStep("share")
        if op in MAC_OPS:
            return self.mac(node)
        if op in TABLE_OPS or (
            op in (Op.POW, Op.DIV, Op.MUL, Op.ADD, Op.SUB)
            and scalar_operand(node, self.g) is not None
        ):
            return self.table(node)
        if op in (Op.ADD, Op.SUB):
            return self.rescale(node, [1.0, 1.0 if op is Op.ADD else -1.0])
        if op in (Op.CONCAT, Op.MIN, Op.MAX):
            return self.rescale(node, [1.0] * len(node.present_inputs))
        if op in (Op.MUL, Op.DIV):
            return self.mul(node)
        if op is Op.POW:
            return self.binary_fp(node)
        if op is Op.LAYER_NORM:
            return self.layer_norm(node)
        if op is Op.GLOBAL_AVERAGE_POOL:
            shape = self.g.shape(node.inputs[0])
            return self.mean(node, int(np.prod(shape[2:])))
        if op in (Op.REDUCE_MEAN, Op.REDUCE_SUM):
            shape = self.g.shape(node.inputs[0])
            axes = S.reduce_axes(node, self.g)
            count = int(np.prod([shape[a] for a in axes])) if op is Op.REDUCE_MEAN else 1
            return self.mean(node, count)
        if op is Op.AVERAGE_POOL:
            return self.avg_pool(node)
        if op in (Op.RESIZE, Op.UPSAMPLE):
            return self.resize_linear(node)
        if op in (Op.SOFTMAX, Op.MASKED_SOFTMAX):
            return self.softmax(node)
        raise S.unsupported(node, "the int8 reference has no kernel for it")

    def build(self, io_quantized: bool) -> Graph:
        for node in self.g.nodes:
            self.steps[node.name] = self.step(node)
        boundary = set(self.g.inputs) | set(self.g.outputs)
        for name, t in list(self.editor.tensors.items()):
            if name in self.editor.constants or name not in self.qp:
                continue
            float_io = io_quantized and name in boundary
            dtype = t.dtype if float_io else self.qp[name].dtype
            self.editor.tensors[name] = Tensor(name, t.shape, dtype, self.qp[name])
        return self.editor.build(prune=True)


def saturate_bias(
    node: Node, bias: np.ndarray, bias_scale: np.ndarray, abs_sums: np.ndarray, zp_max: int
) -> np.ndarray:
    """int32 biases ``round(b / bias_scale)`` of ``node``'s output channels, saturated where
    they would not fit int32 once the back end folds the input zero point in (``-zp *
    sum(w_q)``, bounded by ``zp_max * abs_sums``); each saturated channel is named in one
    warning. The weight scale floor (`weight_scale_floor`) makes this rare: it is left for
    fan-ins beyond ~66,000 products."""
    limit = INT32_MAX - zp_max * np.asarray(abs_sums, np.int64)
    if np.any(limit < 0):
        c = int(np.argmin(limit))
        raise S.unsupported(
            node,
            f"input zero point x weights of channel {c} must fit int32, not "
            f"{zp_max} x {int(abs_sums[c])} (too many products for the accumulator)",
        )
    with np.errstate(over="ignore", invalid="ignore"):
        q = np.rint(np.asarray(bias, np.float64) / bias_scale)
    if not np.all(np.isfinite(q)):
        bad = [int(c) for c in np.flatnonzero(~np.isfinite(q))]
        raise QuantizationError(
            f"layer `{node.name}` ({node.op_type}): bias of channel {bad[0]} must be finite, "
            f"not {float(bias[bad[0]])}"
        )
    over = np.abs(q) > limit
    if np.any(over):
        chans = np.flatnonzero(over)
        named = ", ".join(
            f"channel {c} (bias {float(bias[c]):.6g} = {float(q[c]):.4g} steps of "
            f"{float(bias_scale[c]):.3g}, kept {int(np.sign(q[c]) * limit[c])})"
            for c in chans[:_SATURATED_NAMED]
        )
        more = f" and {chans.size - _SATURATED_NAMED} more" if chans.size > _SATURATED_NAMED else ""
        log.warning(
            "quantization: layer `%s` (%s): int32 bias saturated in %s%s; the output of the "
            "channel is off by the difference",
            node.name,
            node.op_type,
            named,
            more,
        )
        q = np.clip(q, -limit, limit)
    return q.astype(np.int32)


#: Saturated channels a warning names one by one.
_SATURATED_NAMED = 8


def _channel_abs_sums(node: Node, w_q: np.ndarray, axis: int) -> np.ndarray:
    """sum |w_q| of the weights each output channel reads (int64)."""
    if node.op is Op.BATCH_NORM:
        return np.abs(w_q.astype(np.int64)).reshape(-1)
    if node.op is Op.CONV_TRANSPOSE:  # [Cin, Cout/group, k...]: see the function below
        w = np.abs(w_q.astype(np.int64))
        group = int(node.attr("group", 1))
        c_in, opg = w.shape[0], w.shape[1]
        per = w.reshape(group, c_in // group, opg, -1).sum(axis=(1, 3))
        return per.reshape(-1)
    moved = np.moveaxis(w_q, axis, 0).reshape(w_q.shape[axis], -1)
    sums = np.empty(moved.shape[0], np.int64)
    # block by block: the int64 copy of a whole weight is 8 bytes a weight
    rows = max(1, BLOCK_BYTES // max(1, moved.shape[1] * 8))
    for i in range(0, moved.shape[0], rows):
        sums[i : i + rows] = np.abs(moved[i : i + rows].astype(np.int64)).sum(axis=1)
    return sums


def _conv_transpose_weight_scales(
    w: np.ndarray, group: int, resolution: np.ndarray, bias_floor: np.ndarray
) -> tuple[np.ndarray, np.ndarray, int]:
    """(scales along the weight axis, scale of each output channel, axis) of ConvTranspose
    weights, laid out (Cin, Cout/group, kh, kw).

    group 1: per output channel = along axis 1. Grouped: output channel ``g*opg + o``
    reads ``w[g*cpg:(g+1)*cpg, o]``, a slice no single axis of ``w`` indexes, so the
    scales are per group along axis 0 (each repeated over the group's input channels);
    for a depthwise ConvTranspose (one output channel per group) that is again one scale
    per output channel.
    """
    if group == 1:
        s_w = floored_weight_scales(weight_ranges_per_channel(w, 1), resolution, bias_floor)
        return s_w, s_w, 1
    c_in, opg = w.shape[0], w.shape[1]
    # a group shares one scale: the finest resolution and the largest bias its channels need
    s_g = floored_weight_scales(
        weight_ranges_per_channel(w.reshape(group, -1), 0),
        resolution.reshape(group, opg).min(axis=1),
        bias_floor.reshape(group, opg).max(axis=1),
    )
    return np.repeat(s_g, c_in // group), np.repeat(s_g, opg), 0


def _same(a: QuantParams, b: QuantParams) -> bool:
    return (
        a.axis == b.axis
        and np.array_equal(a.scale, b.scale)
        and np.array_equal(a.zero_point, b.zero_point)
    )


def _clip_range(node: Node, graph: Graph) -> tuple[float, float]:
    fn = unary_function(node, graph)
    lo = float(fn(np.array([-np.inf]))[0])
    hi = float(fn(np.array([np.inf]))[0])
    return lo, hi


def quantize_graph(
    graph: Graph,
    calibration: CalibrationData,
    *,
    scheme: Scheme | str = Scheme.PER_TENSOR_HISTOGRAM,
    quantize_dw_channel_wise: bool = False,
    remove_io_quantization: bool = False,
    progress: Any = None,
    executor: FloatExecutor | str = FloatExecutor.ONNXRUNTIME,
    float_format: FloatFormat | None = None,
    histogram: HistogramRange | None = None,
) -> QuantizedGraph:
    """Calibrate ``graph`` and quantize it (see the module docstring); ``executor`` runs
    the float forward passes of calibration (see `calibrate`); ``float_format`` is the DPU's
    float (`FloatFormat.of(arch)`; default: the Metis float18); ``histogram`` chooses the
    range of histogram observers (default: MSE-optimal)."""
    scheme = Scheme(str(scheme))
    for name in graph.inputs:
        for sample in calibration.samples:
            if name not in sample:
                raise QuantizationError(
                    f"calibration sample has no value for input {name} (it has {sorted(sample)})"
                )
    _, qp = calibrate(
        graph, calibration, scheme, progress=progress, executor=executor, histogram=histogram
    )
    builder = _Builder(graph, dict(qp), quantize_dw_channel_wise, float_format or FloatFormat())
    qgraph = builder.build(io_quantized=not remove_io_quantization)
    return QuantizedGraph(
        graph=qgraph,
        steps=builder.steps,
        scheme=scheme.value,
        io_quantized=not remove_io_quantization,
        quantize_dw_channel_wise=quantize_dw_channel_wise,
        calibration_source=calibration.source,
        calibration_samples=len(calibration.samples),
    )


__all__ = [
    "FloatExecutor",
    "Grid",
    "ObservedRange",
    "QStep",
    "QuantizedGraph",
    "calibrate",
    "imc_operands",
    "lut_step",
    "observe_ranges",
    "quantize_graph",
    "saturate_bias",
    "wide_tensors",
]
