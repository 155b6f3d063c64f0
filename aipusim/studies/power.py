"""Study 2: the ``mvm_utilization_limit`` power trade-off.

The limit keeps only a share of the MVM array active: less compute per cycle, less power.
Each limit is compiled and simulated through the sweep engine; the study tabulates FPS,
average and peak power and FPS/W, marks two Pareto fronts with the sweep's own
`pareto_mask` (throughput vs efficiency: FPS and FPS/W; throughput vs peak power: FPS and
peak W), and checks the physics it expects (throttling compute must not raise FPS or peak
power), reporting any violation as an observed anomaly.

Example: ``run_power_study(Path("reports/power"), models=["tiny_cnn"], limits=(0.5, 1.0))``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from aipusim.base.errors import ConfigError
from aipusim.isa.metrics import UNIT_POWER_PARTS
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

DEFAULT_MODELS = ("resnet50",)
#: 0.125 ... 1.0 in steps of 0.125 (the property's range and granularity of interest).
DEFAULT_LIMITS = tuple(k / 8 for k in range(1, 9))
STUDY = "power"
WHY_RESNET50 = [
    "- why ResNet-50: the zoo's reference classifier, dense convolutions that all run on the "
    "MVM array the limit throttles"
]
LIMIT = "mvm_utilization_limit"


@dataclass(frozen=True)
class Front:
    """A trade-off against FPS: the table column of the other figure and its direction."""

    column: str
    flag: str
    maximize: bool
    title: str


FRONTS = (
    Front("FPS/W", "front FPS/W", True, "throughput vs efficiency (FPS, FPS/W)"),
    Front(
        "peak power 10us (W)",
        "front peak W",
        False,
        "throughput vs peak power (FPS, 10 µs-window peak W)",
    ),
)
#: A step where FPS or peak power falls by less than this share counts as flat, not as an
#: anomaly: the compiler tiles each limit separately, so schedules differ a little between
#: limits even where the array is not the bottleneck.
FLAT_SHARE = 0.01

#: The table's column of each part of a unit's power (``clocked_idle`` -> ``clocked idle (W)``).
PART_COLUMNS = {part: f"{part.replace('_', ' ')} (W)" for part in UNIT_POWER_PARTS}

KINDS = {
    "u": "limit",
    "FPS": "fps",
    "avg power (W)": "power_w",
    "peak power 10us (W)": "power_w",
    "peak power 100ns (W)": "power_w",
    "FPS/W": "fps_per_w",
    "energy/frame (mJ)": "energy_mj",
    "p50 latency (ms)": "latency_ms",
    **{PART_COLUMNS[part]: "power_w" for part in UNIT_POWER_PARTS},
}


def check_limits(limits: Sequence[float]) -> list[float]:
    """The limits sorted, each in (0, 1]; the config checks its own range when it runs."""
    values = sorted({float(v) for v in limits})
    if not values:
        raise ConfigError("--limits must give at least one value, not none")
    bad = [v for v in values if not 0 < v <= 1]
    if bad:
        raise ConfigError(f"--limits must be in (0, 1], not {bad}")
    return values


def measure(
    models: Sequence[str],
    limits: Sequence[float],
    frames: int,
    input_size: int | None,
    directory: Path,
    workers: int,
    progress: bool,
    base: StudyBase = BUILT_IN,
) -> pd.DataFrame:
    """One row per (model, limit), with the flags of both Pareto fronts per model."""
    # lazy: aipusim.sweep.report loads pyarrow, not otherwise loaded here
    from aipusim.sweep.report import pareto_mask

    digest = context_digest(STUDY)
    points = [
        design_point(m, ((LIMIT, u),), frames, input_size, digest, base=base)
        for m in models
        for u in limits
    ]
    rows = run_points(STUDY, points, [(LIMIT, tuple(limits))], directory, workers, progress)
    table = pd.DataFrame(
        {
            "model": rows["model"],
            "u": rows[LIMIT + "__value"].astype(float),
            "FPS": rows["fps"],
            "avg power (W)": rows["avg_power_w"],
            "peak power 10us (W)": rows["peak_power_w_10us"],
            "peak power 100ns (W)": rows["peak_power_w_100ns"],
            "FPS/W": rows["fps_per_w"],
            "energy/frame (mJ)": rows["energy_mj_per_frame"],
            "p50 latency (ms)": rows["latency_us_p50"] / 1e3,
            **{PART_COLUMNS[p]: rows[f"power_w_{p}"] for p in UNIT_POWER_PARTS},
            "unit_power_w": rows["unit_power_w"],
            "status": rows["status"],
            "error": rows["error"].fillna(""),
        }
    )
    order = {m: i for i, m in enumerate(models)}
    table = table.sort_values(
        ["model", "u"], key=lambda s: s.map(order) if s.name == "model" else s
    ).reset_index(drop=True)
    for front in FRONTS:
        flags = pd.Series(False, index=table.index)
        for _, group in table.groupby("model", sort=False):
            flags.loc[group.index] = pareto_mask(
                group["FPS"], group[front.column], (True, front.maximize)
            )
        table[front.flag] = flags.map({True: "yes", False: ""})
    # the name run and the other reports use (a graph name, not an ONNX file's path)
    table["model"] = table["model"].map({m: model_name(m) for m in models})
    return table


def unit_breakdown(table: pd.DataFrame) -> pd.DataFrame:
    """Per model at its highest limit, the run's average power per unit (rows) and part
    (columns: dynamic, clocked busy, clocked idle, gated idle, leakage; `SimResult.unit_power_w`).

    >>> import json
    >>> row = {"dynamic": 1.0, "clocked_busy": 0.2, "clocked_idle": 0.1, "gated_idle": 0.01,
    ...        "leakage": 0.02}
    >>> t = pd.DataFrame({"model": ["m"], "u": [1.0], "unit_power_w": [json.dumps({"mvm": row})]})
    >>> unit_breakdown(t).to_dict("records")[0]["dynamic (W)"], len(unit_breakdown(t).columns)
    (1.0, 7)
    """
    out = []
    for model, group in table.groupby("model", sort=False):
        top = group.loc[group["u"].idxmax()]
        for unit, parts in json.loads(top["unit_power_w"]).items():
            out.append(
                {
                    "model": model,
                    "unit": unit,
                    **{PART_COLUMNS[p]: parts[p] for p in UNIT_POWER_PARTS},
                }
            )
    return pd.DataFrame(out)


def _u(value: float) -> str:
    return fmt(value, "limit")


def anomalies(group: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(anomalies, flat steps): steps where raising the limit lowers FPS or peak power by
    more than `FLAT_SHARE`, and by less (rows of one model)."""
    found: list[str] = []
    flat: list[str] = []
    rows = group.sort_values("u").reset_index(drop=True)
    for figure, kind, what in (
        ("FPS", "fps", "FPS"),
        ("peak power 10us (W)", "power_w", "peak power"),
    ):
        for i in range(1, len(rows)):
            lo, hi = rows.iloc[i - 1], rows.iloc[i]
            # Only drops visible at the precision shown, so the message quotes two numbers.
            if not (hi[figure] < lo[figure] and fmt(hi[figure], kind) != fmt(lo[figure], kind)):
                continue
            step = (
                f"{what} falls from {fmt(lo[figure], kind)} at u={_u(lo['u'])} to "
                f"{fmt(hi[figure], kind)} at u={_u(hi['u'])}"
            )
            if hi[figure] < lo[figure] * (1 - FLAT_SHARE):
                found.append(f"{step}: more active MVM array should not give less")
            else:
                flat.append(step)
    return found, flat


def conclusions(table: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(conclusions, anomalies) computed from ``table``."""
    out: list[str] = []
    odd: list[str] = []
    flats: list[str] = []
    ok = table[table["status"] == "ok"]
    for model, group in ok.groupby("model", sort=False):
        eff = group.loc[group["FPS/W"].idxmax()]
        out.append(
            f"`{model}`: FPS/W peaks at **u={_u(eff['u'])}** ({fmt(eff['FPS/W'], 'fps_per_w')} "
            f"FPS/W: {fmt(eff['FPS'], 'fps')} FPS at {fmt(eff['avg power (W)'], 'power_w')} W "
            "average)."
        )
        fast = group.loc[group["FPS"].idxmax()]
        out.append(
            f"`{model}`: the highest FPS is at u={_u(fast['u'])} ({fmt(fast['FPS'], 'fps')} FPS, "
            f"{fmt(fast['avg power (W)'], 'power_w')} W average, "
            f"{fmt(fast['peak power 10us (W)'], 'power_w')} W peak over 10 µs)."
        )
        low, high = group.loc[group["u"].idxmin()], group.loc[group["u"].idxmax()]
        if low["u"] != high["u"]:
            out.append(
                f"`{model}`: from u={_u(high['u'])} down to u={_u(low['u'])}, FPS goes "
                f"{fmt(high['FPS'], 'fps')} -> {fmt(low['FPS'], 'fps')}, average power "
                f"{fmt(high['avg power (W)'], 'power_w')} -> "
                f"{fmt(low['avg power (W)'], 'power_w')} W, peak power "
                f"{fmt(high['peak power 10us (W)'], 'power_w')} -> "
                f"{fmt(low['peak power 10us (W)'], 'power_w')} W (10 µs window)."
            )
        for front in FRONTS:
            on = group[group[front.flag] == "yes"]["u"]
            out.append(
                f"`{model}`: the Pareto front of {front.title} holds u = "
                + ", ".join(_u(u) for u in on)
                + f" ({len(on)} of {len(group)} limits)."
            )
        found, flat = anomalies(group)
        odd += [f"`{model}`: {a}" for a in found]
        flats += [f"`{model}`: {a}" for a in flat]
    for _, row in table[table["status"] != "ok"].iterrows():
        out.append(f"`{row['model']}` at u={_u(row['u'])} failed: {row['error']}")
    if flats:
        out.append(
            f"Flat steps (FPS or peak power lower by under {100 * FLAT_SHARE:g} % at the "
            "higher limit): " + "; ".join(flats) + "."
        )
    if odd:
        out.append(
            f"**Caution**: {len(odd)} step(s) break the expected physics (see the anomalies "
            "below), so the statements above describe the current model, not the hardware."
        )
    return out, odd


def plot_curves(table: pd.DataFrame, path: Path) -> Path:
    """FPS, average and peak power, and FPS/W against the limit."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (model, group) in enumerate(table.groupby("model", sort=False)):
        c = colors[i % len(colors)]
        g = group.sort_values("u")
        axes[0].plot(g["u"], g["FPS"], "o-", color=c, label=model)
        axes[1].plot(g["u"], g["avg power (W)"], "o-", color=c, label=f"{model} average")
        axes[1].plot(
            g["u"], g["peak power 10us (W)"], "s--", color=c, label=f"{model} peak (10 µs)"
        )
        axes[2].plot(g["u"], g["FPS/W"], "o-", color=c, label=model)
    titles = ("Throughput (steady state)", "Power: steady average, 10 µs-window peak", "Efficiency")
    ylabels = ("FPS", "power (W)", "FPS/W")
    ticks = sorted(table["u"].unique())
    for ax, title, ylabel in zip(axes, titles, ylabels, strict=True):
        ax.set_title(title)
        ax.set_xlabel("mvm_utilization_limit u")
        ax.set_ylabel(ylabel)
        ax.set_xticks(ticks, [_u(u) for u in ticks], rotation=45, fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
        top = max((line.get_ydata().max() for line in ax.get_lines()), default=1.0)
        ax.set_ylim(0, 1.12 * top if top > 0 else 1.0)
    fig.tight_layout()
    return save_figure(fig, path)


def _label_points(ax: Any, xs: Sequence[float], ys: Sequence[float], texts: list[str]) -> None:
    """Label points without overlaps: a label that would sit on an earlier one moves down
    (in axes fractions) and keeps a thin leader line to its point."""
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    placed: list[tuple[float, float]] = []
    order = sorted(range(len(xs)), key=lambda k: -ys[k])
    for k in order:
        nx, ny = (xs[k] - x0) / (x1 - x0), (ys[k] - y0) / (y1 - y0)
        lx, ly = nx + 0.02, ny + 0.02
        while any(abs(lx - px) < 0.11 and abs(ly - py) < 0.045 for px, py in placed):
            ly -= 0.045
        placed.append((lx, ly))
        moved = abs(ly - (ny + 0.02)) > 1e-9
        ax.annotate(
            texts[k],
            (xs[k], ys[k]),
            xytext=(lx, ly),
            textcoords="axes fraction",
            fontsize=8,
            va="center",
            arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "grey"} if moved else None,
        )


def plot_front(table: pd.DataFrame, path: Path) -> Path:
    """Both trade-offs: FPS against FPS/W and against peak power, fronts joined and ringed,
    every point labelled with its limit."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, front in zip(axes, FRONTS, strict=True):
        better = "higher" if front.maximize else "lower"
        for i, (model, group) in enumerate(table.groupby("model", sort=False)):
            c = colors[i % len(colors)]
            on = group[group[front.flag] == "yes"].sort_values("FPS")
            rest = group[group[front.flag] != "yes"]
            ax.scatter(rest["FPS"], rest[front.column], color=c, alpha=0.45, s=35, label=model)
            ax.plot(on["FPS"], on[front.column], "-", color=c)
            ax.scatter(
                on["FPS"],
                on[front.column],
                color=c,
                edgecolor="black",
                s=75,
                zorder=3,
                label=f"{model} Pareto front",
            )
        ax.margins(0.15)
        ax.set_xlabel("FPS (higher is better)")
        ax.set_ylabel(f"{front.column} ({better} is better)")
        ax.set_title(f"Pareto front: {front.title}", fontsize=11)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right" if front.maximize else "upper left")
        _label_points(
            ax,
            table["FPS"].tolist(),
            table[front.column].tolist(),
            [f"u={_u(u)}" for u in table["u"]],
        )
    fig.tight_layout()
    return save_figure(fig, path)


def run_power_study(
    out: Path,
    *,
    models: Sequence[str] = DEFAULT_MODELS,
    limits: Sequence[float] = DEFAULT_LIMITS,
    frames: int = 8,
    input_size: int | None = None,
    workers: int = 2,
    resume: bool = False,
    command: str = "aipusim.studies.run_power_study(...)",
    progress: bool = True,
    base: StudyBase = BUILT_IN,
) -> StudyResult:
    """Run the study into ``out``: ``README.md``, two PNGs, Parquet ``results/``
    (``base``: where each model's config starts, ``--defaults`` and ``--set``)."""
    models = check_models(models, input_size)
    base.check(models, STUDY, [LIMIT], "choose the values with --limits")
    limits = check_limits(limits)
    prepare_study_dir(out)
    clear_outputs(out, keep_results=resume)
    table = measure(models, limits, frames, input_size, out / RESULTS_DIR, workers, progress, base)
    found, odd = conclusions(table)
    ok = table[table["status"] == "ok"]
    curves = plot_curves(ok, out / "power_vs_limit.png")
    front = plot_front(ok, out / "pareto.png")
    info = RunInfo(
        study=STUDY,
        command=command,
        models=models,
        input_size=input_size,
        frames=frames,
        config_changes={m: config_changes(m, base) for m in models},
        base=base.describe(),
        swept=f"`{LIMIT}` u = " + ", ".join(_u(u) for u in limits),
        extra=[
            *(WHY_RESNET50 if models == ["resnet50"] else []),
            "- FPS is the steady-state system throughput (host link included; the first start "
            "of each instance is warm-up and left out); average power is the whole chip's "
            "(dynamic + static) in the steady state; peak power is the highest average over a "
            "sliding 10 µs window (100 ns also shown) over the whole run, INIT included "
            "(`aipusim.isa.metrics`); FPS/W = FPS / average power. A limit is on a Pareto front "
            "when no other limit is at least as good in both figures and better in one (per "
            "model).",
            "- power by part (dynamic, clocked busy, clocked idle, gated idle, leakage; W) is "
            "the whole run's average, INIT included, with activity-based clock gating "
            "(`[clock_gating]` of the arch file): a unit burns its clock share while busy and "
            "for the gating latency after, then only the gated residual; always-on clock, the "
            "chip's clock network, DDR PHY, the DRAM devices' standby power and PCIe L0 count "
            "as clocked idle.",
        ],
    )
    anomaly_lines = [f"- {a}" for a in odd] or [
        f"- none: neither FPS nor peak power falls by more than {100 * FLAT_SHARE:g} % as u rises."
    ]
    body = [
        "## Observed anomalies (checked from the numbers)",
        "",
        *anomaly_lines,
        "",
        "## Results",
        "",
        md_table(table.drop(columns=["error", "unit_power_w"]), KINDS),
        "",
        "## Power by unit (highest limit; the run's average)",
        "",
        md_table(unit_breakdown(ok), KINDS),
        "",
        f"![FPS, power and FPS/W against the limit]({curves.name})",
        "",
        f"![Pareto front]({front.name})",
        "",
        f"Raw results (one row per limit): `{RESULTS_DIR}/part-*.parquet`.",
    ]
    readme = write_readme(
        out,
        "Power trade-off: mvm_utilization_limit",
        "How throughput, average and peak power and efficiency change as the share of the "
        "MVM array kept active (u) goes from 1/8 to all of it.",
        info,
        found,
        body,
    )
    return StudyResult(STUDY, out, table, found + odd, [readme, curves, front])
