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
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aipusim.base.errors import ConfigError
from aipusim.base.fileio import write_text
from aipusim.corpus import CorpusModel, default_dir, load_manifest, model_file, select
from aipusim.corpus.measure import (
    ACCURACY_KEYS,
    CLASSIFIER_TARGET_DB,
    OK,
    SETTINGS_TRIED,
    measure_accuracy,
    measure_mode,
    prepare,
)
from aipusim.run.progress import Progress
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
from aipusim.studies.multicore import MODES

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
    *ACCURACY_KEYS,
)
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


def settings_table(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per classifier: its output SQNR (dB) with each of `SETTINGS_TRIED`, the best
    setting and whether it reaches `CLASSIFIER_TARGET_DB`."""
    rows = []
    for record in (
        pd.DataFrame(list(records), columns=list(RECORD_KEYS))
        .drop_duplicates("model")
        .to_dict("records")
    ):
        tried = record.get("settings_sqnr_db")
        if not isinstance(tried, Mapping):
            continue
        row: dict[str, Any] = {"model": record["model"]}
        row |= {label: tried.get(label, np.nan) for label in SETTINGS_TRIED}
        valid = {k: v for k, v in tried.items() if v is not None and not pd.isna(v)}
        best = max(valid, key=valid.__getitem__) if valid else ""
        row["best setting"] = best
        row["best SQNR (dB)"] = valid.get(best, np.nan)
        row[f">= {CLASSIFIER_TARGET_DB:g} dB"] = (
            "yes" if valid and valid[best] >= CLASSIFIER_TARGET_DB else "no"
        )
        rows.append(row)
    columns = ["model", *SETTINGS_TRIED, "best setting", "best SQNR (dB)",
               f">= {CLASSIFIER_TARGET_DB:g} dB"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


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
    for _, row in settings_table(records).iterrows():
        target = f"{CLASSIFIER_TARGET_DB:g} dB"
        text = (
            f"`{row['model']}` (classifier): the best quantization setting tried is "
            f"**{row['best setting']}** at {fmt(row['best SQNR (dB)'], 'db')} dB"
        )
        if row[f">= {target}"] == "yes":
            out.append(text + f", at or above the {target} target.")
            continue
        layer = acc.loc[acc["model"] == row["model"], "limiting layer"]
        out.append(
            text + f", **below the {target} target**"
            + (f"; the limiting layer is {layer.iloc[0]}" if len(layer) and layer.iloc[0] else "")
            + "."
        )  # fmt: skip
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
    """FPS per mode for every model, three models a row (failed cells marked)."""
    plt = pyplot()
    table = mode_table(records)
    models = list(dict.fromkeys(table["model"]))
    labels = list(dict.fromkeys(table["mode"]))
    colors = ["#7f7f7f", "#1f77b4", "#2ca02c", "#ff7f0e"]
    columns = min(3, len(models))
    rows = math.ceil(len(models) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.4 * rows), squeeze=False)
    x = np.arange(len(labels))
    for i, ax in enumerate(axes.flat):
        if i >= len(models):
            ax.set_visible(False)
            continue
        model = models[i]
        group = table[table["model"] == model].set_index("mode").reindex(labels)
        values = group["FPS"].to_numpy(dtype=float)
        bars = ax.bar(x, np.nan_to_num(values), color=colors[: len(labels)])
        ax.bar_label(bars, ["" if np.isnan(v) else fmt(v, "fps") for v in values], fontsize=7)
        for xi in x[group["status"].to_numpy() != OK]:
            ax.annotate("failed", (xi, 0), xytext=(0, 4), textcoords="offset points",
                        ha="center", rotation=90, fontsize=8, color="#d62728")  # fmt: skip
        ax.set_xticks(x, labels, rotation=20, fontsize=8)
        ax.set_ylim(bottom=0, top=None if np.isfinite(values).any() else 1)
        ax.set_title(model, fontsize=9)
        ax.set_ylabel("steady-state FPS", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        ax.margins(y=0.15)
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
                    batch = mode.multicore_mode == "batch"
                    check = CHECK_FRAMES_BATCH if batch else 1
                    folder = work / mode.multicore_mode
                    rows[mode.label] = measure_mode(prep, mode.params(), frames, check, folder)
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
        input_labels={m.name: f"{m.input_shape_text} {m.layout}, {m.kind}" for m in models},
        extra=[
            f"- corpus: `{corpus_dir}` (models checked against the manifest's sha256), "
            "each compiled with the default config plus the mode",
            "- calibration and evaluation: real images (scikit-image's sample photographs; "
            "LFW face and non-face crops for "
            + (", ".join(f"`{m.name}`" for m in models if m.images == "faces") or "none")
            + "), even positions calibrate, odd positions evaluate; each model's own "
            "preprocessing from the "
            "manifest. fp32 reference: onnxruntime on the original ONNX file. Baseline: "
            "`onnxruntime.quantization.quantize_static` (QDQ, per-channel, int8 activations "
            "and weights, min-max) on the same calibration inputs. Limiting layer: the "
            "compiler's own per-layer SQNR of its quantize-only accuracy run (on the images "
            "it holds aside from the calibration folder), the node that drops most below its "
            "inputs.",
            f"- bit-exact: the functional simulator on a seeded input against the int8 "
            f"reference, {CHECK_FRAMES_BATCH} frames in batch mode and 1 in the others; "
            "FPS, latency and energy from a timing run of the frames above (as the "
            "multicore study).",
            "- wall time per model: " + ", ".join(f"`{m}` {s:.0f} s" for m, s in timings.items()),
        ],
    )
    modes = mode_table(records)
    acc = accuracy_table(records)
    tried = settings_table(records)
    body = [
        "## Accuracy (once per model: it does not depend on the mode)",
        "",
        md_table(acc, KINDS),
        "",
        f"![accuracy]({acc_png.name})",
        "",
        f"## Classifiers: output SQNR (dB) with each quantization setting (target "
        f"{CLASSIFIER_TARGET_DB:g} dB)",
        "",
        "Each histogram range method (`histogram_range_method`), with depthwise weights per "
        "tensor (the vendor default of `quantize_dw_channel_wise`) and per channel; the "
        "first column is the default the tables above use.",
        "",
        md_table(tried, {c: "db" for c in [*SETTINGS_TRIED, "best SQNR (dB)"]}),
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
    "conclusions",
    "mode_table",
    "records_of",
    "run_corpus_study",
    "write_study",
]
