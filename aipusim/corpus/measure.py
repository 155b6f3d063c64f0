"""One corpus model through the toolkit: compiled with calibration on real images (through
the compiler's own ``--imageset``/``--transform`` path), timed and checked on data in a
config, and its int8 accuracy against onnxruntime's fp32 run of the original file, beside
onnxruntime's own static int8 quantization as the baseline.

Example (with the corpus fetched)::

    model = load_manifest()["mtcnn_rnet"]
    prep = prepare(model, model_file(model), Path("work"))
    measure_accuracy(prep, Path("work"))["ort_sqnr_db"]
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import version_converter

import aipusim
from aipusim.api.functional_check import chip_inputs, compare
from aipusim.base.errors import AipuSimError, CorpusError
from aipusim.base.fileio import write_text
from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.driver import compile_model
from aipusim.compiler.quant import read_quantized_model
from aipusim.compiler.quant.accuracy import sqnr_db
from aipusim.compiler.quant.advice import limiting_layers
from aipusim.compiler.quant.artifacts import MANIFEST
from aipusim.compiler.quant.data import DataLayout, imageset_calibration
from aipusim.compiler.request import CompileRequest, InputDataLayout
from aipusim.corpus.images import split_images, study_images
from aipusim.corpus.manifest import CorpusModel

#: A cell's status: measured, or stopped by the compiler or the simulator.
OK, COMPILE_ERROR, RUN_ERROR = "ok", "compile error", "run error"
#: Longest error text a table cell shows (a compiler error may quote a whole array).
ERROR_CHARS = 160
#: The opset onnxruntime's per-channel QDQ output needs (older models are converted first).
ORT_MIN_OPSET = 13
#: The accuracy columns, one value per model.
ACCURACY_KEYS = (
    "sqnr_db",
    "top1_agreement",
    "ort_sqnr_db",
    "ort_top1_agreement",
    "limiting_layer",
    "accuracy_error",
    "settings_sqnr_db",
)
#: The output SQNR a classifier should reach with the best documented settings.
CLASSIFIER_TARGET_DB = 25.0
#: The quantization settings a classifier's accuracy is measured with besides the defaults:
#: every histogram range method, with depthwise weights per tensor (the vendor default) and
#: per channel. Label -> config properties.
SETTINGS_TRIED: dict[str, tuple[tuple[str, Any], ...]] = {
    f"{method}{' + dw per channel' if per_channel else ''}": (
        ("histogram_range_method", method),
        ("quantize_dw_channel_wise", per_channel),
    )
    for per_channel in (False, True)
    for method in ("mse", "percentile", "entropy")
}
DEFAULT_SETTING = "mse"


@dataclass
class Prepared:
    """A corpus model ready to compile: its file, calibration folder and transform script,
    and the evaluation inputs (model input name -> preprocessed array, one per image)."""

    model: CorpusModel
    onnx_path: Path
    imageset: Path
    transform: Path
    input_name: str
    evaluation: list[dict[str, np.ndarray]]


TRANSFORM_SCRIPT = '''"""Input preprocessing of corpus model {name} (by aipusim report corpus)."""

from aipusim.corpus import Preprocess

_PREPROCESS = {preprocess!r}


def get_preprocess_transform(image):
    return _PREPROCESS(image, {shape!r}, {layout!r})
'''


def prepare(model: CorpusModel, onnx_path: Path, work: Path) -> Prepared:
    """Write the calibration half of the images and the model's transform script (its
    preprocessing written out, so the script does not depend on any other file) into
    ``work``; preprocess the evaluation half."""
    # lazy: loads PIL, not otherwise loaded here
    from PIL import Image

    if model.preprocess is None:
        raise CorpusError(f"corpus model `{model.name}` must have a [model.preprocess] table")
    proto = onnx.load(str(onnx_path), load_external_data=False)
    constants = {i.name for i in proto.graph.initializer}
    inputs = [i.name for i in proto.graph.input if i.name not in constants]
    if len(inputs) != 1:
        raise CorpusError(f"corpus model `{model.name}` must have one input, not {len(inputs)}")
    calibration, evaluation = split_images(study_images(model.images))
    imageset = work / "images"
    imageset.mkdir(parents=True, exist_ok=True)
    for i, (name, rgb) in enumerate(calibration):
        Image.fromarray(rgb).save(imageset / f"{i:02d}_{name}.png")
    transform = work / "transform.py"
    pre = model.preprocess
    script = TRANSFORM_SCRIPT.format(
        name=model.name, preprocess=pre, shape=model.input_shape, layout=model.layout
    )
    write_text(transform, script)
    feeds = [{inputs[0]: pre(rgb, model.input_shape, model.layout)} for _, rgb in evaluation]
    return Prepared(model, onnx_path, imageset, transform, inputs[0], feeds)


def compile_corpus_model(
    prep: Prepared, out: Path, settings: Sequence[tuple[str, Any]] = ()
) -> Path:
    """Compile with the calibration images into ``out`` (``settings``: config properties,
    e.g. a multicore mode or ``compiler_mode=quantize_only``); returns ``out``."""
    config = CompilerConfig()
    for key, value in settings:
        setattr(config, key, value)
    compile_model(
        CompileRequest(
            model_path=prep.onnx_path,
            output_dir=out,
            config=config,
            input_shape=prep.model.input_shape,
            imageset=prep.imageset,
            transform=prep.transform,
            input_data_layout=InputDataLayout(prep.model.layout),
            cli_args={"input": str(prep.onnx_path), "output": str(out)},
            keep_input_model=False,
        )
    )
    return out


def calibration_inputs(prep: Prepared) -> list[dict[str, np.ndarray]]:
    """The samples the compiler calibrates on (read the way it reads them), for the ORT
    baseline to calibrate on the very same inputs."""
    data = imageset_calibration(
        prep.imageset,
        prep.transform,
        prep.input_name,
        prep.model.input_shape,
        layout=DataLayout(prep.model.layout),
    )
    return [dict(s) for s in data.samples]


def _session(path: Path) -> Any:
    # lazy: loads onnxruntime, not otherwise loaded here
    import onnxruntime as ort

    options = ort.SessionOptions()
    # one thread: the machines this runs on are shared, and results stay reproducible
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    # Graph optimizations off: with them on, onnxruntime fuses the QDQ graph into its own
    # int8 CPU kernels, which saturate on processors without VNNI (a lone 1x1 conv: 9.6 dB
    # instead of 41.6), and the baseline would measure that kernel, not the quantization.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def ort_outputs(path: Path, feeds: Sequence[Mapping[str, np.ndarray]]) -> list[dict[str, Any]]:
    """onnxruntime's outputs of the ONNX file ``path`` on every feed (by output name)."""
    session = _session(path)
    names = [o.name for o in session.get_outputs()]
    return [dict(zip(names, session.run(names, dict(f)), strict=True)) for f in feeds]


def ort_quantize(
    source: Path, target: Path, calibration: Sequence[Mapping[str, np.ndarray]]
) -> Path:
    """onnxruntime's static int8 quantization of ``source`` written to ``target``: its
    documented flow (``quant_pre_process``, then ``quantize_static``) with QDQ nodes,
    per-channel int8 weights, int8 activations and min-max calibration on ``calibration``."""
    # lazy: loads onnxruntime, not otherwise loaded here
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(calibration)

        def get_next(self) -> dict[str, np.ndarray] | None:
            item = next(self.items, None)
            return None if item is None else dict(item)

    proto = onnx.load(str(source))
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < ORT_MIN_OPSET:
        # per-channel DequantizeLinear (its ``axis``) needs opset 13
        proto = version_converter.convert_version(proto, ORT_MIN_OPSET)
    upgraded = target.with_name(f"{target.stem}_fp32.onnx")
    prepared = target.with_name(f"{target.stem}_pre.onnx")
    onnx.save(proto, str(upgraded))
    # onnxruntime logs its advice on the root logger; the study's output is its report
    logging.disable(logging.WARNING)
    try:
        # symbolic shape inference would need sympy; every corpus input shape is known
        quant_pre_process(str(upgraded), str(prepared), skip_symbolic_shape=True)
        quantize_static(
            str(prepared),
            str(target),
            Reader(),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QInt8,
            weight_type=QuantType.QInt8,
        )
    finally:
        logging.disable(logging.NOTSET)
    return target


def int8_outputs(
    folder: Path, feeds: Sequence[Mapping[str, np.ndarray]], outputs: Sequence[str]
) -> list[dict[str, np.ndarray]]:
    """The compiler's int8 reference (host graphs around the quantized core) of the
    compiler output ``folder`` on every feed."""
    # lazy: aipusim.api.compiled loads pandas, not otherwise loaded here
    from aipusim.api.compiled import run_reference

    return [dict(zip(outputs, run_reference(folder, f, outputs), strict=True)) for f in feeds]


def agreement(
    fp32: Sequence[Mapping[str, np.ndarray]],
    test: Sequence[Mapping[str, np.ndarray]],
    class_output: str | None,
) -> tuple[float, float | None]:
    """(SQNR of the weakest output in dB, top-1 agreement of ``class_output`` or None).

    >>> ref = [{"y": np.array([[1.0, 2.0]]), "b": np.array([3.0])}]
    >>> sqnr, top1 = agreement(ref, [{"y": np.array([[1.0, 2.5]]), "b": np.array([3.0])}], "y")
    >>> round(sqnr, 2), top1
    (13.01, 1.0)
    """
    worst = math.inf
    for name in fp32[0]:
        ref = np.stack([np.asarray(f[name], np.float64) for f in fp32])
        got = np.stack([np.asarray(t[name], np.float64).reshape(ref.shape[1:]) for t in test])
        worst = min(worst, sqnr_db(ref, got))
    if class_output is None:
        return worst, None
    ref_cls = [np.asarray(f[class_output]).reshape(-1).argmax() for f in fp32]
    got_cls = [np.asarray(t[class_output]).reshape(-1).argmax() for t in test]
    return worst, float(np.mean([r == g for r, g in zip(ref_cls, got_cls, strict=True)]))


def limiting_layer(folder: Path) -> str:
    """The layer that loses the most precision, by the compiler's own per-layer SQNR of its
    quantize-only accuracy run (`aipusim.compiler.quant.advice.limiting_layers`), as
    ``node (SQNR dB, -drop dB)``; empty when the report has none."""
    report_path = folder / "compilation_report.json"
    if not report_path.is_file():
        return ""
    per_layer = json.loads(report_path.read_text()).get("accuracy", {}).get("per_layer_sqnr_db")
    if not per_layer:
        return ""
    graph = read_quantized_model(folder / "quantized_model" / MANIFEST).graph
    values = {k: float(v) for k, v in per_layer.items()}
    found = limiting_layers(graph, values, count=1)
    if not found:
        return ""
    node, sqnr, drop = found[0]
    return f"{node} ({sqnr:.1f} dB, -{drop:.1f} dB)"


def measure_accuracy(prep: Prepared, work: Path) -> dict[str, Any]:
    """The accuracy columns of a model: aipusim's int8 and ORT's int8 against ORT fp32."""
    out: dict[str, Any] = dict.fromkeys(ACCURACY_KEYS[:4]) | {
        "limiting_layer": "",
        "accuracy_error": "",
        "settings_sqnr_db": None,
    }
    fp32 = ort_outputs(prep.onnx_path, prep.evaluation)
    names = list(fp32[0])
    cls = prep.model.class_output
    try:
        folder = compile_corpus_model(
            prep, work / "quantized", [("compiler_mode", "quantize_only")]
        )
        int8 = int8_outputs(folder, prep.evaluation, names)
        out["sqnr_db"], out["top1_agreement"] = agreement(fp32, int8, cls)
        out["limiting_layer"] = limiting_layer(folder)
        if prep.model.kind == "classifier":
            out["settings_sqnr_db"] = measure_settings(prep, work, fp32, out["sqnr_db"])
    except AipuSimError as exc:
        out["accuracy_error"] = one_line(exc)
    try:
        ort_int8 = ort_quantize(prep.onnx_path, work / "ort_int8.onnx", calibration_inputs(prep))
        out["ort_sqnr_db"], out["ort_top1_agreement"] = agreement(
            fp32, ort_outputs(ort_int8, prep.evaluation), cls
        )
    except Exception as exc:  # onnxruntime's own errors have no common base class
        note = f"onnxruntime baseline: {one_line(exc)}"
        out["accuracy_error"] = "; ".join(e for e in (out["accuracy_error"], note) if e)
    return out


def measure_settings(
    prep: Prepared, work: Path, fp32: Sequence[Mapping[str, Any]], default_db: float
) -> dict[str, float | None]:
    """Output SQNR (dB) of ``prep`` quantized with each of `SETTINGS_TRIED` (None: that
    setting did not quantize); the default setting's is ``default_db``, measured already."""
    names = list(fp32[0])
    found: dict[str, float | None] = {}
    for i, (label, settings) in enumerate(SETTINGS_TRIED.items()):
        if label == DEFAULT_SETTING:
            found[label] = default_db
            continue
        try:
            folder = compile_corpus_model(
                prep, work / f"setting{i}", [("compiler_mode", "quantize_only"), *settings]
            )
            found[label] = agreement(fp32, int8_outputs(folder, prep.evaluation, names), None)[0]
        except AipuSimError:
            found[label] = None
    return found


def one_line(exc: BaseException) -> str:
    """An error as the tables show it: its first line, at most `ERROR_CHARS` characters.

    >>> one_line(ValueError("bias must fit int32, not [1\\n 2]"))
    'bias must fit int32, not [1 ...'
    """
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    if len(lines) > 1 or len(text) > ERROR_CHARS:
        text = text[:ERROR_CHARS].rstrip() + " ..."
    return text


def measure_mode(
    prep: Prepared,
    settings: Sequence[tuple[str, Any]],
    frames: int,
    check_frames: int,
    folder: Path,
) -> dict[str, Any]:
    """Compile ``prep`` with the config ``settings`` (a multicore mode) into ``folder``,
    time it over ``frames`` frames and run ``check_frames`` frames on data against its
    int8 reference: the columns of `aipusim.sweep` (``fps``, ``energy_mj_per_frame``,
    ``bit_exact``, ...) plus ``status`` and ``error``."""
    # lazy: aipusim.sweep.evaluate loads pandas, pyarrow, not otherwise loaded here
    from aipusim.sweep.evaluate import check_columns, metrics

    row: dict[str, Any] = {"status": OK, "error": ""}
    try:
        compile_corpus_model(prep, folder, settings)
    except AipuSimError as exc:
        return {"status": COMPILE_ERROR, "error": one_line(exc)}
    compiled = folder / "compiled_model"
    try:
        row |= metrics(aipusim.simulate(compiled, frames=frames))
        inputs, how = chip_inputs(compiled)
        run = aipusim.simulate(compiled, frames=check_frames, functional=True, inputs=inputs)
        row |= check_columns(compare(run, compiled, inputs, how))
    except AipuSimError as exc:
        return {"status": RUN_ERROR, "error": one_line(exc)}
    return row


__all__ = [
    "ACCURACY_KEYS",
    "COMPILE_ERROR",
    "OK",
    "RUN_ERROR",
    "Prepared",
    "agreement",
    "compile_corpus_model",
    "measure_accuracy",
    "measure_mode",
    "one_line",
    "ort_quantize",
    "prepare",
]
