"""The lean route of ``aipusim profile``: a text trace read and reduced to the layer table
and its summary line with numpy and Arrow alone.

pandas costs about half a second of CPU to import and as much again converting a 1M-line
trace into frames and grouping it, so the command's default output (the per-layer table,
`aipusim.profiler.layers`, under the frame summary of `aipusim.profiler.reduce`) is
computed here from the reader's Arrow tables as numpy columns. The Python API
(`load_trace`, `layer_table`) keeps its pandas frames. What is printed is byte-identical
to the pandas route (``tests/profiler/test_lean.py`` compares both on many traces); the
figures follow the same definitions, and the numpy steps both routes share live in
`aipusim.profiler.grouping`, `exclusive`, `critical` and `consistency`.

>>> from aipusim.profiler.synth import write_synthetic_trace
>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "s.trace"
>>> _ = write_synthetic_trace(p, frames=4, cores=2)
>>> trace = read_trace(p)
>>> layer_rows(trace)["layer"][:2]
['conv1', 'pool1']
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from aipusim.base.arrays import unique_sorted
from aipusim.isa.metrics import WARMUP_STARTS, steady_state
from aipusim.isa.trace_schema import (
    COLUMNS,
    HEADER_INSTANCE_CORES,
    HEADER_TOKEN_LATENCY,
    LEVELS,
    ColumnType,
    Tag,
    TraceHeader,
)
from aipusim.isa.units import UNIT_CLASSES, unit_class
from aipusim.profiler.consistency import CHECKED_COLUMNS, b_frames, consistent_rows
from aipusim.profiler.critical import DISPATCH, critical_cycles, predecessors, resource_of
from aipusim.profiler.drop import drop_count
from aipusim.profiler.exclusive import exclusive_cycles
from aipusim.profiler.grouping import (
    Groups,
    combine,
    critical_units,
    first_seen,
    first_task_after,
    last_rows,
)
from aipusim.profiler.parse import CUT_REASON, read_text

#: What the layer table prints for a layer whose network MACs are unknown (pandas' NA).
NA = "<NA>"

#: The layer table's columns, in order (as `aipusim.profiler.layers.layer_table`).
LAYER_COLUMNS = (
    "layer",
    "op",
    "samples",
    "busy_us",
    "span_us",
    "wait_us",
    "span_us_p50",
    "span_us_p99",
    "critical_unit",
    "critical_pct",
    *(f"{c}_us" for c in UNIT_CLASSES),
    "macs",
    "array_macs",
    "bytes",
)


@dataclass
class Labels:
    """A string column: per row an index into ``names``."""

    codes: np.ndarray
    names: list[str]

    def flags(self, test: Callable[[str], bool]) -> np.ndarray:
        """``test`` of each row's string, evaluated once per name."""
        table = np.array([test(n) for n in self.names], dtype=bool)
        return table[self.codes] if len(table) else np.zeros(len(self.codes), dtype=bool)

    def take(self, rows: np.ndarray) -> Labels:
        return Labels(self.codes[rows], self.names)


Column = np.ndarray | Labels


@dataclass
class LeanTrace:
    """A text trace as numpy columns per tag (the tag's `COLUMNS`; strings as `Labels`),
    with the events that contradict it left out, as `aipusim.profiler.trace.Trace` has
    them (no power timeline: the layer table does not read it)."""

    header: TraceHeader
    tables: dict[Tag, dict[str, Column]]
    events: int
    source: str
    unknown_count: int
    #: (line, reason) of every line that could not be read
    malformed: list[tuple[int, str]]
    inconsistent: dict[str, int] = field(default_factory=dict)

    def rows(self, tag: Tag) -> int:
        return len(self.tables[tag][COLUMNS[tag][0][0]])

    @property
    def us_per_cycle(self) -> float:
        return 1e6 / self.header.freq_hz

    @property
    def cut_line(self) -> int | None:
        cut = [line for line, reason in self.malformed if reason == CUT_REASON]
        return cut[-1] if cut else None


def _numpy(array: pa.Array, dtype: type) -> np.ndarray:
    """The values of a null-free Arrow array of fixed-width ``dtype`` as numpy, without a
    copy. (``to_numpy`` asks pyarrow's pandas shim first, which imports pandas.)"""
    assert array.null_count == 0, "the reader's columns have no nulls"
    if not len(array):
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(
        array.buffers()[1],
        dtype=dtype,
        count=len(array),
        offset=array.offset * np.dtype(dtype).itemsize,
    )


def _labels(chunks: list[pa.DictionaryArray]) -> Labels:
    """A dictionary column as `Labels`; names in order of first appearance over the chunks'
    dictionaries, as pandas unifies them."""
    index: dict[str, int] = {}
    parts = []
    for chunk in chunks:
        names = chunk.dictionary.to_pylist()
        remap = np.array([index.setdefault(n, len(index)) for n in names], dtype=np.int64)
        codes = _numpy(chunk.indices, np.int32).astype(np.int64)
        parts.append(remap[codes] if len(remap) else codes)
    codes = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return Labels(codes, list(index))


def _columns(tag: Tag, parts: list[pa.Table]) -> dict[str, Column]:
    """The tag's chunk tables (`parse.read_text`) as one numpy column per field."""
    out: dict[str, Column] = {}
    for name, ctype in COLUMNS[tag]:
        chunks = [c for part in parts for c in part.column(name).chunks]
        if ctype is ColumnType.INT:
            ints = [_numpy(c, np.int64) for c in chunks]
            out[name] = np.concatenate(ints) if ints else np.zeros(0, dtype=np.int64)
        else:
            out[name] = _labels(chunks)
    return out


def _take(table: dict[str, Column], rows: np.ndarray) -> dict[str, Column]:
    return {k: v.take(rows) if isinstance(v, Labels) else v[rows] for k, v in table.items()}


def _event_text(tag: Tag, table: dict[str, Column], i: int) -> str:
    def value(v: Column) -> object:
        return v.names[v.codes[i]] if isinstance(v, Labels) else int(v[i])

    fields = " ".join(f"{name}={value(table[name])}" for name, _ in COLUMNS[tag])
    return f"[{tag.value}] {fields}"


def read_trace(path: str | Path, strict: bool = False, progress: bool = False) -> LeanTrace:
    """Read a text trace (`aipusim.profiler.parse.read_text`) into numpy columns and leave
    out the events that contradict it (`consistency.consistent_rows`), as `load_trace`."""
    col = read_text(path, strict, progress)
    source = str(path)
    tables = {tag: _columns(tag, col.arrow_parts(tag)) for tag in LEVELS}
    b = tables[Tag.B]["frame"]
    frames = b_frames(b)
    counts: dict[str, int] = {}
    for tag in LEVELS:
        table = tables[tag]
        n = len(table[COLUMNS[tag][0][0]])
        if not n:
            continue
        cols = {c: table[c] for c in CHECKED_COLUMNS if c in table}
        keep = consistent_rows(
            col.header,
            tag,
            cols,
            n,
            frames,
            counts,
            source if strict else None,
            lambda i, tag=tag, table=table: _event_text(tag, table, i),
        )
        if not keep.all():
            tables[tag] = _take(table, np.flatnonzero(keep))
    return LeanTrace(
        header=col.header,
        tables=tables,
        events=col.events - sum(counts.values()),
        source=source,
        unknown_count=len(col.unknown),
        malformed=[(line, reason) for line, _, reason in col.malformed],
        inconsistent=counts,
    )


# ---- time drop (`aipusim.profiler.drop`) -------------------------------------------------


def _frame_spans(trace: LeanTrace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(frame, start, end) of every frame, sorted by frame: from [B] when present, else
    from its events."""
    parts = []
    sources = (
        ((Tag.B, "start", "end"),)
        if trace.rows(Tag.B)
        else (
            (Tag.K, "start", "end"),
            (Tag.M, "start", "end"),
            (Tag.PB, "t", "t"),
            (Tag.PE, "t", "t"),
        )
    )
    for tag, lo, hi in sources:
        t = trace.tables[tag]
        if trace.rows(tag):
            parts.append((t["frame"], t[lo], t[hi]))
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    frame, start, end = (np.concatenate(x) for x in zip(*parts, strict=True))
    order = np.argsort(frame, kind="stable")
    frame, start, end = frame[order], start[order], end[order]
    first = np.flatnonzero(np.r_[True, frame[1:] != frame[:-1]])
    return (
        frame[first],
        np.minimum.reduceat(start, first),
        np.maximum.reduceat(end, first),
    )


def drop_frames(trace: LeanTrace, percent: float) -> LeanTrace:
    """`aipusim.profiler.drop.drop_frames` of a lean trace."""
    if percent == 0.0:
        return trace
    frame, start, end = _frame_spans(trace)
    order = np.lexsort((frame, start))
    k = int(drop_count(len(frame), percent))
    kept = order[k : len(frame) - k]
    keep = frame[kept]
    lo = int(start[kept].min()) if len(kept) else 0
    hi = int(end[kept].max()) if len(kept) else -1
    tables = {}
    for tag, table in trace.tables.items():
        if "frame" in table:
            rows = np.flatnonzero(np.isin(table["frame"], keep))
        else:
            t = table["t"]
            rows = np.flatnonzero((t >= lo) & (t <= hi))
        tables[tag] = _take(table, rows)
    return LeanTrace(
        trace.header,
        tables,
        trace.events,
        trace.source,
        trace.unknown_count,
        trace.malformed,
        trace.inconsistent,
    )


# ---- tasks (`aipusim.profiler.reduce.tasks`) ---------------------------------------------


def _union(parts: list[Labels]) -> Labels:
    """Labels of several columns one after the other; names in order of first appearance
    over the parts' names."""
    index: dict[str, int] = {}
    codes = []
    for part in parts:
        remap = np.array([index.setdefault(n, len(index)) for n in part.names], dtype=np.int64)
        codes.append(remap[part.codes] if len(remap) else part.codes.astype(np.int64))
    return Labels(np.concatenate(codes), list(index))


def _m_resources(m: dict[str, Column]) -> Labels:
    """`critical.resource_of` of every [M] row, worked out once per (unit, src, dst)."""
    unit, src, dst = m["unit"], m["src"], m["dst"]
    if not len(unit.codes):
        return Labels(np.zeros(0, dtype=np.int64), [])
    sizes = [max(len(c.names), 1) for c in (unit, src, dst)]
    key = (unit.codes * sizes[1] + src.codes) * sizes[2] + dst.codes
    combos, inverse = np.unique(key, return_inverse=True)
    names = []
    for combo in combos.tolist():
        u, rest = divmod(combo, sizes[1] * sizes[2])
        a, b = divmod(rest, sizes[2])
        names.append(resource_of(unit.names[u], src.names[a], dst.names[b]))
    cats = list(dict.fromkeys(names))
    return Labels(np.array([cats.index(n) for n in names], np.int64)[inverse], cats)


@dataclass
class _Tasks:
    """[K] then [M] events as columns (`reduce.tasks`)."""

    core: np.ndarray
    unit: Labels
    cls: np.ndarray  # index into UNIT_CLASSES
    frame: np.ndarray
    layer: Labels
    task: np.ndarray
    start: np.ndarray
    end: np.ndarray
    macs: np.ndarray
    bytes: np.ndarray
    resource: Labels

    def take(self, rows: np.ndarray) -> _Tasks:
        return _Tasks(
            **{
                k: (v.take(rows) if isinstance(v, Labels) else v[rows])
                for k, v in self.__dict__.items()
            }
        )

    def __len__(self) -> int:
        return len(self.start)


def _tasks(trace: LeanTrace) -> _Tasks:
    k, m = trace.tables[Tag.K], trace.tables[Tag.M]
    unit = _union([k["unit"], m["unit"]])
    cls_of = np.array([UNIT_CLASSES.index(unit_class(u)) for u in unit.names], dtype=np.int64)
    return _Tasks(
        core=np.concatenate([k["core"], m["core"]]),
        unit=unit,
        cls=cls_of[unit.codes] if len(cls_of) else np.zeros(0, np.int64),
        frame=np.concatenate([k["frame"], m["frame"]]),
        layer=_union([k["layer"], m["layer"]]),
        task=np.concatenate([k["task"], m["task"]]),
        start=np.concatenate([k["start"], m["start"]]),
        end=np.concatenate([k["end"], m["end"]]),
        macs=np.concatenate([k["macs"], np.zeros(len(m["core"]), np.int64)]),
        bytes=np.concatenate([np.zeros(len(k["core"]), np.int64), m["bytes"]]),
        resource=_union([k["unit"], _m_resources(m)]),
    )


def _header_int(trace: LeanTrace, key: str, default: int) -> int:
    try:
        return int(trace.header.extra.get(key, default))
    except ValueError:
        return default


# ---- the layer table (`aipusim.profiler.layers`) ----------------------------------------


@dataclass
class _Samples:
    """Layer samples (one layer on one core for one frame), in the order of
    `layers._samples`; ``layer`` indexes ``names``; ``last_row`` is -1 for a sample with no
    task."""

    names: list[str]
    core: np.ndarray
    frame: np.ndarray
    layer: np.ndarray
    op: np.ndarray  # index into op_names, -1: none
    op_names: list[str]
    start: np.ndarray
    end: np.ndarray
    busy: np.ndarray
    classes: np.ndarray  # [sample, unit class] busy cycles
    net_macs: np.ndarray
    array_macs: np.ndarray
    bytes: np.ndarray
    first_task: np.ndarray
    last_row: np.ndarray


def _layer_ids(names: list[str], vocab: dict[str, int]) -> np.ndarray:
    return np.array([vocab.setdefault(n, len(vocab)) for n in names], dtype=np.int64)


def _samples(trace: LeanTrace, t: _Tasks) -> tuple[_Samples, np.ndarray, np.ndarray]:
    """The layer samples, the tasks' critical-path predecessors and exclusive cycles."""
    vocab: dict[str, int] = {}
    t_layer = _layer_ids(t.layer.names, vocab)[t.layer.codes] if len(t) else np.zeros(0, np.int64)
    pb, pe = trace.tables[Tag.PB], trace.tables[Tag.PE]
    pb_layer = _layer_ids(pb["layer"].names, vocab)[pb["layer"].codes] if len(pb["t"]) else None
    pe_layer = _layer_ids(pe["layer"].names, vocab)[pe["layer"].codes] if len(pe["t"]) else None
    names = list(vocab)
    named = np.array([bool(n) for n in names], dtype=bool)

    excl, pred = np.zeros(len(t)), np.zeros(len(t), np.int64)
    if len(t):
        width = int(t.task.max()) + 1
        # Earliest issued first: INIT (frame -1), then each frame's tasks in tasklist order.
        priority = (t.frame + 1) * width + t.task
        per_instance = max(1, _header_int(trace, HEADER_INSTANCE_CORES, 1))
        # Two independent walks over every task: the second runs on another thread (numpy
        # releases the GIL in its array operations).
        with ThreadPoolExecutor(1) as pool:
            preds = pool.submit(
                predecessors,
                t.core,
                t.unit.codes,
                t.start,
                t.end,
                t.core // per_instance,
                _header_int(trace, HEADER_TOKEN_LATENCY, 0),
            )
            excl = exclusive_cycles(t.core, t.unit.codes, priority, t.start, t.end)
            pred = preds.result()

    mine = np.flatnonzero((t.frame >= 0) & named[t_layer]) if len(t) else np.zeros(0, np.int64)
    g = Groups(combine(t.core[mine], t.frame[mine], t_layer[mine]))
    ex = excl[mine]
    n_cls = len(UNIT_CLASSES)
    classes = np.bincount(g.ids * n_cls + t.cls[mine], weights=ex, minlength=g.n * n_cls)
    classes = classes.reshape(g.n, n_cls)
    has = dict(
        core=g.first(t.core[mine]),
        frame=g.first(t.frame[mine]),
        layer=g.first(t_layer[mine]),
        start=g.min(t.start[mine]),
        end=g.max(t.end[mine]),
        busy=g.sum(ex),
        classes=classes,
        array_macs=g.sum(t.macs[mine]),
        bytes=g.sum(t.bytes[mine]),
        first_task=g.min(t.task[mine]).astype(np.float64),
        last_row=last_rows(g.ids, t.task[mine], t.end[mine], mine, g.n),
    )
    marks = _markers(pb, pe, pb_layer, pe_layer)
    if marks is None:
        s = _Samples(
            names=names,
            op=np.full(g.n, -1, np.int64),
            op_names=[],
            net_macs=np.full(g.n, -1, np.int64),
            **has,
        )
    else:
        s = _merge(has, marks, names, t, len(t) > 0)
    order = np.lexsort((s.start, s.first_task, s.core, s.frame))
    return _take_samples(s, order), pred, excl


def _take_samples(s: _Samples, rows: np.ndarray) -> _Samples:
    return _Samples(**{k: v if isinstance(v, list) else v[rows] for k, v in s.__dict__.items()})


@dataclass
class _Marks:
    """Per (core, frame, layer) of frames >= 0 with a [PB]: op, network MACs, [PB]..[PE]."""

    core: np.ndarray
    frame: np.ndarray
    layer: np.ndarray
    op: np.ndarray  # index into op_names
    op_names: list[str]
    net_macs: np.ndarray
    pb: np.ndarray
    pe: np.ndarray  # -1: no [PE]
    has_pe: np.ndarray


def _markers(
    pb: dict[str, Column],
    pe: dict[str, Column],
    pb_layer: np.ndarray | None,
    pe_layer: np.ndarray | None,
) -> _Marks | None:
    if pb_layer is None:
        return None
    op_names = pb["op"].names
    sel = np.flatnonzero((pb["frame"] >= 0) & pb["layer"].flags(bool))
    if not len(sel):
        return None
    g = Groups(combine(pb["core"][sel], pb["frame"][sel], pb_layer[sel]))
    core, frame, layer = g.first(pb["core"][sel]), g.first(pb["frame"][sel]), g.first(pb_layer[sel])
    pe_t = np.full(g.n, -1, np.int64)
    has_pe = np.zeros(g.n, dtype=bool)
    if pe_layer is not None:
        e = Groups(combine(pe["core"], pe["frame"], pe_layer))
        e_keys = [e.first(pe["core"]), e.first(pe["frame"]), e.first(pe_layer)]
        both = combine(
            *(np.concatenate([a, b]) for a, b in zip([core, frame, layer], e_keys, strict=True))
        )
        at = _locate(both[g.n :], both[: g.n])
        has_pe = at >= 0
        pe_t[has_pe] = e.max(pe["t"])[at[has_pe]]
    return _Marks(
        core=core,
        frame=frame,
        layer=layer,
        op=g.first(pb["op"].codes[sel]),
        op_names=op_names,
        net_macs=g.max(pb["macs"][sel]),
        pb=g.min(pb["t"][sel]),
        pe=pe_t,
        has_pe=has_pe,
    )


def _locate(keys: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Index of each ``wanted`` key in ``keys`` (distinct), or -1."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    pos = np.minimum(np.searchsorted(ordered, wanted), max(len(keys) - 1, 0))
    hit = (pos < len(keys)) & (ordered[pos] == wanted) if len(keys) else np.zeros(len(wanted), bool)
    return np.where(hit, order[pos] if len(keys) else -1, -1)


def _merge(has: dict, marks: _Marks, names: list[str], t: _Tasks, has_tasks: bool) -> _Samples:
    """The samples with tasks outer-joined with the markers on (core, frame, layer), in the
    join's order (the keys sorted, layer names as strings)."""
    rank = np.empty(len(names), dtype=np.int64)
    rank[np.argsort(np.array(names, dtype=object), kind="stable")] = np.arange(len(names))
    na = len(has["core"])
    core_ab = np.concatenate([has["core"], marks.core])
    frame_ab = np.concatenate([has["frame"], marks.frame])
    layer_ab = np.concatenate([has["layer"], marks.layer])
    key_ab = combine(core_ab, frame_ab, rank[layer_ab])
    keys = unique_sorted(key_ab)
    n = len(keys)
    ia, ib = _locate(key_ab[:na], keys), _locate(key_ab[na:], keys)
    in_a, in_b = ia >= 0, ib >= 0
    bare = ~in_a
    src = np.where(in_a, ia, na + ib)
    core, frame, layer = core_ab[src], frame_ab[src], layer_ab[src]

    def pick(values: np.ndarray, rows: np.ndarray, found: np.ndarray, fill: float) -> np.ndarray:
        out = np.full(n, fill, dtype=np.float64 if isinstance(fill, float) else values.dtype)
        out[found] = values[rows[found]]
        return out

    busy_fill = 0.0 if has_tasks else math.nan
    start = pick(has["start"], ia, in_a, 0)
    end = pick(has["end"], ia, in_a, 0)
    pb = pick(marks.pb, ib, in_b, 0)
    jb = np.maximum(ib, 0)
    pe = np.where(in_b & marks.has_pe[jb], marks.pe[jb], pb)
    start[bare] = pb[bare]
    end[bare] = pe[bare]
    first_task = pick(has["first_task"], ia, in_a, 0.0)
    first_task[bare] = first_task_after(
        t.core, t.frame, t.start, t.task, core[bare], frame[bare], start[bare]
    )
    classes = np.full((n, len(UNIT_CLASSES)), busy_fill)
    classes[in_a] = has["classes"][ia[in_a]]
    return _Samples(
        names=names,
        core=core,
        frame=frame,
        layer=layer,
        op=pick(marks.op, ib, in_b, -1),
        op_names=marks.op_names,
        start=start,
        end=end,
        busy=pick(has["busy"], ia, in_a, busy_fill),
        classes=classes,
        net_macs=pick(marks.net_macs, ib, in_b, -1),
        array_macs=pick(has["array_macs"], ia, in_a, 0),
        bytes=pick(has["bytes"], ia, in_a, 0),
        first_task=first_task,
        last_row=pick(has["last_row"], ia, in_a, -1),
    )


def _critical(
    t: _Tasks, pred: np.ndarray, s: _Samples
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """`layers._critical`: per (sample, resource) met on the samples' critical paths, in
    walk order, the cycles; resources index the returned names."""
    names = list(t.resource.names) if len(t) else []
    if DISPATCH not in names:
        names.append(DISPATCH)
    walked = np.flatnonzero(s.last_row >= 0)
    if not len(t) or not len(walked):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0), names
    chain, task, cycles = critical_cycles(pred, t.start, t.end, s.last_row[walked], s.start[walked])
    codes = t.resource.codes
    resource = np.where(task >= 0, codes[np.maximum(task, 0)], names.index(DISPATCH))
    # Pieces come in walk order within each sample: first meetings stay first.
    key, pairs = first_seen(walked[chain] * len(names) + resource)
    sums = np.bincount(key, weights=cycles.astype(np.float64), minlength=len(pairs))
    return pairs // len(names), pairs % len(names), sums, names


def layer_rows(
    trace: LeanTrace, drop_percentile: float = 0.0, drop_by: str = "value"
) -> dict[str, list]:
    """`aipusim.profiler.layers.layer_table` as columns of plain Python values (the
    ``macs`` of a layer without [PB] is `NA`), for `to_markdown`."""
    if drop_by == "time":
        trace, percent = drop_frames(trace, drop_percentile), 0.0
    else:
        percent = drop_percentile
    t = _tasks(trace)
    host = t.unit.flags(lambda u: u.startswith("pcie"))
    if host.any():
        t = t.take(np.flatnonzero(~host))
    s, pred, _ = _samples(trace, t)
    crit = _critical(t, pred, s)
    span = s.end - s.start
    n_all = len(span)
    at = np.full(n_all, -1)
    if percent and n_all:
        by_layer = Groups(s.layer)
        rank = by_layer.rank_first(span)
        size = by_layer.size[by_layer.ids]
        k = drop_count(size, percent)
        kept = np.flatnonzero((rank > k) & (rank <= size - k))
    else:
        kept = np.arange(n_all)
    at[kept] = np.arange(len(kept))
    s = _take_samples(s, kept)
    span = span[kept]
    if not len(kept):
        return {c: [] for c in LAYER_COLUMNS}
    us = trace.us_per_cycle
    g = Groups(s.layer)
    size = g.size
    # the first non-empty op of each layer's samples
    has_op = np.array([bool(o) for o in s.op_names] + [False], dtype=bool)[s.op]
    with_op = np.flatnonzero(has_op)
    by_op = Groups(g.ids[with_op])
    op = [""] * g.n
    for i, c in zip(
        by_op.first(g.ids[with_op]).tolist(), by_op.first(s.op[with_op]).tolist(), strict=True
    ):
        op[i] = s.op_names[c]
    busy = g.sum(s.busy) / size * us
    span_us = g.sum(span) / size * us
    units, pct = critical_units(*crit, at, g.ids, g.n, g.sum(span))
    frames = Groups(combine(g.ids, s.frame))
    per_layer_frames = np.bincount(frames.first(g.ids), minlength=g.n)
    net = g.max(s.net_macs)
    cols = {
        "layer": [s.names[i] for i in g.first(s.layer).tolist()],
        "op": op,
        "samples": size.tolist(),
        "busy_us": busy.tolist(),
        "span_us": span_us.tolist(),
        "wait_us": (span_us - busy).tolist(),
        "span_us_p50": (g.quantile(span, 0.5) * us).tolist(),
        "span_us_p99": (g.quantile(span, 0.99) * us).tolist(),
        "critical_unit": units,
        "critical_pct": pct.tolist(),
        **{
            f"{c}_us": (g.sum(s.classes[:, i]) / size * us).tolist()
            for i, c in enumerate(UNIT_CLASSES)
        },
        "macs": [int(v) if v >= 0 else NA for v in net.tolist()],
        "array_macs": np.round(g.sum(s.array_macs) / per_layer_frames).astype(np.int64).tolist(),
        "bytes": np.round(g.sum(s.bytes) / per_layer_frames).astype(np.int64).tolist(),
    }
    order = _topological(s, g)
    return {c: [cols[c][i] for i in order] for c in LAYER_COLUMNS}


def _topological(s: _Samples, g: Groups) -> list[int]:
    """`layers._topological`: layer groups in tasklist order (lowest core, then first
    task there in the earliest frame it appears in, then start)."""
    min_frame = g.min(s.frame)[g.ids]
    first = np.flatnonzero(s.frame == min_frame)
    ids = g.ids[first]
    min_core = np.full(g.n, np.iinfo(np.int64).max)
    np.minimum.at(min_core, ids, s.core[first])
    first = first[s.core[first] == min_core[ids]]
    ids = g.ids[first]
    f = Groups(ids)
    layers = f.first(ids)
    core, task, start = f.min(s.core[first]), f.min(s.first_task[first]), f.min(s.start[first])
    order = np.lexsort((start, task, core))
    return layers[order].tolist()


# ---- the summary line (`aipusim.profiler.reduce.frame_summary`) ---------------------------


def frame_summary(
    trace: LeanTrace, drop_percentile: float = 0.0, drop_by: str = "value"
) -> dict[str, float]:
    """Frames, warm-up frames, steady-state ``fps`` and the queued latency p50 and p99 (µs)
    of the steady frames, as `reduce.frame_summary` computes them."""
    dropped = drop_frames(trace, drop_percentile) if drop_by == "time" else trace
    percent = 0.0 if drop_by == "time" else drop_percentile
    b = dropped.tables[Tag.B]
    if dropped.rows(Tag.B):
        frame, inst, start, end = b["frame"], b["inst"], b["start"], b["end"]
    else:
        t = _tasks(dropped)
        rows = np.flatnonzero(t.frame >= 0)
        frame, start, end = t.frame[rows], t.start[rows], t.end[rows]
        by_frame = Groups(frame)
        frame, start, end = by_frame.first(frame), by_frame.min(start), by_frame.max(end)
        inst = np.full(len(frame), -1, dtype=np.int64)
    order = np.lexsort((frame, end))
    inst, start, end = inst[order], start[order], end[order]
    latency = end - start
    steady = np.zeros(len(end), dtype=bool)
    for i in np.unique(inst).tolist():
        rows = np.flatnonzero(inst == i)
        distinct = np.unique(end[rows])
        dense = np.searchsorted(distinct, end[rows]) + 1
        steady[rows] = (dense > WARMUP_STARTS) | (len(distinct) <= WARMUP_STARTS)
    if percent and len(end):
        k = int(drop_count(len(end), percent))
        ranked = np.lexsort((np.arange(len(end)), latency))
        rank = np.empty(len(end), dtype=np.int64)
        rank[ranked] = np.arange(1, len(end) + 1)
        keep = (rank > k) & (rank <= len(end) - k)
        inst, start, end, latency, steady = (x[keep] for x in (inst, start, end, latency, steady))
    if not len(end):
        return {"frames": 0, "warmup_frames": 0, "fps": 0.0, "p50_us": 0.0, "p99_us": 0.0}
    us = trace.us_per_cycle
    end_us, start_us, latency_us = end * us, start * us, latency * us
    ends = []
    per_end = 0
    for i in np.unique(inst).tolist():
        e = end_us[inst == i]
        ends.append(np.unique(np.round(e / us).astype(np.int64)))
        per_end = max(per_end, int(np.unique(e, return_counts=True)[1].max()))
    init_ends = [
        d["end"][d["frame"] < 0] for tag in (Tag.K, Tag.M) if len((d := trace.tables[tag])["end"])
    ]
    init_end = np.concatenate(init_ends) if init_ends else np.zeros(0, np.int64)
    origin = int(init_end.max()) if len(init_end) else round(start_us.min() / us)
    state = steady_state(ends, per_end, origin)
    lat = latency_us[steady]
    p50, p99 = (float(np.percentile(lat, q * 100.0)) if len(lat) else math.nan for q in (0.5, 0.99))
    return {
        "frames": len(end),
        "warmup_frames": state.warmup_frames,
        "fps": state.fps_per_cycle / us * 1e6,
        "p50_us": p50,
        "p99_us": p99,
    }


def cores_that_ran(trace: LeanTrace) -> list[int]:
    """The cores with events in the trace (`reduce.cores_that_ran`)."""
    ran: set[int] = set()
    for tag in (Tag.K, Tag.M, Tag.PB):
        ran.update(np.unique(trace.tables[tag]["core"]).tolist())
    return sorted(ran)


__all__ = ["NA", "LeanTrace", "cores_that_ran", "frame_summary", "layer_rows", "read_trace"]
