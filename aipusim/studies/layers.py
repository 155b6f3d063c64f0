"""Study 3: per-layer latency of the zoo models, split by the unit doing the work.

Each model runs with its built-in config through `aipusim.run.job.run_model` (compile, traced
simulation, profiler). Per layer it takes the profiler's figures (`aipusim.profiler.layers`):
``busy`` (exclusive: each instant of a core counted once, for the earliest-issued task
running then), split by unit class, ``span`` (first start to last end), ``wait`` = span -
busy, and the ``critical_unit`` the layer waited on. Layers are ranked by busy time; the
models are compared by the share of their summed busy time each unit class takes.

Example: ``run_layers_study(Path("reports/layers"), models=["tiny_cnn"], frames=2)``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aipusim import zoo
from aipusim.base.fileio import output_path
from aipusim.run.job import resolve_model, run_model
from aipusim.run.progress import Progress
from aipusim.studies.common import (
    BUILT_IN,
    RunInfo,
    StudyBase,
    StudyResult,
    base_config,
    check_models,
    clear_outputs,
    config_changes,
    fmt,
    input_label,
    md_table,
    prepare_study_dir,
    pyplot,
    save_figure,
    write_readme,
)

STUDY = "layers"
#: Parts of a layer's span: its busy time by unit class, then its wait.
PARTS = ("mvm", "dwpu", "dpu", "wload", "dma", "other", "wait")
#: Unit classes (everything but the wait): the candidates for a model's dominant unit.
UNITS = PARTS[:-1]
TOP_LAYERS = 10
#: Layers in each model's compact chart.
TOP_PLOTTED = 25
#: The profiler's per-layer columns the study keeps.
LAYER_COLUMNS = [
    "layer",
    "op",
    "samples",
    "busy_us",
    "span_us",
    "wait_us",
    "critical_unit",
    *[f"{u}_us" for u in UNITS],
    "macs",
    "array_macs",
]


def default_models() -> list[str]:
    """Every zoo model except the test network."""
    return [m for m in zoo.names() if m != "tiny_cnn"]


def profile_model(
    model: str, input_size: int | None, frames: int, out: Path, base: StudyBase = BUILT_IN
) -> dict[str, Any]:
    """Run ``model`` in a scratch folder; keep its per-layer table and bar plot in ``out``.

    Module level so a worker process can run it; returns plain picklable data.
    """
    config = base_config(model, base)
    source = resolve_model(model, input_size)
    with tempfile.TemporaryDirectory(prefix=f"aipusim-layers-{source.slug}-") as tmp:
        run_dir = Path(tmp) / source.slug
        result = run_model(source, config, run_dir, frames=frames)
        plot = out / f"{source.slug}_layers.png"
        with output_path(plot) as tmp_plot:
            shutil.copyfile(run_dir / "plots" / "layers.png", tmp_plot)
    sim = result.sim
    table = result.layers[LAYER_COLUMNS].rename(columns={f"{u}_us": u for u in UNITS})
    table = table.rename(columns={"wait_us": "wait"})
    with output_path(out / f"{source.slug}_layers.csv") as tmp:
        table.to_csv(tmp, index=False)
    return {
        "model": source.name,
        "table": table,
        "plot": plot.name,
        "mode": sim.multicore_mode,
        "replicas": sim.replicas,
        "active_cores": sim.active_cores,
        "fps": sim.fps,
        "latency_ms_unloaded": sim.latency_us_unloaded / 1e3,
        "compile_s": result.compile_seconds,
        "simulate_s": result.simulate_seconds,
    }


def summarise(profiles: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """One row per model: summed busy and span, each unit class's share of the busy time
    (%), the wait's share of the span, the dominant unit and the slowest layer by busy."""
    rows = []
    for p in profiles:
        t = p["table"]
        busy = float(t["busy_us"].sum())
        span = float(t["span_us"].sum())
        shares = {u: 100 * float(t[u].sum()) / busy if busy > 0 else np.nan for u in UNITS}
        dominant = max(UNITS, key=lambda u: shares[u]) if busy > 0 else "-"
        slow = t.loc[t["busy_us"].idxmax()] if len(t) else None
        rows.append(
            {
                "model": p["model"],
                "mode": f"{p['mode']}, {p['replicas']} replica(s) on {p['active_cores']} core(s)",
                "layers": len(t),
                "unloaded latency (ms)": p["latency_ms_unloaded"],
                "summed busy (µs)": busy,
                **{f"{u} %": shares[u] for u in UNITS},
                "wait % of span": 100 * float(t["wait"].sum()) / span if span > 0 else np.nan,
                "dominant unit": dominant,
                "slowest layer": slow["layer"] if slow is not None else "-",
                "slowest busy (µs)": float(slow["busy_us"]) if slow is not None else np.nan,
                "slowest waits on": slow["critical_unit"] if slow is not None else "-",
            }
        )
    return pd.DataFrame(rows)


SUMMARY_KINDS = {
    "unloaded latency (ms)": "latency_ms",
    "summed busy (µs)": "us",
    "slowest busy (µs)": "us",
    "wait % of span": "share_pct",
    **{f"{u} %": "share_pct" for u in UNITS},
}
LAYER_KINDS = {
    "busy (µs)": "us",
    "span (µs)": "us",
    "share of busy %": "share_pct",
    "cumulative %": "share_pct",
    **{f"{part} (µs)": "us" for part in PARTS},
}


def top_layers(table: pd.DataFrame, n: int = TOP_LAYERS) -> pd.DataFrame:
    """The ``n`` layers of one model with the most busy time, their split by unit, the
    unit holding most of it and the unit or link they waited on."""
    total = table["busy_us"].sum()
    top = table.nlargest(n, "busy_us")
    units = top[list(UNITS)]
    main = units.idxmax(axis=1).where(units.max(axis=1) > 0, "-")
    out = pd.DataFrame(
        {
            "layer": top["layer"],
            "op": top["op"],
            "busy (µs)": top["busy_us"],
            "span (µs)": top["span_us"],
            "share of busy %": 100 * top["busy_us"] / total if total > 0 else np.nan,
            "cumulative %": 100 * top["busy_us"].cumsum() / total if total > 0 else np.nan,
            **{f"{part} (µs)": top[part] for part in PARTS},
            "main unit": main,
            "waits on": top["critical_unit"],
        }
    )
    return out.reset_index(drop=True)


def conclusions(summary: pd.DataFrame, tops: dict[str, pd.DataFrame]) -> list[str]:
    """Statements computed from the summary and the per-model top-layer tables."""
    out = []
    for _, row in summary.iterrows():
        model = row["model"]
        dom = row["dominant unit"]
        if dom != "-":
            out.append(
                f"`{model}`: the cores' busy time goes mostly to **{dom}** "
                f"({fmt(row[f'{dom} %'], 'share_pct')} % of the summed layer busy time); "
                f"the layers wait (span not busy) {fmt(row['wait % of span'], 'share_pct')} % "
                "of their summed span."
            )
        top = tops[model]
        if len(top):
            first = top.iloc[0]
            k = min(3, len(top))
            share = top["cumulative %"].iloc[k - 1]
            out.append(
                f"`{model}`: the busiest layer is `{first['layer']}` (op {first['op']}, "
                f"{fmt(first['busy (µs)'], 'us')} µs busy, "
                f"{fmt(first['share of busy %'], 'share_pct')} % of the summed busy time, "
                f"mostly {first['main unit']}; it waits on {first['waits on']}); the {k} "
                f"busiest layers take {fmt(share, 'share_pct')} % together."
            )
    if len(summary) > 1:
        counts = summary["dominant unit"].value_counts()
        for unit, n in counts.items():
            names = ", ".join(
                f"`{m}`" for m in summary.loc[summary["dominant unit"] == unit, "model"]
            )
            out.append(
                f"**{unit}** takes most busy time in {n} of the {len(summary)} models ({names})."
            )
        most = summary.loc[summary["wait % of span"].idxmax()]
        out.append(
            f"The largest wait share is `{most['model']}`'s "
            f"({fmt(most['wait % of span'], 'share_pct')} % of the summed span)."
        )
    return out


def plot_top_layers(model: str, top: pd.DataFrame, path: Path) -> Path:
    """The slowest layers of one model as stacked bars by unit, slowest on top.

    A compact companion of the profiler's all-layer chart, which for a 150-layer detector
    is several thousand pixels tall."""
    # lazy: aipusim.profiler.plots loads matplotlib, numba, pyarrow, tqdm, not otherwise loaded here
    from aipusim.profiler.plots import _CLASS_COLOURS

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 1.6 + 0.32 * len(top)))
    y = np.arange(len(top))
    left = np.zeros(len(top))
    for part in PARTS:
        values = top[f"{part} (µs)"].to_numpy(dtype=float)
        if values.sum() <= 0:
            continue
        ax.barh(y, values, left=left, color=_CLASS_COLOURS[part], label=part, height=0.72)
        left += values
    ax.set_yticks(y, top["layer"], fontsize=8)
    ax.set_ylim(len(top) - 0.5, -0.5)
    ax.set_xlabel("mean per layer sample (µs): busy by unit (exclusive), then wait")
    ax.set_title(f"{model}: the {len(top)} busiest layers, split by unit")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_overview(summary: pd.DataFrame, path: Path) -> Path:
    """One 100 % bar per model: the share of the summed layer busy time each unit class
    takes (exclusive time: each instant of a core counted once)."""
    # lazy: aipusim.profiler.plots loads matplotlib, numba, pyarrow, tqdm, not otherwise loaded here
    from aipusim.profiler.plots import _CLASS_COLOURS

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 1.0 + 0.6 * len(summary)))
    y = np.arange(len(summary))
    left = np.zeros(len(summary))
    for part in UNITS:
        values = summary[f"{part} %"].fillna(0.0).to_numpy()
        ax.barh(y, values, left=left, color=_CLASS_COLOURS[part], label=part, height=0.7)
        for yi, (lo, v) in enumerate(zip(left, values, strict=True)):
            if v >= 6:
                ax.text(lo + v / 2, yi, f"{v:.0f}%", ha="center", va="center", fontsize=8)
        left += values
    modes = summary["mode"].str.split(",").str[0]
    ax.set_yticks(y, [f"{m}\n({mode})" for m, mode in zip(summary["model"], modes, strict=True)])
    ax.set_ylim(len(summary) - 0.5, -0.5)
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of the summed layer busy time (%)")
    ax.set_title("Where the cores' busy time goes, by unit (exclusive time)")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    fig.tight_layout()
    return save_figure(fig, path)


def run_profiles(
    models: Sequence[str],
    input_size: int | None,
    frames: int,
    out: Path,
    workers: int,
    progress: bool,
    base: StudyBase = BUILT_IN,
) -> list[dict[str, Any]]:
    """Profile every model, ``workers`` at a time; results in the order of ``models``."""
    done: dict[str, dict[str, Any]] = {}
    bar = Progress() if progress else None
    step = bar.stage("layers", len(models)) if bar is not None else (lambda _n: None)
    try:
        if workers <= 1:
            for m in models:
                done[m] = profile_model(m, input_size, frames, out, base)
                step(1)
        else:
            # lazy: aipusim.sweep.runner loads pyarrow, not otherwise loaded here
            from aipusim.sweep.runner import worker_setup

            # the workers end when the study is killed (they watch their parent)
            setup = {"initializer": worker_setup, "initargs": (os.getpid(),)}
            with ProcessPoolExecutor(max_workers=min(workers, len(models)), **setup) as pool:
                futures = {
                    pool.submit(profile_model, m, input_size, frames, out, base): m for m in models
                }
                for future in as_completed(futures):
                    done[futures[future]] = future.result()
                    step(1)
    finally:
        if bar is not None:
            bar.close()
    return [done[m] for m in models]


def run_layers_study(
    out: Path,
    *,
    models: Sequence[str] | None = None,
    frames: int = 8,
    input_size: int | None = None,
    workers: int = 2,
    command: str = "aipusim.studies.run_layers_study(...)",
    progress: bool = True,
    base: StudyBase = BUILT_IN,
) -> StudyResult:
    """Run the study into ``out``: ``README.md``, an overview PNG, per model a PNG + CSV
    (``base``: where each model's config starts, ``--defaults`` and ``--set``)."""
    models = check_models(models if models is not None else default_models(), input_size)
    base.check(models, STUDY)
    prepare_study_dir(out)
    clear_outputs(out, keep_results=False)
    profiles = run_profiles(models, input_size, frames, out, workers, progress, base)
    summary = summarise(profiles)
    tops = {p["model"]: top_layers(p["table"]) for p in profiles}
    found = conclusions(summary, tops)
    overview = plot_overview(summary, out / "overview.png")
    info = RunInfo(
        study=STUDY,
        command=command,
        models=models,
        input_size=input_size,
        frames=frames,
        config_changes={m: config_changes(m, base) for m in models},
        base=base.describe(),
        swept="nothing: each model with its base config",
        extra=[
            "- trace levels B,PB,PE,K,M (the `aipusim run` default); per-layer figures are "
            "means over the layer's samples (one layer on one core for one frame) after the "
            "config's `profiling_drop_percentile`. *busy* is exclusive: each instant of a core "
            "counts once, for the earliest-issued task running then, so a core's layer busy "
            "times add up to at most its frame time; *span* runs from the layer's first task "
            "start to its last end; *wait* = span - busy; *waits on* is the unit or link on "
            "the critical path through the layer's span (`aipusim.profiler.layers`).",
            "- compile / simulation wall time: "
            + ", ".join(
                f"`{p['model']}` {p['compile_s']:.1f} s / {p['simulate_s']:.1f} s" for p in profiles
            ),
        ],
    )
    body = [
        "## All models",
        "",
        md_table(summary, SUMMARY_KINDS),
        "",
        "Summed busy time is the sum over layers of each layer's mean busy time; the unit "
        "shares split it by the class of the unit that held each instant. *wait % of span* "
        "is the part of the layers' spans in which the core ran none of their own tasks "
        "(waiting for data, a token or another core, or running earlier-issued work).",
        "",
        f"![where layer time goes]({overview.name})",
        "",
    ]
    top_plots = []
    for p in profiles:
        model = p["model"]
        top_plot = plot_top_layers(
            model, top_layers(p["table"], TOP_PLOTTED), out / f"{model}_top_layers.png"
        )
        top_plots.append(top_plot)
        body += [
            f"## {model} ({input_label(model, input_size)})",
            "",
            f"The {min(TOP_LAYERS, len(p['table']))} busiest of {len(p['table'])} layers "
            f"(all layers: `{model}_layers.csv`):",
            "",
            md_table(tops[model], LAYER_KINDS),
            "",
            f"![{model}: busiest layers by unit]({top_plot.name})",
            "",
            f"Every layer in network order (the profiler's chart): [{p['plot']}]({p['plot']})",
            "",
        ]
    readme = write_readme(
        out,
        "Per-layer latency of the zoo models, by unit",
        "Which layers take the time in each zoo model and which unit (MVM array, depthwise "
        "unit, DPU, weight loads, DMA) is busy during it.",
        info,
        found,
        body,
    )
    files = [readme, overview]
    files += [out / p["plot"] for p in profiles] + top_plots
    files += [out / f"{p['model']}_layers.csv" for p in profiles]
    return StudyResult(STUDY, out, summary, found, files)
