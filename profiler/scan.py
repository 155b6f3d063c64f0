"""One pass over a chunk of trace text: line ends, tags, and the values of every canonical
line. `classify_lines` runs the compiled scan (`aipusim.profiler.native`, C) when it is
built, else `numpy_classify_lines`, its twin in numpy array operations (no loop per line)
described below; both find the same lines and values.

A line is *canonical* for a tag when it is laid out exactly as
`aipusim.isa.trace_schema.format_line` writes it: the padded ``[TAG]``, then every
``key=value`` of the tag in schema order, one space apart, integers as 1-18 decimal
digits (optional ``-``), strings as printable ASCII without ``=`` (possibly empty). For those
lines the scan parses the integers and gathers the strings; every other line gets a careful
per-line look in Python (`aipusim.profiler.parse`).

How, per tag: a canonical line of a tag with ``n`` fields holds exactly ``n - 1`` spaces
after its padded prefix, so the positions of the spaces in the chunk give every field's
token at once; each token must start with its ``key=`` (compared as one little-endian
word of up to 8 bytes loaded at any byte offset), integers are parsed eight digits at a
time inside a 64-bit word (SWAR: digits checked and combined with a few multiplies), and
strings are checked byte by byte once gathered.

>>> import numpy as np
>>> s = classify_lines(np.frombuffer(b"[B]  frame=0 inst=2 start=5 end=-9\\n[X]\\n",
...                                  dtype=np.uint8))
>>> s.ends.tolist(), s.kinds.tolist(), s.columns[Tag.B][2].tolist()
([34, 38], [0, -1], [5])
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from aipusim.isa.trace_schema import COLUMNS, LEVELS, ColumnType, Tag
from aipusim.profiler.native import NATIVE

#: ``kinds`` value of a line whose tag is not one of `LEVELS` (or that has no tag).
OTHER = -1
#: ``kinds`` value ``NONCANONICAL + i``: a line of ``LEVELS[i]`` in another layout.
NONCANONICAL = 16

#: Most digits of a canonical integer: 18 always fit int64.
MAX_DIGITS = 18
#: Width of the padded ``[TAG]`` prefix of a canonical line.
PREFIX_BYTES = 5
#: Zero bytes around the chunk, so that an 8-byte load at any line's start or any
#: value's end stays inside the array.
_SLACK = 8

_U8 = np.uint64(8)
_ASCII_ZEROS = np.uint64(0x3030303030303030)
_HIGH_NIBBLES = np.uint64(0xF0F0F0F0F0F0F0F0)
_SIXES = np.uint64(0x0606060606060606)
_THREES = np.uint64(0x3333333333333333)
_BYTE_PAIRS = np.uint64(0x000000FF000000FF)
_TENS = np.uint64(10)
_HUNDREDS = np.uint64(100 + (1_000_000 << 32))
_ONES = np.uint64(1 + (10_000 << 32))
_SHIFT_8, _SHIFT_16, _SHIFT_32 = np.uint64(8), np.uint64(16), np.uint64(32)


def _word(text: bytes) -> tuple[np.uint64, np.uint64]:
    """(value, mask) of up to 8 bytes as a little-endian word, for comparing loads."""
    assert len(text) <= 8, text
    value = int.from_bytes(text.ljust(8, b"\0"), "little")
    return np.uint64(value), np.uint64((1 << (8 * len(text))) - 1)


@dataclass(frozen=True)
class _Field:
    name: str
    is_int: bool
    key: tuple[np.uint64, np.uint64]
    key_bytes: int


@functools.cache
def _layout(tag: Tag) -> tuple[tuple[np.uint64, np.uint64], tuple[np.uint64, np.uint64], int]:
    """The tag's ``[TAG]`` word, its padded prefix word and the spaces in that prefix."""
    label = f"[{tag.value}]".encode()
    prefix = label.ljust(PREFIX_BYTES)
    return _word(label), _word(prefix), prefix.count(b" ")


@functools.cache
def _fields(tag: Tag) -> tuple[_Field, ...]:
    return tuple(
        _Field(name, ctype is ColumnType.INT, _word(f"{name}=".encode()), len(name) + 1)
        for name, ctype in COLUMNS[tag]
    )


class _Bytes:
    """The chunk with slack on both sides, and 8-byte loads at any offset of it."""

    def __init__(self, raw: np.ndarray) -> None:
        self.padded = np.zeros(len(raw) + 3 * _SLACK, dtype=np.uint8)
        self.padded[_SLACK : _SLACK + len(raw)] = raw
        # Element i is the (unaligned) word of the 8 bytes from padded[i]: a gather from it
        # is one plain fancy index (2.5 times faster than taking rows of a strided view).
        self._words = np.ndarray(
            shape=(len(self.padded) - 7,), dtype="<u8", buffer=self.padded, strides=(1,)
        )

    def load8(self, pos: np.ndarray) -> np.ndarray:
        """Little-endian uint64 of the 8 bytes from each padded position."""
        return self._words[pos]


def _swar8(word: np.ndarray, digits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The number in the top ``digits`` (1-8) bytes of each little-endian word (the lower
    bytes read as ``0``), and whether those bytes are all ASCII digits."""
    shift = ((8 - digits) * 8).astype(np.uint64)
    keep = np.uint64(0xFFFFFFFFFFFFFFFF) << shift
    word = (word & keep) | (_ASCII_ZEROS & ~keep)
    ok = ((word & _HIGH_NIBBLES) | (((word + _SIXES) & _HIGH_NIBBLES) >> np.uint64(4))) == _THREES
    v = word - _ASCII_ZEROS
    v = v * _TENS + (v >> _SHIFT_8)  # pairs of digits
    v = ((v & _BYTE_PAIRS) * _HUNDREDS + ((v >> _SHIFT_16) & _BYTE_PAIRS) * _ONES) >> _SHIFT_32
    return v.astype(np.int64), ok


def _parse_ints(data: _Bytes, begin: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integers in the padded spans [begin, end): (values, valid -?\\d{1,18})."""
    negative = data.padded[begin] == 45  # '-'
    digits = end - begin - negative
    ok = (digits >= 1) & (digits <= MAX_DIGITS)
    digits = np.clip(digits, 1, MAX_DIGITS)
    values, good = _swar8(data.load8(end - 8), np.minimum(digits, 8))
    ok &= good
    long = np.flatnonzero(digits > 8)
    scale = 1
    for step in range(1, (MAX_DIGITS + 7) // 8):
        if not len(long):
            break
        scale *= 10**8
        rest = digits[long] - 8 * step
        part, good = _swar8(data.load8(end[long] - 8 * (step + 1)), np.minimum(rest, 8))
        ok[long] &= good
        values[long] += part * scale
        long = long[rest > 8]
    return np.where(negative, -values, values), ok


def _string_spans(data: _Bytes, begin: np.ndarray, end: np.ndarray) -> tuple:
    """Arrow string buffers (offsets int32, data uint8) of the padded spans, and per span
    whether all its bytes are printable ASCII other than ``=``."""
    # A token shorter than its key gives an empty span (the line is not canonical).
    lengths = np.maximum(end - begin, 0)
    offsets = np.zeros(len(begin) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    index = np.arange(int(offsets[-1]), dtype=np.int64)
    index -= np.repeat(offsets[:-1].astype(np.int64) - begin, lengths)
    chars = data.padded[index]
    bad = (chars <= 32) | (chars >= 128) | (chars == 61)  # '='
    if not bad.any():
        return offsets, chars, np.ones(len(begin), dtype=bool)
    seen = np.zeros(len(chars) + 1, dtype=np.int64)
    np.cumsum(bad, out=seen[1:])
    return offsets, chars, seen[offsets[1:]] == seen[offsets[:-1]]


@dataclass
class Scan:
    """What `classify_lines` found in one chunk."""

    ends: np.ndarray  # newline position of every line
    kinds: np.ndarray  # tag index / NONCANONICAL + index / OTHER, per line
    #: Per tag with canonical lines, per column (schema order), for those lines in order:
    #: int64 values, or the strings as Arrow buffers (offsets int32, data uint8).
    columns: dict[Tag, list]


def _canonical(
    data: _Bytes,
    tag: Tag,
    starts: np.ndarray,
    first: np.ndarray,
    spaces: np.ndarray,
    ends: np.ndarray,
) -> tuple[np.ndarray, list]:
    """Which of the lines of ``tag`` (padded ``starts`` and ``ends``, index in the padded
    ``spaces`` of their ``first`` space) are canonical, and their columns. Every step
    works on all fields of all lines at once: [field, line] matrices."""
    fields = _fields(tag)
    _, _, prefix_spaces = _layout(tag)
    n = len(starts)
    begin = np.empty((len(fields), n), dtype=np.int64)
    end = np.empty((len(fields), n), dtype=np.int64)
    begin[0] = starts + PREFIX_BYTES
    gaps = spaces[first + prefix_spaces + np.arange(len(fields) - 1)[:, None]]
    begin[1:] = gaps + 1
    end[:-1] = gaps
    end[-1] = ends
    keys = data.load8(begin.ravel()).reshape(begin.shape)
    masks, values, key_bytes = _key_words(tag)
    ok = ((keys & masks) == values).all(axis=0)
    begin += key_bytes
    is_int = np.array([f.is_int for f in fields])
    ints, good = _parse_ints(data, begin[is_int].ravel(), end[is_int].ravel())
    ints = ints.reshape(-1, n)
    ok &= good.reshape(-1, n).all(axis=0)
    strs = np.flatnonzero(~is_int)
    if len(strs):
        offsets, chars, good = _string_spans(data, begin[strs].ravel(), end[strs].ravel())
        ok &= good.reshape(-1, n).all(axis=0)
    columns, i, j = [], 0, 0
    for field in fields:
        if field.is_int:
            columns.append(ints[i])
            i += 1
        else:
            lo, hi = offsets[j * n], offsets[(j + 1) * n]
            columns.append(
                (offsets[j * n : (j + 1) * n + 1] - lo, chars[lo:hi], begin[strs[j]], end[strs[j]])
            )
            j += 1
    return ok, columns


@functools.cache
def _key_words(tag: Tag) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per field of ``tag``: the mask and value of its ``key=`` word, and its length."""
    fields = _fields(tag)
    return (
        np.array([f.key[1] for f in fields], dtype=np.uint64)[:, None],
        np.array([f.key[0] for f in fields], dtype=np.uint64)[:, None],
        np.array([f.key_bytes for f in fields], dtype=np.int64)[:, None],
    )


@dataclass(frozen=True)
class Encoded:
    """A string column dictionary-encoded: per row an index into the distinct values, which
    are in order of first appearance (as Arrow's ``dictionary_encode`` orders them), held as
    Arrow string buffers (offsets int32, data uint8)."""

    codes: np.ndarray  # int32
    offsets: np.ndarray  # int32, one more than the distinct values
    chars: np.ndarray  # uint8


@functools.cache
def _schema() -> tuple:
    """`LEVELS` as the compiled scan takes them (`aipusim.profiler.native`)."""
    out = []
    for tag in LEVELS:
        label = f"[{tag.value}]".encode()
        fields = tuple(
            (f"{name}=".encode(), ctype is ColumnType.INT) for name, ctype in COLUMNS[tag]
        )
        out.append((label, label.ljust(PREFIX_BYTES), fields))
    return tuple(out)


def classify_lines(buf: np.ndarray | bytes | memoryview) -> Scan:
    """Scan ``buf`` (whole lines) with the compiled scanner when it is built, else with
    `numpy_classify_lines`; both find the same lines and values (string columns come
    `Encoded` from the compiled one)."""
    if NATIVE is None:
        return numpy_classify_lines(np.frombuffer(buf, dtype=np.uint8))
    ends, kinds, found = NATIVE.scan(buf, _schema())
    columns: dict[Tag, list] = {}
    for t, cols in found.items():
        columns[LEVELS[t]] = [
            np.frombuffer(c, dtype=np.int64)
            if isinstance(c, bytearray)
            else Encoded(
                np.frombuffer(c[0], dtype=np.int32),
                np.frombuffer(c[1], dtype=np.int32),
                np.frombuffer(c[2], dtype=np.uint8),
            )
            for c in cols
        ]
    return Scan(np.frombuffer(ends, dtype=np.int64), np.frombuffer(kinds, dtype=np.int8), columns)


def numpy_classify_lines(buf: np.ndarray) -> Scan:
    """Scan ``buf`` (uint8, whole lines) with numpy array operations. Bytes after the last
    newline are not a line."""
    ends = np.flatnonzero(buf == 10)
    kinds = np.full(len(ends), OTHER, dtype=np.int8)
    columns: dict[Tag, list] = {}
    if not len(ends):
        return Scan(ends, kinds, columns)
    data = _Bytes(buf)
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    spaces = np.flatnonzero(buf == 32) + _SLACK
    starts += _SLACK
    padded_ends = ends + _SLACK
    # Index in ``spaces`` of each line's first space, and each line's count of spaces.
    first = np.searchsorted(spaces, starts)
    count = np.diff(first, append=len(spaces))
    head = data.load8(starts)
    for t, tag in enumerate(LEVELS):
        (label, label_mask), (prefix, prefix_mask), prefix_spaces = _layout(tag)
        mine = np.flatnonzero((head & label_mask) == label)
        if not len(mine):
            continue
        kinds[mine] = NONCANONICAL + t
        shaped = ((head[mine] & prefix_mask) == prefix) & (
            count[mine] == prefix_spaces + len(COLUMNS[tag]) - 1
        )
        rows = mine[shaped]
        if not len(rows):
            continue
        ok, cols = _canonical(data, tag, starts[rows], first[rows], spaces, padded_ends[rows])
        if not ok.all():
            rows = rows[ok]
            cols = [
                c[ok] if isinstance(c, np.ndarray) else _string_spans(data, c[2][ok], c[3][ok])
                for c in cols
            ]
        kinds[rows] = t
        columns[tag] = [c if isinstance(c, np.ndarray) else c[:2] for c in cols]
    return Scan(ends, kinds, columns)
