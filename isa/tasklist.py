"""Tasklist files: ``core<N>.tasklist``, one per core, in ``compiled_model/``.

Little-endian layout:

=========  ===========================================================================
bytes      content
=========  ===========================================================================
0-31       header: magic ``AIPUTL\\0\\0``, format version u16, core id u16, record size
           u16, header size u16, task count u32, string table offset u32, body size u32,
           CRC32 of the body u32
32-        task records, `RECORD_BYTES` each (see `aipusim.isa.encoding`)
...        string table: count u32, then per string a u16 byte length and UTF-8 bytes;
           layer names in order of first use
=========  ===========================================================================

The body is everything after the header. Every problem is a `TasklistError` that names the
byte offset; a CRC mismatch caused by one corrupted byte names that byte (CRC32 is linear,
so the difference between the stored and computed CRC points back to the position).

>>> import tempfile, pathlib
>>> from aipusim.isa.tasks import Barrier, Unit
>>> tl = Tasklist(0, [Barrier(unit=Unit.CTRL, barrier_id=1, core_mask=0b11)])
>>> path = pathlib.Path(tempfile.mkdtemp()) / "core0.tasklist"
>>> write_tasklist(path, tl) == tasklist_size_bytes(tl)
True
>>> read_tasklist(path) == tl
True
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

from aipusim.base.errors import TasklistError
from aipusim.base.fileio import write_bytes
from aipusim.isa.encoding import (
    COMMON_BYTES,
    COMMON_FIELDS,
    LAYOUTS,
    RECORD_BYTES,
    decode_tasks,
    encode_tasks,
)
from aipusim.isa.table import COMMON_DTYPE, TaskTable, decode_table
from aipusim.isa.tasks import Task

if TYPE_CHECKING:
    from aipusim.arch import Arch

MAGIC = b"AIPUTL\0\0"
FORMAT_VERSION = 5
_HEADER = struct.Struct("<8sHHHHIIII")
HEADER_BYTES = _HEADER.size
_COUNT = struct.Struct("<I")
_STRLEN = struct.Struct("<H")
_MAX_STRING_BYTES = (1 << 16) - 1
#: Byte offset of each header field, for error messages.
_AT = {
    "magic": 0,
    "version": 8,
    "core_id": 10,
    "record_bytes": 12,
    "header_bytes": 14,
    "task_count": 16,
    "string_table_offset": 20,
    "body_bytes": 24,
    "body_crc32": 28,
}
_CORE_FILE = re.compile(r"core(\d+)\.tasklist")


@dataclass(frozen=True)
class Tasklist:
    """The tasks of one core, in dispatch order.

    >>> Tasklist(2, []).core_id
    2
    """

    core_id: int
    tasks: tuple[Task, ...] = field(default=())

    def __post_init__(self) -> None:
        if not isinstance(self.tasks, tuple):
            object.__setattr__(self, "tasks", tuple(self.tasks))


@dataclass(frozen=True)
class TasklistHeader:
    """The fixed header of a tasklist file."""

    core_id: int
    task_count: int
    string_table_offset: int
    body_bytes: int
    body_crc32: int
    version: int = FORMAT_VERSION
    record_bytes: int = RECORD_BYTES

    @property
    def file_bytes(self) -> int:
        return HEADER_BYTES + self.body_bytes


@dataclass(frozen=True)
class TaskChunk:
    """A run of consecutive tasks that fits the tasklist window, from `iter_tasklist_chunks`.

    ``size_bytes`` is what loading the chunk into the window moves (its records).
    """

    first_index: int
    tasks: list[Task]
    size_bytes: int


# -- encoding ------------------------------------------------------------------------------


def _utf8(name: str) -> bytes:
    try:
        return name.encode("utf-8")
    except UnicodeEncodeError:
        raise TasklistError(
            f"layer name must be valid Unicode text (no lone surrogates), not {name!r}"
        ) from None


def _string_table(strings: Iterable[str]) -> bytes:
    names = list(strings)
    parts = [_COUNT.pack(len(names))]
    for name in names:
        raw = _utf8(name)
        if len(raw) > _MAX_STRING_BYTES:
            raise TasklistError(
                f"layer name must be at most {_MAX_STRING_BYTES} bytes of UTF-8, "
                f"not {len(raw)} ({name[:40]!r}...)"
            )
        parts += (_STRLEN.pack(len(raw)), raw)
    return b"".join(parts)


def _check_core_id(core_id: object) -> int:
    if isinstance(core_id, bool) or not isinstance(core_id, int) or not 0 <= core_id <= 0xFFFF:
        raise TasklistError(f"core_id must be an integer 0-65535, not {core_id!r}")
    return core_id


def encode_tasklist(tasklist: Tasklist) -> bytes:
    """The bytes of a tasklist file."""
    core_id = _check_core_id(tasklist.core_id)
    strings: dict[str, int] = {}
    records = encode_tasks(tasklist.tasks, strings)
    body = records + _string_table(strings)
    if len(body) > 0xFFFFFFFF:
        raise TasklistError(f"tasklist body must be under 4 GiB, not {len(body)} bytes")
    header = _HEADER.pack(
        MAGIC,
        FORMAT_VERSION,
        core_id,
        RECORD_BYTES,
        HEADER_BYTES,
        len(tasklist.tasks),
        HEADER_BYTES + len(records),
        len(body),
        zlib.crc32(body),
    )
    return header + body


def write_tasklist(path: str | os.PathLike[str], tasklist: Tasklist) -> int:
    """Write ``tasklist`` to ``path`` (whole or not at all); returns the bytes written."""
    data = encode_tasklist(tasklist)
    write_bytes(path, data)
    return len(data)


def tasklist_size_bytes(tasklist: Tasklist) -> int:
    """Bytes of the tasklist file (header, records, string table), without encoding it."""
    names = dict.fromkeys(t.layer for t in tasklist.tasks)
    strings = _COUNT.size + sum(_STRLEN.size + len(_utf8(n)) for n in names)
    return HEADER_BYTES + len(tasklist.tasks) * RECORD_BYTES + strings


def fits_l2_window(
    tasklist: Tasklist | int, arch: Arch | None = None, *, window_bytes: int | None = None
) -> bool:
    """Whether a tasklist (or a size in bytes) fits the per-core L2 tasklist window without
    streaming. The window is ``window_bytes`` when given (the compiler's
    ``l2_size_reserved_tasklist``), else the arch's ``l2.tasklist_reserved_bytes_per_core``.

    >>> fits_l2_window(4096, window_bytes=1024)
    False
    """
    if window_bytes is None:
        if arch is None:
            from aipusim.arch import load_arch

            arch = load_arch()
        window_bytes = arch.l2.tasklist_reserved_bytes_per_core
    size = tasklist if isinstance(tasklist, int) else tasklist_size_bytes(tasklist)
    return size <= window_bytes


# -- decoding ------------------------------------------------------------------------------


def parse_header(data: bytes, file_bytes: int) -> TasklistHeader:
    """Check the first `HEADER_BYTES` of a file of ``file_bytes`` bytes."""
    if len(data) < HEADER_BYTES:
        raise TasklistError(
            f"byte {len(data)}: file is truncated: expected a {HEADER_BYTES}-byte header, "
            f"found {len(data)} bytes"
        )
    magic, version, core_id, rec, hdr, count, str_at, body, crc = _HEADER.unpack_from(data)
    if magic != MAGIC:
        at = next(i for i, (a, b) in enumerate(zip(magic, MAGIC, strict=True)) if a != b)
        raise TasklistError(f"byte {at}: magic must be {MAGIC!r}, not {magic!r}: not a tasklist")
    if version != FORMAT_VERSION:
        raise TasklistError(
            f"byte {_diff_at('version', FORMAT_VERSION, version)}: format version must be "
            f"{FORMAT_VERSION}, not {version}"
        )
    if rec != RECORD_BYTES:
        raise TasklistError(
            f"byte {_diff_at('record_bytes', RECORD_BYTES, rec)}: record size must be "
            f"{RECORD_BYTES}, not {rec}"
        )
    if hdr != HEADER_BYTES:
        raise TasklistError(
            f"byte {_diff_at('header_bytes', HEADER_BYTES, hdr)}: header size must be "
            f"{HEADER_BYTES}, not {hdr}"
        )
    if str_at != HEADER_BYTES + count * RECORD_BYTES:
        # One of the two is corrupted; a string table offset that is not a whole number of
        # records after the header is the likelier culprit.
        if (str_at - HEADER_BYTES) % RECORD_BYTES == 0:
            at = _diff_at("task_count", (str_at - HEADER_BYTES) // RECORD_BYTES, count)
        else:
            at = _diff_at("string_table_offset", HEADER_BYTES + count * RECORD_BYTES, str_at)
        raise TasklistError(
            f"byte {at}: task count (byte 16) and string table offset (byte 20) must "
            f"agree: {count} tasks end at byte {HEADER_BYTES + count * RECORD_BYTES}, not "
            f"{str_at}"
        )
    if file_bytes != HEADER_BYTES + body:
        at = _diff_at("body_bytes", file_bytes - HEADER_BYTES, body)
        if file_bytes < HEADER_BYTES + body:
            raise TasklistError(
                f"byte {file_bytes}: file is truncated: the header says {HEADER_BYTES + body} "
                f"bytes, the file ends after {file_bytes} (or byte {at} is corrupted)"
            )
        raise TasklistError(
            f"byte {at}: body size (byte 24) must be {file_bytes - HEADER_BYTES} (the file "
            f"has {file_bytes} bytes), not {body}"
        )
    if str_at + _COUNT.size > file_bytes:
        raise TasklistError(
            f"byte {file_bytes}: file is truncated: expected {count} tasks and a string "
            f"table from byte {str_at}, the file ends at byte {file_bytes}"
        )
    return TasklistHeader(core_id, count, str_at, body, crc, version, rec)


def _diff_at(name: str, expected: int, actual: int) -> int:
    """File offset of the first byte where a u16/u32 header field differs from ``expected``."""
    size = 2 if name in ("version", "core_id", "record_bytes", "header_bytes") else 4
    exp = (expected & ((1 << 8 * size) - 1)).to_bytes(size, "little")
    act = actual.to_bytes(size, "little")
    return _AT[name] + next((i for i in range(size) if exp[i] != act[i]), 0)


def _check_file_core(header: TasklistHeader, path: str | os.PathLike[str]) -> None:
    """A ``core<N>.tasklist`` file must hold core N's tasks (the header is not CRC-covered)."""
    m = _CORE_FILE.fullmatch(Path(path).name)
    if m and int(m.group(1)) != header.core_id:
        raise TasklistError(
            f"byte {_diff_at('core_id', int(m.group(1)), header.core_id)}: core id must be "
            f"{m.group(1)} (the file is {Path(path).name}), not {header.core_id}"
        )


def parse_strings(data: bytes | memoryview, base_offset: int) -> list[str]:
    """Decode a string table that spans all of ``data`` (file offset ``base_offset``)."""
    if len(data) < _COUNT.size:
        raise TasklistError(f"byte {base_offset + len(data)}: string table is truncated")
    (n,) = _COUNT.unpack_from(data)
    pos = _COUNT.size
    strings = []
    for i in range(n):
        if pos + _STRLEN.size > len(data):
            raise TasklistError(
                f"byte {base_offset + pos}: string table is truncated: expected string {i} "
                f"of {n}, the file ends at byte {base_offset + len(data)}"
            )
        (length,) = _STRLEN.unpack_from(data, pos)
        pos += _STRLEN.size
        if pos + length > len(data):
            raise TasklistError(
                f"byte {base_offset + pos - _STRLEN.size}: string {i} must fit the file "
                f"({len(data) - pos} bytes left), not be {length} bytes long"
            )
        try:
            strings.append(bytes(data[pos : pos + length]).decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise TasklistError(
                f"byte {base_offset + pos + exc.start}: string {i} must be UTF-8"
            ) from None
        pos += length
    if pos != len(data):
        raise TasklistError(
            f"byte {base_offset + pos}: file must end after the {n} strings of the string "
            f"table, not carry {len(data) - pos} more bytes"
        )
    return strings


class _CanonicalStrings:
    """Checks that layer names appear in the string table in order of first use, each used.

    Only one byte sequence encodes a tasklist, so disassembling and reassembling any file
    that reads without error gives the same bytes. Works on the layer-index column of the
    records (no Task objects); equal names in the table count as one layer, as they do for
    the tasks.
    """

    def __init__(self, strings: Sequence[str], string_table_offset: int) -> None:
        self.strings = strings
        self.offset = string_table_offset
        first: dict[str, int] = {}
        # Each string index -> the index of the first string with that name.
        self.layer_of = np.array(
            [first.setdefault(s, i) for i, s in enumerate(strings)], dtype=np.int64
        )
        self.seen: set[int] = set()

    def feed(self, layers: np.ndarray, first_index: int) -> None:
        """Check the (already range-checked) layer indices of tasks ``first_index`` on."""
        if not len(layers):
            return
        ids, first_use = np.unique(self.layer_of[layers], return_index=True)
        order = np.argsort(first_use)
        seen, strings = self.seen, self.strings
        for layer, row in zip(ids[order].tolist(), first_use[order].tolist(), strict=True):
            if layer in seen:
                continue
            expected = strings[len(seen)]
            if layer != self.layer_of[len(seen)]:
                at = HEADER_BYTES + (first_index + row) * RECORD_BYTES + _LAYER_AT
                raise TasklistError(
                    f"byte {at}: task {first_index + row} must use string {len(seen)} "
                    f"({expected!r}, layer names are stored in order of first use), "
                    f"not {layer}"
                )
            seen.add(layer)

    def finish(self) -> None:
        if len(self.seen) != len(self.strings):
            raise TasklistError(
                f"byte {self.offset}: string table must hold only used layer names "
                f"({len(self.seen)}), not {len(self.strings)}"
            )


def _layer_column(data: bytes | memoryview, offset: int, count: int) -> np.ndarray:
    """The layer indices of ``count`` records from ``data[offset]`` (a view, no copy)."""
    return np.frombuffer(data, COMMON_DTYPE, count, offset)["layer"]


_LAYER_AT = next(f.offset for f in LAYOUTS[min(LAYOUTS)].all_fields if f.name == "layer")


def _checked_strings(data: bytes) -> tuple[TasklistHeader, list[str]]:
    """Header, CRC and string table of the bytes of a tasklist file."""
    header = parse_header(data, len(data))
    body = memoryview(data)[HEADER_BYTES:]
    crc = zlib.crc32(body)
    if crc != header.body_crc32:
        raise crc_error(header, crc, data.__getitem__)
    strings = parse_strings(
        body[header.string_table_offset - HEADER_BYTES :], header.string_table_offset
    )
    return header, strings


def decode_tasklist(data: bytes) -> Tasklist:
    """Parse the bytes of a tasklist file."""
    header, strings = _checked_strings(data)
    tasks = decode_tasks(data, header.task_count, strings, offset=HEADER_BYTES)
    canon = _CanonicalStrings(strings, header.string_table_offset)
    canon.feed(_layer_column(data, HEADER_BYTES, header.task_count), 0)
    canon.finish()
    return Tasklist(header.core_id, tasks)


def decode_tasklist_table(data: bytes) -> tuple[TasklistHeader, TaskTable]:
    """Parse the bytes of a tasklist file into columns (`aipusim.isa.table`), with every
    check and error of `decode_tasklist` but no Task objects: the fast path for whole-file
    statistics and validation.

    >>> from aipusim.isa.tasks import TokenWait, Unit
    >>> header, table = decode_tasklist_table(encode_tasklist(
    ...     Tasklist(3, [TokenWait(unit=Unit.DPU, layer="a")] * 2)))
    >>> header.core_id, len(table), table.strings
    (3, 2, ['a'])
    """
    header, strings = _checked_strings(data)
    table = decode_table(data, header.task_count, strings, offset=HEADER_BYTES)
    canon = _CanonicalStrings(strings, header.string_table_offset)
    canon.feed(table["layer"], 0)
    canon.finish()
    return header, table


def read_tasklist(path: str | os.PathLike[str]) -> Tasklist:
    """Read and check a whole tasklist file.

    A file named ``core<N>.tasklist`` must carry core id N.
    """
    data = _read_bytes(path)
    _check_file_core(parse_header(data, len(data)), path)
    return decode_tasklist(data)


def read_tasklist_table(path: str | os.PathLike[str]) -> tuple[TasklistHeader, TaskTable]:
    """Read and check a whole tasklist file as columns (see `decode_tasklist_table`); the
    same checks and errors as `read_tasklist`."""
    data = _read_bytes(path)
    _check_file_core(parse_header(data, len(data)), path)
    return decode_tasklist_table(data)


def _read_bytes(path: str | os.PathLike[str]) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise TasklistError(f"cannot read tasklist {os.fspath(path)!r}: {exc.strerror}") from None


def read_tasklist_header(path: str | os.PathLike[str]) -> TasklistHeader:
    """The checked header of a tasklist file (body not read)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(HEADER_BYTES)
            size = os.fstat(fh.fileno()).st_size
    except OSError as exc:
        raise TasklistError(f"cannot read tasklist {os.fspath(path)!r}: {exc.strerror}") from None
    header = parse_header(head, size)
    _check_file_core(header, path)
    return header


def iter_tasklist_chunks(
    path: str | os.PathLike[str], window_bytes: int | None = None
) -> Iterator[TaskChunk]:
    """Stream a tasklist through a window of ``window_bytes`` (default: the arch's
    ``l2.tasklist_reserved_bytes_per_core``), as the control core does with a tasklist
    larger than its L2 window.

    The header and string table stay resident; each chunk is as many records as fit the
    rest of the window. The whole body is CRC-checked (in pieces) before the first chunk.

    >>> import tempfile, pathlib
    >>> from aipusim.isa.tasks import TokenSignal, TokenRef, TokenScope, Unit
    >>> sig = TokenSignal(unit=Unit.DMA0, signals=(TokenRef(TokenScope.LOCAL, 0),))
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "core0.tasklist"
    >>> _ = write_tasklist(path, Tasklist(0, [sig] * 10))
    >>> [len(c.tasks) for c in iter_tasklist_chunks(path, window_bytes=512)]
    [2, 2, 2, 2, 2]
    """
    if window_bytes is None:
        from aipusim.arch import load_arch

        window_bytes = load_arch().l2.tasklist_reserved_bytes_per_core
    try:
        fh = open(path, "rb")  # noqa: SIM115 (closed in the finally below, across yields)
    except OSError as exc:
        raise TasklistError(f"cannot read tasklist {os.fspath(path)!r}: {exc.strerror}") from None
    try:
        size = os.fstat(fh.fileno()).st_size
        header = parse_header(fh.read(HEADER_BYTES), size)
        _check_file_core(header, path)
        crc = 0
        for piece in iter(lambda: fh.read(1 << 20), b""):
            crc = zlib.crc32(piece, crc)
        if crc != header.body_crc32:
            raise crc_error(header, crc, lambda at: _byte_at(fh, at))
        fh.seek(header.string_table_offset)
        strings = parse_strings(fh.read(), header.string_table_offset)
        resident = HEADER_BYTES + size - header.string_table_offset
        per_chunk = (window_bytes - resident) // RECORD_BYTES
        if per_chunk < 1 and header.task_count:
            raise TasklistError(
                f"window_bytes must hold the header and string table ({resident} bytes) "
                f"plus one {RECORD_BYTES}-byte task, not {window_bytes}"
            )
        canon = _CanonicalStrings(strings, header.string_table_offset)
        fh.seek(HEADER_BYTES)
        for first in range(0, header.task_count, max(per_chunk, 1)):
            n = min(per_chunk, header.task_count - first)
            raw = fh.read(n * RECORD_BYTES)
            tasks = decode_tasks(
                raw,
                n,
                strings,
                first_index=first,
                base_offset=HEADER_BYTES + first * RECORD_BYTES,
            )
            canon.feed(_layer_column(raw, 0, n), first)
            yield TaskChunk(first, tasks, n * RECORD_BYTES)
        canon.finish()
    finally:
        fh.close()


def _byte_at(fh: BinaryIO, offset: int) -> int:
    fh.seek(offset)
    return fh.read(1)[0]


def tasklist_path(directory: str | os.PathLike[str], core_id: int) -> Path:
    """``directory/core<N>.tasklist``."""
    return Path(directory) / f"core{core_id}.tasklist"


def find_tasklists(directory: str | os.PathLike[str]) -> list[Path]:
    """The ``core<N>.tasklist`` files of a compiled-model directory, by core number."""
    found = []
    for p in Path(directory).iterdir():
        m = _CORE_FILE.fullmatch(p.name)
        if m:
            found.append((int(m.group(1)), p))
    return [p for _, p in sorted(found)]


# -- CRC diagnosis -------------------------------------------------------------------------


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc_table()
_CRC_BY_TOP = {c >> 24: i for i, c in enumerate(_CRC_TABLE)}
_CRC_SYNDROME = {c: i for i, c in enumerate(_CRC_TABLE) if i}


def locate_byte_error(
    body_bytes: int, stored_crc: int, computed_crc: int
) -> tuple[int, int] | None:
    """(offset in body, xor mask) of the one corrupted byte that explains a CRC mismatch,
    or None if no single byte does.

    CRC32 is linear: corrupting byte p with mask v changes the CRC by the CRC (zero start)
    of v followed by ``n - 1 - p`` zero bytes. Running the zero-byte step backwards from
    the observed difference finds p and v in O(n) without the data.
    """
    diff = stored_crc ^ computed_crc
    if not diff:
        return None
    top, table, syndrome = _CRC_BY_TOP, _CRC_TABLE, _CRC_SYNDROME
    for back in range(body_bytes):
        v = syndrome.get(diff)
        if v is not None:
            return body_bytes - 1 - back, v
        i = top[diff >> 24]
        diff = ((diff ^ table[i]) << 8 | i) & 0xFFFFFFFF
    return None


def describe_offset(
    header: TasklistHeader, offset: int, read_byte: Callable[[int], int] | None = None
) -> str:
    """What lives at file byte ``offset``: a header field, a task field or the strings.

    ``read_byte(file_offset)`` lets it read a record's opcode to name kind-specific fields.
    """
    if offset < HEADER_BYTES:
        name = max((k for k, at in _AT.items() if at <= offset), key=_AT.__getitem__)
        return f"header field `{name}`"
    if offset >= header.string_table_offset:
        return "the string table"
    index, within = divmod(offset - HEADER_BYTES, RECORD_BYTES)
    fields = COMMON_FIELDS
    if within >= COMMON_BYTES and read_byte is not None:
        layout = LAYOUTS.get(read_byte(offset - within))
        fields = layout.all_fields if layout is not None else fields
    for f in fields:
        if f.offset <= within < f.offset + f.size_bytes:
            return f"task {index}, field `{f.name}`"
    return f"task {index}, record byte {within}"


def crc_error(
    header: TasklistHeader, computed_crc: int, read_byte: Callable[[int], int] | None = None
) -> TasklistError:
    """The error for a body whose CRC32 differs from the header's (``read_byte`` as in
    `describe_offset`)."""
    found = locate_byte_error(header.body_bytes, header.body_crc32, computed_crc)
    detail = (
        f"body CRC32 must be 0x{header.body_crc32:08x} (header byte 28), not 0x{computed_crc:08x}"
    )
    if found is None:
        stored = header.body_crc32.to_bytes(4, "little")
        computed = computed_crc.to_bytes(4, "little")
        differ = [i for i in range(4) if stored[i] != computed[i]]
        if len(differ) == 1:
            # A body error changes all CRC bytes but with odds of 2^-24; one differing byte
            # means the stored CRC itself was hit.
            return TasklistError(f"byte {_AT['body_crc32'] + differ[0]}: {detail}")
        return TasklistError(
            f"byte {HEADER_BYTES}-{header.file_bytes - 1}: {detail}: the body or the stored "
            "CRC is corrupted"
        )
    at = HEADER_BYTES + found[0]
    return TasklistError(
        f"byte {at}: {detail}; one corrupted byte explains it: byte {at} "
        f"({describe_offset(header, at, read_byte)}) has bits 0x{found[1]:02x} flipped"
    )


__all__ = [
    "FORMAT_VERSION",
    "HEADER_BYTES",
    "MAGIC",
    "TaskChunk",
    "Tasklist",
    "TasklistHeader",
    "crc_error",
    "decode_tasklist",
    "decode_tasklist_table",
    "encode_tasklist",
    "find_tasklists",
    "fits_l2_window",
    "iter_tasklist_chunks",
    "locate_byte_error",
    "parse_header",
    "parse_strings",
    "read_tasklist",
    "read_tasklist_header",
    "read_tasklist_table",
    "tasklist_path",
    "tasklist_size_bytes",
    "write_tasklist",
]
