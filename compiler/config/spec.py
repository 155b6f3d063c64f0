"""How one `CompilerConfig` property is described, checked and parsed.

A `Prop` is one row of the property table (`aipusim.compiler.config.table`). Everything
generic about configuration — defaults, validation, parsing ``--set key=value`` text,
JSON/TOML round trips — works from these rows, so a property is declared exactly once.

>>> p = Prop("aipu_cores_used", Kind.INT, 1, Section.MULTICORE, "cores", minimum=1, maximum=4)
>>> p.coerce(4), p.parse("2")
(4, 2)
>>> p.coerce(5)
Traceback (most recent call last):
...
aipusim.base.errors.ConfigError: aipu_cores_used must be an integer 1-4, not 5
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from aipusim.base.errors import ConfigError

#: A value a property can hold (after coercion).
ConfigValue = bool | int | float | str | tuple[str, ...] | None

# Relative slack when checking that a float is a multiple of its step (0.75 / 0.25 in binary
# floating point is exact, but 0.1-based arithmetic in user scripts is not).
_STEP_TOLERANCE = 1e-9


class Kind(StrEnum):
    """The value type of a property."""

    BOOL = "bool"
    INT = "int"
    FLOAT = "float"
    STR = "str"  # free text, or one of `Prop.choices` when they are given
    PATH = "path"  # a filesystem path, stored as a string
    ENUM = "enum"  # one member of `Prop.enum`
    ENUM_LIST = "enum_list"  # a list of distinct members of `Prop.enum`


class Section(StrEnum):
    """The groups of the config reference, used to order listings and documentation."""

    QUANTIZATION = "quantization"
    GRAPH_TRANSFORMATIONS = "graph transformations"
    GRAPH_CLEANER = "graph cleaner"
    MULTICORE = "multi-core and scheduling"
    TILING = "tiling and memory planning"
    MEMORY = "memory hierarchy"
    IMC = "IMC and MVM"
    OUTPUT = "output and paths"
    HARDWARE = "hardware and runtime"
    PROFILING = "profiling and debugging"
    INTERNAL_PATHS = "internal paths"
    MEMORY_LAYOUT = "memory layout constants"


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``"; did you mean `x`?"`` for the closest candidate, or ``""`` when none is close.

    >>> did_you_mean("aipu_core_used", ["aipu_cores_used", "frequency"])
    '; did you mean `aipu_cores_used`?'
    """
    pool = list(candidates)
    by_lower = {c.lower(): c for c in pool}
    # A case-only difference is always the intended word (e.g. "matmul" -> "MatMul").
    if word.lower() in by_lower:
        return f"; did you mean `{by_lower[word.lower()]}`?"
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return f"; did you mean `{by_lower[close[0]]}`?" if close else ""


def show(value: object) -> str:
    """A value as the user wrote it in JSON/TOML terms (true, null, 'text', 5)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, StrEnum):
        return repr(str(value))
    if isinstance(value, list | tuple):
        return "[" + ", ".join(show(v) for v in value) + "]"
    return repr(value)


@dataclass(frozen=True)
class Prop:
    """One configuration property: its name, type, default, valid values and meaning."""

    name: str
    kind: Kind
    default: ConfigValue
    section: Section
    #: What the property does, in one sentence.
    doc: str
    #: True when the property changes the simulated time or energy (sweep candidates).
    perf: bool = False
    #: True when the property changes the quantized model: it is part of the key of the
    #: quantization cache (`aipusim.compiler.quant.cache`), so a compile that differs from
    #: a cached one in this property calibrates again.
    quant: bool = False
    #: True when ``None`` (JSON null; absent in TOML) is a valid value.
    nullable: bool = False
    minimum: float | None = None
    maximum: float | None = None
    #: The bound itself is not allowed (resources_used is in (0, 1]).
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    #: Values must be a multiple of this (resources_used in quarters).
    step: float | None = None
    #: Integers allowed outside [minimum, maximum] with a special meaning (icrx_force -1).
    special: tuple[int, ...] = ()
    #: Allowed strings of a `Kind.STR` property (memory pool names).
    choices: tuple[str, ...] = ()
    enum: type[StrEnum] | None = None
    #: Unit of a numeric value, shown in listings ("bytes", "Hz").
    unit: str = ""

    @property
    def is_list(self) -> bool:
        """True when the value is a list of enum members (``profiling_levels``)."""
        return self.kind is Kind.ENUM_LIST

    # -- description of the valid values -------------------------------------------
    def valid_text(self) -> str:
        """What is valid, as used in error messages: ``an integer 1-4``."""
        match self.kind:
            case Kind.BOOL:
                text = "a boolean (true or false)"
            case Kind.INT:
                text = "an integer" + self._range_text()
            case Kind.FLOAT:
                text = "a number" + self._range_text()
            case Kind.STR:
                text = self._choice_text(self.choices) if self.choices else "a string"
            case Kind.PATH:
                text = "a non-empty path string"
            case Kind.ENUM:
                text = self._choice_text(self._enum_values())
            case Kind.ENUM_LIST:
                text = "a list of distinct values from " + ", ".join(self._enum_values())
        if self.special:
            text += "".join(f" or {v}" for v in self.special)
        if self.nullable:
            text += " or null"
        return text

    def _range_text(self) -> str:
        lo, hi = self.minimum, self.maximum
        shown = [None if b is None else self._bound(b) for b in (lo, hi)]
        if lo is not None and hi is not None:
            if self.exclusive_minimum or self.exclusive_maximum:
                left = "(" if self.exclusive_minimum else "["
                right = ")" if self.exclusive_maximum else "]"
                text = f" in {left}{shown[0]}, {shown[1]}{right}"
            else:
                text = f" {shown[0]}-{shown[1]}"
        elif lo is not None:
            text = f" {'>' if self.exclusive_minimum else '>='} {shown[0]}"
        elif hi is not None:
            text = f" {'<' if self.exclusive_maximum else '<='} {shown[1]}"
        else:
            text = ""
        if self.unit and text:
            text += f" ({self.unit})"
        if self.step is not None:
            text += f" in steps of {self.step}"
        return text

    def _bound(self, value: float) -> str:
        return str(float(value)) if self.kind is Kind.FLOAT else str(int(value))

    @staticmethod
    def _choice_text(values: Sequence[str]) -> str:
        return "one of " + ", ".join(values)

    def _enum_values(self) -> list[str]:
        assert self.enum is not None, f"{self.name}: enum kind without an enum"
        return [m.value for m in self.enum]

    def _fail(self, value: object, hint: str = "") -> ConfigError:
        return ConfigError(f"{self.name} must be {self.valid_text()}, not {show(value)}{hint}")

    # -- checking values -------------------------------------------------------------
    def coerce(self, value: object) -> ConfigValue:
        """Check ``value`` and return it in canonical form, or raise `ConfigError`.

        Integral floats are accepted for integer properties (TOML ``8e8``), ints for float
        properties; enum strings become members; lists become tuples.
        """
        if value is None:
            if self.nullable:
                return None
            raise self._fail(value)
        match self.kind:
            case Kind.BOOL:
                if isinstance(value, bool):
                    return value
                raise self._fail(value)
            case Kind.INT:
                return self._check_range(self._as_int(value), value)
            case Kind.FLOAT:
                return self._check_range(self._as_float(value), value)
            case Kind.STR:
                if not isinstance(value, str):
                    raise self._fail(value)
                if self.choices and value not in self.choices:
                    raise self._fail(value, did_you_mean(value, self.choices))
                return value
            case Kind.PATH:
                if isinstance(value, os.PathLike):
                    value = os.fspath(value)
                if not isinstance(value, str) or not value:
                    raise self._fail(value)
                return value
            case Kind.ENUM:
                return self._as_member(value, value)
            case Kind.ENUM_LIST:
                return self._as_member_list(value)
        raise AssertionError(f"unhandled kind {self.kind}")

    def _as_int(self, value: object) -> int:
        if isinstance(value, bool):
            raise self._fail(value)
        if isinstance(value, int):
            return value
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
        raise self._fail(value)

    def _as_float(self, value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._fail(value)
        if not math.isfinite(value):
            raise self._fail(value)
        return float(value)

    def _check_range(self, number: float, original: object) -> int | float:
        if number in self.special:
            return number
        lo, hi = self.minimum, self.maximum
        below = lo is not None and (number <= lo if self.exclusive_minimum else number < lo)
        above = hi is not None and (number >= hi if self.exclusive_maximum else number > hi)
        if below or above:
            raise self._fail(original)
        if self.step is not None:
            ratio = number / self.step
            if abs(ratio - round(ratio)) > _STEP_TOLERANCE * max(1.0, abs(ratio)):
                raise self._fail(original)
            if isinstance(number, float):
                # Snap to the exact multiple so 0.1 + 0.15 compares equal to 0.25.
                number = round(ratio) * self.step
        return number

    def _as_member(self, value: object, original: object) -> StrEnum:
        assert self.enum is not None
        if isinstance(value, self.enum):
            return value
        if isinstance(value, str):
            try:
                return self.enum(value)
            except ValueError:
                raise self._fail(original, did_you_mean(value, self._enum_values())) from None
        raise self._fail(original)

    def _as_member_list(self, value: object) -> tuple[str, ...]:
        if isinstance(value, str) or not isinstance(value, list | tuple):
            raise self._fail(value)
        members: list[StrEnum] = []
        for item in value:
            # Trace tags are often written with their brackets ("[B]"); accept both forms.
            text = item.strip("[] ") if isinstance(item, str) else item
            member = self._as_member(text, value)
            if member in members:
                raise ConfigError(f"{self.name} lists {show(member)} twice; each level once")
            members.append(member)
        return tuple(members)

    # -- parsing text (``--set key=value``) ------------------------------------------
    def parse(self, text: str) -> ConfigValue:
        """Turn command-line text into a checked value: ``"true"``, ``"0x1000"``, ``"B,PB"``.

        >>> Prop("x", Kind.BOOL, False, Section.OUTPUT, "").parse("yes")
        True
        """
        raw = text.strip()
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
            raw = raw[1:-1]
        if self.nullable and raw.lower() in ("null", "none"):
            return None
        match self.kind:
            case Kind.BOOL:
                lowered = raw.lower()
                if lowered in ("true", "yes", "on", "1"):
                    return True
                if lowered in ("false", "no", "off", "0"):
                    return False
                raise self._fail(raw)
            case Kind.INT:
                return self.coerce(_parse_int(raw, self))
            case Kind.FLOAT:
                try:
                    return self.coerce(float(raw))
                except ValueError:
                    raise self._fail(raw) from None
            case Kind.ENUM_LIST:
                items = [p.strip() for p in raw.replace("[", "").replace("]", "").split(",")]
                return self.coerce([p for p in items if p])
        return self.coerce(raw)


def _parse_int(raw: str, prop: Prop) -> int | float:
    """Integers as decimal, 0x-hex or scientific (``800e6``); floats for the range check."""
    cleaned = raw.replace("_", "")
    for parse in (int, lambda s: int(s, 0), float):
        try:
            return parse(cleaned)
        except ValueError:
            continue
    raise prop._fail(raw)


__all__ = ["ConfigValue", "Kind", "Prop", "Section", "did_you_mean", "show"]
