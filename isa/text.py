"""The text form of a tasklist: one task per line, for people (``aipusim isa disasm/asm``).

::

    # comments and blank lines are ignored
    tasklist core=0
    0 dma0   DmaCopy   layer=conv1 tile=0 frame_slot=0 phase=frame signals=L0 src_pool=ddr ...
    1 mvm    Mvm       layer=conv1 tile=0 frame_slot=0 phase=frame waits=L0 weight_set=0 ...

A task line is ``[index] unit Kind field=value ...``. The index is optional; when present
it must be the task's position (a guard against lines lost in editing). Fields are the
dataclass fields of the kind (`aipusim.isa.tasks`); an omitted field takes its default.
Integers are any Python literal (``4096``, ``0x1000``, ``0b11``, ``1_000``); enums their
value; ``waits``/``signals`` a comma list of tokens ``L3`` (local 3, count 1), ``G0x2``
(global 0, count 2); a layer name with spaces or special characters is JSON-quoted.

`assemble` of `disassemble` gives back an equal tasklist, so the binary is byte-identical.

>>> from aipusim.isa.tasks import Barrier, Unit
>>> from aipusim.isa.tasklist import Tasklist
>>> tl = Tasklist(1, [Barrier(unit=Unit.CTRL, layer="sync all", barrier_id=3, core_mask=15)])
>>> print(disassemble(tl, comments=False), end="")
tasklist core=1
0 ctrl   Barrier      layer="sync all" tile=0 frame_slot=0 phase=frame barrier_id=3 core_mask=0b1111
>>> assemble(disassemble(tl)) == tl
True
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable
from typing import Any

from aipusim.base.errors import TasklistError
from aipusim.isa.encoding import COMMON_FIELDS, field_problem, kind_field_layouts
from aipusim.isa.tasklist import Tasklist
from aipusim.isa.tasks import KINDS, MAX_TOKEN_REFS, Phase, Task, TokenRef, TokenScope, Unit

_KIND_BY_NAME = {k.__name__: k for k in KINDS.values()}
_SCOPE_BY_LETTER = {s.value[0].upper(): s for s in TokenScope}
assert len(_SCOPE_BY_LETTER) == len(TokenScope), "token scopes need distinct initials"
_LETTER_BY_SCOPE = {s: letter for letter, s in _SCOPE_BY_LETTER.items()}
_TOKEN = re.compile(r"([A-Z])(\d+)(?:x(\d+))?")
_BARE = re.compile(r"[^\s\"#=,\\]+")
_ITEM = re.compile(r'([A-Za-z_]\w*)=("(?:[^"\\]|\\.)*"|[^\s"#]*)|([^\s"#=]+)')
_COMMON_LAYOUT = {f.name: f for f in COMMON_FIELDS}
_HEADER_WORD = "tasklist"


# -- formatting ----------------------------------------------------------------------------


def _format_int(name: str, value: int) -> str:
    # Addresses read best in hex, core masks in binary; the rest are counts and sizes.
    if name.endswith("addr") or name.rstrip("0123456789").endswith("addr"):
        return hex(value)
    if name.endswith("mask"):
        return bin(value)
    return str(value)


def _format_str(value: str) -> str:
    return value if _BARE.fullmatch(value) else json.dumps(value, ensure_ascii=False)


def format_tokens(refs: Iterable[TokenRef]) -> str:
    """``L3,G0x2`` for local 3 (count 1) and global 0 (count 2)."""
    return ",".join(
        f"{_LETTER_BY_SCOPE[r.scope]}{r.index}" + (f"x{r.count}" if r.count != 1 else "")
        for r in refs
    )


def format_task(task: Task, index: int | None = None) -> str:
    """One line of text for ``task`` (``index`` first when given)."""
    kind = type(task)
    parts = [] if index is None else [str(index)]
    parts += [
        f"{task.unit.value:<6}",
        f"{kind.__name__:<12}",
        f"layer={_format_str(task.layer)}",
        f"tile={task.tile}",
        f"frame_slot={task.frame_slot}",
        f"phase={task.phase.value}",
    ]
    if task.waits:
        parts.append(f"waits={format_tokens(task.waits)}")
    if task.signals:
        parts.append(f"signals={format_tokens(task.signals)}")
    for name, layout in kind_field_layouts(kind).items():
        value = getattr(task, name)
        shown = value.value if layout.enum is not None else _format_int(name, value)
        parts.append(f"{name}={shown}")
    return " ".join(parts)


def disassemble(tasklist: Tasklist, comments: bool = True) -> str:
    """The text form of ``tasklist`` (ends with a newline)."""
    lines = []
    if comments:
        lines += [
            "# aipusim tasklist text form; `aipusim isa asm` rebuilds the binary",
            f"# {len(tasklist.tasks)} tasks",
        ]
    lines.append(f"{_HEADER_WORD} core={tasklist.core_id}")
    lines += [format_task(t, i) for i, t in enumerate(tasklist.tasks)]
    return "\n".join(lines) + "\n"


# -- parsing -------------------------------------------------------------------------------


def _tokenize(line: str, lineno: int) -> list[tuple[str | None, str]]:
    """(key, raw value) items of a line; key None for bare words. Stops at ``#``."""
    items: list[tuple[str | None, str]] = []
    pos = 0
    while True:
        while pos < len(line) and line[pos].isspace():
            pos += 1
        if pos == len(line) or line[pos] == "#":
            return items
        m = _ITEM.match(line, pos)
        if not m or (m.end() < len(line) and not line[m.end()].isspace() and line[m.end()] != "#"):
            raise TasklistError(
                f"line {lineno}: column {pos + 1} must start a word or key=value, "
                f"not {line[pos : pos + 20]!r}"
            )
        items.append((m.group(1), m.group(2)) if m.group(1) else (None, m.group(3)))
        pos = m.end()


def _parse_str(raw: str, lineno: int, what: str) -> str:
    if raw.startswith('"'):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise TasklistError(
                f"line {lineno}: {what} must be a JSON string, not {raw} ({exc.msg})"
            ) from None
        return value
    return raw


def _parse_int(raw: str, lineno: int, what: str) -> int:
    try:
        return int(raw, 0)
    except ValueError:
        raise TasklistError(
            f"line {lineno}: {what} must be an integer literal, not {raw!r}"
        ) from None


def parse_tokens(raw: str, lineno: int, what: str) -> tuple[TokenRef, ...]:
    """Parse ``L3,G0x2``; an empty string or ``-`` is no tokens."""
    if raw in ("", "-"):
        return ()
    refs = []
    for item in raw.split(","):
        m = _TOKEN.fullmatch(item)
        if not m or m.group(1) not in _SCOPE_BY_LETTER:
            letters = "/".join(_SCOPE_BY_LETTER)
            raise TasklistError(
                f"line {lineno}: {what} token must look like {letters}<index>[x<count>] "
                f"(e.g. L3, G0x2), not {item!r}"
            )
        count = int(m.group(3)) if m.group(3) is not None else 1
        refs.append(TokenRef(_SCOPE_BY_LETTER[m.group(1)], int(m.group(2)), count))
    if len(refs) > MAX_TOKEN_REFS:
        raise TasklistError(
            f"line {lineno}: {what} must list at most {MAX_TOKEN_REFS} tokens, not {len(refs)}"
        )
    return tuple(refs)


def _enum_value(enum_type: Any, raw: str, lineno: int, what: str) -> Any:
    try:
        return enum_type(raw)
    except ValueError:
        valid = ", ".join(m.value for m in enum_type)
        raise TasklistError(f"line {lineno}: {what} must be one of {valid}, not {raw!r}") from None


def parse_task(line: str, lineno: int = 1, expected_index: int | None = None) -> Task | None:
    """The task on one text line (None for a blank or comment line)."""
    items = _tokenize(line, lineno)
    if not items:
        return None
    words = []
    while items and items[0][0] is None:
        words.append(items.pop(0)[1])
    if words and words[0].isdigit():
        index = int(words.pop(0))
        if expected_index is not None and index != expected_index:
            raise TasklistError(
                f"line {lineno}: task index must be {expected_index} (its position), not {index}"
            )
    if len(words) != 2:
        raise TasklistError(
            f"line {lineno}: a task line must be `[index] unit Kind field=value ...`, "
            f"not {line.strip()[:60]!r}"
        )
    unit_raw, kind_name = words
    kind = _KIND_BY_NAME.get(kind_name)
    if kind is None:
        raise TasklistError(
            f"line {lineno}: task kind must be one of {', '.join(_KIND_BY_NAME)}, not {kind_name!r}"
        )
    unit = _enum_value(Unit, unit_raw, lineno, "unit")
    if unit not in kind.UNITS:
        valid = ", ".join(u.value for u in Unit if u in kind.UNITS)
        raise TasklistError(
            f"line {lineno}: unit of {kind_name} must be one of {valid}, not {unit.value}"
        )
    layouts = kind_field_layouts(kind)
    values: dict[str, Any] = {"unit": unit}
    for key, raw in items:
        if key is None:
            raise TasklistError(
                f"line {lineno}: after the kind only field=value items may follow, not {raw!r}"
            )
        if key in values:
            raise TasklistError(f"line {lineno}: field `{key}` must be given once, not twice")
        values[key] = _parse_value(kind_name, layouts, key, raw, lineno)
    missing = [f for f, layout in layouts.items() if f not in values and _required(kind, f)]
    if missing:
        raise TasklistError(
            f"line {lineno}: {kind_name} needs field{'s' if len(missing) > 1 else ''} "
            + ", ".join(f"`{m}`" for m in missing)
        )
    return kind(**values)


def _required(kind: type[Task], name: str) -> bool:
    f = kind.__dataclass_fields__[name]
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def _parse_value(kind_name: str, layouts: dict, key: str, raw: str, lineno: int) -> Any:
    what = f"{kind_name} field `{key}`"
    if key == "layer":
        return _parse_str(raw, lineno, what)
    if key in ("waits", "signals"):
        refs = parse_tokens(raw, lineno, what)
        for ref in refs:
            for part in ("index", "count"):
                problem = field_problem(_COMMON_LAYOUT[f"{key}[0].{part}"], getattr(ref, part))
                if problem:
                    raise TasklistError(f"line {lineno}: {what} token {part} {problem}")
        return refs
    if key == "phase":
        return _enum_value(Phase, raw, lineno, what)
    if key in ("tile", "frame_slot"):
        layout = _COMMON_LAYOUT[key]
    elif key in layouts:
        layout = layouts[key]
    else:
        valid = ", ".join(["layer", "tile", "frame_slot", "phase", "waits", "signals", *layouts])
        raise TasklistError(f"line {lineno}: {kind_name} has no field `{key}`; valid: {valid}")
    if layout.enum is not None:
        return _enum_value(layout.enum, raw, lineno, what)
    value = _parse_int(raw, lineno, what)
    problem = field_problem(layout, value)
    if problem:
        raise TasklistError(f"line {lineno}: {what} {problem}")
    return value


def assemble(text: str) -> Tasklist:
    """Parse the text form into a `Tasklist` (errors name the line)."""
    core_id: int | None = None
    tasks: list[Task] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith(_HEADER_WORD) and (
            len(stripped) == len(_HEADER_WORD) or stripped[len(_HEADER_WORD)].isspace()
        ):
            core_id = _parse_header_line(line, lineno, core_id, len(tasks))
            continue
        task = parse_task(line, lineno, expected_index=len(tasks))
        if task is None:
            continue
        if core_id is None:
            raise TasklistError(
                f"line {lineno}: the `{_HEADER_WORD} core=N` line must come before the first task"
            )
        tasks.append(task)
    if core_id is None:
        raise TasklistError(f"line 1: text must contain a `{_HEADER_WORD} core=N` line")
    return Tasklist(core_id, tasks)


def _parse_header_line(line: str, lineno: int, core_id: int | None, tasks_so_far: int) -> int:
    if core_id is not None:
        raise TasklistError(f"line {lineno}: the `{_HEADER_WORD}` line must appear once, not twice")
    items = _tokenize(line, lineno)[1:]
    if len(items) != 1 or items[0][0] != "core":
        raise TasklistError(
            f"line {lineno}: header must be `{_HEADER_WORD} core=N`, not {line.strip()!r}"
        )
    value = _parse_int(items[0][1], lineno, "core")
    if not 0 <= value <= 0xFFFF:
        raise TasklistError(f"line {lineno}: core must be an integer 0-65535, not {value}")
    assert tasks_so_far == 0, "tasks are refused before the header line"
    return value


__all__ = [
    "assemble",
    "disassemble",
    "format_task",
    "format_tokens",
    "parse_task",
    "parse_tokens",
]
