"""Pass 4 of the compiler: calibration, int8 quantization and the int8 CPU reference.

Entry points:

- `calibrate_and_quantize(graph, config, calibration)` -> `QuantizedGraph`
- `run_int8(qgraph, inputs)` / `run_fp32(graph, inputs)` -> output name -> float array
- `evaluate(graph, qgraph, calibration, debug=...)` -> the accuracy report (dict)
- `write_quantized_model(dir, qgraph, report)` / `read_quantized_model(manifest_path)`
- `calibration_for(graph, request)`: the calibration data a `CompileRequest` asks for
  (bundled photographs for an image input by default, see `data`)
- `quantize_pass(graph, ctx)`: the pipeline pass (Graph -> quantized Graph; the
  `QuantizedGraph` is left in ``ctx.results["quantize"]``)

Example:
    >>> import numpy as np
    >>> from aipusim.compiler.config import CompilerConfig
    >>> from aipusim.compiler.ir import Graph, Node, Op, Tensor
    >>> g = Graph("g", (Node("r", Op.RELU, ("x",), ("y",)),),
    ...           {"x": Tensor("x", (1, 8)), "y": Tensor("y", (1, 8))}, {}, ("x",), ("y",))
    >>> data = random_calibration({"x": (1, 8)}, samples=500)
    >>> q = calibrate_and_quantize(g, CompilerConfig(), data)
    >>> evaluate(g, q, data)["outputs"]["y"]["sqnr_db"] > 30
    True
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from aipusim.base.errors import QuantizationError
from aipusim.base.lazy import lazy_names
from aipusim.compiler.ir import Graph, Op, is_depthwise
from aipusim.compiler.quant.accuracy import (
    accuracy_report,
    layer_sqnr,
    limiting_layers,
    output_report,
    sqnr_db,
    tensor_sqnr,
)
from aipusim.compiler.quant.advice import DW_CHANNEL_WISE, advise
from aipusim.compiler.quant.artifacts import read_quantized_model, write_quantized_model
from aipusim.compiler.quant.cache import quantize_cached
from aipusim.compiler.quant.data import (
    CalibrationData,
    Normalization,
    bundled_image_calibration,
    image_input,
    image_rule_text,
    imageset_calibration,
    random_calibration,
)
from aipusim.compiler.quant.observers import HistogramRange
from aipusim.compiler.quant.quantize import QStep, QuantizedGraph, quantize_graph
from aipusim.compiler.quant.scheme import Scheme, dequantize_values, quantize_values
from aipusim.compiler.request import CalibrationMode
from aipusim.isa.float18 import FloatFormat

if TYPE_CHECKING:
    from aipusim.compiler.config import CompilerConfig

#: Names loaded on first use: the executors import numba's compiler (about a second), which
#: a compile does not need.
_LAZY = {
    "run_fp32": "aipusim.compiler.quant.float_exec",
    "run_int8": "aipusim.compiler.quant.reference",
}


__getattr__ = lazy_names(__name__, _LAZY, globals())


def calibrate_and_quantize(
    graph: Graph,
    config: CompilerConfig,
    calibration: CalibrationData,
    *,
    progress: Any = None,
    arch: Any = None,
) -> QuantizedGraph:
    """Quantize ``graph`` with the knobs of a `CompilerConfig` (reference property names:
    ``quantization_scheme``, ``quantize_dw_channel_wise``, ``remove_io_quantization``; the
    aipusim extensions ``histogram_range_method`` and ``histogram_percentile``); the DPU's
    float format comes from ``arch`` (default: the bundled Metis)."""
    return quantize_graph(
        graph,
        calibration,
        scheme=str(config.quantization_scheme),
        quantize_dw_channel_wise=bool(config.quantize_dw_channel_wise),
        remove_io_quantization=bool(config.remove_io_quantization),
        progress=progress,
        float_format=FloatFormat.of(arch) if arch is not None else None,
        histogram=HistogramRange(config.histogram_range_method, float(config.histogram_percentile)),
    )


def _fp32_outputs(graph: Graph, sample: dict, source: str) -> dict[str, np.ndarray]:
    if source == "onnx":
        from aipusim.compiler.export import run_graph

        return {k: np.asarray(v) for k, v in run_graph(graph, sample).items()}
    from aipusim.compiler.quant.float_exec import run_fp32

    return run_fp32(graph, sample)


def evaluate(
    graph: Graph,
    qgraph: QuantizedGraph,
    calibration: CalibrationData,
    *,
    debug: bool = False,
    fp32: str = "onnx",
    reference: list[dict[str, np.ndarray]] | None = None,
) -> dict:
    """Compare the int8 model with the fp32 ``graph`` on the held-aside samples.

    ``fp32="onnx"`` runs the float graph through its ONNX export in
    ``onnx.reference`` (independent of this package's kernels); ``"numpy"`` uses
    `run_fp32`; ``reference`` gives those fp32 outputs when they are already known. ``debug``
    adds the SQNR of every activation (``quantization_debug``, and every quantize-only run)
    except the pre-activation outputs of MAC ops whose Relu/Clip is fused.

    Each output also gets ``input_rounding_sqnr_db``: the SQNR of the fp32 model when only
    its inputs are rounded to their int8 grid. It shows how strongly the network amplifies
    a small input error (random-weight networks amplify a lot), i.e. a ceiling that no
    int8 model of this network can beat by much.
    """
    from aipusim.compiler.quant.reference import run_int8

    samples = held_samples(calibration)
    t0 = time.perf_counter()
    ref = reference if reference is not None else fp32_reference(graph, calibration, fp32)
    t1 = time.perf_counter()
    got = [run_int8(qgraph, s) for s in samples]
    t2 = time.perf_counter()
    layers = tensor_sqnr(graph, qgraph, samples) if debug else None
    report = accuracy_report(
        ref,
        got,
        fp32_source="onnx.reference" if fp32 == "onnx" else "aipusim numpy fp32",
        per_layer=layers,
    )
    rounded = [_fp32_outputs(graph, _round_inputs(qgraph, s), fp32) for s in samples]
    for name, out in report["outputs"].items():
        out["input_rounding_sqnr_db"] = output_report(
            [r[name] for r in ref], [r[name] for r in rounded]
        )["sqnr_db"]
    report["held_aside_distinct"] = bool(calibration.held_aside) and calibration.held_aside_distinct
    report["timing_s"] = {"fp32": round(t1 - t0, 3), "int8": round(t2 - t1, 3)}
    return report


def held_samples(calibration: CalibrationData) -> list[dict[str, np.ndarray]]:
    """The samples the accuracy report runs on (held aside, else the first calibration one)."""
    return list(calibration.held_aside) or list(calibration.samples[:1])


def fp32_reference(
    graph: Graph, calibration: CalibrationData, fp32: str = "onnx"
) -> list[dict[str, np.ndarray]]:
    """The fp32 outputs of `held_samples` (``onnx``: onnx.reference, ``numpy``: `run_fp32`)."""
    return [_fp32_outputs(graph, s, fp32) for s in held_samples(calibration)]


def accuracy_with_advice(
    graph: Graph,
    qgraph: QuantizedGraph,
    calibration: CalibrationData,
    config: CompilerConfig,
    *,
    arch: Any = None,
    debug: bool = True,
) -> dict:
    """`evaluate` (per-layer with ``debug``), then, for outputs below the SQNR target,
    the limiting layers and the setting that helps (`advice.advise`): another scheme, or
    per-channel depthwise weights when they are per tensor."""
    ref = fp32_reference(graph, calibration)
    report = evaluate(graph, qgraph, calibration, debug=debug, reference=ref)

    def try_scheme(alternative: str) -> dict[str, float]:
        cfg = config.copy()
        if alternative == DW_CHANNEL_WISE:
            cfg.quantize_dw_channel_wise = True
        else:
            cfg.quantization_scheme = alternative
        other = calibrate_and_quantize(graph, cfg, calibration, arch=arch)
        result = evaluate(graph, other, calibration, reference=ref)
        return {k: v["sqnr_db"] for k, v in result["outputs"].items()}

    alternatives = [s.value for s in Scheme]
    if not qgraph.quantize_dw_channel_wise and any(is_depthwise(n, graph) for n in graph.nodes):
        alternatives.append(DW_CHANNEL_WISE)
    return advise(qgraph.graph, report, qgraph.scheme, try_scheme, alternatives)


def _round_inputs(qgraph: QuantizedGraph, sample: dict) -> dict[str, np.ndarray]:
    """The sample with each input replaced by its int8-grid value (quantize, dequantize)."""
    out = {}
    for name, x in sample.items():
        q = qgraph.qparams(name)
        xq = quantize_values(np.asarray(x, np.float64), q.scale, q.zero_point, q.axis)
        out[name] = dequantize_values(xq, q.scale, q.zero_point, q.axis)
    return out


def index_ranges(graph: Graph) -> dict[str, int]:
    """Integer graph inputs -> the number of rows the Gathers reading them index (the
    smallest, so that every lookup is valid); 1 for an integer input no Gather reads."""
    out: dict[str, int] = {}
    for name in graph.inputs:
        if graph.tensor(name).dtype.np.kind not in "iu":
            continue
        sizes = [
            graph.shape(c.inputs[0])[int(c.attr("axis", 0)) % len(graph.shape(c.inputs[0]))]
            for c in graph.consumers(name)
            if c.op is Op.GATHER and c.inputs[1] == name
        ]
        out[name] = min(sizes, default=1)
    return out


def calibration_for(graph: Graph, request: Any = None, *, seed: int = 0) -> CalibrationData:
    """The calibration data a request (the CLI flags) asks for; with none: ``auto``.

    - ``--calibration random``: seeded random data (no ``--imageset``/``--transform``).
    - ``--imageset DIR``: its images, through ``--transform`` or the built-in preprocessing.
    - ``--transform`` alone: the bundled images through the script.
    - otherwise, an image input (`data.image_input`) calibrates on the bundled images with
      the built-in preprocessing; any other graph gets random data (``auto``) or an error
      (``images``).
    """
    mode = CalibrationMode(str(getattr(request, "calibration", None) or "auto"))
    imageset = getattr(request, "imageset", None)
    transform = getattr(request, "transform", None)
    mean, std = getattr(request, "image_mean", None), getattr(request, "image_std", None)
    layout = getattr(request, "input_data_layout", None)
    flags = {"--imageset": imageset, "--transform": transform}
    flags |= {"--image-mean": mean, "--image-std": std}
    given = [flag for flag, value in flags.items() if value]
    if mode is CalibrationMode.RANDOM:
        if given:
            raise QuantizationError(
                f"--calibration must be images or auto with {', '.join(given)}, not random"
            )
        return random_calibration(
            {n: graph.shape(n) for n in graph.inputs},
            seed=seed,
            index_ranges=index_ranges(graph),
        )
    if transform is not None and (mean or std):
        raise QuantizationError(
            "--image-mean/--image-std must be left out with --transform (the script "
            "normalises), not given"
        )
    floats = [n for n in graph.inputs if graph.tensor(n).dtype.np.kind not in "iu"]
    single = floats[0] if len(graph.inputs) == 1 and floats else None
    image = image_input(graph.shape(single), layout) if single is not None else None
    if single is None or (image is None and transform is None):
        if not given and mode is CalibrationMode.AUTO:
            return calibration_for(graph, _RandomRequest(), seed=seed)
        what = (
            f"{single} of shape {graph.shape(single)}"
            if single is not None
            else f"{len(graph.inputs)} inputs ({len(floats)} float)"
        )
        raise QuantizationError(
            f"calibration images need one image input ({image_rule_text()}), not {what}"
        )
    assert single is not None
    norm = Normalization(mean or (0.0,), std or (1.0,))
    color = str(getattr(request, "color_format", "RGB"))
    backend = str(getattr(request, "imreader_backend", "PIL"))
    if imageset is None:
        return bundled_image_calibration(
            single,
            graph.shape(single),
            layout=layout,
            color=color,
            normalization=norm,
            transform=transform,
            backend=backend,
        )
    return imageset_calibration(
        imageset,
        transform,
        single,
        graph.shape(single),
        layout=str(layout or (image.layout if image else "NCHW")),
        color=color,
        backend=backend,
        normalization=norm,
    )


class _RandomRequest:
    """A request for seeded random calibration data."""

    calibration = CalibrationMode.RANDOM


def _arch_of(ctx: Any) -> Any:
    get = getattr(ctx, "get_arch", None)
    return get() if get is not None else None


def quantize_pass(graph: Graph, ctx: Any) -> QuantizedGraph:
    """Pipeline pass: calibrate + quantize, through the quantization cache (`cache`) unless
    the request's ``quantization_cache`` is False. The quantized graph with its integer
    program goes on down the pipeline; ``ctx.results["quantize"]`` keeps
    ``{"qgraph", "calibration", "float_graph", "files", "cache"}`` (this pass's result
    before the rewrites, its serialized core files, and ``cached`` or ``computed``) for the
    accuracy report and the ``quantized_model/`` artifact."""
    request = getattr(ctx, "request", None)
    calibration = calibration_for(graph, request)
    arch = _arch_of(ctx)
    found = quantize_cached(
        graph,
        ctx.config,
        calibration,
        lambda: calibrate_and_quantize(graph, ctx.config, calibration, arch=arch),
        arch=arch,
        use_cache=bool(getattr(request, "quantization_cache", True)),
    )
    ctx.results["quantize"] = {
        "qgraph": found.qgraph,
        "calibration": calibration,
        "float_graph": graph,
        "files": found.files,
        "cache": found.source,
    }
    return found.qgraph


__all__ = [
    "CalibrationData",
    "QStep",
    "QuantizedGraph",
    "accuracy_report",
    "accuracy_with_advice",
    "bundled_image_calibration",
    "calibrate_and_quantize",
    "calibration_for",
    "evaluate",
    "fp32_reference",
    "held_samples",
    "imageset_calibration",
    "layer_sqnr",
    "limiting_layers",
    "quantize_pass",
    "random_calibration",
    "read_quantized_model",
    "run_fp32",
    "run_int8",
    "sqnr_db",
    "write_quantized_model",
]
