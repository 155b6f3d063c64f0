"""Binary records of tasks: one fixed-width little-endian record per task.

The layout of every kind is derived once from the field metadata of `aipusim.isa.tasks`
(``bits`` and ``enum``), so a new kind or field needs no change here. A record is

======================  =====================================================
common part (55 bytes)  opcode u8, unit u8, phase u8, frame_slot u16, tile u32,
                        layer u32 (index into the tasklist's string table),
                        waits: count u8 + MAX_TOKEN_REFS slots of
                        (scope u8, index u16, count u16), signals: the same
kind part              the kind's fields in declaration order; an ``n``-bit field
                        takes the smallest of u8/u16/u32/u64 that holds it, an enum
                        field stores the member's position in its enum
zero padding            up to `RECORD_BYTES`, the same for every kind
======================  =====================================================

Only one encoding of a task is accepted (unused token slots and padding are zero), so
``encode(decode(b)) == b`` for every record that decodes.

Speed matters (the compiler writes and the simulator reads millions of tasks), so each kind
gets a precompiled `struct.Struct` and a small generated encode and decode function. The
generated code has a fast path only: when it fails, a slow reference check walks the record
field by field and raises the precise `TasklistError`.

>>> COMMON_BYTES, RECORD_BYTES
(55, 176)
>>> from aipusim.isa.tasks import Barrier, Unit
>>> t = Barrier(unit=Unit.CTRL, layer="sync", barrier_id=7, core_mask=0b1111)
>>> strings = {}
>>> data = encode_tasks([t], strings)
>>> len(data) == RECORD_BYTES
True
>>> decode_tasks(data, 1, list(strings)) == [t]
True
"""

from __future__ import annotations

import enum
import gc
import operator
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aipusim.base.errors import TasklistError
from aipusim.isa.tasks import KINDS, MAX_TOKEN_REFS, Phase, Task, TokenRef, TokenScope, Unit

#: Widths of the common part (the kind parts are declared in tasks.py).
OPCODE_BITS = 8
UNIT_BITS = 8
PHASE_BITS = 8
FRAME_SLOT_BITS = 16
TILE_BITS = 32
LAYER_INDEX_BITS = 32
TOKEN_COUNT_FIELD_BITS = 8  # number of used slots
TOKEN_SCOPE_BITS = 8
TOKEN_INDEX_BITS = 16
TOKEN_REF_COUNT_BITS = 16

#: Records are padded to a multiple of this, so addresses in a tasklist window stay aligned.
RECORD_ALIGN_BYTES = 8

_CODES = ((8, "B"), (16, "H"), (32, "I"), (64, "Q"))


def _struct_code(n_bits: int) -> str:
    for width, code in _CODES:
        if n_bits <= width:
            return code
    raise TypeError(f"fields wider than 64 bits are not supported, not {n_bits}")


@dataclass(frozen=True)
class FieldLayout:
    """One field of a record: where it sits and what values it may hold."""

    name: str
    bits: int
    enum: type[enum.StrEnum] | None
    offset: int  # byte offset inside the record
    code: str  # struct format character

    @property
    def max_value(self) -> int:
        """Largest raw value (an enum stores indices 0..len-1)."""
        if self.enum is not None:
            return len(self.enum) - 1
        return (1 << self.bits) - 1

    @property
    def size_bytes(self) -> int:
        return struct.calcsize("<" + self.code)

    @property
    def needs_range_check(self) -> bool:
        """True when the struct code alone does not bound the value (odd widths, enums)."""
        return self.enum is not None or self.bits not in (8, 16, 32, 64)

    def describe_valid(self) -> str:
        if self.enum is not None:
            return "one of " + ", ".join(m.value for m in self.enum)
        return f"an integer 0-{self.max_value}"


def _common_fields() -> tuple[list[tuple[str, int, type[enum.StrEnum] | None]], int]:
    head: list[tuple[str, int, type[enum.StrEnum] | None]] = [
        ("opcode", OPCODE_BITS, None),
        ("unit", UNIT_BITS, Unit),
        ("phase", PHASE_BITS, Phase),
        ("frame_slot", FRAME_SLOT_BITS, None),
        ("tile", TILE_BITS, None),
        ("layer", LAYER_INDEX_BITS, None),
    ]
    for side in ("waits", "signals"):
        head.append((f"{side}.count", TOKEN_COUNT_FIELD_BITS, None))
        for slot in range(MAX_TOKEN_REFS):
            head.append((f"{side}[{slot}].scope", TOKEN_SCOPE_BITS, TokenScope))
            head.append((f"{side}[{slot}].index", TOKEN_INDEX_BITS, None))
            head.append((f"{side}[{slot}].count", TOKEN_REF_COUNT_BITS, None))
    return head, len(head)


_COMMON_SPEC, COMMON_VALUES = _common_fields()
#: Values per token block (the used-slot count plus three per slot).
TOKEN_BLOCK_VALUES = 1 + 3 * MAX_TOKEN_REFS
_WAITS_AT = 6
_SIGNALS_AT = _WAITS_AT + TOKEN_BLOCK_VALUES


def _layout_fields(
    spec: Iterable[tuple[str, int, type[enum.StrEnum] | None]], start: int
) -> list[FieldLayout]:
    out = []
    offset = start
    for name, n_bits, enum_type in spec:
        code = _struct_code(n_bits)
        out.append(FieldLayout(name, n_bits, enum_type, offset, code))
        offset += struct.calcsize("<" + code)
    return out


#: The common part of every record, in order.
COMMON_FIELDS: tuple[FieldLayout, ...] = tuple(_layout_fields(_COMMON_SPEC, 0))
COMMON_BYTES = COMMON_FIELDS[-1].offset + COMMON_FIELDS[-1].size_bytes


def _kind_spec(kind: type[Task]) -> list[tuple[str, int, type[enum.StrEnum] | None]]:
    return [(f.name, f.metadata["bits"], f.metadata["enum"]) for f in kind.kind_fields()]


def _record_bytes() -> int:
    longest = max(
        sum(f.size_bytes for f in _layout_fields(_kind_spec(k), 0)) for k in KINDS.values()
    )
    raw = COMMON_BYTES + longest
    return -(-raw // RECORD_ALIGN_BYTES) * RECORD_ALIGN_BYTES


#: Size of every task record in bytes (all kinds share it, so record i sits at i * size).
RECORD_BYTES: int = _record_bytes()


class _BadRecord(Exception):
    """Raised by the generated fast paths; the slow path then explains the problem."""


class _TokenDecoder(dict[bytes, tuple[TokenRef, ...]]):
    """Raw token block -> validated tuple of TokenRef, built on first use.

    Token operands repeat a lot within a tasklist, so a dict keyed by the raw bytes turns
    their decoding into one hash lookup.
    """

    def __missing__(self, raw: bytes) -> tuple[TokenRef, ...]:
        n = raw[0]
        if n > MAX_TOKEN_REFS or any(raw[1 + _REF.size * n :]):
            raise _BadRecord
        scopes = tuple(TokenScope)
        refs = []
        for slot in range(n):
            scope, index, count = _REF.unpack_from(raw, 1 + _REF.size * slot)
            if scope >= len(scopes):
                raise _BadRecord
            refs.append(TokenRef(scopes[scope], index, count))
        if len(self) > _CACHE_LIMIT:  # bound memory on adversarial input
            self.clear()
        value = self[raw] = tuple(refs)
        return value


class _TokenEncoder(dict[tuple[TokenRef, ...], bytes]):
    """Tuple of TokenRef -> raw token block; raises on anything that does not fit."""

    def __missing__(self, refs: tuple[TokenRef, ...]) -> bytes:
        if not isinstance(refs, tuple) or len(refs) > MAX_TOKEN_REFS:
            raise _BadRecord
        raw = bytearray(_BLOCK_BYTES)
        raw[0] = len(refs)
        for slot, r in enumerate(refs):
            if not isinstance(r, TokenRef) or r.scope not in _SCOPE_INDEX:
                raise _BadRecord
            _REF.pack_into(raw, 1 + _REF.size * slot, _SCOPE_INDEX[r.scope], r.index, r.count)
        if len(self) > _CACHE_LIMIT:
            self.clear()
        value = self[refs] = bytes(raw)
        return value


_CACHE_LIMIT = 1 << 16
_SCOPE_INDEX = {s: i for i, s in enumerate(TokenScope)}
_REF = struct.Struct(
    "<"
    + "".join(_struct_code(b) for b in (TOKEN_SCOPE_BITS, TOKEN_INDEX_BITS, TOKEN_REF_COUNT_BITS))
)
_BLOCK_BYTES = (
    struct.calcsize("<" + _struct_code(TOKEN_COUNT_FIELD_BITS)) + MAX_TOKEN_REFS * _REF.size
)


_TOKENS_IN = _TokenEncoder()
_TOKENS_OUT = _TokenDecoder()


@dataclass(frozen=True)
class KindLayout:
    """The record layout of one task kind, with its compiled codecs."""

    kind: type[Task]
    fields: tuple[FieldLayout, ...]  # kind-specific fields (common ones: COMMON_FIELDS)
    pad_bytes: int
    #: Field by field, for explaining errors (one value per entry of `all_fields`).
    detail: struct.Struct
    #: Pack ``(task, strings, out, offset)`` into ``out``; raises on any bad value.
    encode_into: Callable[[Task, dict[str, int], bytearray, int], None]
    #: Task from ``(buf, offset, strings)``; raises _BadRecord/IndexError/KeyError.
    decode_at: Callable[[Any, int, Sequence[str]], Task]

    @property
    def all_fields(self) -> tuple[FieldLayout, ...]:
        return COMMON_FIELDS + self.fields


_COMMON_NAMES = ("unit", "layer", "tile", "frame_slot", "phase", "waits", "signals")


def _generate_codecs(kind: type[Task], fields: Sequence[FieldLayout], pad: int) -> tuple:
    """Build the fast encode/decode functions of one kind from its field table.

    Generated rather than looped because a per-field Python loop costs several times
    more per task than one flat expression, and the throughput target is 1 M tasks/s.
    The common token blocks are handled as opaque byte strings through caches.
    """
    token_code = f"{_BLOCK_BYTES}s"
    fast = struct.Struct(
        "<"
        + "".join(f.code for f in COMMON_FIELDS[:_WAITS_AT])
        + token_code * 2
        + "".join(f.code for f in fields)
        + (f"{pad}s" if pad else "")
    )
    assert fast.size == RECORD_BYTES
    local = {f.name: f"f_{f.name}" for f in fields}
    env: dict[str, Any] = {
        "KIND": kind,
        "NEW": object.__new__,
        "BAD": _BadRecord,
        "GET": operator.attrgetter(*_COMMON_NAMES, *(f.name for f in fields)),
        "PACK": fast.pack_into,
        "UNPACK": fast.unpack_from,
        "TOKS_IN": _TOKENS_IN,
        "TOKS_OUT": _TOKENS_OUT,
        "UNIT_IN": {u: i for i, u in enumerate(Unit) if u in kind.UNITS},
        "UNIT_OUT": {i: u for i, u in enumerate(Unit) if u in kind.UNITS},
        "PHASE_IN": {p: i for i, p in enumerate(Phase)},
        "PHASE_OUT": tuple(Phase),
        "ZPAD": bytes(pad),
    }
    packed = [
        str(kind.OPCODE),
        "UNIT_IN[unit]",
        "PHASE_IN[phase]",
        "frame_slot",
        "tile",
        "S.setdefault(layer, len(S))",
        "TOKS_IN[waits]",
        "TOKS_IN[signals]",
    ]
    # (attribute, expression), in dataclass field order: instances made by the dataclass
    # __init__ then share one key table with these, which keeps each task small.
    built = [
        ("unit", "UNIT_OUT[unit]"),
        ("layer", "STR[layer]"),
        ("tile", "tile"),
        ("frame_slot", "frame_slot"),
        ("phase", "PHASE_OUT[phase]"),
        ("waits", "TOKS_OUT[waits]"),
        ("signals", "TOKS_OUT[signals]"),
    ]
    enc_checks, dec_checks = [], []
    for i, f in enumerate(fields):
        var = local[f.name]
        if f.enum is not None:
            env[f"EIN_{i}"] = {m: n for n, m in enumerate(f.enum)}
            env[f"EOUT_{i}"] = tuple(f.enum)
            packed.append(f"EIN_{i}[{var}]")
            built.append((f.name, f"EOUT_{i}[{var}]"))
        else:
            packed.append(var)
            built.append((f.name, var))
            if f.needs_range_check:
                enc_checks.append(f"    if not 0 <= {var} <= {f.max_value}: raise BAD\n")
                dec_checks.append(f"    if {var} > {f.max_value}: raise BAD\n")
    names = ", ".join([*_COMMON_NAMES, *local.values()])
    unpacked = ", ".join(
        ["_op", "unit", "phase", "frame_slot", "tile", "layer", "waits", "signals"]
        + list(local.values())
        + (["pad"] if pad else [])
    )
    if pad:
        packed.append("ZPAD")
        dec_checks.append("    if pad != ZPAD: raise BAD\n")
    src = (
        "def encode(t, S, out, offset):\n"
        f"    {names}, = GET(t)\n"
        + "".join(enc_checks)
        + f"    PACK(out, offset, {', '.join(packed)})\n"
        "def decode(buf, offset, STR):\n"
        f"    {unpacked}, = UNPACK(buf, offset)\n"
        + "".join(dec_checks)
        + "    o = NEW(KIND)\n"
        + "    d = o.__dict__\n"
        + "".join(f"    d['{name}'] = {expr}\n" for name, expr in built)
        + "    return o\n"
    )
    exec(compile(src, f"<codec {kind.__name__}>", "exec"), env)
    return env["encode"], env["decode"]


def _build_layout(kind: type[Task]) -> KindLayout:
    fields = tuple(_layout_fields(_kind_spec(kind), COMMON_BYTES))
    used = COMMON_BYTES + sum(f.size_bytes for f in fields)
    pad = RECORD_BYTES - used
    fmt = "<" + "".join(f.code for f in COMMON_FIELDS + fields) + (f"{pad}s" if pad else "")
    detail = struct.Struct(fmt)
    assert detail.size == RECORD_BYTES, (kind, detail.size)
    encode, decode = _generate_codecs(kind, fields, pad)
    return KindLayout(kind, fields, pad, detail, encode, decode)


#: Layout of every kind, by opcode and by class.
LAYOUTS: dict[int, KindLayout] = {op: _build_layout(k) for op, k in sorted(KINDS.items())}
_BY_CLASS: dict[type[Task], KindLayout] = {lay.kind: lay for lay in LAYOUTS.values()}
_BY_OPCODE: list[KindLayout | None] = [LAYOUTS.get(op) for op in range(256)]
_ENCODERS = {cls: lay.encode_into for cls, lay in _BY_CLASS.items()}
_DECODERS = [None if lay is None else lay.decode_at for lay in _BY_OPCODE]


def layout_of(kind: type[Task]) -> KindLayout:
    """The record layout of a task kind."""
    return _BY_CLASS[kind]


# -- validation (the slow, precise path) ---------------------------------------------------


def field_problem(f: FieldLayout, value: Any) -> str | None:
    """Why ``value`` cannot be stored in field ``f`` (None when it can)."""
    if f.enum is not None:
        if isinstance(value, str) and value in {m.value for m in f.enum}:
            return None
        return f"must be {f.describe_valid()}, not {value!r}"
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= f.max_value:
        return f"must be {f.describe_valid()}, not {value!r}"
    return None


def _unit_choices(kind: type[Task]) -> str:
    return ", ".join(u.value for u in Unit if u in kind.UNITS)


def task_problem(task: Any) -> str | None:
    """Why ``task`` cannot be encoded (None when it can).

    >>> from aipusim.isa.tasks import Barrier, Unit
    >>> task_problem(Barrier(unit=Unit.CTRL, barrier_id=1, core_mask=300))
    'Barrier field `core_mask` must be an integer 0-255, not 300'
    """
    lay = _BY_CLASS.get(type(task))
    if lay is None:
        kinds = ", ".join(k.__name__ for k in _BY_CLASS)
        return f"task must be one of the kinds {kinds}, not {type(task).__name__}"
    name = lay.kind.__name__
    if task.unit not in lay.kind.UNITS:
        return f"{name} unit must be one of {_unit_choices(lay.kind)}, not {task.unit!r}"
    by_name = {f.name: f for f in COMMON_FIELDS}
    for fname in ("phase", "frame_slot", "tile"):
        problem = field_problem(by_name[fname], getattr(task, fname))
        if problem:
            return f"{name} field `{fname}` {problem}"
    if not isinstance(task.layer, str):
        return f"{name} field `layer` must be a string, not {task.layer!r}"
    for side in ("waits", "signals"):
        refs = getattr(task, side)
        if not isinstance(refs, tuple) or len(refs) > MAX_TOKEN_REFS:
            return (
                f"{name} `{side}` must be a tuple of at most {MAX_TOKEN_REFS} TokenRef, "
                f"not {refs!r}"
            )
        for slot, ref in enumerate(refs):
            problem = _token_problem(ref, slot)
            if problem:
                return f"{name} `{side}` {problem}"
    for f in lay.fields:
        problem = field_problem(f, getattr(task, f.name))
        if problem:
            return f"{name} field `{f.name}` {problem}"
    return None


def _token_problem(ref: Any, slot: int) -> str | None:
    if not isinstance(ref, TokenRef):
        return f"slot {slot} must be a TokenRef, not {ref!r}"
    if ref.scope not in _SCOPE_INDEX:
        return f"slot {slot} scope must be local or global, not {ref.scope!r}"
    for what, n_bits in (("index", TOKEN_INDEX_BITS), ("count", TOKEN_REF_COUNT_BITS)):
        value = getattr(ref, what)
        top = (1 << n_bits) - 1
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
            return f"slot {slot} {what} must be an integer 0-{top}, not {value!r}"
    return None


def check_task(task: Any, index: int = 0) -> None:
    """Raise `TasklistError` naming task ``index`` if ``task`` cannot be encoded."""
    problem = task_problem(task)
    if problem:
        raise TasklistError(f"task {index}: {problem}")


def explain_record(
    buf: bytes | memoryview, offset: int, index: int, strings: Sequence[str], base_offset: int = 0
) -> TasklistError:
    """The precise error for the record at ``offset`` (file offset ``base_offset + offset``)."""
    at = base_offset + offset
    if len(buf) - offset < RECORD_BYTES:
        return TasklistError(
            f"byte {base_offset + len(buf)}: task {index} is truncated: expected "
            f"{RECORD_BYTES} bytes from byte {at}, found {len(buf) - offset}"
        )
    op = buf[offset]
    lay = _BY_OPCODE[op]
    if lay is None:
        valid = ", ".join(str(k) for k in sorted(LAYOUTS))
        return TasklistError(f"byte {at}: task {index} opcode must be one of {valid}, not {op}")
    name = lay.kind.__name__
    values = lay.detail.unpack_from(buf, offset)
    fields = lay.all_fields
    for f, value in zip(fields, values, strict=False):
        where = f"byte {at + f.offset}: task {index} ({name})"
        if f.name == "unit":
            units = list(Unit)
            if value >= len(units) or units[value] not in lay.kind.UNITS:
                valid = ", ".join(str(i) for i, u in enumerate(units) if u in lay.kind.UNITS)
                return TasklistError(
                    f"{where} unit must be one of {valid} ({_unit_choices(lay.kind)}), not {value}"
                )
        elif f.name == "layer":
            if value >= len(strings):
                return TasklistError(
                    f"{where} layer must be a string index 0-{len(strings) - 1}, not {value}"
                )
        elif f.name in ("waits.count", "signals.count"):
            if value > MAX_TOKEN_REFS:
                return TasklistError(f"{where} `{f.name}` must be 0-{MAX_TOKEN_REFS}, not {value}")
        elif f.enum is not None and value > f.max_value:
            return TasklistError(
                f"{where} `{f.name}` must be an index 0-{f.max_value} "
                f"({f.describe_valid()}), not {value}"
            )
        elif value > f.max_value:
            return TasklistError(f"{where} `{f.name}` must be 0-{f.max_value}, not {value}")
    for side, start in (("waits", _WAITS_AT), ("signals", _SIGNALS_AT)):
        used = values[start]
        for k in range(start + 1 + 3 * used, start + TOKEN_BLOCK_VALUES):
            if values[k]:
                f = fields[k]
                return TasklistError(
                    f"byte {at + f.offset}: task {index} ({name}) unused token slot "
                    f"`{f.name}` must be 0 ({side}.count is {used}), not {values[k]}"
                )
    if lay.pad_bytes:
        pad_at = RECORD_BYTES - lay.pad_bytes
        for k in range(pad_at, RECORD_BYTES):
            if buf[offset + k]:
                return TasklistError(
                    f"byte {at + k}: task {index} ({name}) padding must be 0, not {buf[offset + k]}"
                )
    return TasklistError(f"byte {at}: task {index} ({name}) cannot be decoded")


# -- bulk codecs ---------------------------------------------------------------------------


def encode_tasks(
    tasks: Sequence[Task], strings: dict[str, int] | None = None, first_index: int = 0
) -> bytes:
    """Records of ``tasks``, back to back; layer names are added to ``strings`` (name ->
    index, in order of first use) so the caller can write the string table.

    Raises `TasklistError` naming the task index, field, value and valid range when a
    task cannot be encoded (bit widths only; token indices are the checker's business).
    """
    if strings is None:
        strings = {}
    out = bytearray(len(tasks) * RECORD_BYTES)
    encoders = _ENCODERS
    offset = 0
    try:
        for task in tasks:
            encoders[type(task)](task, strings, out, offset)
            offset += RECORD_BYTES
    except (KeyError, TypeError, AttributeError, struct.error, _BadRecord) as exc:
        index = offset // RECORD_BYTES
        check_task(tasks[index], first_index + index)
        raise TasklistError(f"task {first_index + index}: cannot be encoded ({exc})") from exc
    for name in strings:
        if not isinstance(name, str):
            bad = next(i for i, t in enumerate(tasks) if not isinstance(t.layer, str))
            check_task(tasks[bad], first_index + bad)
    return bytes(out)


def decode_tasks(
    data: bytes | memoryview,
    count: int,
    strings: Sequence[str],
    offset: int = 0,
    first_index: int = 0,
    base_offset: int = 0,
) -> list[Task]:
    """Decode ``count`` records starting at ``data[offset]``.

    ``first_index`` numbers the tasks and ``base_offset`` is the file offset of
    ``data[0]``, both only for error messages. Raises `TasklistError` with the byte offset
    of the first bad field.
    """
    end = offset + count * RECORD_BYTES
    if len(data) < end:
        whole = max(0, len(data) - offset) // RECORD_BYTES
        pos = offset + whole * RECORD_BYTES
        raise explain_record(data, pos, first_index + whole, strings, base_offset)
    decoders = _DECODERS
    tasks: list[Task] = []
    append = tasks.append
    pos = offset
    # Tasks hold no reference cycles, yet creating hundreds of thousands of them triggers
    # collections that scan the whole growing list again and again (~2x the decode time).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for pos in range(offset, end, RECORD_BYTES):
            append(decoders[data[pos]](data, pos, strings))
    except (TypeError, IndexError, KeyError, _BadRecord):
        index = first_index + (pos - offset) // RECORD_BYTES
        raise explain_record(data, pos, index, strings, base_offset) from None
    finally:
        if gc_was_enabled:
            gc.enable()
    return tasks


def kind_field_layouts(kind: type[Task]) -> Mapping[str, FieldLayout]:
    """Kind-specific field layouts of ``kind`` by name."""
    return {f.name: f for f in _BY_CLASS[kind].fields}


__all__ = [
    "COMMON_BYTES",
    "COMMON_FIELDS",
    "LAYOUTS",
    "RECORD_BYTES",
    "FieldLayout",
    "KindLayout",
    "check_task",
    "decode_tasks",
    "encode_tasks",
    "explain_record",
    "field_problem",
    "kind_field_layouts",
    "layout_of",
    "task_problem",
]
