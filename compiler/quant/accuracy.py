"""Accuracy of the int8 model against the fp32 model: SQNR, max abs error, top-1 agreement.

SQNR (dB) = 10 log10( sum(ref**2) / sum((ref - test)**2) ) over all held-aside samples of
an output; infinite when the outputs are identical. Top-1 agreement is reported for
classifier outputs (rank 2, more than one class): the share of samples whose arg-max
class is the same in both models.

>>> import numpy as np
>>> round(sqnr_db(np.array([3.0, 4.0]), np.array([3.0, 4.5])), 2)
20.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from aipusim.compiler.ir import Graph
    from aipusim.compiler.quant.quantize import QuantizedGraph

Outputs = Mapping[str, np.ndarray]

#: Layers `limiting_layers` names, and the least drop (dB) that makes a layer limiting.
LIMITING_COUNT = 3
MIN_DROP_DB = 1.0


def sqnr_db(ref: np.ndarray, test: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio of ``test`` against ``ref`` in dB."""
    r = np.asarray(ref, np.float64)
    noise = float(((r - np.asarray(test, np.float64)) ** 2).sum())
    signal = float((r**2).sum())
    if noise == 0:
        return math.inf
    if signal == 0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def is_classifier_output(shape: tuple[int, ...]) -> bool:
    """A (batch, classes) output with more than one class."""
    return len(shape) == 2 and shape[1] > 1


def output_report(refs: Sequence[np.ndarray], tests: Sequence[np.ndarray]) -> dict:
    """SQNR, max abs error (and top-1 agreement for classifiers) of one output."""
    ref = np.concatenate([np.asarray(r).reshape(1, *np.shape(r)) for r in refs])
    test = np.concatenate([np.asarray(t).reshape(1, *np.shape(t)) for t in tests])
    out: dict = {
        "sqnr_db": _json_float(sqnr_db(ref, test)),
        "max_abs_error": float(np.abs(ref.astype(np.float64) - test).max()),
        "fp32_max_abs": float(np.abs(ref).max()),
        "samples": len(refs),
    }
    if is_classifier_output(tuple(np.shape(refs[0]))):
        r = ref.reshape(-1, ref.shape[-1]).argmax(axis=1)
        t = test.reshape(-1, test.shape[-1]).argmax(axis=1)
        out["top1_agreement"] = float((r == t).mean())
    return out


def round_to_grid(x: np.ndarray, q: Any) -> np.ndarray:
    """``x`` rounded to the integer grid of `QuantParams` ``q`` and back to float32 (the
    value the int8 model would hold, before any arithmetic error).

    >>> from aipusim.compiler.ir import QuantParams
    >>> round_to_grid(np.array([0.26, 99.0]), QuantParams(np.float32(0.5), np.int32(0))).tolist()
    [0.5, 63.5]
    """
    from aipusim.compiler.quant.scheme import QMAX, QMIN, WIDE_QMAX, WIDE_QMIN

    wide = np.dtype(q.dtype.np).itemsize > 1
    lo, hi = (WIDE_QMIN, WIDE_QMAX) if wide else (QMIN, QMAX)
    s = np.asarray(q.scale, np.float64)
    z = np.asarray(q.zero_point, np.float64)
    if q.axis is not None and s.ndim:
        shape = [1] * np.ndim(x)
        shape[q.axis] = s.size
        s, z = s.reshape(shape), z.reshape(shape)
    return ((np.clip(np.rint(x / s) + z, lo, hi) - z) * s).astype(np.float32)


def _json_float(v: float) -> float | str:
    return v if math.isfinite(v) else ("inf" if v > 0 else "-inf")


def accuracy_report(
    fp32: Sequence[Outputs],
    int8: Sequence[Outputs],
    *,
    fp32_source: str = "",
    per_layer: Mapping[str, float] | None = None,
) -> dict:
    """The ``report.json`` accuracy section: per output, over the held-aside samples.

    >>> r = accuracy_report([{"y": np.array([[1.0, 2.0]])}], [{"y": np.array([[1.0, 2.0]])}])
    >>> r["outputs"]["y"]["sqnr_db"], r["outputs"]["y"]["top1_agreement"]
    ('inf', 1.0)
    """
    names = list(fp32[0]) if fp32 else []
    report: dict = {
        "fp32_reference": fp32_source,
        "samples": len(fp32),
        "outputs": {n: output_report([f[n] for f in fp32], [q[n] for q in int8]) for n in names},
    }
    if per_layer is not None:
        report["per_layer_sqnr_db"] = {k: _json_float(v) for k, v in per_layer.items()}
    return report


def per_layer_sqnr(
    fp32_values: Sequence[Outputs], int8_values: Sequence[Outputs]
) -> dict[str, float]:
    """SQNR of every tensor both runs kept (graph order of the int8 run)."""
    acc = SqnrAccumulator()
    for f, q in zip(fp32_values, int8_values, strict=True):
        acc.add(f, q)
    return acc.result()


class SqnrAccumulator:
    """Per-tensor SQNR over samples added one at a time (so a big model's every activation
    of every sample need not be held at once). Same value as `sqnr_db` over all samples.

    >>> acc = SqnrAccumulator()
    >>> acc.add({"y": np.array([3.0])}, {"y": np.array([3.5])})
    >>> acc.add({"y": np.array([4.0])}, {"y": np.array([4.0])})
    >>> round(acc.result()["y"], 2)
    20.0
    """

    def __init__(self) -> None:
        self.signal: dict[str, float] = {}
        self.noise: dict[str, float] = {}

    def add(self, fp32: Outputs, int8: Outputs) -> None:
        for name, test in int8.items():
            if name not in fp32:
                continue
            ref = np.asarray(fp32[name], np.float64)
            err = ref - np.asarray(test, np.float64)
            self.signal[name] = self.signal.get(name, 0.0) + float((ref * ref).sum())
            self.noise[name] = self.noise.get(name, 0.0) + float((err * err).sum())

    def result(self) -> dict[str, float]:
        out = {}
        for name, signal in self.signal.items():
            noise = self.noise[name]
            if noise == 0:
                out[name] = math.inf
            elif signal == 0:
                out[name] = -math.inf
            else:
                out[name] = 10.0 * math.log10(signal / noise)
        return out


def fused_preactivations(qgraph: QuantizedGraph) -> set[str]:
    """Inputs of Relu/Clip nodes fused into their producer: their int8 value is already
    clipped, so comparing it with the unclipped fp32 value would say nothing."""
    g = qgraph.graph
    return {
        n.inputs[0]
        for n in g.nodes
        if qgraph.steps[n.name].kind == "clamp"
        and g.tensor(n.inputs[0]).quant is g.tensor(n.outputs[0]).quant
    }


def tensor_sqnr(
    graph: Graph, qgraph: QuantizedGraph, inputs: Sequence[Mapping[str, np.ndarray]]
) -> dict[str, float]:
    """Tensor name -> SQNR (dB) of the int8 reference (`run_int8`, dequantized) against
    the fp32 graph (`run_fp32`) over the samples ``inputs``, in graph order; fused
    pre-activations (`fused_preactivations`) are left out. One sample at a time: a big
    model's activations of every sample need not be held at once."""
    from aipusim.compiler.quant.float_exec import run_fp32
    from aipusim.compiler.quant.reference import run_int8

    fused = fused_preactivations(qgraph)
    acc = SqnrAccumulator()
    for s in inputs:
        q_all = run_int8(qgraph, s, keep_all=True)
        acc.add(
            run_fp32(graph, s, keep_all=True), {k: v for k, v in q_all.items() if k not in fused}
        )
    order = {n: i for i, n in enumerate(o for node in qgraph.graph.nodes for o in node.outputs)}
    return dict(sorted(acc.result().items(), key=lambda kv: order.get(kv[0], -1)))


def layer_sqnr(
    graph: Graph, qgraph: QuantizedGraph, inputs: Sequence[Mapping[str, np.ndarray]]
) -> dict[str, float]:
    """Layer (node name of the quantized graph) -> SQNR (dB) of its output, int8 reference
    against fp32, over the samples ``inputs`` (the lowest output of a multi-output node);
    the graph inputs are listed too, under their own names (their rounding to int8).
    Layers whose output is a fused pre-activation are measured at the activation.

    >>> from aipusim.compiler.config import CompilerConfig
    >>> from aipusim.compiler.ir import Graph, Node, Op, Tensor
    >>> from aipusim.compiler.quant import calibrate_and_quantize, random_calibration
    >>> g = Graph("g", (Node("r", Op.SIGMOID, ("x",), ("y",)),),
    ...           {"x": Tensor("x", (1, 64)), "y": Tensor("y", (1, 64))}, {}, ("x",), ("y",))
    >>> data = random_calibration({"x": (1, 64)}, samples=8)
    >>> db = layer_sqnr(g, calibrate_and_quantize(g, CompilerConfig(), data), data.held_aside)
    >>> sorted(db), db["r"] > 30
    (['r', 'x'], True)
    """
    return by_layer(qgraph.graph, tensor_sqnr(graph, qgraph, inputs))


def by_layer(graph: Graph, per_tensor: Mapping[str, Any]) -> dict[str, float]:
    """Tensor-keyed SQNRs (``per_layer_sqnr_db`` of the accuracy report) keyed by the node
    that produces each tensor (its lowest output), graph inputs under their own names."""
    out = {i: float(per_tensor[i]) for i in graph.inputs if i in per_tensor}
    for node in graph.nodes:
        values = [float(per_tensor[o]) for o in node.outputs if o in per_tensor]
        if values:
            out[node.name] = min(values)
    return out


def rounding_sensitivity(
    graph: Graph,
    qgraph: QuantizedGraph,
    inputs: Sequence[Mapping[str, np.ndarray]],
    tensors: Sequence[str] | None = None,
) -> dict[str, float]:
    """Tensor -> the SQNR (dB) of the graph's outputs (the lowest over outputs) when only
    that tensor is rounded to its int8 grid, every other tensor and every weight in float;
    lowest first. Where `layer_sqnr` shows where the error shows, this shows which grid it
    enters through: PP-LCNet's first HardSwish output, rounded alone, leaves its logits at
    7.8 dB. One float run per tensor and sample: pass ``tensors`` to limit it.

    >>> from aipusim.compiler.config import CompilerConfig
    >>> from aipusim.compiler.ir import Graph, Node, Op, Tensor
    >>> from aipusim.compiler import quant
    >>> t = {n: Tensor(n, (2, 16)) for n in "ab"}
    >>> g = Graph("t", (Node("tanh", Op.TANH, ("a",), ("b",)),), t, {}, ("a",), ("b",))
    >>> cal = quant.random_calibration({"a": (2, 16)}, samples=4)
    >>> db = rounding_sensitivity(g, quant.calibrate_and_quantize(g, CompilerConfig(), cal),
    ...                           cal.held_aside)
    >>> list(db) == sorted(db, key=db.get) and set(db) == {"a", "b"}
    True
    """
    from aipusim.compiler.quant.float_exec import run_fp32

    qg = qgraph.graph
    if tensors is None:
        names = [*graph.inputs, *(o for n in graph.nodes for o in n.outputs if o)]
        tensors = [t for t in names if t in qg.tensors and qg.tensor(t).quant is not None]
    refs = [run_fp32(graph, s) for s in inputs]
    out: dict[str, float] = {}
    for t in tensors:
        q = qg.tensor(t).quant
        assert q is not None, f"tensor {t} is not quantized"

        def one(name: str, value: np.ndarray, t: str = t, q: Any = q) -> np.ndarray:
            return round_to_grid(value, q) if name == t else value

        acc = SqnrAccumulator()
        for s, ref in zip(inputs, refs, strict=True):
            acc.add(ref, run_fp32(graph, s, replace=one))
        out[t] = min(acc.result().values())
    return dict(sorted(out.items(), key=lambda kv: kv[1]))


def finite_value(v: Any) -> float | None:
    """``v`` as a float when it is a finite number (report values may be "inf"), else None."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def limiting_layers(
    graph: Graph, sqnr: Mapping[str, Any], count: int = LIMITING_COUNT
) -> list[tuple[str, float, float]]:
    """(node name, its output SQNR, drop below its inputs' SQNR) of the ``count`` nodes
    that lose the most, largest drop first (drops under `MIN_DROP_DB` left out): the
    layers that lose precision rather than pass on a loss from earlier.

    ``sqnr`` is keyed by layer (`layer_sqnr`) or by tensor (the accuracy report's
    ``per_layer_sqnr_db``); values may be the report's ``"inf"`` strings.

    >>> from aipusim.compiler.ir import Graph, Node, Op, Tensor
    >>> g = Graph("g", (Node("a", Op.RELU, ("x",), ("y",)), Node("b", Op.SIGMOID, ("y",), ("z",))),
    ...           {n: Tensor(n, (1, 4)) for n in "xyz"}, {}, ("x",), ("z",))
    >>> limiting_layers(g, {"x": 40.0, "y": 38.0, "z": 12.0})
    [('b', 12.0, 26.0), ('a', 38.0, 2.0)]
    >>> limiting_layers(g, {"x": 40.0, "a": 38.0, "b": 12.0})
    [('b', 12.0, 26.0), ('a', 38.0, 2.0)]
    """

    def of_tensor(t: str) -> float | None:
        if t in sqnr:
            return finite_value(sqnr[t])
        producer = graph.producer(t)
        return finite_value(sqnr.get(producer.name)) if producer is not None else None

    found = []
    for node in graph.nodes:
        own_values = [v for v in (of_tensor(o) for o in node.outputs if o) if v is not None]
        ins = [of_tensor(i) for i in node.present_inputs if not graph.is_constant(i)]
        ins = [v for v in ins if v is not None]
        if not own_values:
            continue
        own = min(own_values)
        drop = (min(ins) - own) if ins else 0.0
        if drop >= MIN_DROP_DB:
            found.append((node.name, round(own, 1), round(drop, 1)))
    found.sort(key=lambda t: -t[2])
    return found[:count]


__all__ = [
    "LIMITING_COUNT",
    "MIN_DROP_DB",
    "SqnrAccumulator",
    "accuracy_report",
    "by_layer",
    "finite_value",
    "fused_preactivations",
    "is_classifier_output",
    "layer_sqnr",
    "limiting_layers",
    "output_report",
    "per_layer_sqnr",
    "round_to_grid",
    "rounding_sensitivity",
    "sqnr_db",
    "tensor_sqnr",
]
