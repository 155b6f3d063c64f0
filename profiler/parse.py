"""Read trace v1 (text or Parquet) into one Arrow-backed pandas DataFrame per tag.

The text reader never holds the file as a Python list of lines. It reads byte chunks and
runs one pass over each (`aipusim.profiler.scan`, compiled or numpy): line ends, each line's
tag, and for lines laid out exactly as `format_line` writes them, the parsed integers and
the gathered strings, which become Arrow columns (strings dictionary-encoded) without a
Python object per value. Only the remaining lines (fields
reordered, extra fields, other spacing, non-ASCII, garbage) go through a per-line Python
fallback, which accepts any field order and extra fields and otherwise records the line as
malformed with its number.

Rules: line 1 is the header (`TraceHeader`); blank lines and ``#`` comment lines are
skipped; a line whose ``[TAG]`` is unknown is kept in the ``[?]`` table; any other line
that cannot be read is malformed (``strict=True`` raises `TraceFormatError` on the first
one). A last line without its newline is malformed too (`CUT_REASON`): the writer ends every
line, so the file was cut there, and the line may read as a valid event with a cut number
(``end=10`` of ``end=105``). Parquet rows are numbered from 1 in place of line numbers.

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "t.trace"
>>> _ = p.write_text("# aipusim-trace 1 freq_hz=1000000 cores=1 model=m levels=B\\n"
...                  "[B]  frame=0 inst=0 start=0 end=10\\n")
>>> parse_text(p).tables[Tag.B]["end_us"].tolist()
[10.0]
"""

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from aipusim.base.errors import TraceFormatError
from aipusim.isa.trace_schema import (
    COLUMNS,
    HEADER_PREFIX,
    LEVELS,
    OPTIONAL_COLUMNS,
    ColumnType,
    Tag,
    TraceHeader,
)
from aipusim.profiler.scan import NONCANONICAL, OTHER, Encoded, classify_lines

if TYPE_CHECKING:
    import pandas as pd

# pandas and pyarrow.compute are imported where they are used: the lean `aipusim profile`
# route (`aipusim.profiler.lean`) reads text traces with this module and never loads
# pandas, about half a second of every such process.

#: The ``reason`` of `ParsedTables.malformed` for the last line of a trace that ends
#: without a newline (left out: its writer stopped mid-line).
CUT_REASON = "the last line was cut short: the file ends mid-line"

#: Bytes read per chunk: large enough that the per-chunk Python and Arrow work is small
#: (the compiled scan makes it the larger part: 8 MiB read a 1M-line trace in about 0.1
#: CPU-s less than 2 MiB), small enough that a few chunks in flight stay a small share of
#: the memory. (The numpy scan alone was fastest at 2 MiB, its gathers then in the caches.)
CHUNK_BYTES = 1 << 23

#: Threads scanning chunks ahead of the one being turned into tables (at most the CPUs).
SCAN_THREADS = max(1, min(4, os.cpu_count() or 1))

#: Rows per Parquet batch.
PARQUET_BATCH_ROWS = 1 << 20

#: Time columns (cycles) that get a ``<name>_us`` twin.
TIME_COLUMNS = ("t", "start", "end")

_UNKNOWN_TAG = re.compile(r"^\[[^\]\s]*\]")
# 18 digits always fit int64; a longer number is malformed rather than an overflow error.
_INT_FIELD = r"-?\d{1,18}"
_BAD_LINE_PREVIEW = 120


@dataclass
class ParsedTables:
    """What a reader returns; `aipusim.profiler.trace.Trace` wraps it."""

    header: TraceHeader
    tables: dict[Tag, pd.DataFrame]
    unknown: pd.DataFrame  # columns: line, text
    malformed: pd.DataFrame  # columns: line, text, reason
    events: int  # event lines (or rows) read, known tags only


def _arrow_type(ctype: ColumnType) -> pa.DataType:
    return pa.int64() if ctype is ColumnType.INT else pa.dictionary(pa.int32(), pa.string())


def tag_schema(tag: Tag) -> pa.Schema:
    """Arrow schema of a tag's table as read (strings dictionary-encoded), before ``*_us``."""
    return pa.schema([(name, _arrow_type(ctype)) for name, ctype in COLUMNS[tag]])


_KNOWN = {tag.value: tag for tag in LEVELS}
_INT_RE = re.compile(rf"^{_INT_FIELD}$")


class _Collector:
    """Accumulates per-chunk Arrow tables per tag, then builds the DataFrames."""

    def __init__(self, header: TraceHeader, source: str, strict: bool) -> None:
        self.header = header
        self.source = source
        self.strict = strict
        self.parts: dict[Tag, list[pa.Table]] = {tag: [] for tag in LEVELS}
        self.unknown: list[tuple[int, str]] = []
        self.malformed: list[tuple[int, str, str]] = []
        self.pending: list[tuple[int, str, str]] = []
        self.events = 0

    def bad(self, line_no: int, text: str, reason: str) -> None:
        self.pending.append((line_no, text.rstrip("\r\n"), reason))

    def end_chunk(self) -> None:
        """Report a chunk's bad lines in file order; strict mode stops at the first."""
        self.pending.sort()
        if self.strict and self.pending:
            line_no, text, reason = self.pending[0]
            raise TraceFormatError(
                f"{self.source}: line {line_no}: {reason}: {text[:_BAD_LINE_PREVIEW]!r}"
            )
        self.malformed += self.pending
        self.pending = []

    def add(self, tag: Tag, table: pa.Table) -> None:
        if table.num_rows:
            self.parts[tag].append(table)
            self.events += table.num_rows

    def arrow_parts(self, tag: Tag) -> list[pa.Table]:
        """The tag's events as Arrow tables, one per chunk read; the collector lets go."""
        return self.parts.pop(tag)

    def finish(self) -> ParsedTables:
        import pandas as pd

        us_per_cycle = 1e6 / self.header.freq_hz
        tables = {}
        for tag in LEVELS:
            # Pop each tag's chunks as it is converted, so only one tag is held twice.
            tables[tag] = _to_pandas(_concat(self.arrow_parts(tag), tag_schema(tag)), us_per_cycle)
        unknown = pd.DataFrame(
            {
                "line": pd.array([n for n, _ in self.unknown], dtype="int64[pyarrow]"),
                "text": pd.array([t for _, t in self.unknown], dtype="string[pyarrow]"),
            }
        )
        malformed = pd.DataFrame(
            {
                "line": pd.array([m[0] for m in self.malformed], dtype="int64[pyarrow]"),
                "text": pd.array([m[1] for m in self.malformed], dtype="string[pyarrow]"),
                "reason": pd.array([m[2] for m in self.malformed], dtype="string[pyarrow]"),
            }
        )
        return ParsedTables(self.header, tables, unknown, malformed, self.events)


def _concat(parts: list[pa.Table], schema: pa.Schema) -> pa.Table:
    if not parts:
        return schema.empty_table()
    table = pa.concat_tables(parts)
    # Numbers become one contiguous array each (the reductions read them as numpy);
    # dictionary columns stay chunked: pandas merges their per-chunk dictionaries into
    # one set of categories while converting, cheaper than unifying them here.
    columns = [
        col.combine_chunks() if not pa.types.is_dictionary(col.type) else col
        for col in table.columns
    ]
    return pa.Table.from_arrays(columns, schema=table.schema)


def _types_mapper(dtype: pa.DataType) -> pd.ArrowDtype | None:
    import pandas as pd

    if pa.types.is_integer(dtype) or pa.types.is_floating(dtype):
        return pd.ArrowDtype(dtype)
    return None  # dictionaries become pandas Categorical


def _to_pandas(table: pa.Table, us_per_cycle: float) -> pd.DataFrame:
    import pyarrow.compute as pc

    for name in TIME_COLUMNS:
        if name in table.column_names:
            us = pc.multiply(pc.cast(table[name], pa.float64()), us_per_cycle)
            table = table.append_column(f"{name}_us", us)
    return table.to_pandas(types_mapper=_types_mapper, self_destruct=True)


def int64_array(values: np.ndarray) -> pa.Array:
    """An Arrow int64 array over ``values`` without a copy. ``pa.array`` of a numpy array
    would ask pyarrow's pandas shim whether it is a Series, which imports pandas."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def int32_array(values: np.ndarray) -> pa.Array:
    """An Arrow int32 array over ``values`` without a copy (see `int64_array`)."""
    values = np.ascontiguousarray(values, dtype=np.int32)
    return pa.Array.from_buffers(pa.int32(), len(values), [None, pa.py_buffer(values)])


def _words(offsets: np.ndarray, chars: np.ndarray) -> pa.Array:
    """An Arrow string array of the scan's buffers. The scan admits printable ASCII only,
    so the bytes are valid UTF-8."""
    return pa.StringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets), pa.py_buffer(chars))


def _string_array(values: list[str]) -> pa.Array:
    """An Arrow string array of ``values`` (`int64_array` says why not ``pa.array``)."""
    data = [v.encode() for v in values]
    offsets = np.zeros(len(data) + 1, dtype=np.int32)
    np.cumsum([len(d) for d in data], out=offsets[1:])
    return pa.StringArray.from_buffers(
        len(data), pa.py_buffer(offsets), pa.py_buffer(b"".join(data))
    )


def _encoded_strings(values: list[str]) -> pa.DictionaryArray:
    """``values`` dictionary-encoded in order of first appearance, as ``dictionary_encode``
    gives them, without an Arrow compute kernel (importing pyarrow.compute costs about
    0.15 CPU-s of every process)."""
    index: dict[str, int] = {}
    codes = np.array([index.setdefault(v, len(index)) for v in values], dtype=np.int32)
    return pa.DictionaryArray.from_arrays(int32_array(codes), _string_array(list(index)))


def _fallback_row(tag: Tag, text: str) -> tuple[dict[str, object] | None, str]:
    """Per-line parse accepting any field order and extra fields; (row, reason)."""
    fields: dict[str, str] = {}
    for token in text.split()[1:]:
        key, sep, value = token.partition("=")
        if not sep:
            return None, f"field {token!r} must be key=value"
        fields[key] = value
    row: dict[str, object] = {}
    optional = OPTIONAL_COLUMNS.get(tag, {})
    for name, ctype in COLUMNS[tag]:
        if name not in fields and name in optional:
            row[name] = optional[name]
            continue
        if name not in fields:
            return None, f"[{tag.value}] line must have {name}=..."
        value = fields[name]
        if ctype is ColumnType.INT:
            if not _INT_RE.match(value):
                return None, f"{name} must be an integer, not {value!r}"
            row[name] = int(value)
        else:
            row[name] = value
    return row, ""


def _rows_table(tag: Tag, rows: list[dict[str, object]]) -> pa.Table:
    arrays = []
    for name, ctype in COLUMNS[tag]:
        values = [r[name] for r in rows]
        arrays.append(
            int64_array(np.array(values, dtype=np.int64))
            if ctype is ColumnType.INT
            else _encoded_strings(values)
        )
    return pa.Table.from_arrays(arrays, schema=tag_schema(tag))


class _Lines:
    """One chunk: its bytes and what the vectorised scan found in them."""

    def __init__(self, buf: bytes | memoryview) -> None:
        self.buf = buf
        self.scan = classify_lines(buf)
        self.ends = self.scan.ends
        self.starts = np.empty_like(self.ends)
        if len(self.ends):
            self.starts[0] = 0
            self.starts[1:] = self.ends[:-1] + 1

    def text(self, i: int) -> str:
        return bytes(self.buf[self.starts[i] : self.ends[i]]).decode("utf-8", errors="replace")

    def table(self, tag: Tag) -> pa.Table:
        """The canonical lines of ``tag`` as a typed table."""
        arrays = []
        for (_, ctype), values in zip(COLUMNS[tag], self.scan.columns[tag], strict=True):
            if ctype is ColumnType.INT:
                arrays.append(int64_array(values))
            elif isinstance(values, Encoded):
                # already encoded by the compiled scan: no Arrow compute kernel (importing
                # pyarrow.compute costs about 0.15 CPU-s of every process)
                arrays.append(
                    pa.DictionaryArray.from_arrays(
                        int32_array(values.codes), _words(values.offsets, values.chars)
                    )
                )
            else:
                offsets, chars = values
                arrays.append(_words(offsets, chars).dictionary_encode())
        return pa.Table.from_arrays(arrays, schema=tag_schema(tag))


def _parse_chunk(col: _Collector, lines: _Lines, first_line_no: int) -> None:
    kinds = lines.scan.kinds
    slow: list[tuple[int, Tag]] = []
    for t, tag in enumerate(LEVELS):
        slow += [(int(i), tag) for i in np.flatnonzero(kinds == NONCANONICAL + t)]
        if tag in lines.scan.columns:
            col.add(tag, lines.table(tag))
    # Lines that are not events of a known tag: skip, keep as [?], or report.
    for i in np.flatnonzero(kinds == OTHER):
        text = lines.text(int(i))
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if _UNKNOWN_TAG.match(stripped):
            col.unknown.append((first_line_no + int(i), text.rstrip("\r")))
        else:
            col.bad(first_line_no + int(i), text, "line must start with a [TAG] such as [K]")
    rows: dict[Tag, list[dict[str, object]]] = {}
    for i, tag in slow:
        text = lines.text(i)
        row, reason = _fallback_row(tag, text)
        if row is None:
            col.bad(first_line_no + i, text, reason)
        else:
            rows.setdefault(tag, []).append(row)
    for tag, tag_rows in rows.items():
        col.add(tag, _rows_table(tag, tag_rows))
    col.end_chunk()


def _chunks(fh, first: bytes) -> Iterator[bytes | memoryview]:
    """Yield buffers of whole lines, each ending in a newline; a last line without one (the
    file was cut mid-line) comes alone as the final buffer, without a newline."""
    carry = first
    while True:
        data = fh.read(CHUNK_BYTES)
        buf = carry + data if carry else data
        cut = buf.rfind(b"\n") + 1
        if not data:
            if cut:
                yield memoryview(buf)[:cut]
            if buf[cut:]:
                yield buf[cut:]
            return
        if cut == 0:
            carry = buf
            continue
        carry = buf[cut:]
        yield memoryview(buf)[:cut]  # a view: no copy of the chunk


def _cut_line(col: _Collector, buf: bytes, line_no: int) -> None:
    """Record the last line of a file that ends without a newline: its writer stopped
    mid-line, so even a line that parses may hold a cut number (``end=10`` of ``end=105``)."""
    text = buf.decode("utf-8", "replace")
    if text.strip() and not text.strip().startswith("#"):
        col.bad(line_no, text, CUT_REASON)
        col.end_chunk()


def _read_header(fh, source: str) -> tuple[TraceHeader, bytes]:
    head = fh.read(min(CHUNK_BYTES, 1 << 16))
    if not head:
        raise TraceFormatError(f"{source}: trace is empty; line 1 must be {HEADER_PREFIX!r} ...")
    nl = head.find(b"\n")
    while nl < 0:
        more = fh.read(1 << 16)
        if not more:
            nl = len(head)
            break
        head += more
        nl = head.find(b"\n")
        if nl < 0 and len(head) > (1 << 20):
            raise TraceFormatError(f"{source}: line 1 (the header) must be under 1 MiB")
    try:
        line = head[:nl].decode("utf-8").rstrip("\r")
    except UnicodeDecodeError:
        raise TraceFormatError(
            f"{source}: line 1 must be a UTF-8 {HEADER_PREFIX!r} header, not binary data"
        ) from None
    return TraceHeader.parse(line, source), head[nl + 1 :]


class _NoBar:
    """What `parse_text` updates when no progress is shown."""

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int) -> None:
        return None


def _progress_bar(total: int | None) -> object:
    # lazy: tqdm (and the importlib.metadata it loads) costs every profile process that
    # shows no bar, which is any whose stderr is not a terminal
    from tqdm import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, desc="parse", leave=False)


def parse_text(path: str | Path, strict: bool = False, progress: bool = False) -> ParsedTables:
    """Parse a text trace (``.gz``/``.zst``/``.bz2`` are decompressed by suffix);
    ``progress`` shows a tqdm bar of the bytes read on stderr."""
    return read_text(path, strict, progress).finish()


def read_text(path: str | Path, strict: bool = False, progress: bool = False) -> _Collector:
    """`parse_text` up to its Arrow tables: the collector holding every tag's chunks, its
    unknown and malformed lines (no pandas)."""
    source = str(path)
    sized = Path(source).is_file() and Path(source).suffix not in (".gz", ".bz2", ".zst", ".lz4")
    bar = _progress_bar(Path(source).stat().st_size if sized else None) if progress else _NoBar()
    try:
        fh = pa.input_stream(source, compression="detect")
    except (FileNotFoundError, OSError) as exc:
        raise TraceFormatError(f"{source}: trace cannot be opened: {exc}") from None
    # The scans of the next chunks run on other threads (numpy releases the GIL in its
    # array operations) while this one turns the scanned chunks into tables in file order.
    with fh, bar, ThreadPoolExecutor(SCAN_THREADS) as pool:
        header, rest = _read_header(fh, source)
        col = _Collector(header, source, strict)
        line_no = 2
        scanning: deque[tuple[Future[_Lines], int]] = deque()

        def take_one() -> None:
            nonlocal line_no
            future, size = scanning.popleft()
            lines = future.result()
            _parse_chunk(col, lines, line_no)
            line_no += len(lines.ends)
            bar.update(size)

        for buf in _chunks(fh, rest):
            if buf[-1:] != b"\n":
                while scanning:
                    take_one()
                _cut_line(col, bytes(buf), line_no)
                bar.update(len(buf))
                break
            scanning.append((pool.submit(_Lines, buf), len(buf)))
            if len(scanning) > SCAN_THREADS:
                take_one()
        while scanning:
            take_one()
    return col


def _row_text(batch: pa.RecordBatch, i: int) -> str:
    row = batch.slice(i, 1).to_pylist()[0]
    tag = row.pop("tag", None)
    fields = " ".join(f"{k}={v}" for k, v in row.items() if v is not None)
    return f"[{tag}] {fields}"


def _fill_optional(tag: Tag, rows: pa.RecordBatch) -> pa.RecordBatch:
    """``rows`` with the tag's optional columns present and their nulls filled in."""
    import pyarrow.compute as pc

    for name, default in OPTIONAL_COLUMNS.get(tag, {}).items():
        fill = pa.scalar(default, pa.int64())
        if name in rows.schema.names:
            i = rows.schema.get_field_index(name)
            column = pc.fill_null(pc.cast(rows.column(i), pa.int64()), fill)
            rows = rows.set_column(i, name, column)
        else:
            rows = rows.append_column(name, pa.array([default] * rows.num_rows, pa.int64()))
    return rows


_PARQUET_MAGIC = b"PAR1"


def is_parquet(path: Path) -> bool:
    """A Parquet trace, by suffix or by its first bytes (else it is read as text)."""
    if path.suffix == ".parquet":
        return True
    try:
        with path.open("rb") as fh:
            return fh.read(4) == _PARQUET_MAGIC
    except OSError:
        return False


def parse_parquet(path: str | Path, strict: bool = False) -> ParsedTables:
    """Parse the Parquet form: a ``tag`` column plus the union of the tags' columns."""
    # lazy: pyarrow.parquet (with the cloud file systems it loads) only for Parquet traces
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    source = str(path)
    try:
        pf = pq.ParquetFile(source)
    except (OSError, pa.ArrowInvalid) as exc:
        raise TraceFormatError(f"{source}: Parquet trace cannot be read: {exc}") from None
    meta = {k.decode(): v.decode() for k, v in (pf.schema_arrow.metadata or {}).items()}
    header = TraceHeader.from_metadata(meta, source)
    if "tag" not in pf.schema_arrow.names:
        raise TraceFormatError(f"{source}: Parquet trace must have a 'tag' column")
    col = _Collector(header, source, strict)
    row0 = 1
    for batch in pf.iter_batches(batch_size=PARQUET_BATCH_ROWS):
        tag_col = pc.cast(batch.column("tag"), pa.string())
        known_mask = pc.fill_null(pc.is_in(tag_col, value_set=pa.array(list(_KNOWN))), False)
        for i in pc.indices_nonzero(pc.invert(known_mask)).to_numpy():
            col.unknown.append((row0 + int(i), _row_text(batch, int(i))))
        for tag_text, tag in _KNOWN.items():
            mask = pc.fill_null(pc.equal(tag_col, tag_text), False)
            idx = pc.indices_nonzero(mask).to_numpy()
            if len(idx) == 0:
                continue
            sub = _fill_optional(tag, batch.filter(mask))
            missing = [n for n, _ in COLUMNS[tag] if n not in sub.schema.names]
            if missing:
                for j, i in enumerate(idx):
                    col.bad(row0 + int(i), _row_text(sub, j), f"column {missing[0]} is missing")
                continue
            valid = pa.array(np.ones(len(idx), dtype=bool))
            for name, _ in COLUMNS[tag]:
                valid = pc.and_(valid, pc.is_valid(sub.column(name)))
            if not pc.all(valid).as_py():
                for j in pc.indices_nonzero(pc.invert(valid)).to_numpy():
                    nulls = [n for n, _ in COLUMNS[tag] if not sub.column(n)[int(j)].is_valid]
                    col.bad(row0 + int(idx[j]), _row_text(sub, int(j)), f"{nulls[0]} is null")
                sub = sub.filter(valid)
            arrays = []
            for name, ctype in COLUMNS[tag]:
                values = sub.column(name)
                if ctype is ColumnType.INT:
                    arrays.append(pc.cast(values, pa.int64()))
                else:
                    if pa.types.is_dictionary(values.type):
                        values = values.dictionary_decode()
                    arrays.append(pc.cast(values, pa.string()).dictionary_encode())
            col.add(tag, pa.Table.from_arrays(arrays, schema=tag_schema(tag)))
        col.end_chunk()
        row0 += batch.num_rows
    return col.finish()
