"""Study 7: the corpus, trained third-party networks, through the whole toolkit.

For every corpus model (`aipusim.corpus`) and each way of using the four cores of the
multicore study, the model is compiled with calibration on real images, simulated for FPS,
unloaded latency and energy per frame, and run on data by the functional simulator against
its int8 reference (bit-exact or not). A model that does not compile in a mode is recorded
with the compiler's error, not dropped.

Accuracy does not depend on the mode, so it is measured once per model, on real images the
calibration never saw: the int8 model (host graphs around the quantized core, the compiler's
int8 reference) against onnxruntime's fp32 run of the original ONNX file, as the SQNR of the
weakest output and, for classifiers, the top-1 agreement of the class scores; and the same
for onnxruntime's own static int8 quantization (QDQ, per-channel, the same calibration
images) as the baseline. Where aipusim's SQNR falls short, the compiler's own per-layer
diagnosis names the layer that loses it.

Example: ``run_corpus_study(Path("out"), models=["mtcnn_pnet"], frames=2)``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aipusim.base.errors import AipuSimError, ConfigError, CorpusError
from aipusim.base.fileio import write_text
from aipusim.corpus import CorpusModel, load_manifest, model_file, select
from aipusim.studies.common import (
    RunInfo,
    StudyResult,
    clear_outputs,
    fmt,
    md_table,
    prepare_study_dir,
    pyplot,
    save_figure,
    write_readme,
)
from aipusim.studies.multicore import MODES, Mode

STUDY = "corpus"
#: Frames the functional check runs: a whole start in batch mode (four frames at once),
#: one frame in the other modes (every start there is one frame).
CHECK_FRAMES_BATCH = 4
#: The columns of `corpus.json`'s records, in table order.
RECORD_KEYS = (
    "model",
    "mode",
    "status",
    "error",
    "fps",
    "latency_ms_unloaded",
    "energy_mj_per_frame",
    "bit_exact",
    "mismatches",
    "sqnr_db",
    "top1_agreement",
    "ort_sqnr_db",
    "ort_top1_agreement",
    "limiting_layer",
    "accuracy_error",
)
OK, COMPILE_ERROR, RUN_ERROR = "ok", "compile error", "run error"
#: The opset onnxruntime's per-channel QDQ output needs (older models are converted first).
ORT_MIN_OPSET = 13
#: Kinds of figure for `fmt`, by table column.
KINDS = {
    "FPS": "fps",
    "unloaded latency (ms)": "latency_ms",
    "energy/frame (mJ)": "energy_mj",
    "SQNR (dB)": "db",
    "ORT SQNR (dB)": "db",
    "top-1 agreement": "ratio",
    "ORT top-1 agreement": "ratio",
}


# ------------------------------------------------------------------ images (calibration)

#: scikit-image's sample photographs (shipped in its wheel): natural scenes, documents,
#: microscopy, astronomy; grey ones are given three equal channels.
PHOTOS = (
    "astronaut",
    "brick",
    "camera",
    "cell",
    "chelsea",
    "clock",
    "coffee",
    "coins",
    "colorwheel",
    "grass",
    "gravel",
    "horse",
    "hubble_deep_field",
    "immunohistochemistry",
    "logo",
    "moon",
    "page",
    "retina",
    "rocket",
    "text",
)
#: Face crops for the MTCNN refinement and output nets: faces and non-faces of scikit-image's
#: LFW subset (its first 100 images are faces, the next 100 are not), alternating.
FACES = 10


def _rgb(image: np.ndarray) -> np.ndarray:
    a = np.asarray(image)
    if a.dtype == bool:
        a = a.astype(np.uint8) * 255
    elif a.dtype.kind == "f":
        a = np.clip(np.round(a * 255.0), 0, 255).astype(np.uint8)
    if a.ndim == 2:
        a = np.repeat(a[:, :, None], 3, axis=2)
    return np.ascontiguousarray(a[:, :, :3], dtype=np.uint8)


def study_images(kind: str = "photos") -> list[tuple[str, np.ndarray]]:
    """The real images of the study as (name, HxWx3 uint8 RGB), in a fixed order.

    ``photos``: `PHOTOS`; ``faces``: `FACES` face and as many non-face crops, alternating.
    """
    try:
        import skimage.data as data
    except ImportError:
        raise CorpusError(
            "the corpus study needs scikit-image for its real images, not a missing package: "
            "pip install scikit-image"
        ) from None
    if kind == "faces":
        lfw = data.lfw_subset()
        out = []
        for i in range(FACES):
            out += [(f"face_{i:02d}", _rgb(lfw[i])), (f"nonface_{i:02d}", _rgb(lfw[100 + i]))]
        return out
    return [(name, _rgb(getattr(data, name)())) for name in PHOTOS]


def split_images(images: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """Calibrate on one half, evaluate on the other: even positions, odd positions.

    >>> split_images([0, 1, 2, 3, 4])
    ([0, 2, 4], [1, 3])
    """
    return list(images[0::2]), list(images[1::2])


def image_kind(model: CorpusModel) -> str:
    """Which images a model sees: face crops for the MTCNN nets that classify crops."""
    return "faces" if model.name in ("mtcnn_rnet", "mtcnn_onet") else "photos"


# ------------------------------------------------------------------ one model


@dataclass
class Prepared:
    """A corpus model ready to compile: its file, calibration folder and transform, and
    the evaluation inputs (model input name -> array) with their fp32 outputs."""

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
    import onnx
    from PIL import Image

    if model.preprocess is None:
        raise CorpusError(f"corpus model `{model.name}` must have a [model.preprocess] table")
    proto = onnx.load(str(onnx_path), load_external_data=False)
    constants = {i.name for i in proto.graph.initializer}
    inputs = [i.name for i in proto.graph.input if i.name not in constants]
    if len(inputs) != 1:
        raise CorpusError(f"corpus model `{model.name}` must have one input, not {len(inputs)}")
    calibration, evaluation = split_images(study_images(image_kind(model)))
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
    from aipusim.compiler.config import CompilerConfig
    from aipusim.compiler.driver import compile_model
    from aipusim.compiler.request import CompileRequest, InputDataLayout

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
    from aipusim.compiler.quant.data import DataLayout, imageset_calibration

    data = imageset_calibration(
        prep.imageset,
        prep.transform,
        prep.input_name,
        prep.model.input_shape,
        layout=DataLayout(prep.model.layout),
    )
    return [dict(s) for s in data.samples]


def _session(path: Path) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    # one thread: the machines this runs on are shared, and results stay reproducible
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
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
    import logging

    import onnx
    from onnx import version_converter
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
    from aipusim.compiled import run_reference

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
    from aipusim.compiler.quant.accuracy import sqnr_db

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
    from aipusim.compiler.quant import read_quantized_model
    from aipusim.compiler.quant.advice import limiting_layers
    from aipusim.compiler.quant.artifacts import MANIFEST

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
    out: dict[str, Any] = dict.fromkeys(
        ("sqnr_db", "top1_agreement", "ort_sqnr_db", "ort_top1_agreement"), None
    )
    out |= {"limiting_layer": "", "accuracy_error": ""}
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


def one_line(exc: BaseException) -> str:
    """An error as one line (its first), the way the tables show it."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def measure_mode(prep: Prepared, mode: Mode, frames: int, work: Path) -> dict[str, Any]:
    """Compile ``prep`` in ``mode``, time it over ``frames`` frames, check it on data."""
    import aipusim
    from aipusim.functional_check import chip_inputs, compare
    from aipusim.sweep.evaluate import check_columns, metrics

    row: dict[str, Any] = {"status": OK, "error": ""}
    folder = work / mode.multicore_mode
    try:
        compile_corpus_model(prep, folder, mode.params())
    except AipuSimError as exc:
        return {"status": COMPILE_ERROR, "error": one_line(exc)}
    compiled = folder / "compiled_model"
    try:
        timed = aipusim.simulate(compiled, frames=frames)
        row |= metrics(timed)
        inputs, how = chip_inputs(compiled)
        check_frames = CHECK_FRAMES_BATCH if mode.multicore_mode == "batch" else 1
        run = aipusim.simulate(compiled, frames=check_frames, functional=True, inputs=inputs)
        row |= check_columns(compare(run, compiled, inputs, how))
    except AipuSimError as exc:
        return {"status": RUN_ERROR, "error": one_line(exc)}
    return row


# ------------------------------------------------------------------ the table


def records_of(
    model: str, accuracy: Mapping[str, Any], modes: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """`corpus.json` records of one model: one per mode, the model's accuracy on each."""
    out = []
    for label, row in modes.items():
        record = dict.fromkeys(RECORD_KEYS)
        record |= {"model": model, "mode": label, **accuracy}
        record["status"] = row.get("status", OK)
        record["error"] = row.get("error", "")
        record["fps"] = row.get("fps")
        unloaded = row.get("latency_us_unloaded")
        record["latency_ms_unloaded"] = None if unloaded is None else unloaded / 1e3
        record["energy_mj_per_frame"] = row.get("energy_mj_per_frame")
        record["bit_exact"] = row.get("bit_exact")
        record["mismatches"] = row.get("mismatches")
        out.append(record)
    return out


def mode_table(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per model and mode: status, FPS, latency, energy, bit-exactness, error."""
    df = pd.DataFrame(list(records), columns=list(RECORD_KEYS))
    exact = df["bit_exact"].map({True: "yes", False: "no"}).fillna("n/a")
    return pd.DataFrame(
        {
            "model": df["model"],
            "mode": df["mode"],
            "status": df["status"],
            "FPS": df["fps"].astype(float),
            "unloaded latency (ms)": df["latency_ms_unloaded"].astype(float),
            "energy/frame (mJ)": df["energy_mj_per_frame"].astype(float),
            "bit-exact": exact,
            "error": df["error"].fillna(""),
        }
    )


def accuracy_table(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per model: aipusim's and ORT's int8 against fp32, and the limiting layer."""
    df = pd.DataFrame(list(records), columns=list(RECORD_KEYS)).drop_duplicates("model")
    return pd.DataFrame(
        {
            "model": df["model"],
            "SQNR (dB)": df["sqnr_db"].astype(float),
            "ORT SQNR (dB)": df["ort_sqnr_db"].astype(float),
            "top-1 agreement": df["top1_agreement"].astype(float),
            "ORT top-1 agreement": df["ort_top1_agreement"].astype(float),
            "limiting layer": df["limiting_layer"].fillna(""),
            "accuracy error": df["accuracy_error"].fillna(""),
        }
    ).reset_index(drop=True)


def conclusions(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Statements computed from the tables: where each model compiles and runs bit-exact,
    its best mode, and how its int8 accuracy compares with onnxruntime's."""
    modes = mode_table(records)
    acc = accuracy_table(records)
    out: list[str] = []
    labels = list(dict.fromkeys(modes["mode"]))
    everywhere = [m for m, g in modes.groupby("model", sort=False) if (g["status"] == OK).all()]
    models = list(dict.fromkeys(modes["model"]))
    out.append(
        f"**{len(everywhere)} of {len(models)}** models compile and run in all "
        f"{len(labels)} modes"
        + (f" ({', '.join(f'`{m}`' for m in everywhere)})." if everywhere else ".")
    )
    ok = modes[modes["status"] == OK]
    exact = ok[ok["bit-exact"] == "yes"]
    out.append(
        f"**{len(exact)} of {len(modes)}** (model, mode) cells are bit-exact on data against "
        "the int8 reference."
    )
    for model, group in modes.groupby("model", sort=False):
        good = group[group["status"] == OK]
        failed = group[group["status"] != OK]
        if len(good):
            top = good.loc[good["FPS"].idxmax()]
            out.append(
                f"`{model}`: **{top['mode']}** gives the highest FPS "
                f"({fmt(top['FPS'], 'fps')} FPS, {fmt(top['energy/frame (mJ)'], 'energy_mj')} "
                "mJ per frame)."
            )
        for _, row in good[good["bit-exact"] == "no"].iterrows():
            out.append(f"`{model}` in mode {row['mode']} is not bit-exact.")
        if len(failed) == len(group):
            errors = list(dict.fromkeys(failed["error"]))
            out.append(
                f"`{model}` fails in every mode ({failed['status'].iloc[0]}): {errors[0]}"
                + (f" (and {len(errors) - 1} other errors)" if len(errors) > 1 else "")
            )
        else:
            for _, row in failed.iterrows():
                out.append(f"`{model}` in mode {row['mode']}: {row['status']}: {row['error']}")
    for _, row in acc.iterrows():
        model = row["model"]
        if row["accuracy error"]:
            out.append(f"`{model}`: no int8 accuracy from aipusim: {row['accuracy error']}")
            continue
        ours, theirs = row["SQNR (dB)"], row["ORT SQNR (dB)"]
        text = (
            f"`{model}`: aipusim's int8 reaches {fmt(ours, 'db')} dB SQNR against fp32, "
            f"onnxruntime's static int8 {fmt(theirs, 'db')} dB"
        )
        if not pd.isna(row["top-1 agreement"]):
            text += (
                f"; top-1 agreement {fmt(row['top-1 agreement'], 'ratio')} vs "
                f"{fmt(row['ORT top-1 agreement'], 'ratio')}"
            )
        if not pd.isna(theirs) and ours < theirs:
            text += ". **aipusim is below onnxruntime**"
            if row["limiting layer"]:
                text += f"; the layer that loses most is {row['limiting layer']}"
        out.append(text + ".")
    return out


def plot_accuracy(records: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """SQNR of aipusim's and onnxruntime's int8 per model (bars; missing ones marked)."""
    plt = pyplot()
    acc = accuracy_table(records)
    x = np.arange(len(acc))
    fig, ax = plt.subplots(figsize=(1.6 * len(acc) + 3, 4))
    for offset, column, color, label in (
        (-0.2, "SQNR (dB)", "#1f77b4", "aipusim int8"),
        (0.2, "ORT SQNR (dB)", "#ff7f0e", "onnxruntime static int8 (QDQ, per-channel)"),
    ):
        values = acc[column].to_numpy(dtype=float)
        shown = np.where(np.isfinite(values), values, 0.0)
        bars = ax.bar(x + offset, shown, 0.4, color=color, label=label)
        ax.bar_label(bars, [fmt(v, "db") for v in values], fontsize=7, padding=2)
    ax.set_xticks(x, acc["model"], rotation=20, fontsize=8)
    ax.set_ylabel("SQNR vs fp32 of the weakest output (dB)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("int8 accuracy on real images the calibration did not see")
    fig.tight_layout()
    return save_figure(fig, path)


def plot_fps(records: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """FPS per mode for every model (failed cells marked)."""
    plt = pyplot()
    table = mode_table(records)
    models = list(dict.fromkeys(table["model"]))
    labels = list(dict.fromkeys(table["mode"]))
    colors = ["#7f7f7f", "#1f77b4", "#2ca02c", "#ff7f0e"]
    fig, axes = plt.subplots(1, len(models), figsize=(3.6 * len(models), 3.8), squeeze=False)
    x = np.arange(len(labels))
    for ax, model in zip(axes[0], models, strict=True):
        group = table[table["model"] == model].set_index("mode").reindex(labels)
        values = group["FPS"].to_numpy(dtype=float)
        bars = ax.bar(x, np.nan_to_num(values), color=colors[: len(labels)])
        ax.bar_label(bars, ["" if np.isnan(v) else fmt(v, "fps") for v in values], fontsize=7)
        for xi in x[group["status"].to_numpy() != OK]:
            ax.annotate("failed", (xi, 0), xytext=(0, 4), textcoords="offset points",
                        ha="center", rotation=90, fontsize=8, color="#d62728")  # fmt: skip
        ax.set_xticks(x, labels, rotation=20, fontsize=8)
        ax.set_title(model, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        ax.margins(y=0.15)
    axes[0][0].set_ylabel("steady-state FPS")
    fig.suptitle("Corpus models on 4 cores, per multicore mode")
    fig.tight_layout()
    return save_figure(fig, path)


# ------------------------------------------------------------------ the study


def check_study_models(
    names: Sequence[str], manifest: Path | None, corpus_dir: Path | None
) -> tuple[list[CorpusModel], dict[str, Path]]:
    """The models asked for (every one by default), each fetched and sha256-checked."""
    models = select(load_manifest(manifest), names)
    return models, {m.name: model_file(m, corpus_dir) for m in models}


def run_corpus_study(
    out: Path,
    *,
    models: Sequence[str] = (),
    frames: int = 8,
    manifest: Path | None = None,
    corpus_dir: Path | None = None,
    command: str = "aipusim.studies.run_corpus_study(...)",
    progress: bool = True,
) -> StudyResult:
    """Run the study into ``out``: ``README.md``, ``corpus.json``, ``accuracy.png``,
    ``fps.png``. ``models``: corpus model names (default: all of the manifest);
    ``corpus_dir``: where they were fetched (default: `aipusim.corpus.default_dir`)."""
    import tempfile

    from aipusim.corpus import default_dir
    from aipusim.progress import Progress

    if frames < 2:
        raise ConfigError(f"--frames must be an integer >= 2 (one warm-up start), not {frames}")
    chosen, files = check_study_models(models, manifest, corpus_dir)
    prepare_study_dir(out)
    clear_outputs(out, keep_results=False)
    records: list[dict[str, Any]] = []
    timings: dict[str, float] = {}
    bar = Progress() if progress else None
    step: Callable[[int], None] = (
        bar.stage("corpus", len(chosen) * (1 + len(MODES))) if bar else lambda _n: None
    )
    try:
        for model in chosen:
            start = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix=f"aipusim-corpus-{model.name}-") as tmp:
                work = Path(tmp)
                prep = prepare(model, files[model.name], work)
                if bar:
                    bar.note(f"{model.name}: accuracy")
                accuracy = measure_accuracy(prep, work)
                step(1)
                rows = {}
                for mode in MODES:
                    if bar:
                        bar.note(f"{model.name}: {mode.label}")
                    rows[mode.label] = measure_mode(prep, mode, frames, work)
                    step(1)
            records += records_of(model.name, accuracy, rows)
            timings[model.name] = time.perf_counter() - start
    finally:
        if bar:
            bar.close()
    return write_study(out, records, chosen, frames, command, timings, corpus_dir or default_dir())


def write_study(
    out: Path,
    records: list[dict[str, Any]],
    models: Sequence[CorpusModel],
    frames: int,
    command: str,
    timings: Mapping[str, float],
    corpus_dir: Path,
) -> StudyResult:
    """``corpus.json``, the figures and ``README.md`` from the records."""
    found = conclusions(records)
    json_path = out / "corpus.json"
    write_text(json_path, json.dumps(_jsonable(records), indent=2) + "\n")
    acc_png = plot_accuracy(records, out / "accuracy.png")
    fps_png = plot_fps(records, out / "fps.png")
    info = RunInfo(
        study=STUDY,
        command=command,
        models=[m.name for m in models],
        input_size=None,
        frames=frames,
        config_changes={},
        swept="mode: " + "; ".join(m.text() for m in MODES),
        extra=[
            f"- corpus: `{corpus_dir}` (models checked against the manifest's sha256); "
            "inputs: " + ", ".join(f"`{m.name}` {m.input_shape_text} {m.layout}" for m in models),
            "- calibration and evaluation: real images (scikit-image's sample photographs; "
            "LFW face and non-face crops for `mtcnn_rnet`/`mtcnn_onet`), even positions "
            "calibrate, odd positions evaluate; each model's own preprocessing from the "
            "manifest. fp32 reference: onnxruntime on the original ONNX file. Baseline: "
            "`onnxruntime.quantization.quantize_static` (QDQ, per-channel, int8 activations "
            "and weights, min-max) on the same calibration inputs.",
            f"- bit-exact: the functional simulator on a seeded input against the int8 "
            f"reference, {CHECK_FRAMES_BATCH} frames in batch mode and 1 in the others; "
            "FPS, latency and energy from a timing run of the frames above (as the "
            "multicore study).",
            "- wall time per model: " + ", ".join(f"`{m}` {s:.0f} s" for m, s in timings.items()),
        ],
    )
    modes = mode_table(records)
    acc = accuracy_table(records)
    body = [
        "## Accuracy (once per model: it does not depend on the mode)",
        "",
        md_table(acc, KINDS),
        "",
        f"![accuracy]({acc_png.name})",
        "",
        "## Per model and mode",
        "",
        md_table(modes, KINDS),
        "",
        f"![FPS per mode]({fps_png.name})",
        "",
        f"All records (one per model and mode): `{json_path.name}`.",
    ]
    readme = write_readme(
        out,
        "The corpus: trained third-party networks on the AIPU",
        "Do real trained networks, as their packages ship them, compile in every multicore "
        "mode, run bit-exact, and keep their accuracy in int8 (against onnxruntime's own "
        "int8 as the baseline)?",
        info,
        found,
        body,
    )
    return StudyResult(STUDY, out, modes, found, [readme, json_path, acc_png, fps_png])


def _jsonable(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    def value(v: Any) -> Any:
        if isinstance(v, np.generic):
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            return "inf" if v > 0 else ("-inf" if v < 0 else None)
        return v

    return [{k: value(r.get(k)) for k in RECORD_KEYS} for r in records]


__all__ = [
    "MODES",
    "RECORD_KEYS",
    "accuracy_table",
    "agreement",
    "conclusions",
    "mode_table",
    "records_of",
    "run_corpus_study",
    "split_images",
    "study_images",
]
