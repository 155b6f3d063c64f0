"""The field's baseline for int8 accuracy: onnxruntime's ``quantize_static`` on the same data.

`ort_static_sqnr` quantizes an ONNX model with onnxruntime's post-training static
quantization (QDQ format, int8 activations and weights, weights per channel, the
calibration method of the caller's choice; onnxruntime's optional pre-processing step
is not run), calibrated on the same samples aipusim calibrates on, then runs the fp32 and
the QDQ model in onnxruntime on the evaluation samples and compares their outputs with
`accuracy.output_report`. When aipusim's int8 model is less accurate than this, the
quantizer loses something a standard tool keeps.

Example:
    >>> import numpy as np, onnx
    >>> from onnx import TensorProto, helper, numpy_helper
    >>> w = numpy_helper.from_array(np.random.default_rng(0).normal(size=(4, 3, 1, 1))
    ...                             .astype(np.float32), "w")
    >>> m = helper.make_model(helper.make_graph(
    ...     [helper.make_node("Conv", ["x", "w"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 4])], [w]),
    ...     opset_imports=[helper.make_opsetid("", 17)])
    >>> xs = [np.random.default_rng(i).normal(size=(1, 3, 4, 4)).astype(np.float32)
    ...       for i in range(4)]
    >>> r = ort_static_sqnr(m, (1, 3, 4, 4), xs, xs)
    >>> r["sqnr_db"] > 25
    True
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from aipusim.base.errors import QuantizationError
from aipusim.compiler.quant.accuracy import output_report

#: Calibration methods of onnxruntime's ``CalibrationMethod`` that `ort_static_sqnr` takes.
ORT_CALIBRATION_METHODS = ("MinMax", "Entropy", "Percentile")

Sample = np.ndarray | Mapping[str, np.ndarray]


def _fixed_input_model(model: str | os.PathLike[str] | onnx.ModelProto, shape: Sequence[int]):
    """The model with its (single) input's dimensions set to ``shape``."""
    proto = model if isinstance(model, onnx.ModelProto) else onnx.load(str(model))
    proto = onnx.ModelProto.FromString(proto.SerializeToString())  # never edit the caller's
    inits = {i.name for i in proto.graph.initializer}
    inputs = [i for i in proto.graph.input if i.name not in inits]
    if len(inputs) != 1:
        raise QuantizationError(f"the ORT baseline needs a model with one input, not {len(inputs)}")
    dims = inputs[0].type.tensor_type.shape.dim
    if len(dims) != len(shape):
        raise QuantizationError(
            f"input shape must have {len(dims)} dimensions for input {inputs[0].name}, "
            f"not {tuple(shape)}"
        )
    for d, v in zip(dims, shape, strict=True):
        d.ClearField("dim_param")
        d.dim_value = int(v)
    return proto, inputs[0].name


def _feeds(samples: Sequence[Sample], name: str) -> list[dict[str, np.ndarray]]:
    return [
        {name: np.asarray(s[name] if isinstance(s, Mapping) else s, np.float32)} for s in samples
    ]


def ort_static_sqnr(
    model: str | os.PathLike[str] | onnx.ModelProto,
    input_shape: Sequence[int],
    calib_inputs: Sequence[Sample],
    eval_inputs: Sequence[Sample],
    *,
    method: str = "MinMax",
    per_channel: bool = True,
    output: str | None = None,
    fused_kernels: bool = False,
) -> dict[str, Any]:
    """SQNR (dB) and top-1 agreement of onnxruntime's ``quantize_static`` (QDQ, int8) model
    against the fp32 model, on ``eval_inputs``, calibrated on ``calib_inputs``.

    Samples are arrays of ``input_shape`` (or dicts input name -> array). The result is
    the first output's `accuracy.output_report` (``sqnr_db``, ``max_abs_error``,
    ``top1_agreement`` for a (batch, classes) output ...) plus ``output``, ``method`` and
    ``per_channel``. ``output`` names the tensor compared (default: the first graph
    output), e.g. the logits before a Softmax that aipusim leaves to the host.

    The QDQ model runs with onnxruntime's graph optimizations off (``fused_kernels``
    False, the default): each DequantizeLinear -> float op -> QuantizeLinear computes
    exactly what the quantization scheme defines. With them on, onnxruntime fuses the QDQ
    pairs into its int8 CPU kernels, and on an x86 CPU without VNNI its int8 x int8
    products saturate in 16-bit pairs: a 1x1 conv calibrated on one random sample then
    reaches 9.6 dB on that sample instead of 41.6 dB, an artefact of the runtime rather
    than of the quantization.
    """
    import onnxruntime as ort
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    if method not in ORT_CALIBRATION_METHODS:
        raise QuantizationError(
            f"ORT calibration method must be one of {', '.join(ORT_CALIBRATION_METHODS)}, "
            f"not {method}"
        )
    if not calib_inputs or not eval_inputs:
        raise QuantizationError("the ORT baseline needs calibration and evaluation samples")
    proto, name = _fixed_input_model(model, input_shape)
    calib, evals = _feeds(calib_inputs, name), _feeds(eval_inputs, name)
    if output is not None and output not in [o.name for o in proto.graph.output]:
        if output not in {t for n in proto.graph.node for t in n.output}:
            raise QuantizationError(f"output must be a tensor of the model, not {output}")
        proto.graph.output.append(onnx.ValueInfoProto(name=output))

    class _Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(calib)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.it, None)

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    fused = ort.SessionOptions()
    fused.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    with tempfile.TemporaryDirectory(prefix="aipusim_ort_baseline_") as tmp:
        fp32_path, int8_path = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        onnx.save(proto, str(fp32_path))
        quantize_static(
            str(fp32_path),
            str(int8_path),
            _Reader(),
            quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QInt8,
            weight_type=QuantType.QInt8,
            per_channel=per_channel,
            calibrate_method=getattr(CalibrationMethod, method),
        )
        sessions = [
            ort.InferenceSession(str(p), o, providers=["CPUExecutionProvider"])
            for p, o in ((fp32_path, options), (int8_path, fused if fused_kernels else options))
        ]
        out = output or sessions[0].get_outputs()[0].name
        fp32, int8 = ([s.run([out], f)[0] for f in evals] for s in sessions)
    report = output_report(fp32, int8)
    return {
        **report,
        "output": out,
        "method": method,
        "per_channel": per_channel,
        "fused_kernels": fused_kernels,
    }


__all__ = ["ORT_CALIBRATION_METHODS", "ort_static_sqnr"]
