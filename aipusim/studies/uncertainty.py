"""Study 8: bands on every figure from the inferred (I) numbers, and which of them drive them.

Every (I) number of ``arch/metis.toml`` with a range is sampled jointly (the Latin
hypercube of `aipusim.calibrate.uncertainty.sample_overrides`); each model's back end is recompiled
and simulated per sample (its front end runs once, `aipusim.api.retarget.Retargeter`). Per model
FPS, energy per frame and average power are given as p5/p50/p95 over the samples, next to
the figure with the file's values.

The drivers are ranked by first-order variance-based sensitivity indices estimated from the
same samples with RBD-FAST (SALib's ``rbd_fast``: Tarantola et al. 2006, Plischke 2010).
Sobol indices would need a Saltelli design of N x (2D + 2) runs (D ~ 70 numbers: thousands
of compiles per model); RBD-FAST needs no special design: for each number it orders the
samples by that number's value and reads the share of the figure's variance at low
frequencies of that ordering, so any sample that covers each range evenly serves, which a
Latin hypercube does by construction. An index is the share of a figure's variance that
one number explains alone (0-1); an index below the noise floor (the same samples with the
figure shuffled) is indistinguishable from none.

Example: ``run_uncertainty_study(Path("out"), models=["tiny_cnn"], samples=8, input_size=32)``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aipusim.api.retarget import Retargeter
from aipusim.arch import load_arch
from aipusim.base.errors import ConfigError
from aipusim.calibrate.uncertainty import Band, check_samples, run_samples, sample_overrides
from aipusim.studies.common import (
    STUDY_MARKER,
    RunInfo,
    StudyResult,
    backend_runs_line,
    check_models,
    clear_outputs,
    config_changes,
    fmt,
    md_table,
    prepare_study_dir,
    pyplot,
    rows_per_model,
    save_figure,
    write_readme,
)

DEFAULT_MODELS = ("resnet50", "mobilenetv2", "yolov5s", "yolov8n", "deit_tiny")
STUDY = "uncertainty"
DEFAULT_SAMPLES = 64
#: Drivers shown per model and figure.
TOP_DRIVERS = 5
#: The figures: column -> (label, `fmt` kind).
FIGURES = {
    "fps": ("FPS", "fps"),
    "energy": ("energy per frame (mJ)", "energy_mj"),
    "power": ("average power (W)", "power_w"),
}
#: RBD-FAST's harmonics (SALib's default); fewer when the samples are few (it needs N > 2M).
HARMONICS = 10


def measure_model(
    model: str, input_size: int | None, frames: int, samples: int, seed: int, progress: bool
) -> list[dict[str, Any]]:
    """The file's values, then every joint sample of ``model`` (runs in a worker process):
    one row each with the sampled numbers (``x:`` columns), figures and error."""
    base = load_arch()
    front = Retargeter(model, input_size=input_size, arch=base)
    levels = list(front.config.profiling_levels)
    drawn = sample_overrides(base, samples, seed)
    started = time.perf_counter()

    def step(i: int) -> None:
        if progress and (i % 8 == 0 or i == samples):
            print(
                f"uncertainty: {model} {i}/{samples} samples "
                f"({time.perf_counter() - started:.0f} s)",
                file=sys.stderr,
                flush=True,
            )

    # The first entry is the file's values (no override): the figure the bands surround.
    done = run_samples(front, [{}, *drawn], frames=frames, levels=levels, on_sample=step)
    rows = []
    for i, r in enumerate(done):
        row: dict[str, Any] = {
            "model": model,
            "sample": "file" if i == 0 else str(i - 1),
            "fps": r["fps"],
            "energy": r["energy"],
            "power": r["power"],
            "error": r["error"],
        }
        row.update({f"x:{k}": v for k, v in r["overrides"].items()})
        rows.append(row)
    return rows


def measure(
    models: Sequence[str],
    frames: int,
    input_size: int | None,
    samples: int,
    seed: int,
    workers: int,
    progress: bool,
) -> pd.DataFrame:
    """One row per (model, sample); the models run in ``workers`` processes."""
    return rows_per_model(
        measure_model, [(m, input_size, frames, samples, seed, progress) for m in models], workers
    )


def band_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per model and figure: the file's value, p5/p50/p95 over the samples that ran, the
    band's width as a share of p50 (%), samples ok and failed."""
    out = []
    for model, group in rows.groupby("model", sort=False):
        file_row = group[group["sample"] == "file"].iloc[0]
        drawn = group[group["sample"] != "file"]
        ok = drawn[drawn["error"] == ""]
        for name in FIGURES:
            band = Band.of(list(ok[name])) if len(ok) else Band(np.nan, np.nan, np.nan)
            out.append(
                {
                    "model": model,
                    "figure": name,
                    "file": float(file_row[name]),
                    "p5": band.p5,
                    "p50": band.p50,
                    "p95": band.p95,
                    "width %": 100.0 * (band.p95 - band.p5) / band.p50,
                    "ok": len(ok),
                    "failed": len(drawn) - len(ok),
                }
            )
    return pd.DataFrame(out)


def drivers(rows: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Per model, figure and sampled number: its first-order RBD-FAST index (SALib) over the
    samples that ran. Numbers a model's samples never moved (one value) get none."""
    # lazy: loads SALib, not otherwise loaded here
    from SALib.analyze import rbd_fast

    out = []
    keys = [c for c in rows.columns if c.startswith("x:")]
    for model, group in rows.groupby("model", sort=False):
        ok = group[(group["sample"] != "file") & (group["error"] == "")]
        x = ok[keys].to_numpy(dtype=float)
        moved = [i for i, _ in enumerate(keys) if len(np.unique(x[:, i])) > 1]
        harmonics = min(HARMONICS, (len(ok) - 1) // 2)
        if len(moved) == 0 or harmonics < 1:
            continue
        problem = {
            "num_vars": len(moved),
            "names": [keys[i][2:] for i in moved],
            "bounds": [[float(x[:, i].min()), float(x[:, i].max())] for i in moved],
        }
        for name in FIGURES:
            y = ok[name].to_numpy(dtype=float)
            if np.ptp(y) == 0:
                indices = np.zeros(len(moved))
            else:
                # Its bootstrap of the confidence interval divides by the variance of
                # resamples, which is 0 when few samples hold a handful of distinct values;
                # S1 itself rests on the whole sample (its variance checked above). Only S1
                # is used, never that interval: the fewest resamples SALib takes (2), since
                # its 100 default took most of a small study's time and S1 does not depend
                # on them.
                try:
                    with np.errstate(invalid="ignore", divide="ignore"):
                        result = rbd_fast.analyze(
                            problem, x[:, moved], y, M=harmonics, num_resamples=2, seed=seed
                        )
                        shuffled = np.random.default_rng(seed).permutation(y)
                        null = rbd_fast.analyze(
                            problem, x[:, moved], shuffled, M=harmonics, num_resamples=2,
                            seed=seed,
                        )  # fmt: skip
                except ZeroDivisionError:
                    # (its bias correction divides by a ratio of the few samples' spectra,
                    # which is exactly 0 or 1 with a handful of samples: no ranking then)
                    continue
                indices = np.asarray(result["S1"], dtype=float)
                floor = float(np.nanpercentile(np.asarray(null["S1"], dtype=float), 95))
            for key, s1 in zip(problem["names"], indices, strict=True):
                out.append(
                    {
                        "model": model,
                        "figure": name,
                        "parameter": key,
                        "S1": float(s1),
                        "noise": floor if np.ptp(y) else 0.0,
                    }
                )
    return pd.DataFrame(out, columns=["model", "figure", "parameter", "S1", "noise"])


def conclusions(bands_: pd.DataFrame, ranked: pd.DataFrame, rows: pd.DataFrame) -> list[str]:
    """Statements computed from the tables: the widest band, the numbers that drive each
    figure, which would narrow the bands most if measured, and the samples that failed."""
    out = []
    ok = bands_.dropna(subset=["width %"])
    if not ok.empty:
        w = ok.sort_values("width %", ascending=False).iloc[0]
        n = ok.sort_values("width %").iloc[0]
        out.append(
            f"Widest band: `{w.model}` {FIGURES[w.figure][0]}, p5-p95 "
            f"{fmt(w.p5, FIGURES[w.figure][1])}-{fmt(w.p95, FIGURES[w.figure][1])} "
            f"({w['width %']:.1f} % of its p50); narrowest: `{n.model}` "
            f"{FIGURES[n.figure][0]} ({n['width %']:.1f} %)."
        )
        for name, (label, _) in FIGURES.items():
            part = ok[ok["figure"] == name]
            out.append(
                f"{label}: the band is {part['width %'].min():.1f}-{part['width %'].max():.1f} % "
                f"of p50 wide across the models; the file's value lies inside p5-p95 for "
                f"{int(((part['file'] >= part['p5']) & (part['file'] <= part['p95'])).sum())} of "
                f"{len(part)} models."
            )
    if not ranked.empty:
        samples = int(bands_["ok"].min()) if not bands_.empty else 0
        for name, (label, _) in FIGURES.items():
            part = ranked[ranked["figure"] == name]
            floor = float(part["noise"].mean())
            total = part.groupby("parameter")["S1"].mean().sort_values(ascending=False)
            top = total[total >= floor].head(3)
            if top.empty:
                out.append(
                    f"{label}: no number's index (mean over the models) reaches the noise "
                    f"floor {floor:.2f} of {samples} samples."
                )
                continue
            out.append(
                f"{label}: measuring "
                + ", ".join(f"`{k}` (mean S1 {v:.2f})" for k, v in top.items())
                + " would narrow its bands most (first-order RBD-FAST index, mean over the "
                f"models; {floor:.2f} is the noise floor at {samples} samples: the 95th "
                "percentile of the indices of the same samples with the figure shuffled)."
            )
    drawn = rows[rows["sample"] != "file"]
    for model, group in drawn.groupby("model", sort=False):
        bad = group[group["error"] != ""]
        if not bad.empty:
            errors = bad["error"].value_counts()
            out.append(
                f"`{model}`: {len(bad)} of {len(group)} samples failed to compile or run: "
                + "; ".join(f"{c} x {e}" for e, c in errors.items())
            )
    return out


def plot_bands(bands_: pd.DataFrame, path: Path) -> Path:
    """One panel per figure: per model the p5-p95 band and p50, as a change against the
    file's value (%), and the file's value at 0."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(FIGURES), figsize=(5.0 * len(FIGURES), 4.2), squeeze=False)
    for ax, (name, (label, _)) in zip(axes[0], FIGURES.items(), strict=True):
        part = bands_[bands_["figure"] == name]
        x = np.arange(len(part))
        rel = {q: 100.0 * (part[q].to_numpy() / part["file"].to_numpy() - 1.0) for q in FIGURES_Q}
        ax.vlines(x, rel["p5"], rel["p95"], color="#1f77b4", linewidth=8, alpha=0.5, label="p5-p95")
        ax.plot(x, rel["p50"], "o", color="#1f77b4", label="p50")
        ax.axhline(0, color="black", linewidth=0.8, label="the file's values")
        ax.set_xticks(x, list(part["model"]), rotation=30, fontsize=8)
        ax.set_ylabel("change vs the file's values (%)", fontsize=8)
        ax.set_title(label)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Bands over the inferred numbers sampled jointly within their ranges")
    fig.tight_layout()
    return save_figure(fig, path)


FIGURES_Q = ("p5", "p50", "p95")


def plot_drivers(ranked: pd.DataFrame, path: Path) -> Path:
    """One panel per figure: the numbers with the largest mean index over the models, bars
    per model."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(FIGURES), figsize=(5.4 * len(FIGURES), 5.5), squeeze=False)
    models = list(dict.fromkeys(ranked["model"]))
    for ax, (name, (label, _)) in zip(axes[0], FIGURES.items(), strict=True):
        part = ranked[ranked["figure"] == name]
        order = part.groupby("parameter")["S1"].mean().sort_values(ascending=False)
        keys = list(order.index[: 2 * TOP_DRIVERS])[::-1]
        y = np.arange(len(keys))
        height = 0.8 / max(len(models), 1)
        for j, model in enumerate(models):
            by_key = part[part["model"] == model].set_index("parameter")["S1"]
            ax.barh(y + j * height, [by_key.get(k, 0.0) for k in keys], height, label=model)
        ax.set_yticks(y + 0.4 - height / 2, keys, fontsize=7)
        ax.set_xlabel("first-order index S1 (RBD-FAST)", fontsize=8)
        ax.set_title(label)
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.suptitle("Which inferred numbers drive each figure (variance-based, joint samples)")
    fig.tight_layout()
    return save_figure(fig, path)


def _band_shown(group: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "figure": [FIGURES[f][0] for f in group["figure"]],
            **{
                col: [
                    fmt(v, FIGURES[f][1]) for v, f in zip(group[col], group["figure"], strict=True)
                ]
                for col in ("file", "p5", "p50", "p95")
            },
            "width % of p50": [f"{v:.1f}" for v in group["width %"]],
            "samples ok": [str(v) for v in group["ok"]],
            "failed": [str(v) for v in group["failed"]],
        }
    )


def _drivers_shown(group: pd.DataFrame) -> pd.DataFrame:
    cols: dict[str, list[str]] = {"rank": [str(i + 1) for i in range(TOP_DRIVERS)]}
    for name, (label, _) in FIGURES.items():
        top = group[group["figure"] == name].sort_values("S1", ascending=False).head(TOP_DRIVERS)
        cells = [f"`{r.parameter}` {r.S1:.2f}" for r in top.itertuples()]
        cols[label] = cells + [""] * (TOP_DRIVERS - len(cells))
    return pd.DataFrame(cols)


def run_uncertainty_study(
    out: Path,
    *,
    models: Sequence[str] = DEFAULT_MODELS,
    samples: int = DEFAULT_SAMPLES,
    frames: int = 8,
    input_size: int | None = None,
    seed: int = 0,
    workers: int = 2,
    command: str = "aipusim.studies.run_uncertainty_study(...)",
    progress: bool = True,
) -> StudyResult:
    """Run the study into ``out``: ``README.md``, ``bands.png``, ``drivers.png`` and every
    sample in ``study.json``."""
    check_samples(samples, "--samples")
    models = check_models(models, input_size)
    prepare_study_dir(out)
    clear_outputs(out, keep_results=False)
    started = time.perf_counter()
    rows = measure(models, frames, input_size, samples, seed, workers, progress)
    seconds = time.perf_counter() - started
    base = rows[rows["sample"] == "file"]
    bad = base[base["error"] != ""]
    if not bad.empty:
        raise ConfigError(
            f"{bad.iloc[0]['model']} must compile and run with the file's values: "
            f"{bad.iloc[0]['error']}"
        )
    bands_ = band_table(rows)
    ranked = drivers(rows, seed)
    found = conclusions(bands_, ranked, rows)
    record = {
        "samples": samples,
        "seed": seed,
        "frames": frames,
        "input_size": input_size,
        "method": "Latin hypercube; first-order indices by RBD-FAST (SALib rbd_fast)",
        "bands": bands_.to_dict(orient="records"),
        "drivers": ranked.to_dict(orient="records"),
        "rows": json.loads(rows.to_json(orient="records")),
    }
    figures = [plot_bands(bands_, out / "bands.png")]
    if not ranked.empty:
        figures.append(plot_drivers(ranked, out / "drivers.png"))
    keys = [c[2:] for c in rows.columns if c.startswith("x:")]
    info = RunInfo(
        study=STUDY,
        command=command,
        models=models,
        input_size=input_size,
        frames=frames,
        config_changes={m: config_changes(m) for m in models},
        swept=f"{samples} joint samples (Latin hypercube, seed {seed}) of the {len(keys)} "
        "inferred numbers with a range in `arch/metis.toml`",
        extra=[
            backend_runs_line(len(rows), seconds, workers, len(models)),
            "- band: the 5th to 95th percentile over the samples that compiled and ran; "
            "width % = (p95 - p5) / p50",
            "- drivers: first-order variance-based index S1 per number, estimated from the "
            "same samples by RBD-FAST (SALib `rbd_fast`). Sobol indices would need a Saltelli "
            "design of N x (2D + 2) runs, thousands at D ~ 70; RBD-FAST works from any sample "
            "that covers each range evenly, as a Latin hypercube does. It ranks by the share "
            "of variance a number explains alone; interactions are not credited. At N "
            "samples an index below the noise floor (the 95th percentile of every number's index "
            "with the figure's values shuffled among the samples; the `noise` key of "
            "`study.json`) is indistinguishable from none.",
            "- one-at-a-time swings of each number (tornado charts): "
            "[the sensitivity study](../sensitivity/README.md)",
        ],
    )
    body = ["## Results", ""]
    for fig in figures:
        body += [f"![{fig.stem}]({fig.name})", ""]
    for model, group in bands_.groupby("model", sort=False):
        body += [f"### `{model}`", "", md_table(_band_shown(group)), ""]
        part = ranked[ranked["model"] == model]
        if not part.empty:
            body += ["Top drivers (S1):", "", md_table(_drivers_shown(part)), ""]
        else:
            body += ["No drivers: too few samples ran to rank the numbers (RBD-FAST needs "
                     "more; the study's default is 64).", ""]  # fmt: skip
    failed = rows[(rows["sample"] != "file") & (rows["error"] != "")]
    if not failed.empty:
        body += ["### Samples that failed", ""]
        tokens = [k for k in keys if k.startswith("tokens.")]
        for _, r in failed.iterrows():
            shown = ", ".join(f"`{k}`={r[f'x:{k}']:g}" for k in tokens if pd.notna(r[f"x:{k}"]))
            line = f"- `{r['model']}` sample {r['sample']}: {r['error']}"
            body.append(line + (f" ({shown})" if shown else ""))
        body += ["", "Every sampled value of every failed sample: `study.json` (`rows`)."]
    body.append(
        "Every sample (one row per model and sample, sampled numbers as `x:` keys): `study.json`."
    )
    readme = write_readme(
        out,
        "Uncertainty: bands from the inferred numbers and what drives them",
        "Every inferred (I) number of the arch file sampled jointly within its range: how wide "
        "FPS, energy per frame and average power of each model are, and which numbers would "
        "narrow them most if measured.",
        info,
        found,
        body,
    )
    # study.json is also the folder's marker (what was run, `write_readme`): the rows join it.
    marker = out / STUDY_MARKER
    marker.write_text(json.dumps({**json.loads(marker.read_text()), **record}, indent=1) + "\n")
    return StudyResult(STUDY, out, bands_, found, [readme, *figures, out / "study.json"])


__all__ = ["DEFAULT_MODELS", "band_table", "drivers", "run_uncertainty_study"]
