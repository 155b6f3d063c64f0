"""Study 4: how much each inferred (I) number of the arch file decides the answer.

Every inferred number has a plausible range in ``arch/metis.toml`` (``[ranges]``). The
study moves each one alone to the low and to the high end of its range and measures
steady-state FPS, energy per frame and average power of each model (its built-in zoo
config), against the model with every number at its value in the file. A tornado chart
per model shows the parameters that move FPS (and energy per frame) most.

Each model's front end (import, quantization) runs once: it does not read the numbers the
study moves. The back end (tiling, IMC mapping, multicore split, memory plan, schedule)
plans with the cost model, so it runs again for every variant; when the tasklists come
out byte for byte as with the file's values, the number affected only the simulation, and
the table says which numbers changed the compiler's decisions for which model.

Example: ``run_sensitivity_study(Path("out"), models=["tiny_cnn"], keys=["l1.latency_cycles"])``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import aipusim
from aipusim.api.retarget import Retargeter
from aipusim.arch import load_arch
from aipusim.arch.loader import arch_value
from aipusim.base.errors import AipuSimError, ConfigError
from aipusim.studies.common import (
    RunInfo,
    StudyResult,
    backend_runs_line,
    check_models,
    clear_outputs,
    config_changes,
    consistent_overrides,
    fmt,
    md_table,
    prepare_study_dir,
    pyplot,
    rows_per_model,
    save_figure,
    write_readme,
)

DEFAULT_MODELS = ("resnet50", "mobilenetv2", "yolov5s", "yolov8n")
STUDY = "sensitivity"
#: Parameters shown per model in the tornado charts (the largest swings).
TORNADO_ROWS = 15
#: A swing below this share (of the model's figure with the file's values) counts as none.
NO_EFFECT = 0.001
#: The figures measured, by column prefix.
FIGURES = {
    "fps": ("FPS", "fps"),
    "energy": ("energy per frame", "energy_mj"),
    "power": ("average power", "power_w"),
}


def parameters(arch: Any, keys: Sequence[str] | None = None) -> tuple[list[Any], list[Any]]:
    """(ranges moved, ranges of one value) of ``arch``, in file order; only ``keys`` if
    given (each must have a range)."""
    ranges = list(arch.ranges)
    if keys is not None:
        known = {r.key: r for r in ranges}
        missing = [k for k in keys if k not in known]
        if missing:
            raise ConfigError(
                f"--keys must name inferred arch numbers with a range, not {', '.join(missing)}"
            )
        ranges = [known[k] for k in keys]
    return [r for r in ranges if r.low < r.high], [r for r in ranges if r.low == r.high]


def _value(r: Any, end: str, current: Any) -> Any:
    value = r.low if end == "low" else r.high
    return int(value) if isinstance(current, int) else float(value)


def measure_model(
    model: str,
    input_size: int | None,
    frames: int,
    keys: Sequence[str] | None,
    progress: bool,
) -> list[dict[str, Any]]:
    """Every variant of ``model``: the file's values, then each moved number at each end
    (runs in a worker process)."""
    base = load_arch()
    moved, _ = parameters(base, keys)
    front = Retargeter(model, input_size=input_size, arch=base)
    levels = list(front.config.profiling_levels)
    variants: list[tuple[str, str, Any]] = [("", "file", None)]
    for r in moved:
        current = arch_value(base, r.key)
        variants += [(r.key, end, _value(r, end, current)) for end in ("low", "high")]
    rows = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="aipusim-sensitivity-") as tmp:
        baseline: dict[str, bytes] | None = None
        for i, (key, end, value) in enumerate(variants):
            row: dict[str, Any] = {"model": model, "parameter": key, "end": end, "value": value}
            try:
                moved_too = consistent_overrides(base, {key: value}) if key else {}
                row["also moved"] = "; ".join(
                    f"{k}={v:g}" for k, v in moved_too.items() if k != key
                )
                arch = load_arch(overrides=moved_too) if key else base
                out = Path(tmp) / f"v{i}"
                lists = front.compile(arch, out)
                if baseline is None:
                    baseline = lists
                row["recompiled"] = lists != baseline
                res = aipusim.simulate(out, frames, levels=levels, arch=arch)
                row.update(
                    fps=res.fps,
                    energy=res.energy_mj_per_frame_total,
                    power=res.avg_power_w,
                    status="ok",
                    error="",
                )
            except AipuSimError as exc:
                row.update(
                    recompiled=None, fps=np.nan, energy=np.nan, power=np.nan, status="failed"
                )
                row["error"] = str(exc)
            rows.append(row)
            if progress and ((i + 1) % 10 == 0 or i + 1 == len(variants)):
                print(
                    f"sensitivity: {model} {i + 1}/{len(variants)} variants "
                    f"({time.perf_counter() - started:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
    return rows


def measure(
    models: Sequence[str],
    frames: int,
    input_size: int | None,
    keys: Sequence[str] | None,
    workers: int,
    progress: bool,
) -> pd.DataFrame:
    """One row per (model, variant); the models run in ``workers`` processes."""
    return rows_per_model(
        measure_model, [(m, input_size, frames, keys, progress) for m in models], workers
    )


def swings(rows: pd.DataFrame) -> pd.DataFrame:
    """Per model and moved number: its range, each figure at each end and as a change
    against the file's values (%), whether it changed the compiler's tasklists."""
    out = []
    for model, group in rows.groupby("model", sort=False):
        base = group[group["end"] == "file"].iloc[0]
        for key, pair in group[group["end"] != "file"].groupby("parameter", sort=False):
            ends = pair.set_index("end")
            row: dict[str, Any] = {
                "model": model,
                "parameter": key,
                "low": ends.loc["low", "value"],
                "high": ends.loc["high", "value"],
                "recompiled": bool(ends["recompiled"].fillna(False).any()),
                "status": "ok" if (ends["status"] == "ok").all() else "failed",
                "error": "; ".join(e for e in ends["error"] if e),
            }
            for name in FIGURES:
                for end in ("low", "high"):
                    value = float(ends.loc[end, name])
                    row[f"{name} {end}"] = value
                    row[f"{name} {end} %"] = 100.0 * (value / float(base[name]) - 1.0)
                row[f"{name} swing %"] = float(
                    np.nanmax(np.abs([row[f"{name} low %"], row[f"{name} high %"]]))
                )
            out.append(row)
    return pd.DataFrame(out)


def _pct(value: float) -> str:
    return "n/a" if value is None or np.isnan(value) else f"{value:+.1f} %"


def conclusions(table: pd.DataFrame, base: pd.DataFrame) -> list[str]:
    """Statements computed from the swings: what matters most per model and figure, what
    never matters, and which numbers the compiler's decisions depend on."""
    out = []
    for model, group in table.groupby("model", sort=False):
        b = base[base["model"] == model].iloc[0]
        out.append(
            f"`{model}` with the file's values: {fmt(b['fps'], 'fps')} FPS, "
            f"{fmt(b['energy'], 'energy_mj')} mJ per frame, {fmt(b['power'], 'power_w')} W."
        )
        for name, (label, _) in FIGURES.items():
            ranked = group.sort_values(f"{name} swing %", ascending=False).head(3)
            ranked = ranked[ranked[f"{name} swing %"] >= 100 * NO_EFFECT]
            if ranked.empty:
                continue
            parts = [
                f"`{r.parameter}` ({_pct(r[f'{name} low %'])} at {r.low:g}, "
                f"{_pct(r[f'{name} high %'])} at {r.high:g})"
                for _, r in ranked.iterrows()
            ]
            out.append(f"`{model}`: {label} moves most with " + "; ".join(parts) + ".")
    moved = table.groupby("parameter", sort=False)
    idle = [
        k
        for k, g in moved
        if all((g[f"{n} swing %"].fillna(0) < 100 * NO_EFFECT).all() for n in FIGURES)
    ]
    if idle:
        out.append(
            f"{len(idle)} of {moved.ngroups} moved numbers change no figure of any model by "
            f"{100 * NO_EFFECT:g} % or more: " + ", ".join(f"`{k}`" for k in idle) + "."
        )
    compiled = [
        f"`{k}` ({', '.join(g.loc[g['recompiled'], 'model'])})"
        for k, g in moved
        if g["recompiled"].any()
    ]
    out.append(
        f"{len(compiled)} of {moved.ngroups} moved numbers change the compiler's tasklists "
        "(the back end plans with them): "
        + (", ".join(compiled) if compiled else "none")
        + "; the others change only the simulation."
    )
    for _, r in table[table["status"] != "ok"].iterrows():
        out.append(f"`{r.model}` with `{r.parameter}` at an end of its range failed: {r.error}")
    return out


def plot_tornado(table: pd.DataFrame, name: str, path: Path) -> Path:
    """One panel per model: the ``TORNADO_ROWS`` numbers moving figure ``name`` most, each a
    bar from its change at the low end to its change at the high end."""
    plt = pyplot()
    label = FIGURES[name][0]
    models = list(dict.fromkeys(table["model"]))
    fig, axes = plt.subplots(1, len(models), figsize=(5.2 * len(models), 6.5), squeeze=False)
    for ax, model in zip(axes[0], models, strict=True):
        group = table[table["model"] == model].sort_values(f"{name} swing %", ascending=False)
        group = group.head(TORNADO_ROWS).iloc[::-1]
        y = np.arange(len(group))
        low = group[f"{name} low %"].to_numpy(dtype=float)
        high = group[f"{name} high %"].to_numpy(dtype=float)
        ax.barh(y, np.nan_to_num(low), color="#1f77b4", label="at the low end")
        ax.barh(y, np.nan_to_num(high), color="#d62728", alpha=0.75, label="at the high end")
        ax.set_yticks(y, [p for p in group["parameter"]], fontsize=7)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_xlabel(f"{label}: change vs the file's values (%)", fontsize=8)
        ax.set_title(model)
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.suptitle(f"Sensitivity of {label} to each inferred number across its plausible range")
    fig.tight_layout()
    return save_figure(fig, path)


def _shown(group: pd.DataFrame) -> pd.DataFrame:
    """A model's table for the README, by FPS swing."""
    g = group.sort_values(["fps swing %", "energy swing %"], ascending=False)
    return pd.DataFrame(
        {
            "parameter": [f"`{p}`" for p in g["parameter"]],
            "low": [f"{v:g}" for v in g["low"]],
            "high": [f"{v:g}" for v in g["high"]],
            "FPS low": [_pct(v) for v in g["fps low %"]],
            "FPS high": [_pct(v) for v in g["fps high %"]],
            "energy/frame low": [_pct(v) for v in g["energy low %"]],
            "energy/frame high": [_pct(v) for v in g["energy high %"]],
            "avg power low": [_pct(v) for v in g["power low %"]],
            "avg power high": [_pct(v) for v in g["power high %"]],
            "recompiled": ["yes" if v else "no" for v in g["recompiled"]],
        }
    )


def run_sensitivity_study(
    out: Path,
    *,
    models: Sequence[str] = DEFAULT_MODELS,
    frames: int = 8,
    input_size: int | None = None,
    keys: Sequence[str] | None = None,
    workers: int = 2,
    command: str = "aipusim.studies.run_sensitivity_study(...)",
    progress: bool = True,
) -> StudyResult:
    """Run the study into ``out``: ``README.md``, ``tornado_fps.png``,
    ``tornado_energy.png`` and every measured variant in ``variants.csv``."""
    models = check_models(models, input_size)
    moved, fixed = parameters(load_arch(), keys)
    if not moved:
        raise ConfigError("the arch file must give at least one inferred number a range to move")
    prepare_study_dir(out)
    clear_outputs(out, keep_results=False)
    started = time.perf_counter()
    rows = measure(models, frames, input_size, keys, workers, progress)
    seconds = time.perf_counter() - started
    base = rows[rows["end"] == "file"]
    bad = base[base["status"] != "ok"]
    if not bad.empty:
        raise ConfigError(
            f"{bad.iloc[0]['model']} must compile and run with the file's values: "
            f"{bad.iloc[0]['error']}"
        )
    table = swings(rows)
    found = conclusions(table, base)
    rows.to_csv(out / "variants.csv", index=False)
    figures = [
        plot_tornado(table, "fps", out / "tornado_fps.png"),
        plot_tornado(table, "energy", out / "tornado_energy.png"),
    ]
    info = RunInfo(
        study=STUDY,
        command=command,
        models=models,
        input_size=input_size,
        frames=frames,
        config_changes={m: config_changes(m) for m in models},
        swept=f"each of the {len(moved)} inferred numbers with a range in `arch/metis.toml` "
        "alone, to the low and to the high end of its range",
        extra=[
            backend_runs_line(len(rows), seconds, workers, len(models)),
            "- not moved (a range of one value: structural, no figure depends on them): "
            + (", ".join(f"`{r.key}`" for r in fixed) or "none"),
            "- FPS: steady-state system throughput (the first start of each instance is "
            "warm-up and left out); energy per frame: a steady frame's own work plus the "
            "chip's static power over one frame period; average power = energy per frame x "
            "FPS (`aipusim.isa.metrics`). Changes are against the model with every number at "
            "its value in the file.",
            "- recompiled: the back end emitted other tasklists with the number at an end of "
            "its range (its tiling, mapping, split or schedule depend on it); otherwise the "
            "number changed the simulation only.",
            "- a V-f supply moved past a neighbouring point's moves that point with it, so the "
            "table never needs more voltage for a lower clock (`variants.csv`, `also moved`).",
        ],
    )
    body = ["## Results", ""]
    for fig in figures:
        body += [f"![{fig.stem}]({fig.name})", ""]
    for model, group in table.groupby("model", sort=False):
        body += [f"### `{model}`", "", md_table(_shown(group)), ""]
    body.append("Every variant (one row per model, number and end): `variants.csv`.")
    readme = write_readme(
        out,
        "Sensitivity: which inferred numbers decide the answer",
        "Every inferred (I) number of the arch file moved alone across its plausible range: "
        "how much FPS, energy per frame and average power of each model follow it.",
        info,
        found,
        body,
    )
    return StudyResult(STUDY, out, table, found, [readme, *figures, out / "variants.csv"])


__all__ = ["DEFAULT_MODELS", "parameters", "run_sensitivity_study", "swings"]
