"""PNG plots of a trace (matplotlib, Agg backend: no display needed).

* `plot_layer_bars`: mean latency per layer, stacked by exclusive unit-class time;
* `plot_gantt`: timeline of tasks per core and unit, coloured by layer;
* `plot_power`: power timeline, stacked by component, with the total;
* `plot_roofline`: layers as points (ops per byte through DDR, weight loading and L1
  fill/drain vs achieved ops/s), one panel per path under its roof and the compute roof;
* `plot_utilisation`: heatmap of unit busy fraction (core/unit x time bin);
* `plot_bandwidth`: bandwidth per memory pool over time;
* `plot_all`: all that apply, into a folder.

>>> import tempfile, pathlib
>>> from aipusim.profiler.synth import write_synthetic_trace
>>> from aipusim.profiler.trace import load_trace
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = write_synthetic_trace(d / "s.trace", frames=2, cores=2)
>>> plot_layer_bars(load_trace(d / "s.trace"), d / "bars.png").stat().st_size > 0
True
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: never needs a display

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.patches import Patch
from matplotlib.transforms import Bbox

from aipusim.base.errors import TraceFormatError
from aipusim.base.fileio import output_path, reporting
from aipusim.isa.trace_schema import POWER_TOTAL_COLUMN, Tag
from aipusim.isa.units import BY_RANK, UNIT_CLASSES, UNITS
from aipusim.profiler.consistency import INIT_FRAME
from aipusim.profiler.drop import DropBy
from aipusim.profiler.groups import NO_LAYER, layer_groups
from aipusim.profiler.layers import PARTS, LayerSort, layer_breakdown, layer_table
from aipusim.profiler.reduce import (
    bandwidth_table,
    power_table,
    tasks,
    utilisation,
)
from aipusim.profiler.trace import Trace

#: Colour of each unit class: its highest-ranked unit's, then stalls in grey.
_CLASS_COLOURS = {
    **{cls: next(u.color for u in BY_RANK if u.unit_class == cls) for cls in UNIT_CLASSES},
    "wait": "#c7c7c7",
}
#: Position of each unit in timelines (the registry's display order).
_DISPLAY = {spec.unit.value: i for i, spec in enumerate(UNITS)}
_DPI = 120
_ROOFLINE_NAMED = 8


def save_figure(fig: plt.Figure, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` whole or not at all (format by suffix, PNG without one);
    the figure stays open for its caller."""
    p = Path(path)
    with reporting(p.parent, "create"):
        p.parent.mkdir(parents=True, exist_ok=True)
    with output_path(p) as tmp:
        fig.savefig(tmp, dpi=_DPI, bbox_inches="tight", format=p.suffix.lstrip(".") or "png")
    return p


def _save(fig: plt.Figure, path: str | Path) -> Path:
    try:
        return save_figure(fig, path)
    finally:
        plt.close(fig)


def _title(trace: Trace, what: str) -> str:
    model = trace.header.model or Path(trace.source).stem
    return f"{model}: {what}"


def plot_layer_bars(
    trace: Trace,
    path: str | Path,
    drop_percentile: float = 0.0,
    drop_by: DropBy | str = DropBy.VALUE,
    table: pd.DataFrame | None = None,
    top: int | None = None,
    sort: LayerSort | str | None = None,
) -> Path:
    """`layer_bars_figure` written to ``path``; returns ``path``."""
    return _save(layer_bars_figure(trace, drop_percentile, drop_by, table, top, sort), path)


def layer_bars_figure(
    trace: Trace,
    drop_percentile: float = 0.0,
    drop_by: DropBy | str = DropBy.VALUE,
    table: pd.DataFrame | None = None,
    top: int | None = None,
    sort: LayerSort | str | None = None,
) -> plt.Figure:
    """Horizontal stacked bars, layers in topological order (or the ``top`` layers by
    ``sort``, largest first: `ranked_layers`): each layer's mean span split into its busy
    time by unit class (exclusive: each instant of a core counted once) and its wait
    (`aipusim.profiler.layers`). ``table``: the trace's `layer_table` with these drop
    settings, when the caller has it already."""
    bd = layer_breakdown(trace, drop_percentile, drop_by, table, top, sort)
    parts = [p for p in PARTS if bd[p].sum() > 0] if len(bd) else list(PARTS)
    height = max(2.5, 0.28 * len(bd) + 1.5)
    fig, ax = plt.subplots(figsize=(9, height))
    y = np.arange(len(bd))
    left = np.zeros(len(bd))
    for part in parts:
        values = bd[part].to_numpy(dtype=np.float64)
        ax.barh(y, values, left=left, color=_CLASS_COLOURS[part], label=part, height=0.75)
        left += values
    ax.set_yticks(y, bd["layer"], fontsize=8 if len(bd) > 30 else 9)
    ax.set_ylim(max(len(bd), 1) - 0.5, -0.5)
    ax.set_xlabel("mean span per layer sample (µs): busy by unit (exclusive), then wait")
    which = "per-layer busy and wait time"
    if top is not None or sort is not None:
        key = LayerSort(sort or LayerSort.BUSY).value
        which += f", {'top ' + str(top) if top is not None else 'all layers'} by {key} time"
    ax.set_title(_title(trace, which))
    ax.legend(loc="lower right", fontsize=8, ncols=len(parts) if len(parts) < 8 else 4)
    ax.grid(axis="x", alpha=0.3)
    if not len(bd):
        ax.text(0.5, 0.5, "no layer events in trace", ha="center", transform=ax.transAxes)
    return fig


def plot_gantt(
    trace: Trace,
    path: str | Path,
    start_us: float | None = None,
    end_us: float | None = None,
    max_tasks: int = 20_000,
) -> Path:
    """`gantt_figure` written to ``path``; returns ``path``."""
    return _save(gantt_figure(trace, start_us, end_us, max_tasks), path)


def gantt_figure(
    trace: Trace,
    start_us: float | None = None,
    end_us: float | None = None,
    max_tasks: int = 20_000,
) -> plt.Figure:
    """Tasks on a timeline, one row per core and unit, coloured by layer group (the first
    part of the layer names, `aipusim.profiler.groups`).

    Without a window, the first ``max_tasks`` tasks (by start) set it, so a long trace
    still gives a readable picture of its beginning."""
    t = tasks(trace)
    us = trace.us_per_cycle
    t = t.assign(s_us=t["start"] * us, e_us=t["end"] * us).sort_values("start", kind="stable")
    if start_us is None:
        start_us = float(t["s_us"].min()) if len(t) else 0.0
    if end_us is None:
        last = t["e_us"].iloc[:max_tasks].max() if len(t) else 1.0
        end_us = float(last)
    t = t[(t["e_us"] > start_us) & (t["s_us"] < end_us)]
    rows = t[["core", "unit"]].astype({"unit": str}).drop_duplicates()
    rows = rows.sort_values(
        ["core", "unit"], key=lambda s: s.map(_unit_order) if s.name == "unit" else s
    ).reset_index(drop=True)
    row_of = {(int(r.core), r.unit): i for i, r in enumerate(rows.itertuples())}
    # colour by layer group (first part of the name, in network order), so that a legend of
    # at most MOST_GROUPS entries names every colour; host transfers and barriers in grey
    group = layer_groups([*_network_order(trace), *t["layer"].astype(str)])
    labels = list(dict.fromkeys(g for g in group.values() if g != NO_LAYER))
    cmap = plt.get_cmap("tab10")
    colour_of = {g: cmap(i % 10) for i, g in enumerate(labels)} | {NO_LAYER: "#b0b0b0"}
    colour = {name: colour_of[g] for name, g in group.items()}
    fig, ax = plt.subplots(figsize=(12, max(2.5, 0.32 * len(rows) + 1.6)))
    for (core, unit), g in t.groupby(["core", "unit"], observed=True):
        y = row_of[(int(core), str(unit))]
        spans = list(zip(g["s_us"], g["e_us"] - g["s_us"], strict=True))
        ax.broken_barh(
            spans, (y - 0.4, 0.8), facecolors=[colour[str(x)] for x in g["layer"]], linewidth=0
        )
    ax.set_yticks(
        range(len(rows)),
        [f"core {c} {u}" for c, u in zip(rows["core"], rows["unit"], strict=True)],
        fontsize=8,
    )
    ax.set_ylim(max(len(rows), 1) - 0.5, -0.5)
    ax.set_xlim(start_us, end_us)
    mark_init(ax, init_window_us(trace))
    ax.set_xlabel("time (µs)")
    ax.set_title(_title(trace, "timeline per core and unit (colour = layer group)"))
    for i in range(1, len(rows)):
        if rows["core"].iloc[i] != rows["core"].iloc[i - 1]:
            ax.axhline(i - 0.5, color="black", linewidth=0.6)
    if group:
        shown = labels + ([NO_LAYER] if NO_LAYER in group.values() else [])
        handles = [Patch(color=colour_of[g], label=g) for g in shown]
        ax.legend(
            handles=handles,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            fontsize=8,
            title="layer group (in the order frame 0 ends them)",
        )
    else:
        ax.text(0.5, 0.5, "no tasks in window", ha="center", transform=ax.transAxes)
    return fig


#: The name every output gives a memory pool or link of the trace (the trace's ``host`` end
#: of a transfer is the PCIe link, ``pcie`` in the utilisation and energy tables).
LINK_NAMES = {"host": "pcie"}


def link_name(pool: str) -> str:
    """The name outputs use for ``pool`` (`LINK_NAMES`).

    >>> link_name("host"), link_name("l2")
    ('pcie', 'l2')
    """
    return LINK_NAMES.get(pool, pool)


def init_window_us(trace: Trace) -> tuple[float, float] | None:
    """(start, end) in µs of the INIT phase (the tasks of frame -1: constants to L2,
    weights to the IMC, once per run), or None when the trace has none."""
    k, m = trace[Tag.K], trace[Tag.M]
    starts, ends = [], []
    for events in (k, m):
        init = (events["frame"] == INIT_FRAME).to_numpy(bool)
        if init.any():
            starts.append(float(events["start"][init].min()))
            ends.append(float(events["end"][init].max()))
    if not ends:
        return None
    return min(starts) * trace.us_per_cycle, max(ends) * trace.us_per_cycle


def mark_init(ax: plt.Axes, window: tuple[float, float] | None) -> None:
    """Shade the INIT phase on a time axis and name it (every timeline marks it: INIT is
    no frame, and its power and traffic are left out of the steady figures)."""
    if window is None:
        return
    ax.axvspan(*window, color="#999999", alpha=0.18, zorder=0, linewidth=0)
    ax.annotate(
        "INIT",
        (window[0], 1.0),
        xycoords=("data", "axes fraction"),
        xytext=(2, -10),
        textcoords="offset points",
        fontsize=8,
        color="#444444",
    )


def _network_order(trace: Trace) -> list[str]:
    """Layer names in the order the first frame finishes them ([PE] events: a layer may
    begin early, loading its weights, but it ends after the layers it reads; the init
    phase loads weights in yet another order), then those of the other frames."""
    pe = trace[Tag.PE]
    frame = pe["frame"].to_numpy(np.int64)
    if not (frame >= 0).any():
        return []
    first = frame == frame[frame >= 0].min()
    pe = pe.assign(later=~first).sort_values(["later", "t"], kind="stable")
    return list(dict.fromkeys(pe["layer"].astype(str)))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _unit_order(unit: str) -> int:
    return _DISPLAY.get(unit, len(_DISPLAY))


def power_caption(timeline: pd.DataFrame) -> str:
    """What a power plot shows: the bin its line averages over and the run's peak power
    by window, as recorded with the timeline.

    >>> t = pd.DataFrame({"t_start_us": [0.0], "t_end_us": [1.0]})
    >>> t.attrs = {"bin_us": 1.0, "peak_power_w": {"100ns": 9.5, "10us": 7.25}}
    >>> power_caption(t)
    'power over time, averaged over 1 µs bins; peak 9.50 W (100ns window), 7.25 W (10us window)'
    """
    bin_us = timeline.attrs.get("bin_us")
    if bin_us is None and len(timeline):
        bin_us = float((timeline["t_end_us"] - timeline["t_start_us"]).iloc[0])
    what = f"power over time, averaged over {bin_us:g} µs bins" if bin_us else "power over time"
    peaks = timeline.attrs.get("peak_power_w")
    if peaks:
        what += "; peak " + ", ".join(f"{w:.2f} W ({k} window)" for k, w in peaks.items())
    return what


#: Most time bins a power plot draws (about two pixels each): with more, the total line
#: zigzags over every pixel and hides the components under it.
_POWER_BINS = 400


def _coarser(p: pd.DataFrame, most: int) -> pd.DataFrame:
    """``p`` (a power timeline) with runs of neighbouring bins merged into at most ``most``,
    each the time-weighted mean of its bins (energy kept); ``attrs["bin_us"]`` follows."""
    if len(p) <= most:
        return p
    factor = -(-len(p) // most)
    group = np.arange(len(p)) // factor
    width = (p["t_end_us"] - p["t_start_us"]).to_numpy()
    cols = [c for c in p.columns if c.endswith("_w")]
    weighted = p[cols].mul(width, axis=0).groupby(group).sum()
    span = pd.Series(width).groupby(group).sum()
    out = weighted.div(span, axis=0)
    out.insert(0, "t_start_us", p["t_start_us"].groupby(group).min())
    out.insert(1, "t_end_us", p["t_end_us"].groupby(group).max())
    out.attrs = dict(p.attrs)
    if "bin_us" in out.attrs:
        out.attrs["bin_us"] = out.attrs["bin_us"] * factor
    return out.reset_index(drop=True)


def plot_power(trace: Trace, path: str | Path) -> Path:
    """Stacked power per component over time, with the total as a line on top of them.
    The title states the bin the plot averages over (the timeline's, merged into at most
    `_POWER_BINS` bins) and, when the simulator recorded them, the run's peak power by
    sliding window (`aipusim.isa.metrics.PEAK_WINDOWS`), which no merging changes."""
    full = power_table(trace)
    p = _coarser(full, _POWER_BINS)
    comps = [c for c in p.columns if c.endswith("_w") and c != POWER_TOTAL_COLUMN]
    comps = [c for c in comps if p[c].abs().sum() > 0]
    palette = dict(zip(comps, plt.get_cmap("tab20").colors, strict=False))
    # the steady static power at the bottom, the components that come and go above it
    comps.sort(key=lambda c: c != "static_w")
    mid = (p["t_start_us"] + p["t_end_us"]) / 2
    fig, ax = plt.subplots(figsize=(11, 4.5))
    if comps:
        ax.stackplot(
            mid,
            *[p[c] for c in comps],
            labels=[c.removesuffix("_w") for c in comps],
            colors=[palette[c] for c in comps],
            alpha=0.85,
        )
    if POWER_TOTAL_COLUMN in p.columns:
        ax.plot(mid, p[POWER_TOTAL_COLUMN], color="black", linewidth=0.8, label="total")
        avg = float(full[POWER_TOTAL_COLUMN].mean()) if len(full) else 0.0
        ax.axhline(
            avg,
            color="black",
            linestyle="--",
            linewidth=0.8,
            label=f"whole-run average {avg:.2f} W (INIT included)",
        )
        steady = full.attrs.get("steady_avg_power_w")
        if steady is not None:
            ax.axhline(
                steady,
                color="#d62728",
                linestyle=":",
                linewidth=1.0,
                label=f"steady-state average {steady:.2f} W (report.md: a steady frame's "
                "energy x FPS; no INIT, no warm-up)",
            )
    mark_init(ax, init_window_us(trace))
    ax.set_xlabel("time (µs)")
    ax.set_ylabel("power (W)")
    ax.set_title(_title(trace, power_caption(p)), fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_ylim(bottom=0)
    return _save(fig, path)


def _header_number(trace: Trace, key: str) -> float | None:
    value = trace.header.extra.get(key)
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        raise TraceFormatError(
            f"{trace.source}: header {key} must be a number, not {value!r}"
        ) from None


@dataclass(frozen=True)
class _Path:
    """One data path of the roofline: the bytes each layer moves through it and its roof."""

    title: str
    bytes_per_layer: pd.Series
    bytes_per_cycle: float | None
    roof_label: str


def plot_roofline(
    trace: Trace,
    path: str | Path,
    peak_macs_per_cycle: float | None = None,
    ddr_bytes_per_cycle: float | None = None,
    drop_percentile: float = 0.0,
    drop_by: DropBy | str = DropBy.VALUE,
    table: pd.DataFrame | None = None,
    weight_load_bytes_per_cycle: float | None = None,
    l1_fill_bytes_per_cycle: float | None = None,
) -> Path:
    """Roofline of the layers, one panel per data path: DDR (bytes to or from DDR), weight
    loading (bytes written into the IMC arrays: the wload unit's busy cycles times its
    width) and L1 fill/drain (bytes moved to or from L1 by DMA). In each, x = ops (2 per
    array MAC) per byte through that path, y = achieved ops/s (ops per sample / mean span);
    the roofs (when known, from the arguments or the trace header's
    ``peak_macs_per_cycle=``, ``ddr_bytes_per_cycle=``, ``weight_load_bytes_per_cycle=``,
    ``l1_fill_bytes_per_cycle=``) are compute ``2 * peak_macs_per_cycle * freq`` (one
    core) and the path's ``bytes_per_cycle * freq * x``. A layer on or near a path's roof is
    bound by it. Layers without MACs are left out; layers that move no byte through a path
    sit at its right edge (▶). Points are coloured by op type; the 8 layers that take the
    most time are named, each label placed where it overlaps no other."""
    peak = peak_macs_per_cycle or _header_number(trace, "peak_macs_per_cycle")
    freq = trace.header.freq_hz
    lt = layer_table(trace, drop_percentile, drop_by) if table is None else table
    m, k = trace[Tag.M], trace[Tag.K]
    steady_m = m[(m["frame"] >= 0).to_numpy(bool)].assign(layer=m["layer"].astype(str))
    src, dst = steady_m["src"].astype(str), steady_m["dst"].astype(str)

    def moved(sel: pd.Series) -> pd.Series:
        return steady_m[sel.to_numpy(bool)].groupby("layer")["bytes"].sum().astype(float)

    done = k[(k["frame"] >= 0).to_numpy(bool)].assign(layer=k["layer"].astype(str))
    wload_bw = weight_load_bytes_per_cycle or _header_number(trace, "weight_load_bytes_per_cycle")
    wload = done[done["unit"].astype(str) == "wload"]
    wload_cycles = (wload["end"] - wload["start"]).groupby(wload["layer"]).sum().astype(float)
    ddr = ddr_bytes_per_cycle or _header_number(trace, "ddr_bytes_per_cycle")
    l1 = l1_fill_bytes_per_cycle or _header_number(trace, "l1_fill_bytes_per_cycle")
    paths = [
        _Path("DDR", moved((src == "ddr") | (dst == "ddr")), ddr, "DDR roof"),
        _Path(
            "weight loading into the IMC",
            wload_cycles * (wload_bw or 0.0),
            wload_bw,
            "weight-load roof",
        ),
        _Path("L1 fill/drain (DMA)", moved((src == "l1") | (dst == "l1")), l1, "L1 fill roof"),
    ]
    # What the arrays ran per layer sample (padded MACs: the hardware's work, under its roof).
    array_macs = done.groupby("layer")["macs"].sum().astype(float)
    n = lt["samples"].to_numpy(dtype=np.float64)
    lt = lt.assign(sample_macs=lt["layer"].map(array_macs).fillna(0.0).to_numpy() / n)
    keep = (lt["sample_macs"] > 0).to_numpy()
    lt, n = lt[keep], n[keep]
    ops = 2.0 * lt["sample_macs"].to_numpy(dtype=np.float64)
    achieved = ops / (lt["span_us"].to_numpy(dtype=np.float64) * 1e-6)
    total = lt["busy_us"] * lt["samples"]
    named = (total.rank(ascending=False, method="first") <= _ROOFLINE_NAMED).to_numpy()
    op = lt["op"].astype(str).to_numpy()
    kinds = list(dict.fromkeys(op))
    cmap = plt.get_cmap("tab10")
    fig, axes = plt.subplots(1, len(paths), figsize=(6 * len(paths), 6), sharey=True)
    placed_x = []
    for ax, data in zip(axes, paths, strict=True):
        per_sample = lt["layer"].map(data.bytes_per_layer).fillna(0.0).to_numpy() / n
        # a layer that moves no bytes on this path has no finite intensity (drawn at the edge)
        intensity = np.full(len(per_sample), np.inf)
        with np.errstate(over="ignore"):
            np.divide(ops, per_sample, out=intensity, where=per_sample > 0)
        finite = np.isfinite(intensity)
        x_hi = max(intensity[finite].max() * 4 if finite.any() else 1e3, 1e3)
        x_lo = min(intensity[finite].min() / 4 if finite.any() else 1.0, 1.0)
        x_plot = np.where(finite, intensity, x_hi)
        placed_x.append(x_plot)
        xs = np.logspace(np.log10(x_lo), np.log10(x_hi), 200)
        if peak:
            ax.axhline(
                2 * peak * freq,
                color="red",
                linewidth=1.2,
                label=f"compute roof {2 * peak * freq / 1e12:.1f} TOPS (one core)",
            )
        if data.bytes_per_cycle:
            roof = data.bytes_per_cycle * freq * xs
            if peak:
                roof = np.minimum(roof, 2 * peak * freq)
            ax.plot(
                xs,
                roof,
                color="darkorange",
                linewidth=1.2,
                label=f"{data.roof_label} {data.bytes_per_cycle * freq / 1e9:.1f} GB/s",
            )
        for i, kind in enumerate(kinds):
            sel = op == kind
            for fin, marker in ((True, "o"), (False, ">")):
                pick = sel & (finite == fin)
                if pick.any():
                    ax.scatter(
                        x_plot[pick],
                        achieved[pick],
                        color=cmap(i % 10),
                        marker=marker,
                        s=40,
                        zorder=3,
                        label=f"{kind} ({_count(int(sel.sum()), 'layer')})"
                        if fin or not (sel & finite).any()
                        else None,
                    )
        if not finite.all():
            ax.scatter(
                [], [], color="grey", marker=">", label=f"no {data.title} bytes (right edge)"
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(x_lo, x_hi * 1.5)
        ax.set_xlabel(f"ops per byte of {data.title}")
        note = "" if (peak and data.bytes_per_cycle) else " (roof unknown)"
        ax.set_title(f"{data.title}{note}", fontsize=10)
        ax.grid(alpha=0.25)
        if len(lt):
            ax.legend(loc="upper left", bbox_to_anchor=(0.0, 0.93), fontsize=7)
        else:
            ax.text(0.5, 0.5, "no layer with MACs", ha="center", transform=ax.transAxes)
    axes[0].set_ylabel("achieved ops/s")
    for ax, x_plot in zip(axes, placed_x, strict=True):
        ax.get_ylim()  # the limits as they will be drawn (autoscaled), to place the labels
        _label_without_overlap(ax, x_plot[named], achieved[named], list(lt["layer"][named]))
    fig.suptitle(_title(trace, "roofline of the layers (one panel per data path)"), fontsize=11)
    return _save(fig, path)


#: Where a roofline label may go around its point, in order of preference (offsets in
#: points); only the first keeps the label next to its point without a leader line.
_LABEL_OFFSETS = [(4, 3)] + [(dx, dy) for dy in (12, -14, 26, -28, 40, -42, 54) for dx in (4, -4)]
#: How far short of its point a leader line stops (matplotlib's arrow ``shrinkB``, points).
_LEADER_SHRINK_POINTS = 2.0


def _label_without_overlap(ax: plt.Axes, xs: np.ndarray, ys: np.ndarray, texts: list[str]) -> None:
    """Name points so that no two labels overlap: each label takes the first of a few
    places around its point (`_LABEL_OFFSETS`) where its drawn box (text and leader line)
    overlaps no earlier label and stays inside the axes, with a thin leader line when it
    had to move away.

    A label's text box is measured once and moved to each place by arithmetic (a text's
    size does not depend on where it is; a right-aligned box is the left-aligned one moved
    left by its width): asking matplotlib for the box of every candidate annotation, leader
    line included, took seconds per plot."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    pixels_per_point = renderer.points_to_pixels(1.0)
    anchors = ax.transData.transform(np.column_stack([xs, ys]).astype(float))
    placed: list[Bbox] = []
    (dx0, dy0), leader = _LABEL_OFFSETS[0], {"arrowstyle": "-", "lw": 0.4, "color": "grey"}
    for k in np.argsort(-np.asarray(ys, dtype=float)):
        label = ax.annotate(
            texts[k], (xs[k], ys[k]), xytext=(dx0, dy0), textcoords="offset points", fontsize=7
        )
        first = label.get_window_extent(renderer)
        for dx, dy in _LABEL_OFFSETS:
            shift_x = (dx - dx0) * pixels_per_point - (first.width if dx < 0 else 0.0)
            box = first.translated(shift_x, (dy - dy0) * pixels_per_point)
            if (dx, dy) != (dx0, dy0):
                box = Bbox.union([box, _leader_end(anchors[k], box, pixels_per_point)])
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0
            if inside and box.y1 <= frame.y1 and not any(box.overlaps(b) for b in placed):
                placed.append(box)
                if (dx, dy) != (dx0, dy0):
                    label.remove()
                    ax.annotate(
                        texts[k],
                        (xs[k], ys[k]),
                        xytext=(dx, dy),
                        textcoords="offset points",
                        fontsize=7,
                        ha="left" if dx > 0 else "right",
                        arrowprops=leader,
                    )
                break
        else:
            label.remove()


def _leader_end(anchor: np.ndarray, box: Bbox, pixels_per_point: float) -> Bbox:
    """Where the leader line from a label's text ``box`` to its point ``anchor`` (display
    pixels) ends: short of the point towards the text's centre (the line itself runs
    inside the union of the text box and this end)."""
    towards = np.array([(box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2]) - anchor
    length = float(np.hypot(*towards))
    end = (
        anchor
        if length == 0
        else anchor + towards / length * (_LEADER_SHRINK_POINTS * pixels_per_point)
    )
    return Bbox([end, end])


def plot_utilisation(trace: Trace, path: str | Path, bins: int = 100) -> Path:
    """Heatmap: busy fraction of every core/unit (rows) per time bin (columns)."""
    util, edges = utilisation(trace, bins)
    if len(util):
        util = util.iloc[
            sorted(
                range(len(util)), key=lambda i: (util.index[i][0], _unit_order(util.index[i][1]))
            )
        ]
    fig, ax = plt.subplots(figsize=(12, max(2.5, 0.3 * len(util) + 1.6)))
    if len(util):
        im = ax.imshow(
            util.to_numpy(),
            aspect="auto",
            interpolation="nearest",
            cmap="viridis",
            vmin=0,
            vmax=1,
            extent=(edges[0], edges[-1], len(util) - 0.5, -0.5),
        )
        ax.set_yticks(range(len(util)), [f"core {c} {u}" for c, u in util.index], fontsize=8)
        fig.colorbar(im, ax=ax, label="busy fraction", pad=0.01)
        window = init_window_us(trace)
        if window is not None:  # (a shade would hide the heat: the INIT end as a line)
            ax.axvline(window[1], color="white", linestyle="--", linewidth=1.0)
            ax.annotate(
                "INIT ends",
                (window[1], 0.0),
                xycoords=("data", "axes fraction"),
                xytext=(3, 3),
                textcoords="offset points",
                fontsize=8,
                color="white",
            )
    else:
        ax.text(0.5, 0.5, "no tasks in trace", ha="center", transform=ax.transAxes)
    width = (edges[-1] - edges[0]) / max(len(edges) - 1, 1)
    ax.set_xlabel("time (µs)")
    ax.set_title(_title(trace, f"unit utilisation over time, busy fraction per {width:.3g} µs bin"))
    return _save(fig, path)


def plot_bandwidth(trace: Trace, path: str | Path, bins: int = 100) -> Path:
    """Bandwidth of every memory pool over time (GB/s)."""
    bw = bandwidth_table(trace, bins)
    mid = (bw["t_start_us"] + bw["t_end_us"]) / 2
    fig, ax = plt.subplots(figsize=(11, 4))
    columns = [c for c in bw.columns if c.endswith("_gb_s")]
    # each pool keeps one line style, so a pool whose line lies under another's (L1 under
    # L2 when every byte goes L2 -> L1) still shows; the host link is named pcie as in
    # every other output
    styles = ("-", "--", "-.", ":")
    for i, col in enumerate(columns):
        ax.plot(
            mid,
            bw[col],
            label=link_name(col.removesuffix("_gb_s")),
            linewidth=1.0 + 0.6 * (len(columns) - 1 - i) / max(len(columns) - 1, 1),
            linestyle=styles[i % len(styles)],
            alpha=0.9,
        )
    mark_init(ax, init_window_us(trace))
    ax.set_xlabel("time (µs)")
    ax.set_ylabel("GB/s")
    width = float((bw["t_end_us"] - bw["t_start_us"]).iloc[0]) if len(bw) else 0.0
    ax.set_title(_title(trace, f"memory bandwidth over time, averaged over {width:.3g} µs bins"))
    ax.grid(alpha=0.3)
    ax.set_ylim(bottom=0)
    if len(bw.columns) > 2:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return _save(fig, path)


def plot_all(
    trace: Trace,
    out_dir: str | Path,
    drop_percentile: float = 0.0,
    drop_by: DropBy | str = DropBy.VALUE,
    peak_macs_per_cycle: float | None = None,
    ddr_bytes_per_cycle: float | None = None,
    bins: int = 100,
    table: pd.DataFrame | None = None,
    layer_top: int | None = None,
    layer_sort: LayerSort | str | None = None,
    weight_load_bytes_per_cycle: float | None = None,
    l1_fill_bytes_per_cycle: float | None = None,
) -> list[Path]:
    """Every plot that the trace has data for, as ``<out_dir>/<name>.png``; ``table`` is
    the trace's `layer_table` with these drop settings if the caller has it; ``layer_top``
    and ``layer_sort`` pick the layers of ``layers.png`` (`plot_layer_bars`)."""
    d = Path(out_dir)
    if table is None:
        table = layer_table(trace, drop_percentile, drop_by)
    out = [
        plot_layer_bars(
            trace, d / "layers.png", drop_percentile, drop_by, table, layer_top, layer_sort
        ),
        plot_gantt(trace, d / "gantt.png"),
        plot_roofline(
            trace,
            d / "roofline.png",
            peak_macs_per_cycle,
            ddr_bytes_per_cycle,
            drop_percentile,
            drop_by,
            table,
            weight_load_bytes_per_cycle,
            l1_fill_bytes_per_cycle,
        ),
        plot_utilisation(trace, d / "utilisation.png", bins),
        plot_bandwidth(trace, d / "bandwidth.png", bins),
    ]
    if trace.power is not None:
        out.append(plot_power(trace, d / "power.png"))
    return out


__all__ = [
    "LINK_NAMES",
    "gantt_figure",
    "init_window_us",
    "layer_bars_figure",
    "link_name",
    "mark_init",
    "plot_all",
    "plot_bandwidth",
    "plot_gantt",
    "plot_layer_bars",
    "plot_power",
    "plot_roofline",
    "plot_utilisation",
    "save_figure",
]
