"""Export a trace as Chrome trace-event JSON (opens in Perfetto UI and chrome://tracing).

Layout: one process per core (``pid`` = core) with one thread per unit (``tid`` = a fixed
small number per unit name, named by metadata events) plus a ``layers`` thread carrying
each layer sample as a span; a ``frames`` process with one thread per instance; a
``counters`` process with power (W per component) and bandwidth (GB/s per pool) counters.
[K]/[M] tasks are ``"X"`` complete events; ``ts`` and ``dur`` are microseconds.

Event strings are built column-wise with Arrow string kernels, so millions of events are
written without a Python loop per event.

>>> import json, tempfile, pathlib
>>> from aipusim.profiler.synth import write_synthetic_trace
>>> from aipusim.profiler.trace import load_trace
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = write_synthetic_trace(d / "s.trace", frames=2, cores=2)
>>> _ = write_chrome_trace(load_trace(d / "s.trace"), d / "s.json")
>>> "traceEvents" in json.loads((d / "s.json").read_text())
True
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from aipusim.base.fileio import output_path
from aipusim.isa.trace_schema import POWER_TIME_COLUMNS, Tag
from aipusim.isa.units import UNITS
from aipusim.profiler.layers import layer_spans
from aipusim.profiler.reduce import bandwidth_table
from aipusim.profiler.trace import Trace

#: Thread ids of the known units, in the registry's display order (others get the next
#: free numbers).
UNIT_TIDS = {spec.unit.value: i for i, spec in enumerate(UNITS, start=1)}
LAYERS_TID = 0


def _json_strings(values: pd.Series) -> pa.Array:
    """Each value as a JSON string literal (quoted, escaped), via its categories."""
    cat = pd.Categorical(values.astype("category"))
    literals = pa.array([json.dumps(str(c)) for c in cat.categories], pa.string())
    codes = pa.array(cat.codes.astype(np.int32))
    return pa.DictionaryArray.from_arrays(codes, literals).dictionary_decode()


def _num(values: np.ndarray | pd.Series) -> pa.Array:
    return pc.cast(pa.array(np.asarray(values)), pa.string())


def _write_events(out: IO[str], pieces: list, first: list[bool]) -> None:
    """Write one event string per row (pieces: literal strings and Arrow arrays)."""
    lines = pc.binary_join_element_wise(*pieces, "")
    if len(lines) == 0:
        return
    text = ",\n".join(lines.to_pylist())
    out.write(text if first[0] else ",\n" + text)
    first[0] = False


def _meta(pid: int, tid: int | None, kind: str, name: str) -> str:
    event: dict[str, object] = {"name": kind, "ph": "M", "pid": pid, "args": {"name": name}}
    if tid is not None:
        event["tid"] = tid
    return json.dumps(event)


def write_chrome_trace(
    trace: Trace, path: str | Path, bandwidth_bins: int = 200, rows_per_batch: int = 1 << 18
) -> int:
    """Write the Chrome/Perfetto JSON of ``trace``; returns the number of events."""
    us = trace.us_per_cycle
    core_ids = set(range(trace.header.cores))
    for tag in (Tag.K, Tag.M, Tag.PB):
        core_ids |= {int(c) for c in trace[tag]["core"].unique()}
    # The frames and counters processes come after the highest core id.
    frames_pid, counters_pid = max(core_ids) + 1, max(core_ids) + 2
    tids = dict(UNIT_TIDS)
    units = set()
    for tag in (Tag.K, Tag.M):
        units |= {str(u) for u in trace[tag]["unit"].unique()}
    for u in sorted(units - set(tids)):
        tids[u] = max(tids.values()) + 1
    count = 0
    first = [True]
    with output_path(path) as tmp, open(tmp, "w", encoding="utf-8") as out:
        out.write('{"displayTimeUnit":"ns","traceEvents":[\n')
        meta = [
            _meta(frames_pid, None, "process_name", "frames"),
            _meta(counters_pid, None, "process_name", "counters"),
        ]
        for core in sorted(core_ids):
            meta.append(_meta(core, None, "process_name", f"core {core}"))
            meta.append(_meta(core, LAYERS_TID, "thread_name", "layers"))
            meta += [
                _meta(core, tid, "thread_name", unit) for unit, tid in tids.items() if unit in units
            ]
        out.write(",\n".join(meta))
        first[0] = False
        count += len(meta)
        for tag in (Tag.K, Tag.M):
            df = trace[tag]
            for lo in range(0, len(df), rows_per_batch):
                part = df.iloc[lo : lo + rows_per_batch]
                start = part["start"].to_numpy(np.int64)
                dur = (part["end"].to_numpy(np.int64) - start) * us
                unit = part["unit"].astype(str).map(tids).to_numpy(np.int64)
                if tag is Tag.K:
                    args = ['"tile":', _num(part["tile"]), ',"array_macs":', _num(part["macs"])]
                else:
                    args = [
                        '"src":',
                        _json_strings(part["src"]),
                        ',"dst":',
                        _json_strings(part["dst"]),
                        ',"bytes":',
                        _num(part["bytes"]),
                    ]
                pieces = [
                    '{"name":',
                    _json_strings(part["layer"]),
                    ',"cat":"',
                    tag.value,
                    '","ph":"X","ts":',
                    _num(start * us),
                    ',"dur":',
                    _num(dur),
                    ',"pid":',
                    _num(part["core"]),
                    ',"tid":',
                    _num(unit),
                    ',"args":{"frame":',
                    _num(part["frame"]),
                    ',"task":',
                    _num(part["task"]),
                    ",",
                    *args,
                    "}}",
                ]
                _write_events(out, pieces, first)
                count += len(part)
        samples = layer_spans(trace)
        if len(samples):
            start = samples["start"].to_numpy(np.int64)
            dur = (samples["end"].to_numpy(np.int64) - start) * us
            _write_events(
                out,
                [
                    '{"name":',
                    _json_strings(samples["layer"]),
                    ',"cat":"layer","ph":"X","ts":',
                    _num(start * us),
                    ',"dur":',
                    _num(dur),
                    ',"pid":',
                    _num(samples["core"]),
                    f',"tid":{LAYERS_TID},"args":{{"frame":',
                    _num(samples["frame"]),
                    "}}",
                ],
                first,
            )
            count += len(samples)
        b = trace[Tag.B]
        if len(b):
            start = b["start"].to_numpy(np.int64)
            dur = (b["end"].to_numpy(np.int64) - start) * us
            _write_events(
                out,
                [
                    '{"name":"frame ',
                    _num(b["frame"]),
                    '","cat":"frame","ph":"X","ts":',
                    _num(start * us),
                    ',"dur":',
                    _num(dur),
                    f',"pid":{frames_pid},"tid":',
                    _num(b["inst"]),
                    ',"args":{"frame":',
                    _num(b["frame"]),
                    "}}",
                ],
                first,
            )
            count += len(b)
        count += _write_counters(out, trace, counters_pid, bandwidth_bins, first)
        out.write("\n]}\n")
    return count


def _write_counters(out: IO[str], trace: Trace, pid: int, bins: int, first: list[bool]) -> int:
    """Power and bandwidth as "C" counter events (one series per column)."""
    count = 0
    series: list[tuple[str, pd.DataFrame]] = []
    if len(trace[Tag.M]):
        bw = bandwidth_table(trace, bins=bins)
        series.append(("bandwidth GB/s", bw.rename(columns={"t_start_us": "ts"})))
    if trace.power is not None and len(trace.power):
        p = trace.power.rename(columns={f"{POWER_TIME_COLUMNS[0]}_us": "ts"})
        keep = ["ts", *[c for c in p.columns if c.endswith("_w")]]
        series.append(("power W", p[keep]))
    for name, df in series:
        cols = [
            c
            for c in df.columns
            if c not in ("ts", "t_end_us", *POWER_TIME_COLUMNS) and not c.endswith("_us")
        ]
        if not cols:
            continue
        args: list = []
        for i, c in enumerate(cols):
            args += [
                ("" if i == 0 else ",") + json.dumps(c) + ":",
                _num(df[c].to_numpy(np.float64).round(6)),
            ]
        _write_events(
            out,
            [
                f'{{"name":{json.dumps(name)},"ph":"C","pid":{pid},"ts":',
                _num(df["ts"].to_numpy(np.float64)),
                ',"args":{',
                *args,
                "}}",
            ],
            first,
        )
        count += len(df)
    return count
