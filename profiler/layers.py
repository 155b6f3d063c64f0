"""Per-layer figures of a trace: busy, span and wait time, the critical unit, MACs.

Definitions (cycles in the trace, ``*_us`` in microseconds):

* **Layer sample**: one layer on one core for one frame (INIT, frame -1, is no frame).
* ``span``: from the first start to the last end of the sample's [K]/[M] tasks (from its
  [PB] to its [PE] when it has none).
* ``busy``: the sample's exclusive time (`aipusim.profiler.exclusive`): the instants of
  the core that its tasks hold, each instant of a core counted once, for the
  earliest-issued task running then. So for each core and frame the busy times of the
  layers add up to at most the frame's time on that core. ``<class>_us`` splits busy by the
  class of the unit (mvm, dwpu, dpu, wload, dma, other).
* ``wait``: span - busy: the part of the span in which the core ran none of the sample's
  tasks (it waited for data, a token or another core, or ran earlier-issued work).
* ``critical_unit``: the unit or link the layer waited on, from the critical path walked
  back through the trace (`aipusim.profiler.critical`); ``critical_pct`` is the share of
  the layer's span it explains.
* ``macs``: the network's multiply-accumulates of the layer in one frame (the compiler's,
  from [PB]); ``array_macs``: what the MVM/DWPU arrays ran for it in one frame (padded
  channels, all cores); ``bytes``: what its transfers moved in one frame.

A table has one row per layer, in topological order (the order of the tasklist: the
layer's first task on the lowest core that runs it), with the mean over its samples.

>>> from aipusim.profiler.synth import write_synthetic_trace
>>> from aipusim.profiler.trace import load_trace
>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "s.trace"
>>> _ = write_synthetic_trace(p, frames=4, cores=2)
>>> t = layer_table(load_trace(p))
>>> t["layer"].tolist()[:2], bool((t["busy_us"] <= t["span_us"] + 1e-9).all())
(['conv1', 'pool1'], True)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pandas as pd

from aipusim.isa.trace_schema import HEADER_INSTANCE_CORES, HEADER_TOKEN_LATENCY, Tag
from aipusim.profiler.critical import DISPATCH, critical_cycles, predecessors
from aipusim.profiler.drop import DropBy, drop_by_value
from aipusim.profiler.exclusive import exclusive_cycles
from aipusim.profiler.grouping import critical_units, first_seen, first_task_after, last_rows
from aipusim.profiler.lean import LAYER_COLUMNS
from aipusim.profiler.reduce import (
    UNIT_CLASSES,
    _i64,
    _prepare,
    cat_flags,
    cat_strings,
    tasks,
)
from aipusim.profiler.trace import Trace

#: The parts of a layer's span: the busy time by unit class, then the wait.
PARTS = (*UNIT_CLASSES, "wait")
_KEYS = ["core", "frame", "layer"]


def _is_host_link(unit: str) -> bool:
    return unit.startswith("pcie")


def _header_int(trace: Trace, key: str, default: int) -> int:
    try:
        return int(trace.header.extra.get(key, default))
    except ValueError:
        return default


def _core_tasks(trace: Trace) -> pd.DataFrame:
    """The cores' tasks (host link transfers left out) with their exclusive cycles and
    their critical-path predecessor."""
    t = tasks(trace)
    t = t[~cat_flags(t["unit"], _is_host_link)]
    t = t.reset_index(drop=True)
    if t.empty:
        return t.assign(excl=np.zeros(0), pred=np.zeros(0, np.int64))
    task = _i64(t["task"])
    frame = _i64(t["frame"])
    width = int(task.max()) + 1
    # Earliest issued first: INIT (frame -1), then each frame's tasks in tasklist order.
    priority = (frame + 1) * width + task
    unit = t["unit"].cat.codes.to_numpy(np.int64)
    core = _i64(t["core"])
    excl = exclusive_cycles(core, unit, priority, _i64(t["start"]), _i64(t["end"]))
    per_instance = max(1, _header_int(trace, HEADER_INSTANCE_CORES, 1))
    pred = predecessors(
        core,
        unit,
        _i64(t["start"]),
        _i64(t["end"]),
        core // per_instance,
        _header_int(trace, HEADER_TOKEN_LATENCY, 0),
    )
    return t.assign(excl=excl, pred=pred)


def _markers(trace: Trace) -> pd.DataFrame:
    """Per (core, frame, layer) of frames >= 0: op, network MACs and the [PB]..[PE] span."""
    pb, pe = trace[Tag.PB], trace[Tag.PE]
    cols = ["core", "frame", "layer", "op", "net_macs", "pb", "pe"]
    if not len(pb):
        return pd.DataFrame(columns=cols)
    b = pd.DataFrame(
        {
            "core": _i64(pb["core"]),
            "frame": _i64(pb["frame"]),
            "layer": cat_strings(pb["layer"]).to_numpy(),
            "op": cat_strings(pb["op"]).to_numpy(),
            "net_macs": _i64(pb["macs"]),
            "pb": _i64(pb["t"]),
        }
    )
    b = b[(b["frame"] >= 0) & (b["layer"] != "")]
    b = b.groupby(_KEYS, sort=False, as_index=False).agg(
        op=("op", "first"), net_macs=("net_macs", "max"), pb=("pb", "min")
    )
    if len(pe):
        e = pd.DataFrame(
            {
                "core": _i64(pe["core"]),
                "frame": _i64(pe["frame"]),
                "layer": cat_strings(pe["layer"]).to_numpy(),
                "pe": _i64(pe["t"]),
            }
        )
        e = e.groupby(_KEYS, sort=False, as_index=False).agg(pe=("pe", "max"))
        b = b.merge(e, on=_KEYS, how="left")
    else:
        b["pe"] = np.nan
    return b[cols]


def layer_samples(trace: Trace) -> pd.DataFrame:
    """One row per layer sample: core, frame, layer, op, start, end, busy and busy per unit
    class (cycles), the layer's network MACs (-1 unknown), array MACs, bytes, its first
    task index and, per sample, the cycles per resource of its critical path
    (``critical``, a dict)."""
    samples, crit = _samples(trace)
    dicts: list[dict[str, float]] = [{} for _ in range(len(samples))]
    names = crit.names
    for i, r, c in zip(
        crit.sample.tolist(), crit.resource.tolist(), crit.cycles.tolist(), strict=True
    ):
        dicts[i][names[r]] = c
    return samples.assign(critical=dicts)


@dataclass
class _Critical:
    """The critical path of every sample, long form: per (sample, resource), in the order
    the walk met them, the cycles; ``resource`` indexes ``names``."""

    sample: np.ndarray
    resource: np.ndarray
    cycles: np.ndarray
    names: list[str]


def _samples(trace: Trace) -> tuple[pd.DataFrame, _Critical]:
    """`layer_samples` without its ``critical`` column, and the critical paths."""
    t = _core_tasks(trace)
    marks = _markers(trace)
    sel = (t["frame"] >= 0).to_numpy(dtype=bool) & cat_flags(t["layer"], bool)
    mine = t[sel].assign(layer=lambda d: cat_strings(d["layer"]))
    for c in UNIT_CLASSES:
        mine[c] = np.where((mine["cls"] == c).to_numpy(dtype=bool), mine["excl"], 0.0)
    g = mine.groupby(_KEYS, sort=False)
    samples = g.agg(
        start=("start", "min"),
        end=("end", "max"),
        busy=("excl", "sum"),
        array_macs=("macs", "sum"),
        bytes=("bytes", "sum"),
        first_task=("task", "min"),
        **{c: (c, "sum") for c in UNIT_CLASSES},
    ).reset_index()
    samples["last_row"] = last_rows(
        g.ngroup().to_numpy(),
        _i64(mine["task"]),
        _i64(mine["end"]),
        mine.index.to_numpy(),
        len(samples),
    )
    has_tasks = len(t) > 0
    if len(marks):
        samples = samples.merge(marks, on=_KEYS, how="outer")
        bare = samples["start"].isna().to_numpy()
        samples.loc[bare, "start"] = samples.loc[bare, "pb"]
        samples.loc[bare, "end"] = samples.loc[bare, "pe"].fillna(samples.loc[bare, "pb"])
        samples.loc[bare, "first_task"] = _first_task_after(t, samples[bare])
        fill = {"busy": 0.0 if has_tasks else np.nan, "array_macs": 0, "bytes": 0}
        samples = samples.fillna(fill | {c: fill["busy"] for c in UNIT_CLASSES})
        samples["op"] = samples["op"].fillna("")
        samples["net_macs"] = samples["net_macs"].fillna(-1)
    else:
        samples["op"] = ""
        samples["net_macs"] = -1
    cols = ["core", "frame", "layer", "op", "start", "end", "busy", *UNIT_CLASSES]
    cols += ["net_macs", "array_macs", "bytes", "first_task"]
    samples = samples[[*cols, "last_row"]]
    for c in ("core", "frame", "start", "end", "net_macs", "array_macs", "bytes"):
        samples[c] = samples[c].astype(np.int64)
    samples = samples.sort_values(["frame", "core", "first_task", "start"], kind="stable")
    samples = samples.reset_index(drop=True)
    return samples[cols], _critical(t, samples)


def _first_task_after(t: pd.DataFrame, bare: pd.DataFrame) -> np.ndarray:
    """`grouping.first_task_after` of the samples with no task of their own."""
    if t.empty or bare.empty:
        return np.full(len(bare), np.inf)
    return first_task_after(
        _i64(t["core"]),
        _i64(t["frame"]),
        _i64(t["start"]),
        _i64(t["task"]),
        _i64(bare["core"]),
        _i64(bare["frame"]),
        _i64(bare["start"]),
    )


def _critical(t: pd.DataFrame, samples: pd.DataFrame) -> _Critical:
    """The critical paths of the samples with tasks (`critical.critical_cycles`), summed
    per (sample, resource) in the order the walk met them."""
    names = [str(c) for c in t["resource"].cat.categories] if len(t) else []
    if DISPATCH not in names:
        names.append(DISPATCH)
    rows = samples["last_row"].to_numpy(dtype=np.float64)
    walked = np.flatnonzero(~np.isnan(rows))
    if t.empty or not len(walked):
        empty = np.zeros(0, dtype=np.int64)
        return _Critical(empty, empty, np.zeros(0), names)
    chain, task, cycles = critical_cycles(
        _i64(t["pred"]),
        _i64(t["start"]),
        _i64(t["end"]),
        rows[walked].astype(np.int64),
        samples["start"].to_numpy(np.int64)[walked],
    )
    codes = t["resource"].cat.codes.to_numpy(np.int64)
    resource = np.where(task >= 0, codes[np.maximum(task, 0)], names.index(DISPATCH))
    # Pieces come in walk order within each sample: factorize keeps first meetings first.
    key, pairs = first_seen(walked[chain] * len(names) + resource)
    sums = np.bincount(key, weights=cycles.astype(np.float64), minlength=len(pairs))
    return _Critical(pairs // len(names), pairs % len(names), sums, names)


def layer_spans(trace: Trace) -> pd.DataFrame:
    """One row per layer sample: core, frame, layer, start, end (its span, cycles),
    without the exclusive and critical-path work of `layer_samples` (for timelines)."""
    t = tasks(trace)
    sel = (t["frame"] >= 0).to_numpy(dtype=bool) & cat_flags(t["layer"], bool)
    sel &= ~cat_flags(t["unit"], _is_host_link)
    mine = t[sel].assign(layer=lambda d: cat_strings(d["layer"]))
    spans = mine.groupby(_KEYS, sort=False, as_index=False).agg(
        start=("start", "min"), end=("end", "max")
    )
    marks = _markers(trace)
    if len(marks):
        bare = marks.merge(spans[_KEYS], on=_KEYS, how="left", indicator=True)
        bare = bare[bare["_merge"] == "left_only"]
        extra = pd.DataFrame(
            {
                **{k: bare[k].to_numpy() for k in _KEYS},
                "start": bare["pb"].to_numpy(np.int64),
                "end": bare["pe"].fillna(bare["pb"]).to_numpy(np.int64),
            }
        )
        spans = pd.concat([spans, extra], ignore_index=True)
    return spans.sort_values(["start", "core"], kind="stable").reset_index(drop=True)


def _topological(samples: pd.DataFrame) -> list[str]:
    """Layers in tasklist order: by the lowest core that runs a layer, then its first task
    there (in the earliest frame it appears in)."""
    first = samples[samples["frame"] == samples.groupby("layer")["frame"].transform("min")]
    first = first[first["core"] == first.groupby("layer")["core"].transform("min")]
    key = first.groupby("layer", sort=False).agg(
        core=("core", "min"), task=("first_task", "min"), start=("start", "min")
    )
    return key.sort_values(["core", "task", "start"], kind="stable").index.tolist()


def layer_table(
    trace: Trace, drop_percentile: float = 0.0, drop_by: DropBy | str = DropBy.VALUE
) -> pd.DataFrame:
    """Per layer, in topological order: op, samples, mean busy/span/wait (µs), span p50 and
    p99, the critical unit and the share of the span it explains, busy by unit class,
    network MACs, array MACs and bytes per frame (see the module doc)."""
    trace, percent = _prepare(trace, drop_percentile, drop_by)
    samples, crit = _samples(trace)
    samples = samples.assign(span=samples["end"] - samples["start"])
    # Where each sample is after the drop (-1: dropped), for its critical-path pieces.
    at = np.full(len(samples), -1)
    samples = drop_by_value(samples, "span", ["layer"], percent)
    at[samples.index.to_numpy()] = np.arange(len(samples))
    samples = samples.reset_index(drop=True)
    cols = list(LAYER_COLUMNS)
    if samples.empty:
        return pd.DataFrame(columns=cols)
    us = trace.us_per_cycle
    g = samples.groupby("layer", sort=False)
    span = g["span"]
    frames = g["frame"].nunique()
    out = pd.DataFrame(
        {
            "op": g["op"].agg(lambda ops: next((o for o in ops if o), "")),
            "samples": span.size(),
            "busy_us": g["busy"].mean() * us,
            "span_us": span.mean() * us,
            "span_us_p50": span.quantile(0.5) * us,
            "span_us_p99": span.quantile(0.99) * us,
        }
    )
    out["wait_us"] = out["span_us"] - out["busy_us"]
    out["critical_unit"], out["critical_pct"] = _critical_units(
        crit, at, g.ngroup().to_numpy(), len(out), span.sum().to_numpy()
    )
    for c in UNIT_CLASSES:
        out[f"{c}_us"] = g[c].mean() * us
    net = g["net_macs"].max()
    out["macs"] = net.where(net >= 0).astype("Int64")
    out["array_macs"] = (g["array_macs"].sum() / frames).round().astype(np.int64)
    out["bytes"] = (g["bytes"].sum() / frames).round().astype(np.int64)
    out = out.reindex(_topological(samples))
    out.index.name = "layer"
    return out.reset_index()[cols]


def _critical_units(
    crit: _Critical, at: np.ndarray, group: np.ndarray, n: int, total: np.ndarray
) -> tuple[list[str], np.ndarray]:
    """`grouping.critical_units` of the critical paths ``crit``."""
    return critical_units(crit.sample, crit.resource, crit.cycles, crit.names, at, group, n, total)


class LayerSort(StrEnum):
    """What ranks layers (``run --sort``): exclusive busy time, or span (first task's start
    to last task's end, waits included)."""

    BUSY = "busy"
    SPAN = "span"


def ranked_layers(
    table: pd.DataFrame, top: int | None = None, sort: LayerSort | str | None = None
) -> pd.DataFrame:
    """The rows of a `layer_table` in network order, or, with ``sort`` or ``top``, the ``top``
    layers (default: all) with the most busy time (or span), largest first.

    >>> t = pd.DataFrame({"layer": ["a", "b", "c"], "busy_us": [1.0, 3.0, 2.0],
    ...                   "span_us": [9.0, 3.0, 2.0]})
    >>> ranked_layers(t, 2)["layer"].tolist(), ranked_layers(t, sort="span")["layer"].tolist()
    (['b', 'c'], ['a', 'b', 'c'])
    """
    if top is None and sort is None:
        return table
    key = f"{LayerSort(sort or LayerSort.BUSY).value}_us"
    return table.nlargest(len(table) if top is None else top, key).reset_index(drop=True)


def layer_breakdown(
    trace: Trace,
    drop_percentile: float = 0.0,
    drop_by: DropBy | str = DropBy.VALUE,
    table: pd.DataFrame | None = None,
    top: int | None = None,
    sort: LayerSort | str | None = None,
) -> pd.DataFrame:
    """Each layer's mean span split into parts (µs) that add up to it: busy by unit class,
    then ``wait``; for stacked bars. Rows as in `layer_table` (``table``, if given, is
    the trace's layer table with these drop settings), or as `ranked_layers` picks them."""
    if table is None:
        table = layer_table(trace, drop_percentile, drop_by)
    table = ranked_layers(table, top, sort)
    parts = table[["layer", *[f"{c}_us" for c in UNIT_CLASSES], "wait_us"]]
    return parts.rename(columns={f"{c}_us": c for c in PARTS})


def slowest_layers(
    table: pd.DataFrame, n: int = 10, sort: LayerSort | str = LayerSort.BUSY
) -> pd.DataFrame:
    """The ``n`` layers of a `layer_table` with the most busy time (or span, by ``sort``),
    with the unit class that holds most of it (``-`` when none).

    >>> t = pd.DataFrame({"layer": ["a", "b"], "busy_us": [1.0, 3.0], "mvm_us": [1.0, 0.0],
    ...                   **{f"{c}_us": [0.0, 0.0] for c in UNIT_CLASSES[1:]}})
    >>> t.loc[1, "dma_us"] = 3.0
    >>> slowest_layers(t, 1)[["layer", "unit"]].values.tolist()
    [['b', 'dma']]
    """
    busy = table[[f"{c}_us" for c in UNIT_CLASSES]]
    top = table.assign(unit=busy.idxmax(axis=1).str.removesuffix("_us"))
    top.loc[busy.max(axis=1) <= 0, "unit"] = "-"
    return ranked_layers(top, n, sort)


__all__ = [
    "PARTS",
    "layer_breakdown",
    "layer_samples",
    "layer_spans",
    "layer_table",
    "slowest_layers",
]
