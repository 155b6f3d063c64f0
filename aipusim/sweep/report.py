"""Summarise a sweep folder: Pareto fronts, two plots and a Markdown table.

Two trade-offs, each per model (different models do different work, so their points are
not rivals): throughput against efficiency (maximise FPS and FPS/W) and latency against
power (minimise p50 latency and average power). A point is on a front when no other point
of its model is at least as good in both figures and better in one.

>>> import pandas as pd
>>> df = pd.DataFrame({"fps": [10, 20, 15, 5], "fps_per_w": [5, 2, 4, 1]})
>>> pareto_mask(df["fps"], df["fps_per_w"], maximize=(True, True)).tolist()
[True, True, True, False]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aipusim.base.errors import ConfigError
from aipusim.base.fileio import output_path, reporting, write_text
from aipusim.run.config_text import changes_text
from aipusim.sweep.space import value_text
from aipusim.sweep.store import STATUS_FAILED, STATUS_OK, ResultStore, swept_columns


@dataclass(frozen=True)
class Front:
    """One trade-off: two result columns and whether each is maximised."""

    name: str
    x: str
    y: str
    maximize: tuple[bool, bool]
    title: str
    x_label: str
    y_label: str


FRONTS = (
    Front("fps", "fps", "fps_per_w", (True, True), "Throughput vs efficiency", "FPS", "FPS/W"),
    Front(
        "latency",
        "latency_us_p50",
        "avg_power_w",
        (False, False),
        "Latency vs power",
        "latency p50 (µs)",
        "average power (W)",
    ),
)


def pareto_mask(x: Sequence[float], y: Sequence[float], maximize: tuple[bool, bool]) -> np.ndarray:
    """True for the non-dominated points of (x, y); NaN points are never on the front."""
    xs = np.asarray(x, dtype=float) * (1 if maximize[0] else -1)
    ys = np.asarray(y, dtype=float) * (1 if maximize[1] else -1)
    valid = ~(np.isnan(xs) | np.isnan(ys))
    mask = np.zeros(len(xs), dtype=bool)
    vx, vy = xs[valid], ys[valid]
    # Point i is dominated when some j is >= in both figures and > in at least one.
    ge = (vx[None, :] >= vx[:, None]) & (vy[None, :] >= vy[:, None])
    gt = (vx[None, :] > vx[:, None]) | (vy[None, :] > vy[:, None])
    mask[valid] = ~(ge & gt).any(axis=1)
    return mask


def front_flags(ok: pd.DataFrame) -> pd.DataFrame:
    """``ok`` with a boolean column ``front_<name>`` per trade-off (per model)."""
    out = ok.copy()
    for front in FRONTS:
        flags = pd.Series(False, index=out.index)
        for _, group in out.groupby("model", sort=False):
            mask = pareto_mask(group[front.x], group[front.y], front.maximize)
            flags.loc[group.index] = mask
        out[f"front_{front.name}"] = flags.astype(bool)
    return out


def plain_number(value: float) -> str:
    """``value`` with four significant digits in plain notation (the integer part whole):
    a reader compares 193312 with 1933 at a glance, not 1.933e+05 with 1933. NaN: empty."""
    if pd.isna(value):
        return ""
    value = float(value)
    digits = int(np.floor(np.log10(abs(value)))) + 1 if value else 1
    return f"{value:.{max(0, 4 - digits)}f}"


def point_labels(
    points: pd.DataFrame, x: str, y: str, keys: Sequence[str]
) -> list[tuple[float, float, str]]:
    """One label per distinct (x, y) of ``points``: the swept values of each point there,
    one line each, so points with the same figures are named together rather than drawn
    over one another unseen."""
    labels: dict[tuple[float, float], list[str]] = {}
    for _, row in points.iterrows():
        text = " ".join(f"{k}={row[k]}" for k in keys) or str(row.get("model", ""))
        labels.setdefault((float(row[x]), float(row[y])), []).append(text)
    return [
        (px, py, "\n".join(texts) + (" (same figures)" if len(texts) > 1 else ""))
        for (px, py), texts in labels.items()
    ]


def _label_inward(ax: Any, labels: list[tuple[float, float, str]]) -> None:
    """Write each label beside its point on the side facing the middle of the axes, so a
    label of a point at the edge stays inside the figure."""
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    for px, py, text in labels:
        right = px > (x0 + x1) / 2
        top = py > (y0 + y1) / 2
        ax.annotate(
            text,
            (px, py),
            xytext=(-8 if right else 8, -8 if top else 8),
            textcoords="offset points",
            ha="right" if right else "left",
            va="top" if top else "bottom",
            fontsize=7,
        )


def _plot(ok: pd.DataFrame, front: Front, path: Path, keys: Sequence[str]) -> None:
    # lazy: loads matplotlib, not otherwise loaded here
    import matplotlib

    matplotlib.use("Agg")
    # lazy: loads matplotlib, not otherwise loaded here
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    flag = f"front_{front.name}"
    labelled: list[tuple[float, float, str]] = []
    for i, (model, group) in enumerate(ok.groupby("model", sort=False)):
        color = colors[i % len(colors)]
        rest = group[~group[flag]]
        best = group[group[flag]].sort_values(front.x)
        ax.scatter(rest[front.x], rest[front.y], color=color, alpha=0.35, s=25)
        ax.plot(best[front.x], best[front.y], color=color, linewidth=1.2)
        ax.scatter(
            best[front.x],
            best[front.y],
            color=color,
            edgecolor="black",
            s=60,
            label=f"{model} (front: {len(best)} of {len(group)})",
            zorder=3,
        )
        labelled += point_labels(best, front.x, front.y, keys)
        for px, py, text in point_labels(rest, front.x, front.y, keys):
            if "\n" in text:  # several points behind one marker: say how many
                count = text.count("\n") + 1
                ax.annotate(f"x{count}", (px, py), xytext=(4, -10), textcoords="offset points",
                            fontsize=7, color=color)  # fmt: skip
    ax.margins(0.08)
    _label_inward(ax, labelled)
    ax.set_xlabel(front.x_label)
    ax.set_ylabel(front.y_label)
    ax.ticklabel_format(style="plain", useOffset=False)
    better = "higher" if front.maximize[0] else "lower"
    ax.set_title(f"{front.title} (Pareto front highlighted; {better} is better)")
    ax.grid(True, alpha=0.3)
    if not ok.empty:
        ax.legend(fontsize="small")
    fig.tight_layout()
    try:
        with output_path(path) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
    finally:
        plt.close(fig)


_METRICS = [
    "fps",
    "fps_per_w",
    "latency_us_p50",
    "latency_us_p99",
    "avg_power_w",
    "peak_power_w_10us",
    "energy_mj_per_frame",
]


def _table(frame: pd.DataFrame, columns: list[str]) -> str:
    if frame.empty:
        return "_none_"
    shown = frame[columns].copy()
    for column in shown.columns:
        if pd.api.types.is_float_dtype(shown[column]):
            shown[column] = [plain_number(v) for v in shown[column]]
    # No number parsing: swept values stay as written ("1.0", not 1).
    return shown.to_markdown(index=False, disable_numparse=True)


def base_config_lines(context: Mapping[str, Any], models: Sequence[str]) -> list[str]:
    """One line per model: the properties its points start from that differ from the
    defaults (the sweep's base config: built-in config or defaults, --conf, --set), before
    the swept keys.

    >>> base_config_lines({"base_config": {"aipu_cores_used": 4}}, ["tiny_cnn"])
    ['- `tiny_cnn`: aipu_cores_used=4']
    """
    return [f"- `{m}`: {changes_text(c)}" for m, c in base_changes(context, models).items()]


def base_changes(context: Mapping[str, Any], models: Sequence[str]) -> dict[str, dict[str, str]]:
    """Per model, the base config's changes from the defaults as ``{property: text}``,
    from a sweep's context (`aipusim.sweep.space.build_space`)."""
    per_model = context.get("base_configs") or {}
    out = {}
    for model in models:
        changed = per_model.get(model, context.get("base_config") or {})
        out[model] = {k: value_text(v) for k, v in changed.items() if k != "output_dir"}
    return out


def markdown_report(
    table: pd.DataFrame,
    keys: list[str],
    plots: dict[str, str],
    context: Mapping[str, Any] | None = None,
) -> str:
    """The Markdown text: counts, the base config, each front, every point, then the
    failures."""
    ok = front_flags(table[table["status"] == STATUS_OK])
    failed = table[table["status"] == STATUS_FAILED]
    lines = [
        "# Sweep report",
        "",
        f"{len(table)} points: {len(ok)} ok, {len(failed)} failed. "
        f"Models: {', '.join(table['model'].unique())}. "
        f"Swept: {', '.join(keys) if keys else 'nothing (one point per model)'}.",
        "",
    ]
    if context is not None:
        lines += [
            "Base config of each model's points, before the swept keys (changes from the "
            "defaults):",
            "",
            *base_config_lines(context, list(table["model"].unique())),
            "",
        ]
    for front in FRONTS:
        flag = f"front_{front.name}"
        on = ok[ok[flag]].sort_values(["model", front.x], ascending=[True, not front.maximize[0]])
        lines += [
            f"## {front.title}: Pareto front",
            "",
            f"![{front.title}]({plots[front.name]})",
            "",
            _table(on, ["model", *keys, *_METRICS]),
            "",
        ]
    ranked = ok.sort_values(["model", "fps"], ascending=[True, False]).copy()
    ranked["front"] = [
        ",".join(f.name for f in FRONTS if row[f"front_{f.name}"]) for _, row in ranked.iterrows()
    ]
    lines += ["## All points", "", _table(ranked, ["model", *keys, *_METRICS, "front"]), ""]
    lines += ["## Failed points", "", _table(failed, ["model", *keys, "error"]), ""]
    return "\n".join(lines)


#: The figures `result_table` prints per point.
RESULT_COLUMNS = ["status", "fps", "latency_us_p50", "energy_mj_per_frame", "avg_power_w"]


def result_table(table: pd.DataFrame) -> str:
    """Every point of a sweep as a Markdown table: the swept values, status, FPS, p50
    latency, energy per frame and average power (what ``aipusim sweep`` prints)."""
    keys = swept_columns(table.columns)
    order = table.sort_values(["model", *keys], kind="stable")
    return _table(order, ["model", *keys, *RESULT_COLUMNS])


def report_dir(directory: str | Path) -> Path:
    """Where `write_report` writes by default: ``<DIR>_report`` beside the sweep folder,
    never inside it (any file there would stop ``pd.read_parquet(DIR)`` reading it).

    >>> report_dir("runs/sw/").as_posix()
    'runs/sw_report'
    """
    directory = Path(directory)
    return directory.with_name(f"{directory.name}_report")


def write_report(directory: str | Path, out_dir: str | Path | None = None) -> dict[str, Any]:
    """Read the sweep in ``directory``; write ``report.md`` and the two front plots to
    ``out_dir`` (default: `report_dir`), which must lie outside ``directory``.

    Returns a summary: counts, the files written, and the ids of the points on each front.
    """
    store = ResultStore(directory)
    table = store.read()
    target = Path(out_dir) if out_dir is not None else report_dir(directory)
    inside = Path(directory).resolve()
    if target.resolve() == inside or inside in target.resolve().parents:
        raise ConfigError(
            f"the report folder must lie outside the sweep's dataset folder {directory} "
            f"(a file in it stops pd.read_parquet reading it), not {target}"
        )
    with reporting(target, "create"):
        target.mkdir(parents=True, exist_ok=True)
    keys = swept_columns(table.columns)
    ok = front_flags(table[table["status"] == STATUS_OK])
    plots = {f.name: f"pareto_{f.name}.png" for f in FRONTS}
    for front in FRONTS:
        _plot(ok, front, target / plots[front.name], keys)
    report = target / "report.md"
    write_text(report, markdown_report(table, keys, plots, store.context()))
    return {
        "points": len(table),
        "ok": len(ok),
        "failed": int((table["status"] == STATUS_FAILED).sum()),
        "report": str(report),
        "base_config_changes": base_changes(store.context(), list(table["model"].unique())),
        "plots": [str(target / p) for p in plots.values()],
        "fronts": {f.name: ok.loc[ok[f"front_{f.name}"], "point_id"].tolist() for f in FRONTS},
    }


__all__ = [
    "FRONTS",
    "RESULT_COLUMNS",
    "Front",
    "base_config_lines",
    "front_flags",
    "markdown_report",
    "pareto_mask",
    "plain_number",
    "point_labels",
    "report_dir",
    "result_table",
    "write_report",
]
