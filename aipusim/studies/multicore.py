"""Study 1: the multicore modes on four cores, model by model.

Four ways to use the chip: four independent single-core instances with a quarter of the
memory each ("4 x Batch-1", the simulator places one replica per core), and one instance
spanning all four cores as ``batch`` (four frames at once), ``cooperative`` (each layer split
across the cores) or ``pipeline`` (consecutive layers on consecutive cores). Each is compiled
and simulated through the sweep engine; the conclusions rank the modes by FPS, latency and
energy per frame.

Example: ``run_multicore_study(Path("reports/multicore"), models=["tiny_cnn"], frames=2)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from aipusim.base.errors import ConfigError
from aipusim.run.job import model_name
from aipusim.studies.common import (
    BUILT_IN,
    RESULTS_DIR,
    RunInfo,
    StudyBase,
    StudyResult,
    check_models,
    clear_outputs,
    config_changes,
    context_digest,
    design_point,
    fmt,
    md_table,
    prepare_study_dir,
    pyplot,
    run_points,
    save_figure,
    write_readme,
)

DEFAULT_MODELS = ("resnet50", "mobilenetv2", "yolov8n")
STUDY = "multicore"


@dataclass(frozen=True)
class Mode:
    """One way to use the four cores: its label and the config properties it sets."""

    label: str
    cores: int
    resources: float
    multicore_mode: str

    def text(self) -> str:
        """The label and the properties, as a study's what-was-run section shows them."""
        return (
            f"{self.label} (`aipu_cores_used={self.cores}`, `resources_used={self.resources}`, "
            f"`multicore_mode={self.multicore_mode}`)"
        )

    def params(self) -> tuple[tuple[str, object], ...]:
        return (
            ("aipu_cores_used", self.cores),
            ("resources_used", self.resources),
            ("multicore_mode", self.multicore_mode),
        )


def mode_keys(modes: Sequence[Mode]) -> list[tuple[str, tuple[object, ...]]]:
    """The swept config keys of ``modes`` with their values, for `run_points`."""
    return [
        ("aipu_cores_used", tuple(dict.fromkeys(m.cores for m in modes))),
        ("resources_used", tuple(dict.fromkeys(m.resources for m in modes))),
        ("multicore_mode", tuple(m.multicore_mode for m in modes)),
    ]


MODES = (
    Mode("4 x Batch-1", 1, 0.25, "multiprocess"),
    Mode("batch", 4, 1.0, "batch"),
    Mode("cooperative", 4, 1.0, "cooperative"),
    Mode("pipeline", 4, 1.0, "pipeline"),
)
REFERENCE = MODES[0].label

#: Table columns and the format of each.
KINDS = {
    "FPS": "fps",
    "unloaded latency (ms)": "latency_ms",
    "p50 latency (ms)": "latency_ms",
    "p99 latency (ms)": "latency_ms",
    "energy/frame (mJ)": "energy_mj",
    "avg power (W)": "power_w",
    "FPS/W": "fps_per_w",
    "FPS vs 4 x Batch-1": "ratio",
}


def select_modes(names: Sequence[str] | None) -> tuple[Mode, ...]:
    """The modes named by their ``multicore_mode`` (``multiprocess`` is 4 x Batch-1), in
    the study's order; every mode for None.

    >>> [m.label for m in select_modes(["cooperative", "batch"])]
    ['batch', 'cooperative']
    """
    if names is None:
        return MODES
    by_name = {m.multicore_mode: m for m in MODES}
    bad = [n for n in names if n not in by_name]
    if bad or not names:
        raise ConfigError(
            f"--modes must be some of {', '.join(by_name)} (multiprocess is 4 x Batch-1), "
            f"not {','.join(bad) or 'none'}"
        )
    return tuple(m for m in MODES if m.multicore_mode in names)


def measure(
    models: Sequence[str],
    frames: int,
    input_size: int | None,
    directory: Path,
    workers: int,
    progress: bool,
    modes: Sequence[Mode] = MODES,
    base: StudyBase = BUILT_IN,
) -> pd.DataFrame:
    """Compile and simulate every model in every mode; one row per (model, mode)."""
    digest = context_digest(STUDY)
    points = [
        design_point(m, mode.params(), frames, input_size, digest, base=base)
        for m in models
        for mode in modes
    ]
    rows = run_points(STUDY, points, mode_keys(modes), directory, workers, progress)
    label = {m.multicore_mode: m.label for m in modes}
    rows = rows.assign(mode=rows["multicore_mode"].map(label))
    table = pd.DataFrame(
        {
            "model": rows["model"],
            "mode": rows["mode"],
            "FPS": rows["fps"],
            "unloaded latency (ms)": rows["latency_us_unloaded"] / 1e3,
            "p50 latency (ms)": rows["latency_us_p50"] / 1e3,
            "p99 latency (ms)": rows["latency_us_p99"] / 1e3,
            "energy/frame (mJ)": rows["energy_mj_per_frame"],
            "avg power (W)": rows["avg_power_w"],
            "FPS/W": rows["fps_per_w"],
            "status": rows["status"],
            "error": rows["error"].fillna(""),
        }
    )
    order = {m: i for i, m in enumerate(models)}
    mode_order = {m.label: i for i, m in enumerate(MODES)}
    table = table.sort_values(
        ["model", "mode"], key=lambda s: s.map(order if s.name == "model" else mode_order)
    ).reset_index(drop=True)
    # (without the reference mode among ``modes`` the ratio column is n/a)
    ref = table[table["mode"] == REFERENCE].set_index("model")["FPS"]
    table.insert(3, "FPS vs 4 x Batch-1", table["FPS"] / table["model"].map(ref))
    # the name run and the other reports use (a graph name, not an ONNX file's path)
    table["model"] = table["model"].map({m: model_name(m) for m in models})
    return table


def conclusions(table: pd.DataFrame) -> list[str]:
    """Statements computed from ``table``: best mode per model for each figure, overall."""
    out: list[str] = []
    ok = table[table["status"] == "ok"]
    best_fps: dict[str, str] = {}
    for model, group in ok.groupby("model", sort=False):
        ranked = group.sort_values("FPS", ascending=False)
        top = ranked.iloc[0]
        best_fps[model] = top["mode"]
        ratio = top["FPS vs 4 x Batch-1"]
        vs = (
            f", {fmt(ratio, 'ratio')} x {REFERENCE}"
            if top["mode"] != REFERENCE and not np.isnan(ratio)
            else ""
        )
        runner = ""
        if len(ranked) > 1:
            second = ranked.iloc[1]
            runner = f"; next is {second['mode']} with {fmt(second['FPS'], 'fps')} FPS"
        out.append(
            f"`{model}`: **{top['mode']}** gives the highest FPS "
            f"({fmt(top['FPS'], 'fps')} FPS{vs}){runner}."
        )
        idle = group.loc[group["unloaded latency (ms)"].idxmin()]
        out.append(
            f"`{model}`: **{idle['mode']}** has the lowest unloaded latency "
            f"({fmt(idle['unloaded latency (ms)'], 'latency_ms')} ms)."
        )
        low = group.loc[group["p50 latency (ms)"].idxmin()]
        out.append(
            f"`{model}`: **{low['mode']}** has the lowest queued p50 latency "
            f"({fmt(low['p50 latency (ms)'], 'latency_ms')} ms; p99 "
            f"{fmt(low['p99 latency (ms)'], 'latency_ms')} ms)."
        )
        eco = group.loc[group["energy/frame (mJ)"].idxmin()]
        out.append(
            f"`{model}`: **{eco['mode']}** uses the least energy per frame "
            f"({fmt(eco['energy/frame (mJ)'], 'energy_mj')} mJ)."
        )
    if best_fps:
        counts = pd.Series(best_fps).value_counts()
        winner, n = counts.index[0], int(counts.iloc[0])
        out.append(
            f"Across the {len(best_fps)} model(s), **{winner}** is the fastest mode for {n} "
            f"({', '.join(f'`{m}`' for m, w in best_fps.items() if w == winner)})."
        )
    failed = table[table["status"] != "ok"]
    for _, row in failed.iterrows():
        out.append(f"`{row['model']}` in mode {row['mode']} failed: {row['error']}")
    return out


def plot(table: pd.DataFrame, path: Path) -> Path:
    """A grid: one column per model, rows FPS / latency p50+p99 / energy per frame."""
    plt = pyplot()
    models = list(dict.fromkeys(table["model"]))
    shown = set(table["mode"])
    # each mode keeps its colour whichever modes are shown
    palette = dict(zip(MODES, ["#7f7f7f", "#1f77b4", "#2ca02c", "#ff7f0e"], strict=True))
    labels = [m.label for m in MODES if m.label in shown]
    colors = [c for m, c in palette.items() if m.label in shown]
    fig, axes = plt.subplots(3, len(models), figsize=(4.2 * len(models), 10), squeeze=False)
    x = np.arange(len(labels))
    for col, model in enumerate(models):
        group = table[table["model"] == model].set_index("mode").reindex(labels)
        panels = (
            ("FPS", ["FPS"], "steady-state FPS (higher is better)"),
            (
                "latency",
                ["unloaded latency (ms)", "p50 latency (ms)", "p99 latency (ms)"],
                "latency ms: unloaded, queued p50 (dots), p99 (hatched)",
            ),
            ("energy", ["energy/frame (mJ)"], "steady energy per frame, mJ"),
        )
        for row, (_, columns, ylabel) in enumerate(panels):
            ax = axes[row][col]
            width = 0.8 / len(columns)
            for j, column in enumerate(columns):
                values = group[column].to_numpy(dtype=float)
                bars = ax.bar(
                    x + (j - (len(columns) - 1) / 2) * width,
                    np.nan_to_num(values),
                    width,
                    color=colors,
                    hatch=(None, "..", "//")[j],
                    edgecolor="black",
                    linewidth=0.5,
                )
                if len(columns) == 1:
                    texts = ["" if np.isnan(v) else fmt(v, KINDS[column]) for v in values]
                    ax.bar_label(bars, texts, fontsize=7, padding=2)
            failed = group["status"].to_numpy() != "ok"
            for xi in x[failed]:
                ax.annotate(
                    "failed",
                    (xi, 0),
                    xytext=(0, 4),
                    textcoords="offset points",
                    ha="center",
                    rotation=90,
                    fontsize=8,
                    color="#d62728",
                )
            ax.set_xticks(x, labels, rotation=20, fontsize=8)
            ax.set_ylabel(ylabel, fontsize=8)
            ax.grid(axis="y", alpha=0.3)
            ax.margins(y=0.15)
            if row == 0:
                ax.set_title(model)
    fig.suptitle("Multicore modes on 4 cores")
    fig.tight_layout()
    return save_figure(fig, path)


def run_multicore_study(
    out: Path,
    *,
    models: Sequence[str] = DEFAULT_MODELS,
    frames: int = 8,
    input_size: int | None = None,
    workers: int = 2,
    resume: bool = False,
    command: str = "aipusim.studies.run_multicore_study(...)",
    progress: bool = True,
    modes: Sequence[str] | None = None,
    base: StudyBase = BUILT_IN,
) -> StudyResult:
    """Run the study into ``out``: ``README.md``, ``multicore.png``, Parquet ``results/``.
    ``modes``: only these ``multicore_mode`` values (`select_modes`; ``aipusim compare``);
    ``base``: where each model's config starts (``--defaults``, ``--set``)."""
    chosen = select_modes(modes)
    models = check_models(models, input_size)
    swept = [k for k, _ in mode_keys(chosen)]
    base.check(models, STUDY, swept, "choose modes with --modes")
    prepare_study_dir(out)
    clear_outputs(out, keep_results=resume)
    table = measure(models, frames, input_size, out / RESULTS_DIR, workers, progress, chosen, base)
    found = conclusions(table)
    figure = plot(table, out / "multicore.png")
    info = RunInfo(
        study=STUDY,
        command=command,
        models=models,
        input_size=input_size,
        frames=frames,
        config_changes={m: config_changes(m, base) for m in models},
        base=base.describe(),
        swept="mode: " + "; ".join(m.text() for m in chosen),
        extra=[
            "- FPS is the steady-state system throughput (host link included), summed over "
            "replicas; the first start of each instance (in batch mode 4 frames) is warm-up "
            "and left out. Unloaded latency: one start (a frame; a batch of 4 in batch mode) "
            "through an idle chip, input to result. p50/p99 latency: queued, from the input "
            "issued to the result back, the host sending as fast as its buffers allow. Energy "
            "per frame: a steady frame's own work plus the chip's static power over one frame "
            "period (`aipusim.isa.metrics`)."
        ],
    )
    shown = table.drop(columns=["error"])
    body = [
        "## Results",
        "",
        md_table(shown, KINDS),
        "",
        f"![multicore modes]({figure.name})",
        "",
        f"Raw results (one row per model and mode): `{RESULTS_DIR}/part-*.parquet`.",
    ]
    readme = write_readme(
        out,
        "Multicore modes: 4 x Batch-1 vs batch vs cooperative vs pipeline",
        "Which way of using the four cores gives the most frames per second, the lowest "
        "latency and the least energy per frame, for each model.",
        info,
        found,
        body,
    )
    return StudyResult(STUDY, out, table, found, [readme, figure])
