"""Study 2: the ``mvm_utilization_limit`` power trade-off.

The limit keeps only a share of the MVM array active: less compute per cycle, less power.
Each limit is compiled and simulated through the sweep engine; the study tabulates FPS,
average and peak power and FPS/W, marks the Pareto front of (FPS, FPS/W) with the sweep's
own `pareto_mask`, and checks the physics it expects (throttling compute must not raise
FPS or peak power), reporting any violation as an observed anomaly.

Example: ``run_power_study(Path("reports/power"), models=["tiny_cnn"], limits=(0.5, 1.0))``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from aipusim.errors import ConfigError
from aipusim.studies.common import (
    RESULTS_DIR,
    RunInfo,
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
LIMIT = "mvm_utilization_limit"

KINDS = {
    "u": "limit",
    "FPS": "fps",
    "avg power (W)": "power_w",
    "peak power (W)": "power_w",
    "FPS/W": "fps_per_w",
    "energy/frame (mJ)": "energy_mj",
    "p50 latency (ms)": "latency_ms",
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
) -> pd.DataFrame:
    """One row per (model, limit), with the Pareto flag of (FPS, FPS/W) per model."""
    from aipusim.sweep.report import pareto_mask

    digest = context_digest(STUDY)
    points = [
        design_point(m, ((LIMIT, u),), frames, input_size, digest) for m in models for u in limits
    ]
    rows = run_points(STUDY, points, [(LIMIT, tuple(limits))], directory, workers, progress)
    table = pd.DataFrame(
        {
            "model": rows["model"],
            "u": rows[LIMIT + "__value"].astype(float),
            "FPS": rows["fps"],
            "avg power (W)": rows["avg_power_w"],
            "peak power (W)": rows["peak_power_w"],
            "FPS/W": rows["fps_per_w"],
            "energy/frame (mJ)": rows["energy_mj_per_frame"],
            "p50 latency (ms)": rows["latency_us_p50"] / 1e3,
            "status": rows["status"],
            "error": rows["error"].fillna(""),
        }
    )
    order = {m: i for i, m in enumerate(models)}
    table = table.sort_values(
        ["model", "u"], key=lambda s: s.map(order) if s.name == "model" else s
    ).reset_index(drop=True)
    front = pd.Series(False, index=table.index)
    for _, group in table.groupby("model", sort=False):
        front.loc[group.index] = pareto_mask(group["FPS"], group["FPS/W"], (True, True))
    table["Pareto"] = front.map({True: "yes", False: ""})
    return table


def _u(value: float) -> str:
    return fmt(value, "limit")


def anomalies(group: pd.DataFrame) -> list[str]:
    """Steps where raising the limit lowers FPS or lowers peak power (rows sorted by u)."""
    found = []
    rows = group.sort_values("u").reset_index(drop=True)
    for figure, kind, what in (
        ("FPS", "fps", "FPS"),
        ("peak power (W)", "power_w", "peak power"),
    ):
        for i in range(1, len(rows)):
            lo, hi = rows.iloc[i - 1], rows.iloc[i]
            # Only drops visible at the precision shown, so the message quotes two numbers.
            if hi[figure] < lo[figure] and fmt(hi[figure], kind) != fmt(lo[figure], kind):
                found.append(
                    f"{what} falls from {fmt(lo[figure], kind)} at u={_u(lo['u'])} to "
                    f"{fmt(hi[figure], kind)} at u={_u(hi['u'])}: more active MVM array "
                    "should not give less"
                )
    return found


def conclusions(table: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(conclusions, anomalies) computed from ``table``."""
    out: list[str] = []
    odd: list[str] = []
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
            f"{fmt(fast['peak power (W)'], 'power_w')} W peak)."
        )
        low, high = group.loc[group["u"].idxmin()], group.loc[group["u"].idxmax()]
        if low["u"] != high["u"]:
            out.append(
                f"`{model}`: from u={_u(high['u'])} down to u={_u(low['u'])}, FPS goes "
                f"{fmt(high['FPS'], 'fps')} -> {fmt(low['FPS'], 'fps')}, average power "
                f"{fmt(high['avg power (W)'], 'power_w')} -> "
                f"{fmt(low['avg power (W)'], 'power_w')} W, peak power "
                f"{fmt(high['peak power (W)'], 'power_w')} -> "
                f"{fmt(low['peak power (W)'], 'power_w')} W."
            )
        on = group[group["Pareto"] == "yes"]["u"]
        out.append(
            f"`{model}`: the Pareto front of (FPS, FPS/W) holds u = "
            + ", ".join(_u(u) for u in on)
            + f" ({len(on)} of {len(group)} points); every other limit is beaten in both "
            "throughput and efficiency by one of them."
        )
        odd += [f"`{model}`: {a}" for a in anomalies(group)]
    for _, row in table[table["status"] != "ok"].iterrows():
        out.append(f"`{row['model']}` at u={_u(row['u'])} failed: {row['error']}")
    if odd:
        out.append(
            f"**Caution**: {len(odd)} step(s) break the expected physics (see the anomalies "
            "below), so the statements above describe the current model, not the hardware."
        )
    return out, odd


def plot_curves(table: pd.DataFrame, path: Path) -> Path:
    """FPS, average/peak power and FPS/W against the limit; Pareto points ringed."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (model, group) in enumerate(table.groupby("model", sort=False)):
        c = colors[i % len(colors)]
        g = group.sort_values("u")
        front = g[g["Pareto"] == "yes"]
        axes[0].plot(g["u"], g["FPS"], "o-", color=c, label=model)
        axes[1].plot(g["u"], g["avg power (W)"], "o-", color=c, label=f"{model} average")
        axes[1].plot(g["u"], g["peak power (W)"], "s--", color=c, label=f"{model} peak")
        axes[2].plot(g["u"], g["FPS/W"], "o-", color=c, label=model)
        for ax, column in ((axes[0], "FPS"), (axes[2], "FPS/W")):
            ax.scatter(
                front["u"],
                front[column],
                s=140,
                facecolors="none",
                edgecolors="black",
                linewidths=1.3,
                zorder=3,
                label="Pareto front (FPS, FPS/W)" if i == 0 else None,
            )
    titles = ("Throughput", "Power", "Efficiency")
    ylabels = ("FPS", "power (W)", "FPS/W")
    ticks = sorted(table["u"].unique())
    for ax, title, ylabel in zip(axes, titles, ylabels, strict=True):
        ax.set_title(title)
        ax.set_xlabel("mvm_utilization_limit u")
        ax.set_ylabel(ylabel)
        ax.set_xticks(ticks, [_u(u) for u in ticks], rotation=45, fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_front(table: pd.DataFrame, path: Path) -> Path:
    """FPS against FPS/W, each point labelled with its limit; the front joined."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 5.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (model, group) in enumerate(table.groupby("model", sort=False)):
        c = colors[i % len(colors)]
        front = group[group["Pareto"] == "yes"].sort_values("FPS")
        rest = group[group["Pareto"] != "yes"]
        ax.scatter(rest["FPS"], rest["FPS/W"], color=c, alpha=0.45, s=35, label=f"{model}")
        ax.plot(front["FPS"], front["FPS/W"], "-", color=c)
        ax.scatter(
            front["FPS"],
            front["FPS/W"],
            color=c,
            edgecolor="black",
            s=75,
            zorder=3,
            label=f"{model} Pareto front",
        )
        for _, row in group.iterrows():
            ax.annotate(
                f"u={_u(row['u'])}",
                (row["FPS"], row["FPS/W"]),
                textcoords="offset points",
                xytext=(5, 4),
                fontsize=8,
            )
    ax.set_xlabel("FPS (higher is better)")
    ax.set_ylabel("FPS/W (higher is better)")
    ax.set_title("mvm_utilization_limit: throughput vs efficiency")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.margins(0.12)
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
) -> StudyResult:
    """Run the study into ``out``: ``README.md``, two PNGs, Parquet ``results/``."""
    models = check_models(models, input_size)
    limits = check_limits(limits)
    prepare_study_dir(out)
    clear_outputs(out, keep_results=resume)
    table = measure(models, limits, frames, input_size, out / RESULTS_DIR, workers, progress)
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
        config_changes={m: config_changes(m) for m in models},
        swept=f"`{LIMIT}` u = " + ", ".join(_u(u) for u in limits),
        extra=[
            "- FPS is the system throughput (host link included); power is the whole chip's "
            "(dynamic + static), averaged over the run and its highest sample; FPS/W = FPS / "
            "average power. Pareto: no other limit has both higher FPS and higher FPS/W."
        ],
    )
    anomaly_lines = [f"- {a}" for a in odd] or ["- none: FPS and peak power rise with u."]
    body = [
        "## Observed anomalies (checked from the numbers)",
        "",
        *anomaly_lines,
        "",
        "## Results",
        "",
        md_table(table.drop(columns=["error"]), KINDS),
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
