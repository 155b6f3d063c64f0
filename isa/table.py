"""Columnar tasks: a whole tasklist body as numpy columns, for bulk encode, decode and counts.

Every record has the same size (`RECORD_BYTES`), so a numpy structured dtype per record
layout views a whole body at once. Decoding is then column extraction and encoding is
filling one structured array, with no Python object per task; this is the path for work
over all tasks of a file (validation, statistics) at millions of tasks per second. The
bytes are exactly those of `aipusim.isa.encoding` (same format, same checks, same
`TasklistError` messages: the first bad row is explained by `explain_record`).

A `TaskTable` has one column per common field (named as in `COMMON_FIELDS`:
``opcode``, ``unit``, ``phase``, ``frame_slot``, ``tile``, ``layer``, ``waits.count``,
``waits[0].scope``, ...) and one per kind-specific field over the union of all kinds
(``src_addr``, ``vectors``, ...; zero in rows whose kind lacks the field). Enum fields and
``unit``/``phase`` hold the member's position in its enum (for a field name shared by two
kinds with different enums, such as ``kind``, the row's opcode says which enum), ``layer``
holds an index into ``strings``.

>>> from aipusim.isa.tasks import Barrier, TokenSignal, TokenRef, TokenScope, Unit
>>> tasks = [Barrier(unit=Unit.CTRL, layer="sync", barrier_id=7, core_mask=0b1111),
...          TokenSignal(unit=Unit.DMA0, layer="x", signals=(TokenRef(TokenScope.LOCAL, 3),))]
>>> table = TaskTable.from_tasks(tasks)
>>> table["opcode"].tolist(), table["barrier_id"].tolist(), table.strings
([8, 7], [7, 0], ['sync', 'x'])
>>> encode_table(table) == encode_tasks(tasks)
True
>>> decode_table(encode_table(table), 2, table.strings).to_tasks() == tasks
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aipusim.base.errors import TasklistError
from aipusim.isa.encoding import (
    COMMON_FIELDS,
    LAYOUTS,
    RECORD_BYTES,
    FieldLayout,
    decode_tasks,
    encode_tasks,
    explain_record,
)
from aipusim.isa.tasks import KINDS, MAX_TOKEN_REFS, Phase, Task, Unit

_NUMPY_CODE = {"B": "u1", "H": "<u2", "I": "<u4", "Q": "<u8"}
_OPCODES = 256  # opcode is a u8


def _record_dtype(fields: Sequence[FieldLayout]) -> np.dtype:
    return np.dtype(
        {
            "names": [f.name for f in fields],
            "formats": [_NUMPY_CODE[f.code] for f in fields],
            "offsets": [f.offset for f in fields],
            "itemsize": RECORD_BYTES,
        }
    )


#: The common part of a record (the kind part and padding are skipped).
COMMON_DTYPE: np.dtype = _record_dtype(COMMON_FIELDS)
#: The full record of each kind, by opcode.
KIND_DTYPES: dict[int, np.dtype] = {
    op: _record_dtype(lay.all_fields) for op, lay in LAYOUTS.items()
}


def _column_dtypes() -> dict[str, np.dtype]:
    out = {f.name: np.dtype(_NUMPY_CODE[f.code]) for f in COMMON_FIELDS}
    for lay in LAYOUTS.values():
        for f in lay.fields:
            dt = np.dtype(_NUMPY_CODE[f.code])
            out[f.name] = max(out.get(f.name, dt), dt, key=lambda d: d.itemsize)
    return out


#: Every column of a `TaskTable` and its dtype (a kind field takes its widest declaration).
COLUMN_DTYPES: dict[str, np.dtype] = _column_dtypes()
_COMMON_NAMES = frozenset(f.name for f in COMMON_FIELDS)
_KIND_COLUMNS = tuple(n for n in COLUMN_DTYPES if n not in _COMMON_NAMES)
_FIELD_NAMES = {op: {f.name for f in lay.fields} for op, lay in LAYOUTS.items()}
#: Kind column -> bool per opcode: does that kind have the field?
_HAS_FIELD = {
    name: np.array([op in LAYOUTS and name in _FIELD_NAMES[op] for op in range(_OPCODES)])
    for name in _KIND_COLUMNS
}


def _unit_table() -> np.ndarray:
    ok = np.zeros((_OPCODES, _OPCODES), dtype=bool)  # [opcode, unit]; unknown opcodes: none
    for op, kind in KINDS.items():
        for i, unit in enumerate(Unit):
            ok[op, i] = unit in kind.UNITS
    return ok


_UNIT_OK = _unit_table()
#: Common fields whose stored width admits values beyond their range (phase, scopes).
_COMMON_CHECKS = tuple(
    (f.name, f.max_value)
    for f in COMMON_FIELDS
    if f.name not in ("opcode", "unit", "layer")
    and not f.name.endswith(".count")
    and f.needs_range_check
)
#: Kind fields whose stored width admits values beyond their range (enums, odd widths).
_KIND_CHECKS = {
    op: tuple((f.name, f.max_value) for f in lay.fields if f.needs_range_check)
    for op, lay in LAYOUTS.items()
}
_SIDES = ("waits", "signals")


def _pad_masks() -> tuple[tuple[int, np.ndarray], ...]:
    """The 8-byte words of a record that hold padding of some kind, each with a mask per
    opcode of which of its bytes are padding (so padding is checked a word at a time)."""
    assert RECORD_BYTES % 8 == 0
    masks = np.zeros((_OPCODES, RECORD_BYTES), dtype=np.uint8)
    for op, lay in LAYOUTS.items():
        masks[op, RECORD_BYTES - lay.pad_bytes :] = 0xFF
    words = masks.view("<u8")
    return tuple(
        (int(w), np.ascontiguousarray(words[:, w])) for w in np.flatnonzero(words.any(axis=0))
    )


_PAD_WORDS = _pad_masks()


def _read_masks() -> np.ndarray:
    """Per opcode, the 8-byte words of a record with the bytes `_rows_rejected` reads set
    (every byte but those of the fields no rule checks: tile, frame slot, addresses,
    sizes...), so records that agree on them get the same verdict."""
    keep = np.full((_OPCODES, RECORD_BYTES), 0xFF, dtype=np.uint8)
    ruled = {"opcode", "unit", "layer", *(name for name, _ in _COMMON_CHECKS)}
    for name in COMMON_DTYPE.names:
        if name not in ruled and not name.startswith(_SIDES):
            dt, at = COMMON_DTYPE.fields[name][:2]
            keep[:, at : at + dt.itemsize] = 0
    for op, lay in LAYOUTS.items():
        checked = {name for name, _ in _KIND_CHECKS[op]}
        for f in lay.fields:
            if f.name not in checked:
                dt, at = KIND_DTYPES[op].fields[f.name][:2]
                keep[op, at : at + dt.itemsize] = 0
    return keep.view("<u8")


_READ_MASKS = _read_masks()
#: Odd 64-bit multipliers, one per record word, to hash a record's read bytes.
_WORD_MIX = np.random.default_rng(0x7A5C).integers(
    1, 2**63, size=RECORD_BYTES // 8, dtype=np.uint64
) | np.uint64(1)


def _bad_rows(data: Any, offset: int, n: int, n_strings: int) -> np.ndarray:
    """Bool per record: would the object decoder reject it? (Same rules as `explain_record`.)

    A tasklist repeats a few distinct records at other addresses, tiles and sizes, which
    no rule reads: records are grouped by the bytes the rules read (hashed, then checked
    exactly) and the rules run once per group."""
    words = np.frombuffer(data, "<u8", n * (RECORD_BYTES // 8), offset)
    words = words.reshape(n, RECORD_BYTES // 8)
    read = words & _READ_MASKS[words[:, 0] & np.uint64(0xFF)]
    _, first, inverse = np.unique(read @ _WORD_MIX, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if len(first) * 4 > n or not np.array_equal(read, read[first[inverse]]):
        return _rows_rejected(data, offset, n, n_strings)
    return _rows_rejected(read[first].tobytes(), 0, len(first), n_strings)[inverse]


def _rows_rejected(data: Any, offset: int, n: int, n_strings: int) -> np.ndarray:
    """`_bad_rows` record by record."""
    common = np.frombuffer(data, COMMON_DTYPE, n, offset)
    op = common["opcode"]
    bad = ~_UNIT_OK[op, common["unit"]]
    bad |= common["layer"] >= n_strings
    for name, top in _COMMON_CHECKS:
        bad |= common[name] > top
    for side in _SIDES:
        used = common[f"{side}.count"]
        bad |= used > MAX_TOKEN_REFS
        for slot in range(MAX_TOKEN_REFS):
            ref = f"{side}[{slot}]"
            filled = (common[f"{ref}.scope"] != 0) | (common[f"{ref}.index"] != 0)
            filled |= common[f"{ref}.count"] != 0
            bad |= (used <= slot) & filled
    present = np.flatnonzero(np.bincount(op, minlength=_OPCODES))
    for code in present:
        checks = _KIND_CHECKS.get(int(code))
        if checks:
            view = np.frombuffer(data, KIND_DTYPES[int(code)], n, offset)
            is_kind = op == code
            for name, top in checks:
                bad |= is_kind & (view[name] > top)
    words = np.frombuffer(data, "<u8", n * (RECORD_BYTES // 8), offset)
    words = words.reshape(n, RECORD_BYTES // 8)
    for w, mask in _PAD_WORDS:
        bad |= (words[:, w] & mask.take(op)) != 0
    return bad


@dataclass(frozen=True, eq=False)
class TaskTable:
    """Tasks as columns (see the module docstring); ``strings`` are the layer names.

    Build one with `TaskTable.from_tasks`, `decode_table` or from columns (every name of
    `COLUMN_DTYPES`, equal lengths, non-negative integers that fit the column's dtype).
    Values are checked against the record format only by `encode_table`.
    """

    columns: Mapping[str, np.ndarray]
    strings: list[str]

    def __post_init__(self) -> None:
        names = set(self.columns)
        if names != set(COLUMN_DTYPES):
            missing = sorted(set(COLUMN_DTYPES) - names)
            extra = sorted(names - set(COLUMN_DTYPES))
            raise TasklistError(
                f"TaskTable columns must be exactly those of COLUMN_DTYPES, not missing "
                f"{missing} and with extra {extra}"
            )
        fixed = {name: _column(name, self.columns[name]) for name in COLUMN_DTYPES}
        lengths = {len(col) for col in fixed.values()}
        if len(lengths) > 1:
            raise TasklistError(f"TaskTable columns must have one length, not {sorted(lengths)}")
        strings = list(self.strings)
        for s in strings:
            if not isinstance(s, str):
                raise TasklistError(f"TaskTable strings must be str, not {s!r}")
        object.__setattr__(self, "columns", fixed)
        object.__setattr__(self, "strings", strings)

    def __len__(self) -> int:
        return len(self.columns["opcode"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TaskTable):
            return NotImplemented
        return self.strings == other.strings and all(
            np.array_equal(col, other.columns[name]) for name, col in self.columns.items()
        )

    __hash__ = None  # type: ignore[assignment]  # mutable arrays inside

    @classmethod
    def from_tasks(cls, tasks: Sequence[Task]) -> TaskTable:
        """The table of ``tasks`` (raises `TasklistError` like `encode_tasks`).

        Goes through the records: the object codec is the one definition of how a task maps
        to fields, so the two paths cannot drift apart.
        """
        strings: dict[str, int] = {}
        data = encode_tasks(tasks, strings)
        return decode_table(data, len(tasks), list(strings))

    def to_tasks(self) -> list[Task]:
        """The tasks of the table (raises `TasklistError` like `decode_tasks`)."""
        _check_stray(self, 0)
        return decode_tasks(_pack(self).data, len(self), self.strings)

    def counts(self, column: str) -> dict[int, int]:
        """Rows per value of ``column`` (values that occur only).

        >>> from aipusim.isa.tasks import TokenWait, Unit
        >>> TaskTable.from_tasks([TokenWait(unit=Unit.DPU)] * 3).counts("opcode")
        {6: 3}
        """
        values, counts = np.unique(self.columns[column], return_counts=True)
        return dict(zip(values.tolist(), counts.tolist(), strict=True))

    def count_by(self, column: str) -> dict[str, int]:
        """Rows per ``unit`` or ``phase`` (by enum value) or per ``opcode`` (by kind name),
        sorted by name.

        >>> from aipusim.isa.tasks import TokenWait, Unit
        >>> TaskTable.from_tasks([TokenWait(unit=Unit.DPU)] * 2).count_by("unit")
        {'dpu': 2}
        """
        if column not in _NAMED:
            raise TasklistError(
                f"count_by column must be one of {', '.join(_NAMED)}, not {column!r}"
            )
        names = _NAMED[column]
        return dict(sorted((names[v], n) for v, n in self.counts(column).items()))


_NAMED: dict[str, dict[int, str]] = {
    "unit": dict(enumerate(u.value for u in Unit)),
    "phase": dict(enumerate(p.value for p in Phase)),
    "opcode": {op: kind.__name__ for op, kind in KINDS.items()},
}


def _column(name: str, values: Any) -> np.ndarray:
    dtype = COLUMN_DTYPES[name]
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise TasklistError(f"TaskTable column `{name}` must be 1-D, not shape {arr.shape}")
    if arr.dtype == dtype:
        return arr
    top = np.iinfo(dtype).max
    if arr.size:
        if arr.dtype.kind not in "iu":
            raise TasklistError(
                f"TaskTable column `{name}` must hold integers 0-{top}, not {arr.dtype} values"
            )
        low, high = arr.min().item(), arr.max().item()
        if low < 0 or high > top:
            raise TasklistError(
                f"TaskTable column `{name}` must hold integers 0-{top}, "
                f"not {low if low < 0 else high}"
            )
    return arr.astype(dtype)


def empty_table(strings: Sequence[str] = ()) -> TaskTable:
    """A table of no tasks."""
    return TaskTable({n: np.zeros(0, dt) for n, dt in COLUMN_DTYPES.items()}, list(strings))


def _check_stray(table: TaskTable, first_index: int) -> None:
    """A kind column must be 0 in rows whose kind lacks the field (the value would be lost)."""
    op = table["opcode"]
    for name in _KIND_COLUMNS:
        stray = table[name] != 0
        stray &= ~_HAS_FIELD[name][op]
        rows = np.flatnonzero(stray)
        if len(rows):
            row = int(rows[0])
            kind = KINDS.get(int(op[row]))
            what = kind.__name__ if kind else f"opcode {int(op[row])}"
            raise TasklistError(
                f"task {first_index + row}: column `{name}` must be 0 where the kind "
                f"({what}) has no such field, not {int(table[name][row])}"
            )


def _pack(table: TaskTable) -> np.ndarray:
    """The records of ``table`` as a uint8 array, layer indices as they are (unchecked)."""
    n = len(table)
    cols = table.columns
    buf = np.zeros(n * RECORD_BYTES, dtype=np.uint8)
    common = buf.view(COMMON_DTYPE)
    for f in COMMON_FIELDS:
        common[f.name] = cols[f.name]
    op = cols["opcode"]
    for code in np.flatnonzero(np.bincount(op, minlength=_OPCODES)):
        lay = LAYOUTS.get(int(code))
        if lay is None or not lay.fields:
            continue
        rows = np.flatnonzero(op == code)
        view = buf.view(KIND_DTYPES[int(code)])
        for f in lay.fields:
            view[f.name][rows] = cols[f.name][rows]
    return buf


def _raise_first_bad(
    bad: np.ndarray, data: Any, offset: int, strings: Sequence[str], first_index: int, base: int
) -> None:
    rows = np.flatnonzero(bad)
    if len(rows):
        row = int(rows[0])
        pos = offset + row * RECORD_BYTES
        raise explain_record(data, pos, first_index + row, strings, base)


def encode_table(
    table: TaskTable, strings: dict[str, int] | None = None, first_index: int = 0
) -> bytes:
    """Records of ``table``, byte for byte what `encode_tasks` makes of ``table.to_tasks()``;
    layer names are added to ``strings`` (name -> index, in order of first use).

    A row the record format cannot hold raises `TasklistError` with the message the decoder
    gives for those bytes (offsets into the returned records); a kind column that is
    non-zero in a row whose kind lacks the field raises too (it would be lost).
    """
    if strings is None:
        strings = {}
    n = len(table)
    _check_stray(table, first_index)
    buf = _pack(table)
    if n:
        bad = _bad_rows(buf, 0, n, len(table.strings))
        _raise_first_bad(bad, buf, 0, table.strings, first_index, 0)
        layer = table["layer"]
        used, first = np.unique(layer, return_index=True)
        remap = np.zeros(len(table.strings), dtype=np.uint32)
        for idx in used[np.argsort(first)].tolist():
            remap[idx] = strings.setdefault(table.strings[idx], len(strings))
        buf.view(COMMON_DTYPE)["layer"] = remap[layer]
    return buf.tobytes()


def decode_table(
    data: bytes | bytearray | memoryview,
    count: int,
    strings: Sequence[str],
    offset: int = 0,
    first_index: int = 0,
    base_offset: int = 0,
) -> TaskTable:
    """Decode ``count`` records from ``data[offset]`` into a table; arguments and errors as
    in `decode_tasks` (the same record is reported with the same message)."""
    end = offset + count * RECORD_BYTES
    if len(data) < end:
        whole = max(0, len(data) - offset) // RECORD_BYTES
        pos = offset + whole * RECORD_BYTES
        raise explain_record(data, pos, first_index + whole, strings, base_offset)
    if count <= 0:
        return empty_table(strings)
    bad = _bad_rows(data, offset, count, len(strings))
    _raise_first_bad(bad, data, offset, strings, first_index, base_offset)
    common = np.frombuffer(data, COMMON_DTYPE, count, offset)
    cols: dict[str, np.ndarray] = {f.name: common[f.name].copy() for f in COMMON_FIELDS}
    for name in _KIND_COLUMNS:
        cols[name] = np.zeros(count, COLUMN_DTYPES[name])
    op = cols["opcode"]
    for code in np.flatnonzero(np.bincount(op, minlength=_OPCODES)):
        lay = LAYOUTS[int(code)]
        if not lay.fields:
            continue
        rows = np.flatnonzero(op == code)
        view = np.frombuffer(data, KIND_DTYPES[int(code)], count, offset)
        for f in lay.fields:
            cols[f.name][rows] = view[f.name][rows]
    return TaskTable(cols, list(strings))


__all__ = [
    "COLUMN_DTYPES",
    "COMMON_DTYPE",
    "KIND_DTYPES",
    "TaskTable",
    "decode_table",
    "empty_table",
    "encode_table",
]
