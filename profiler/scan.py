"""One compiled pass over a chunk of trace text: where lines end and which are canonical.

A line is *canonical* for a tag when it is laid out exactly as
`aipusim.isa.trace_schema.format_line` writes it: the padded ``[TAG]``, then every
``key=value`` of the tag in schema order, one space apart, values non-empty. Canonical
lines go to the fast column-wise reader; every other line gets a careful per-line look.
Checking this in a numba loop costs one read of each byte, where numpy needed a dozen
whole-array passes.

>>> import numpy as np
>>> ends, kinds, _ = classify_lines(np.frombuffer(b"[B]  frame=0 inst=0 start=0 end=9\\n[X]\\n",
...                                            dtype=np.uint8))
>>> ends.tolist(), kinds.tolist()
([33, 37], [0, -1])
"""

from __future__ import annotations

import functools

import numba
import numpy as np

from aipusim.isa.trace_schema import COLUMNS, LEVELS

#: ``kinds`` value of a line whose tag is not one of `LEVELS` (or that has no tag).
OTHER = -1
#: ``kinds`` value ``NONCANONICAL + i``: a line of ``LEVELS[i]`` in another layout.
NONCANONICAL = 16


@functools.cache
def _templates() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Byte templates per tag: padded ``[TAG]`` prefix, then ``key=`` strings."""
    prefix_bytes, prefix_off, key_bytes, key_off, tag_keys = b"", [0], b"", [0], [0]
    for tag in LEVELS:
        prefix_bytes += f"[{tag.value}]".ljust(5).encode()
        prefix_off.append(len(prefix_bytes))
        for name, _ in COLUMNS[tag]:
            key_bytes += f"{name}=".encode()
            key_off.append(len(key_bytes))
        tag_keys.append(len(key_off) - 1)
    as_u8 = functools.partial(np.frombuffer, dtype=np.uint8)
    return (
        np.concatenate([as_u8(prefix_bytes), as_u8(key_bytes)]),
        np.array(prefix_off, dtype=np.int64),
        np.array([len(prefix_bytes) + o for o in key_off], dtype=np.int64),
        np.array(tag_keys, dtype=np.int64),
    )


@numba.njit(cache=True, nogil=True)
def _scan(
    buf: np.ndarray,
    tmpl: np.ndarray,
    prefix_off: np.ndarray,
    key_off: np.ndarray,
    tag_keys: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    n = len(buf)
    count = 0
    spaced = np.empty(n, dtype=np.uint8)
    for i in range(n):
        c = buf[i]
        if c == 10:
            count += 1
        spaced[i] = 32 if c == 61 else c
    ends = np.empty(count, dtype=np.int64)
    kinds = np.empty(count, dtype=np.int8)
    n_tags = len(prefix_off) - 1
    start = 0
    line = 0
    for i in range(n):
        if buf[i] != 10:
            continue
        end = i
        ends[line] = end
        kind = -1
        # Which tag: the bracketed prefix without its padding.
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
            # Canonical layout: padding, then "key=value" pairs one space apart.
            pos = start + width
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
                value_start = pos
                # A value ends at any control byte, space or '=' (which would shift fields).
                while pos < end and buf[pos] > 32 and buf[pos] != 61:
                    pos += 1
                if pos == value_start:
                    ok = False
                k += 1
            if ok and pos == end:
                kind = t
            break
        kinds[line] = kind
        line += 1
        start = i + 1
    return ends, kinds, spaced


def classify_lines(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Newline positions of ``buf`` (uint8), each line's kind (``i`` = canonical line of
    ``LEVELS[i]``, ``NONCANONICAL + i`` = other layout of that tag, `OTHER` = no known
    tag), and a copy of ``buf`` with every ``=`` turned into a space (for the CSV reader).
    Bytes after the last newline are not a line."""
    return _scan(buf, *_templates())
