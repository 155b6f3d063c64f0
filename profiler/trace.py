"""The `Trace` object and `load_trace`, which picks the text or Parquet reader.

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "run.trace"
>>> _ = p.write_text("# aipusim-trace 1 freq_hz=800000000 cores=4 model=m levels=K\\n"
...                  "[K]  core=0 unit=mvm frame=0 layer=c1 task=1 tile=0 start=0 end=800 "
...                  "macs=64\\n[X] hello\\n")
>>> tr = load_trace(p)
>>> len(tr[Tag.K]), tr.unknown_count, tr[Tag.K]["end_us"].iloc[0]
(1, 1, 1.0)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa

from aipusim.base.errors import InvalidArgument, TraceFormatError
from aipusim.base.fileio import output_path
from aipusim.isa.trace_schema import (
    LEVELS,
    POWER_BIN_KEY,
    POWER_PEAK_KEY,
    POWER_STEADY_KEY,
    POWER_TIME_COLUMNS,
    POWER_TIMELINE_SUFFIX,
    ColumnType,
    Tag,
    TraceHeader,
    union_columns,
)
from aipusim.profiler.consistency import drop_inconsistent
from aipusim.profiler.parse import is_parquet, parse_parquet, parse_text

_COMPRESSION_SUFFIXES = (".gz", ".bz2", ".zst", ".lz4")


@dataclass
class Trace:
    """A parsed trace: header, one DataFrame per tag, the lines that were not events.

    ``tables[tag]`` has the tag's columns of `aipusim.isa.trace_schema.COLUMNS` (integers
    as ``int64[pyarrow]``, strings as categoricals) plus ``t_us``/``start_us``/``end_us``
    (``double[pyarrow]``) converted with ``header.freq_hz``. Every tag has a table, empty
    when the trace holds none of its events. ``unknown`` (line, text) keeps ``[?]`` lines;
    ``malformed`` (line, text, reason) lists the lines that could not be read. ``power`` is
    the simulator's power timeline (``<stem>.power.parquet``) when it was found, with
    ``t_start_us``/``t_end_us`` added.
    """

    header: TraceHeader
    tables: dict[Tag, pd.DataFrame]
    unknown: pd.DataFrame
    malformed: pd.DataFrame
    events: int
    source: str = ""
    power: pd.DataFrame | None = None
    #: Events left out because they contradict the trace, per reason
    #: (`aipusim.profiler.consistency`).
    inconsistent: dict[str, int] = field(default_factory=dict)

    def __getitem__(self, tag: Tag | str) -> pd.DataFrame:
        return self.tables[Tag(tag)]

    @property
    def unknown_count(self) -> int:
        return len(self.unknown)

    @property
    def malformed_count(self) -> int:
        return len(self.malformed)

    @property
    def cut_line(self) -> int | None:
        """The number of the last line when the file ends mid-line (that line is left out
        and listed in ``malformed``): a trace whose writer stopped early. None otherwise."""
        from aipusim.profiler.parse import CUT_REASON

        cut = self.malformed[self.malformed["reason"] == CUT_REASON]
        return int(cut["line"].iloc[-1]) if len(cut) else None

    @property
    def us_per_cycle(self) -> float:
        return 1e6 / self.header.freq_hz

    def to_parquet(self, path: str | Path) -> None:
        """Write the events in the Parquet form of trace v1 (``[?]`` lines are not events
        and are left out); `load_trace` reads it back to equal tables."""
        cols = union_columns()
        parts = []
        for tag in LEVELS:
            df = self.tables[tag]
            arrays = {"tag": pa.array([tag.value] * len(df), pa.string())}
            for name, ctype in cols.items():
                if name in df.columns:
                    values = df[name]
                    arrays[name] = (
                        pa.array(values.to_numpy(dtype="int64"), pa.int64())
                        if ctype is ColumnType.INT
                        else pa.array(values.astype(str).to_numpy(dtype=object), pa.string())
                    )
                else:
                    arrays[name] = pa.nulls(len(df), _union_type(ctype))
            parts.append(pa.table(arrays))
        table = pa.concat_tables(parts).replace_schema_metadata(self.header.metadata())
        # lazy: pyarrow.parquet is for Parquet files only (see `parse.parse_parquet`)
        import pyarrow.parquet as pq

        with output_path(path) as tmp:
            pq.write_table(table, str(tmp))


def _union_type(ctype: ColumnType) -> pa.DataType:
    return pa.int64() if ctype is ColumnType.INT else pa.string()


def power_timeline_path(path: str | Path) -> Path:
    """Where the simulator puts the power timeline of trace ``path``: its name without the
    last suffix plus ``.power.parquet`` (``run.trace`` -> ``run.power.parquet``), beside
    it; a compression suffix is dropped first (``run.trace.gz`` -> the same)."""
    p = Path(path)
    name = p.name
    if p.suffix in _COMPRESSION_SUFFIXES:
        name = name.removesuffix(p.suffix)
    return p.with_name(name.removesuffix(Path(name).suffix) + POWER_TIMELINE_SUFFIX)


def load_power_timeline(path: str | Path, freq_hz: int) -> pd.DataFrame:
    """The power timeline as a DataFrame with ``t_start_us``/``t_end_us`` added; its bin
    (µs), the run's peak power by window and its steady-state average power, when the
    file records them, are in ``attrs["bin_us"]``, ``attrs["peak_power_w"]`` and
    ``attrs["steady_avg_power_w"]``."""
    # lazy: pyarrow.parquet is for Parquet files only (see `parse.parse_parquet`)
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(str(path))
        df = table.to_pandas()
    except (OSError, pa.ArrowInvalid) as exc:
        raise TraceFormatError(f"{path}: power timeline cannot be read: {exc}") from None
    meta = table.schema.metadata or {}
    try:
        if POWER_BIN_KEY.encode() in meta:
            df.attrs["bin_us"] = float(meta[POWER_BIN_KEY.encode()])
        if POWER_PEAK_KEY.encode() in meta:
            df.attrs["peak_power_w"] = {
                str(k): float(v) for k, v in json.loads(meta[POWER_PEAK_KEY.encode()]).items()
            }
        if POWER_STEADY_KEY.encode() in meta:
            df.attrs["steady_avg_power_w"] = float(meta[POWER_STEADY_KEY.encode()])
    except (ValueError, AttributeError) as exc:
        raise TraceFormatError(f"{path}: power timeline metadata is malformed: {exc}") from None
    missing = [c for c in POWER_TIME_COLUMNS if c not in df.columns]
    if missing:
        raise TraceFormatError(f"{path}: power timeline must have column {missing[0]!r}")
    for name in POWER_TIME_COLUMNS:
        df[f"{name}_us"] = df[name].astype("float64") * (1e6 / freq_hz)
    return df


def load_trace(path: str | Path, strict: bool = False, progress: bool = False) -> Trace:
    """Read a trace file (text, optionally compressed, or Parquet by content/suffix).

    ``strict=True`` raises `TraceFormatError` on the first malformed line (with its
    number) or the first event that contradicts the trace (a core beyond the header's
    count, a negative time, a frame no ``[B]`` event has) instead of counting it; without
    it such events are left out and counted in ``inconsistent``. The power timeline
    beside the trace is loaded too.
    ``progress`` shows a progress bar on stderr while a text trace is read.
    """
    if not isinstance(path, str | os.PathLike):
        raise InvalidArgument(
            f"path must be a trace file path (str or os.PathLike), not {type(path).__name__}"
        )
    p = Path(path)
    if not p.is_file():
        raise TraceFormatError(f"trace {str(p)!r} must be an existing file")
    parsed = parse_parquet(p, strict) if is_parquet(p) else parse_text(p, strict, progress)
    power_path = power_timeline_path(p)
    power = (
        load_power_timeline(power_path, parsed.header.freq_hz)
        if power_path.is_file() and power_path != p
        else None
    )
    tables, dropped = drop_inconsistent(parsed.header, parsed.tables, str(p), strict)
    return Trace(
        header=parsed.header,
        tables=tables,
        unknown=parsed.unknown,
        malformed=parsed.malformed,
        events=parsed.events - sum(dropped.values()),
        source=str(p),
        power=power,
        inconsistent=dropped,
    )


__all__ = ["Trace", "load_power_timeline", "load_trace", "power_timeline_path"]
