"""One compiled pass over a chunk of trace text: line ends, tags, and the values of every
canonical line.

A line is *canonical* for a tag when it is laid out exactly as
`aipusim.isa.trace_schema.format_line` writes it: the padded ``[TAG]``, then every
``key=value`` of the tag in schema order, one space apart, integers as 1-18 decimal
digits (optional ``-``), strings as printable ASCII without ``=`` (possibly empty). For those
lines the numba loop parses the integers and records where each string lies; every other
line gets a careful per-line look in Python (`aipusim.profiler.parse`).

>>> import numpy as np
>>> s = classify_lines(np.frombuffer(b"[B]  frame=0 inst=2 start=5 end=-9\\n[X]\\n",
...                                  dtype=np.uint8))
>>> s.ends.tolist(), s.kinds.tolist(), s.ints[:4, 0].tolist()
([34, 38], [0, -1], [0, 2, 5, -9])
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numba
import numpy as np

from aipusim.isa.trace_schema import COLUMNS, LEVELS, ColumnType, Tag

#: ``kinds`` value of a line whose tag is not one of `LEVELS` (or that has no tag).
OTHER = -1
#: ``kinds`` value ``NONCANONICAL + i``: a line of ``LEVELS[i]`` in another layout.
NONCANONICAL = 16

#: Most integer / string columns of any tag (sizes of the per-line value slots).
MAX_INTS = max(sum(c is ColumnType.INT for _, c in COLUMNS[t]) for t in LEVELS)
MAX_STRS = max(sum(c is ColumnType.STR for _, c in COLUMNS[t]) for t in LEVELS)


@functools.cache
def slots(tag: Tag) -> list[int]:
    """Value slot of each column of ``tag``: its index among the tag's ints or strings."""
    out, n_int, n_str = [], 0, 0
    for _, ctype in COLUMNS[tag]:
        if ctype is ColumnType.INT:
            out.append(n_int)
            n_int += 1
        else:
            out.append(n_str)
            n_str += 1
    return out


@functools.cache
def _templates() -> tuple[np.ndarray, ...]:
    """Byte templates per tag (padded ``[TAG]`` prefix, ``key=`` strings) and, per key,
    whether it is an integer and its value slot."""
    prefix_bytes, prefix_off, key_bytes, key_off, tag_keys = b"", [0], b"", [0], [0]
    is_int, slot = [], []
    for tag in LEVELS:
        prefix_bytes += f"[{tag.value}]".ljust(5).encode()
        prefix_off.append(len(prefix_bytes))
        for (name, ctype), s in zip(COLUMNS[tag], slots(tag), strict=True):
            key_bytes += f"{name}=".encode()
            key_off.append(len(key_bytes))
            is_int.append(ctype is ColumnType.INT)
            slot.append(s)
        tag_keys.append(len(key_off) - 1)
    as_u8 = functools.partial(np.frombuffer, dtype=np.uint8)
    return (
        np.concatenate([as_u8(prefix_bytes), as_u8(key_bytes)]),
        np.array(prefix_off, dtype=np.int64),
        np.array([len(prefix_bytes) + o for o in key_off], dtype=np.int64),
        np.array(tag_keys, dtype=np.int64),
        np.array(is_int, dtype=np.bool_),
        np.array(slot, dtype=np.int64),
    )


@numba.njit(cache=True, nogil=True)
def _scan(
    buf, tmpl, prefix_off, key_off, tag_keys, key_is_int, key_slot, n_ints, n_strs
):  # pragma: no cover - compiled
    n = len(buf)
    count = 0
    for i in range(n):
        if buf[i] == 10:
            count += 1
    ends = np.empty(count, dtype=np.int64)
    kinds = np.empty(count, dtype=np.int8)
    # Slot-major, so one column of one tag is a contiguous row to take from.
    ints = np.empty((n_ints, count), dtype=np.int64)
    spans = np.empty((n_strs, 2, count), dtype=np.int64)
    n_tags = len(prefix_off) - 1
    start = 0
    line = 0
    for i in range(n):
        if buf[i] != 10:
            continue
        end = i
        ends[line] = end
        kind = -1
        for t in range(n_tags):
            p0 = prefix_off[t]
            p1 = prefix_off[t + 1]
            close = p0
            while tmpl[close] != 93:  # ']'
                close += 1
            width = close - p0 + 1
            if end - start < width:
                continue
            same = True
            for j in range(width):
                if buf[start + j] != tmpl[p0 + j]:
                    same = False
                    break
            if not same:
                continue
            kind = 16 + t
            ok = end - start >= p1 - p0
            if ok:
                for j in range(width, p1 - p0):
                    if buf[start + j] != 32:
                        ok = False
                        break
            pos = start + (p1 - p0)
            k = tag_keys[t]
            while ok and k < tag_keys[t + 1]:
                if k > tag_keys[t]:
                    if pos >= end or buf[pos] != 32:
                        ok = False
                        break
                    pos += 1
                k0 = key_off[k]
                k1 = key_off[k + 1]
                if end - pos < k1 - k0:
                    ok = False
                    break
                for j in range(k1 - k0):
                    if buf[pos + j] != tmpl[k0 + j]:
                        ok = False
                        break
                if not ok:
                    break
                pos += k1 - k0
                if key_is_int[k]:
                    negative = pos < end and buf[pos] == 45  # '-'
                    if negative:
                        pos += 1
                    digits = 0
                    value = 0
                    while pos < end and 48 <= buf[pos] <= 57:
                        value = value * 10 + (buf[pos] - 48)
                        digits += 1
                        pos += 1
                    if digits == 0 or digits > 18:
                        ok = False
                        break
                    ints[key_slot[k], line] = -value if negative else value
                else:
                    value_start = pos
                    # May be empty: the simulator writes ``layer=`` for host transfers.
                    while pos < end and 32 < buf[pos] < 128 and buf[pos] != 61:
                        pos += 1
                    spans[key_slot[k], 0, line] = value_start
                    spans[key_slot[k], 1, line] = pos
                k += 1
            if ok and pos == end:
                kind = t
            break
        kinds[line] = kind
        line += 1
        start = i + 1
    return ends, kinds, ints, spans


@numba.njit(cache=True, nogil=True)
def _gather(buf, begin, end):  # pragma: no cover - compiled
    offsets = np.empty(len(begin) + 1, dtype=np.int32)
    offsets[0] = 0
    for i in range(len(begin)):
        offsets[i + 1] = offsets[i] + (end[i] - begin[i])
    data = np.empty(offsets[-1], dtype=np.uint8)
    out = 0
    for i in range(len(begin)):
        for j in range(begin[i], end[i]):
            data[out] = buf[j]
            out += 1
    return offsets, data


def gather_strings(buf: np.ndarray, begin: np.ndarray, end: np.ndarray) -> tuple:
    """Arrow string buffers (offsets int32, data uint8) of the byte spans of ``buf``."""
    return _gather(buf, begin, end)


@numba.njit(cache=True, nogil=True)
def _span_hash(buf, b, e):  # pragma: no cover - compiled
    h = np.uint64(14695981039346656037)  # FNV-1a
    for j in range(b, e):
        h = (h ^ np.uint64(buf[j])) * np.uint64(1099511628211)
    return h


@numba.njit(cache=True, nogil=True)
def _encode(buf, begin, end):  # pragma: no cover - compiled
    n = len(begin)
    cap = 1024
    table = np.full(cap, -1, dtype=np.int64)
    ub = np.empty(max(n, 1), dtype=np.int64)
    ue = np.empty(max(n, 1), dtype=np.int64)
    codes = np.empty(n, dtype=np.int32)
    nu = 0
    for i in range(n):
        b, e = begin[i], end[i]
        slot = np.int64(_span_hash(buf, b, e) & np.uint64(cap - 1))
        while True:
            u = table[slot]
            if u == -1:
                table[slot] = nu
                ub[nu], ue[nu] = b, e
                codes[i] = nu
                nu += 1
                break
            if ue[u] - ub[u] == e - b:
                same = True
                for j in range(e - b):
                    if buf[ub[u] + j] != buf[b + j]:
                        same = False
                        break
                if same:
                    codes[i] = u
                    break
            slot = (slot + 1) & (cap - 1)
        if 2 * nu > cap:
            # Keep the table at most half full: double it and re-insert the uniques.
            cap *= 2
            table = np.full(cap, -1, dtype=np.int64)
            for u in range(nu):
                slot = np.int64(_span_hash(buf, ub[u], ue[u]) & np.uint64(cap - 1))
                while table[slot] != -1:
                    slot = (slot + 1) & (cap - 1)
                table[slot] = u
    return codes, ub[:nu], ue[:nu]


def encode_strings(buf: np.ndarray, begin: np.ndarray, end: np.ndarray) -> tuple:
    """Dictionary-encode the byte spans of ``buf``: (codes int32, unique begins, unique
    ends) in order of first appearance."""
    return _encode(buf, begin, end)


@dataclass
class Scan:
    """What `classify_lines` found in one chunk."""

    ends: np.ndarray  # newline position of every line
    kinds: np.ndarray  # tag index / NONCANONICAL + index / OTHER, per line
    ints: np.ndarray  # [slot, line] integer values of canonical lines
    spans: np.ndarray  # [slot, (begin, end), line] byte spans of string values


def classify_lines(buf: np.ndarray) -> Scan:
    """Scan ``buf`` (uint8, whole lines). Bytes after the last newline are not a line."""
    return Scan(*_scan(buf, *_templates(), MAX_INTS, MAX_STRS))
