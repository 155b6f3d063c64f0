"""Reductions of a `Trace` into tables: per layer, unit, frame, core; bandwidth and power
over time; unit utilisation per time bin.

Definitions (times in cycles in the trace, ``*_us`` columns in microseconds):

* Layer figures (samples, busy, span, wait, critical unit) are in
  `aipusim.profiler.layers`. Events with an empty layer name belong to no layer, and
  those of frame < 0 (the simulator's init phase, which loads constants once per
  instance) are not layer samples; both still count in the unit and core tables.
* **Window**: first to last event time of the (possibly time-dropped) trace; busy % of a
  unit or core = union of its task intervals / window.
* **Stall** of a unit: an idle gap between two consecutive tasks of that unit belonging
  to the same layer of the same frame (the unit had more work for the layer but waited
  on tokens or data).

Dropping (``drop_percentile`` p, see `aipusim.profiler.drop`): ``drop_by="value"`` drops
the extreme p % of each group's samples (layer latencies per layer, task durations per
unit for the task statistics, frame latencies); ``"time"`` first drops the first and last
p % of frames from the whole trace. Busy and stall figures are time fractions and are not
value-dropped.

>>> from aipusim.profiler.synth import write_synthetic_trace
>>> from aipusim.profiler.trace import load_trace
>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "s.trace"
>>> _ = write_synthetic_trace(p, frames=4, cores=2)
>>> sorted(set(unit_table(load_trace(p))["unit"]))
['dma0', 'dma1', 'dpu', 'dwpu', 'mvm', 'wload']
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from aipusim.base.errors import TraceFormatError
from aipusim.isa.metrics import WARMUP_STARTS, steady_state
from aipusim.isa.trace_schema import POWER_TIME_COLUMNS, Tag
from aipusim.isa.units import UNIT_CLASSES, unit_class
from aipusim.profiler.critical import resource_of
from aipusim.profiler.drop import DropBy, check_percent, drop_by_value, drop_frames
from aipusim.profiler.intervals import binned_overlap, covered
from aipusim.profiler.trace import Trace


def _i64(series: pd.Series) -> np.ndarray:
    return series.to_numpy(dtype=np.int64)


def _prepare(trace: Trace, percent: float, drop_by: DropBy | str) -> tuple[Trace, float]:
    """Apply a time drop to the trace; return the value-drop percent still to apply."""
    percent = check_percent(percent)
    drop_by = DropBy(drop_by)
    if drop_by is DropBy.TIME:
        return drop_frames(trace, percent), 0.0
    return trace, percent


def _categorical(series: pd.Series) -> pd.Categorical:
    return pd.Categorical(series.astype("category"))


def cat_strings(series: pd.Series) -> pd.Series:
    """``series.astype(str)`` of a categorical column, taken from its categories: one
    conversion per category instead of one per row (a 1M-row trace has a few dozen)."""
    codes = series.cat.codes.to_numpy()
    if len(codes) and codes.min() < 0:  # missing values: let pandas spell them
        return series.astype(str)
    return pd.Series(series.cat.categories.astype(str).take(codes), index=series.index)


def cat_flags(series: pd.Series, test: Callable[[str], bool]) -> np.ndarray:
    """``test`` of each row's ``str`` value of a categorical column, as a bool array,
    evaluated once per category."""
    codes = series.cat.codes.to_numpy()
    if len(codes) and codes.min() < 0:
        return np.array([test(v) for v in series.astype(str)], dtype=bool)
    flags = np.array([test(str(c)) for c in series.cat.categories], dtype=bool)
    return flags[codes] if len(flags) else np.zeros(len(codes), dtype=bool)


def union_categoricals(parts: list[pd.Categorical]) -> pd.Categorical:
    """Concatenate categoricals with different categories (string categories, in order of
    first appearance); robust to empty parts whose categories have no dtype."""
    names: dict[str, None] = {}
    for part in parts:
        names.update(dict.fromkeys(str(c) for c in part.categories))
    cats = pd.Index(list(names), dtype=object)
    codes = [
        np.where(part.codes >= 0, cats.get_indexer(part.categories.astype(object))[part.codes], -1)
        if len(part.categories)
        else np.full(len(part), -1, dtype=np.int64)
        for part in parts
    ]
    return pd.Categorical.from_codes(np.concatenate(codes), categories=cats.astype(str))


def tasks(trace: Trace) -> pd.DataFrame:
    """[K] and [M] events as one frame: core, unit, cls, frame, layer, task, start, end,
    macs, bytes, and the task's ``resource`` on the critical path (`critical.resource_of`:
    its unit, or the slowest link of a transfer). Cycles; categoricals for unit, cls, layer
    and resource."""
    k, m = trace[Tag.K], trace[Tag.M]
    unit = union_categoricals([_categorical(k["unit"]), _categorical(m["unit"])])
    layer = union_categoricals([_categorical(k["layer"]), _categorical(m["layer"])])
    names = [unit_class(str(u)) for u in unit.categories]  # host link, unknown: other
    cls_codes = np.array([UNIT_CLASSES.index(n) for n in names], dtype=np.int64)
    codes = cls_codes[unit.codes] if len(unit) else np.zeros(0, np.int64)
    zeros_k, zeros_m = np.zeros(len(k), np.int64), np.zeros(len(m), np.int64)
    resource = union_categoricals([_categorical(k["unit"]), _m_resources(m)])
    return pd.DataFrame(
        {
            "core": np.concatenate([_i64(k["core"]), _i64(m["core"])]),
            "unit": unit,
            "cls": pd.Categorical.from_codes(codes, categories=list(UNIT_CLASSES)),
            "frame": np.concatenate([_i64(k["frame"]), _i64(m["frame"])]),
            "layer": layer,
            "task": np.concatenate([_i64(k["task"]), _i64(m["task"])]),
            "start": np.concatenate([_i64(k["start"]), _i64(m["start"])]),
            "end": np.concatenate([_i64(k["end"]), _i64(m["end"])]),
            "macs": np.concatenate([_i64(k["macs"]), zeros_m]),
            "bytes": np.concatenate([zeros_k, _i64(m["bytes"])]),
            "resource": resource,
        }
    )


def _m_resources(m: pd.DataFrame) -> pd.Categorical:
    """`critical.resource_of` of every [M] row, worked out once per (unit, src, dst)."""
    cols = [_categorical(m[c]) for c in ("unit", "src", "dst")]
    if not len(m):
        return pd.Categorical([])
    sizes = [max(len(c.categories), 1) for c in cols]
    key = (cols[0].codes.astype(np.int64) * sizes[1] + cols[1].codes) * sizes[2] + cols[2].codes
    combos, inverse = np.unique(key, return_inverse=True)
    names = []
    for combo in combos:
        u, rest = divmod(int(combo), sizes[1] * sizes[2])
        a, b = divmod(rest, sizes[2])
        parts = (str(c.categories[i]) for c, i in zip(cols, (u, a, b), strict=True))
        names.append(resource_of(*parts))
    cats = list(dict.fromkeys(names))
    return pd.Categorical.from_codes(
        np.array([cats.index(n) for n in names], np.int64)[inverse], categories=cats
    )


def cores_that_ran(trace: Trace) -> list[int]:
    """The cores with events in the trace (the header's ``cores`` is the chip's count)."""
    ran: set[int] = set()
    for tag in (Tag.K, Tag.M, Tag.PB):
        df = trace[tag]
        if len(df):
            ran.update(int(c) for c in df["core"].unique())
    return sorted(ran)


def window(trace: Trace) -> tuple[int, int]:
    """(first, last) event time of the trace in cycles; (0, 0) when it has no events."""
    lo, hi = [], []
    for df in trace.tables.values():
        if not len(df):
            continue
        cols = ("t", "t") if "t" in df.columns else ("start", "end")
        lo.append(int(df[cols[0]].min()))
        hi.append(int(df[cols[1]].max()))
    return (min(lo), max(hi)) if lo else (0, 0)


def unit_table(
    trace: Trace, drop_percentile: float = 0.0, drop_by: DropBy | str = DropBy.VALUE
) -> pd.DataFrame:
    """Per core and unit: tasks, busy time and %, stalls, task duration statistics,
    MACs and bytes."""
    trace, percent = _prepare(trace, drop_percentile, drop_by)
    t = tasks(trace)
    lo, hi = window(trace)
    span = max(hi - lo, 1)
    us = trace.us_per_cycle
    if t.empty:
        return pd.DataFrame(
            columns=[
                "core",
                "unit",
                "tasks",
                "busy_us",
                "busy_pct",
                "stalls",
                "stall_us",
                "mean_task_us",
                "p50_task_us",
                "p99_task_us",
                "array_macs",
                "bytes",
            ]
        )
    groups = t.groupby(["core", "unit"], sort=True, observed=True)
    gid = groups.ngroup().to_numpy()
    keys = groups.size().reset_index()[["core", "unit"]]
    n = len(keys)
    busy = covered(_i64(t["start"]), _i64(t["end"]), gid, n, np.full(n, lo), np.full(n, hi))
    # Stalls: gaps between consecutive tasks of a unit within one layer of one frame.
    lcode = t["layer"].cat.codes.to_numpy(np.int64)
    frame = _i64(t["frame"])
    order = np.lexsort((_i64(t["start"]), lcode, frame, gid))
    g_s, f_s, l_s = gid[order], frame[order], lcode[order]
    s_s, e_s = _i64(t["start"])[order], _i64(t["end"])[order]
    reach = pd.Series(e_s).groupby([g_s, f_s, l_s]).cummax().to_numpy()
    same = np.zeros(len(order), dtype=bool)
    same[1:] = (g_s[1:] == g_s[:-1]) & (f_s[1:] == f_s[:-1]) & (l_s[1:] == l_s[:-1])
    gap = np.zeros(len(order))
    gap[1:] = np.where(same[1:], np.maximum(0, s_s[1:] - reach[:-1]), 0)
    stalls = np.bincount(g_s, weights=gap > 0, minlength=n)
    stall_cycles = np.bincount(g_s, weights=gap, minlength=n)
    kept = drop_by_value(t.assign(dur=t["end"] - t["start"]), "dur", ["core", "unit"], percent)
    d = kept.groupby(["core", "unit"], sort=True, observed=True)["dur"]
    stats = pd.DataFrame({"mean": d.mean(), "p50": d.quantile(0.5), "p99": d.quantile(0.99)})
    stats = stats.reindex(pd.MultiIndex.from_frame(keys))
    out = keys.copy()
    out["tasks"] = groups.size().to_numpy()
    out["busy_us"] = busy * us
    out["busy_pct"] = 100.0 * busy / span
    out["stalls"] = stalls.astype(np.int64)
    out["stall_us"] = stall_cycles * us
    out["mean_task_us"] = stats["mean"].to_numpy() * us
    out["p50_task_us"] = stats["p50"].to_numpy() * us
    out["p99_task_us"] = stats["p99"].to_numpy() * us
    # what the arrays ran, padding included (the network's MACs are per layer, `layer_table`)
    out["array_macs"] = groups["macs"].sum().to_numpy()
    out["bytes"] = groups["bytes"].sum().to_numpy()
    return out


def frame_table(
    trace: Trace, drop_percentile: float = 0.0, drop_by: DropBy | str = DropBy.VALUE
) -> pd.DataFrame:
    """Per frame: inst, start/end/latency (µs), the interval since the previous frame's
    end (µs; its inverse is the throughput) and ``steady``: False for the warm-up frames
    (the first start of each instance, `aipusim.isa.metrics`). From [B] events (start: the
    input issued, end: the result back), else from the frame's other events (inst -1)."""
    trace, percent = _prepare(trace, drop_percentile, drop_by)
    b = trace[Tag.B]
    if len(b):
        df = pd.DataFrame(
            {
                "frame": _i64(b["frame"]),
                "inst": _i64(b["inst"]),
                "start": _i64(b["start"]),
                "end": _i64(b["end"]),
            }
        )
    else:
        t = tasks(trace)
        t = t[(t["frame"] >= 0).to_numpy(dtype=bool)]
        df = t.groupby("frame", as_index=False).agg(start=("start", "min"), end=("end", "max"))
        df.insert(1, "inst", -1)
    df = df.sort_values(["end", "frame"], kind="stable").reset_index(drop=True)
    df["latency"] = df["end"] - df["start"]
    df["interval"] = df["end"].diff()
    # A start's frames share their end: an instance's first WARMUP_STARTS ends are warm-up.
    rank = df.groupby("inst")["end"].rank(method="dense")
    starts = df.groupby("inst")["end"].transform("nunique")
    df["steady"] = (rank > WARMUP_STARTS) | (starts <= WARMUP_STARTS)
    df = drop_by_value(df, "latency", [], percent) if percent else df
    us = trace.us_per_cycle
    return pd.DataFrame(
        {
            "frame": df["frame"].to_numpy(),
            "inst": df["inst"].to_numpy(),
            "start_us": df["start"].to_numpy() * us,
            "end_us": df["end"].to_numpy() * us,
            "latency_us": df["latency"].to_numpy() * us,
            "interval_us": df["interval"].to_numpy(dtype=np.float64) * us,
            "steady": df["steady"].to_numpy(dtype=bool),
        }
    )


def frame_summary(
    trace: Trace, drop_percentile: float = 0.0, drop_by: DropBy | str = DropBy.VALUE
) -> dict[str, float]:
    """Frames, warm-up frames, steady-state ``fps`` and the queued latency (mean, p50,
    p99, µs) of the steady frames, with the definitions of `aipusim.isa.metrics` (the
    simulator's ``fps`` and ``latency_us_p50``/``p99`` of the same run)."""
    f = frame_table(trace, drop_percentile, drop_by)
    if f.empty:
        return {
            "frames": 0,
            "warmup_frames": 0,
            "fps": 0.0,
            "mean_us": 0.0,
            "p50_us": 0.0,
            "p99_us": 0.0,
        }
    us = trace.us_per_cycle
    ends = f.groupby("inst")["end_us"]
    per_end = int(f.groupby(["inst", "end_us"]).size().max())
    # the end of the init phase (frame -1): its last [K]/[M] task (no need of `tasks`)
    init_ends = [
        _i64(d["end"])[_i64(d["frame"]) < 0] for d in (trace[Tag.K], trace[Tag.M]) if len(d)
    ]
    init_end = np.concatenate(init_ends) if init_ends else np.zeros(0, np.int64)
    origin = int(init_end.max()) if len(init_end) else round(f["start_us"].min() / us)
    state = steady_state(
        [np.unique(np.round(e.to_numpy() / us).astype(np.int64)) for _, e in ends],
        per_end,
        origin,
    )
    lat = f.loc[f["steady"], "latency_us"]
    return {
        "frames": len(f),
        "warmup_frames": state.warmup_frames,
        "fps": state.fps_per_cycle / us * 1e6,
        "mean_us": float(lat.mean()),
        "p50_us": float(lat.quantile(0.5)),
        "p99_us": float(lat.quantile(0.99)),
    }


def core_table(
    trace: Trace, drop_percentile: float = 0.0, drop_by: DropBy | str = DropBy.VALUE
) -> pd.DataFrame:
    """Per core that ran (has tasks in the trace): frames it worked on (the init phase is
    not a frame), layer samples, tasks, busy % (any unit) and per unit class, the MACs the
    arrays ran (``array_macs``, padding included), bytes and achieved array MACs per cycle
    over the window. (Only the time drop applies.)"""
    trace, _ = _prepare(trace, drop_percentile, drop_by)
    t = tasks(trace)
    lo, hi = window(trace)
    span = max(hi - lo, 1)
    cores = np.unique(t["core"].to_numpy(np.int64)) if len(t) else np.zeros(0, np.int64)
    n = len(cores)
    idx = np.searchsorted(cores, t["core"].to_numpy(np.int64))
    bounds = (np.full(n, lo), np.full(n, hi))
    out = pd.DataFrame({"core": cores})
    in_frames = t[(t["frame"] >= 0).to_numpy(dtype=bool)]
    out["frames"] = (
        in_frames.groupby("core")["frame"].nunique().reindex(cores, fill_value=0).to_numpy()
    )
    # Layer samples (`aipusim.profiler.layers`): distinct (frame, layer) per core.
    named = t[((t["frame"] >= 0) & (t["layer"].astype(str) != "")).to_numpy(dtype=bool)]
    per_core = named.groupby(["core", "frame", "layer"], observed=True).size().groupby("core")
    out["layer_samples"] = per_core.size().reindex(cores, fill_value=0).to_numpy()
    out["tasks"] = np.bincount(idx, minlength=n)
    out["busy_pct"] = 100.0 * covered(_i64(t["start"]), _i64(t["end"]), idx, n, *bounds) / span
    for c in UNIT_CLASSES:
        sel = (t["cls"] == c).to_numpy(dtype=bool)
        out[f"{c}_pct"] = (
            100.0 * covered(_i64(t["start"])[sel], _i64(t["end"])[sel], idx[sel], n, *bounds) / span
        )
    out["array_macs"] = np.bincount(idx, weights=_i64(t["macs"]), minlength=n).astype(np.int64)
    out["bytes"] = np.bincount(idx, weights=_i64(t["bytes"]), minlength=n).astype(np.int64)
    out["array_macs_per_cycle"] = out["array_macs"] / span
    return out


def _edges(lo: int, hi: int, bins: int) -> np.ndarray:
    if bins < 1:
        raise TraceFormatError(f"bins must be a positive integer, not {bins}")
    return np.linspace(lo, max(hi, lo + 1), bins + 1)


def bandwidth_table(
    trace: Trace,
    bins: int = 100,
    drop_percentile: float = 0.0,
    drop_by: DropBy | str = DropBy.VALUE,
) -> pd.DataFrame:
    """Bytes per second through each memory pool over time, from [M] events.

    A transfer counts for both its ``src`` and its ``dst`` pool, its bytes spread evenly
    over [start, end). Columns: t_start_us, t_end_us, then ``<pool>_gb_s`` (10⁹ B/s) for
    every pool seen, e.g. ``ddr_gb_s``, ``l2_gb_s``."""
    trace, _ = _prepare(trace, drop_percentile, drop_by)
    m = trace[Tag.M]
    lo, hi = window(trace)
    edges = _edges(lo, hi, bins)
    us = trace.us_per_cycle
    out = pd.DataFrame({"t_start_us": edges[:-1] * us, "t_end_us": edges[1:] * us})
    if not len(m):
        return out
    start, end, nbytes = _i64(m["start"]), _i64(m["end"]), _i64(m["bytes"]).astype(float)
    src, dst = m["src"].astype(str).to_numpy(object), m["dst"].astype(str).to_numpy(object)
    seconds = np.diff(edges) * us * 1e-6
    for pool in sorted(set(src) | set(dst)):
        sel = (src == pool) | (dst == pool)
        s, e, b = start[sel], end[sel], nbytes[sel]
        timed = e > s
        moved = binned_overlap(s[timed], e[timed], b[timed] / (e[timed] - s[timed]), edges)
        # Zero-length transfers land whole in the bin of their start.
        moved += np.histogram(s[~timed], bins=edges, weights=b[~timed])[0]
        out[f"{pool}_gb_s"] = moved / seconds / 1e9
    return out


def utilisation(trace: Trace, bins: int = 100) -> tuple[pd.DataFrame, np.ndarray]:
    """Busy fraction of every (core, unit) in each time bin: (frame indexed by core and
    unit with one column per bin, bin edges in µs)."""
    t = tasks(trace)
    lo, hi = window(trace)
    edges = _edges(lo, hi, bins)
    if t.empty:
        return pd.DataFrame(), edges * trace.us_per_cycle
    rows = {}
    width = np.diff(edges)
    for (core, unit), g in t.groupby(["core", "unit"], sort=True, observed=True):
        s, e = _i64(g["start"]), _i64(g["end"])
        rows[(core, unit)] = np.clip(binned_overlap(s, e, np.ones(len(s)), edges) / width, 0, 1)
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index = pd.MultiIndex.from_tuples(df.index, names=["core", "unit"])
    return df, edges * trace.us_per_cycle


def power_table(
    trace: Trace, drop_percentile: float = 0.0, drop_by: DropBy | str = DropBy.VALUE
) -> pd.DataFrame:
    """The power timeline (W per component and ``total_w`` per time bin, times in µs)."""
    trace, _ = _prepare(trace, drop_percentile, drop_by)
    if trace.power is None:
        raise TraceFormatError(
            f"{trace.source}: no power timeline; the simulator writes it beside the trace "
            "as <name>.power.parquet"
        )
    p = trace.power
    front = [f"{c}_us" for c in POWER_TIME_COLUMNS]
    rest = [c for c in p.columns if c not in front and c not in POWER_TIME_COLUMNS]
    return p[front + rest].reset_index(drop=True)
