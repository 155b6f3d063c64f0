"""Load a hardware TOML into `Arch`: parse, apply dotted overrides, type-check, validate.

The loader is generic over the dataclasses of `model`: a table becomes the dataclass of the
field of the same name, an array of tables a tuple of dataclasses. Unknown and missing keys,
wrong types and impossible values are `ArchError`s naming the key and what is valid. The
optional ``[ranges]`` table maps dotted keys of inferred numbers to their plausible
``[low, high]`` (`ParamRange`); a dotted key names an array item by its index
(``clock.vf_points[1].voltage_v``), in overrides too.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import math
import re
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from aipusim.arch.model import Arbitration, Arch, ParamRange
from aipusim.arch.ranges import range_of
from aipusim.base.errors import ArchError

DEFAULT_ARCH_PATH = Path(__file__).with_name("metis.toml")


def load_arch(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> Arch:
    """Read a hardware TOML (default: the bundled ``metis.toml``) into a validated `Arch`.

    ``overrides`` maps dotted keys to values, e.g. ``{"ddr.data_rate_mt_s": 3200}``.

    >>> arch = load_arch(overrides={"ddr.data_rate_mt_s": 3200})
    >>> arch.ddr.data_rate_mt_s
    3200
    """
    source = Path(path) if path is not None else DEFAULT_ARCH_PATH
    try:
        # (an `Arch` is immutable: the same file bytes and overrides give the same one)
        key = (str(source), source.read_bytes(), repr(sorted((overrides or {}).items())))
    except OSError:
        key = None  # read_toml names the problem
    if key is not None and key in _loaded:
        return _loaded[key]
    raw = read_toml(source)
    ranges = raw.pop(RANGES, {})
    for name, value in (overrides or {}).items():
        _apply_override(raw, name, value)
    raw[RANGES] = ()
    arch = _build(Arch, raw, "")
    _validate(arch)
    arch = dataclasses.replace(arch, ranges=_ranges(arch, ranges))
    if key is not None:
        _loaded[key] = arch
        while len(_loaded) > LOADED_KEPT:
            del _loaded[next(iter(_loaded))]
    return arch


#: How many loaded arches a process keeps (a sweep worker loads each point's over and
#: over: parsing and checking the TOML took about 30 ms each time), by file bytes and
#: overrides.
LOADED_KEPT = 8
_loaded: dict[tuple[str, bytes, str], Arch] = {}


#: The table of plausible ranges of the inferred numbers.
RANGES = "ranges"
_PART = re.compile(r"^(\w+)(?:\[(\d+)\])?$")


def _parts(dotted: str) -> list[tuple[str, int | None]]:
    """``a.b[1].c`` -> [(a, None), (b, 1), (c, None)]; an `ArchError` if malformed."""
    out = []
    for part in dotted.split("."):
        m = _PART.match(part)
        if m is None:
            raise ArchError(f"arch key {dotted!r} must be dotted names, as in 'ddr.latency_ns'")
        out.append((m.group(1), None if m.group(2) is None else int(m.group(2))))
    return out


def arch_value(arch: Any, dotted: str) -> Any:
    """The value of a dotted key of ``arch``.

    >>> arch_value(load_arch(), "clock.vf_points[0].max_hz")
    800000000
    """
    node = arch
    for name, index in _parts(dotted):
        if not hasattr(node, name):
            raise ArchError(f"arch key {dotted!r}: {_unknown(name, dict.fromkeys(_names(node)))}")
        node = getattr(node, name)
        if index is not None:
            if not isinstance(node, tuple) or not 0 <= index < len(node):
                raise ArchError(f"arch key {dotted!r}: {name} has no item {index}")
            node = node[index]
    return node


def _names(node: Any) -> list[str]:
    return [f.name for f in fields(node)] if is_dataclass(node) else []


def _ranges(arch: Arch, table: Any) -> tuple[ParamRange, ...]:
    if not isinstance(table, dict):
        raise ArchError(f"{RANGES} must be a table of 'key' = [low, high], not {table!r}")
    out = []
    for key, bounds in table.items():
        value = arch_value(arch, key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ArchError(f"{RANGES}: {key!r} must name a number of the arch, not {value!r}")
        ok = isinstance(bounds, list) and len(bounds) == 2
        ok = ok and all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds)
        if not ok or bounds[0] > bounds[1]:
            raise ArchError(f"{RANGES}.{key} must be [low, high] with low <= high, not {bounds!r}")
        if isinstance(value, int) and not all(float(b).is_integer() for b in bounds):
            raise ArchError(f"{RANGES}.{key} must be whole numbers ({key} is an integer)")
        out.append(ParamRange(key, bounds[0], bounds[1]))
    return tuple(out)


def read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file; a missing or malformed one is an `ArchError` with file and line."""
    if not path.is_file():
        raise ArchError(f"arch file must be an existing TOML file, not {str(path)!r}")
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message already ends in "(at line L, column C)".
        raise ArchError(f"{path}: invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ArchError(f"{path}: byte {exc.start} must be UTF-8 text, not binary data") from None
    except OSError as exc:
        raise ArchError(f"{path}: cannot be read: {exc.strerror or exc}") from None


def _apply_override(raw: dict[str, Any], dotted: str, value: Any) -> None:
    *tables, (key, key_index) = _parts(dotted)
    node: Any = raw
    for i, (table, index) in enumerate(tables):
        if not isinstance(node, dict) or table not in node or table == RANGES:
            where = ".".join(t for t, _ in tables[: i + 1])
            raise ArchError(f"arch override {dotted!r}: there is no table {where!r}")
        node = node[table]
        if index is not None:
            if not isinstance(node, list) or not 0 <= index < len(node):
                raise ArchError(f"arch override {dotted!r}: {table} has no item {index}")
            node = node[index]
    if not isinstance(node, dict) or key not in node or key_index is not None:
        raise ArchError(f"arch override {dotted!r}: {_unknown(key, node)}")
    node[key] = value


def _unknown(key: str, table: Any) -> str:
    known = list(table) if isinstance(table, dict) else []
    hint = difflib.get_close_matches(key, known, n=1)
    return f"unknown key {key!r}" + (f"; did you mean {hint[0]!r}?" if hint else "")


def _build(cls: type, table: Any, where: str) -> Any:
    if not isinstance(table, dict):
        raise ArchError(f"{where or 'arch'} must be a table, not {type(table).__name__}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in fields(cls)]
    for key in table:
        if key not in names:
            raise ArchError(f"{where or 'arch'}: {_unknown(key, dict.fromkeys(names))}")
    values: dict[str, Any] = {}
    for name in names:
        dotted = f"{where}.{name}" if where else name
        if cls is Arch and name == RANGES:
            continue  # parsed apart, once the numbers are known
        if name not in table:
            raise ArchError(f"{dotted} is missing from the arch description")
        values[name] = _convert(hints[name], table[name], dotted)
    return cls(**values)


def _convert(hint: Any, value: Any, dotted: str) -> Any:
    origin = typing.get_origin(hint)
    if is_dataclass(hint):
        return _build(hint, value, dotted)
    if origin is tuple:
        (item,) = {a for a in typing.get_args(hint) if a is not Ellipsis}
        if not isinstance(value, list):
            raise ArchError(f"{dotted} must be an array of tables, not {value!r}")
        return tuple(_build(item, v, f"{dotted}[{i}]") for i, v in enumerate(value))
    if origin in (typing.Union, types.UnionType):
        raise AssertionError(f"optional fields are not used in arch ({dotted})")
    if hint is str:
        if not isinstance(value, str):
            raise ArchError(f"{dotted} must be a string, not {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ArchError(f"{dotted} must be {range_of(dotted).text(True)}, not {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ArchError(f"{dotted} must be {range_of(dotted).text(False)}, not {value!r}")
        if not math.isfinite(value):
            raise ArchError(f"{dotted} must be {range_of(dotted).text(False)}, not {value!r}")
        return float(value)
    raise AssertionError(f"unhandled arch field type {hint!r} for {dotted}")


def _numbers(obj: Any, where: str) -> typing.Iterator[tuple[str, str, float]]:
    for f in fields(obj):
        if isinstance(obj, Arch) and f.name == RANGES:
            continue  # the plausible ranges of some numbers, not numbers of the chip
        value = getattr(obj, f.name)
        dotted = f"{where}.{f.name}" if where else f.name
        if is_dataclass(value):
            yield from _numbers(value, dotted)
        elif isinstance(value, tuple):
            for i, item in enumerate(value):
                yield from _numbers(item, f"{dotted}[{i}]")
        elif isinstance(value, (int, float)):
            yield f.name, dotted, value


def _validate(arch: Arch) -> None:
    for _name, dotted, value in _numbers(arch, ""):
        valid = range_of(dotted)
        if not valid.lo <= value <= valid.hi:
            shown = f"{value:g}" if isinstance(value, float) else str(value)
            raise ArchError(f"{dotted} must be {valid.text(isinstance(value, int))}, not {shown}")
    for dotted, part in (("l1", arch.l1), ("l2", arch.l2), ("ddr", arch.ddr)):
        if part.reserved_bytes >= part.size_bytes:
            raise ArchError(
                f"{dotted}.reserved_bytes must be smaller than {dotted}.size_bytes "
                f"({part.size_bytes}), not {part.reserved_bytes}"
            )
    if arch.l2_budget_bytes <= 0:
        raise ArchError(
            "l2.size_bytes must exceed l2.reserved_bytes plus the tasklist windows of all "
            f"cores ({arch.l2.size_bytes - arch.l2_budget_bytes} bytes), not {arch.l2.size_bytes}"
        )
    if arch.l1.arbitration not in set(Arbitration):
        raise ArchError(
            f"l1.arbitration must be one of {', '.join(Arbitration)}, not {arch.l1.arbitration!r}"
        )
    mvm = arch.mvm
    if mvm.banks * mvm.bank_cols != mvm.cols:
        raise ArchError(
            f"mvm.banks x mvm.bank_cols must equal mvm.cols ({mvm.cols}), "
            f"not {mvm.banks} x {mvm.bank_cols}"
        )
    if mvm.rows % mvm.input_blocks:
        raise ArchError(
            f"mvm.input_blocks must divide mvm.rows ({mvm.rows}), not {mvm.input_blocks}"
        )
    e = arch.energy
    if e.mvm_sparse_active_fraction >= 1 or e.mvm_sparse_tops_per_w <= e.mvm_dense_tops_per_w:
        raise ArchError(
            "energy.mvm_sparse_tops_per_w must exceed energy.mvm_dense_tops_per_w "
            f"({e.mvm_dense_tops_per_w:g}) at energy.mvm_sparse_active_fraction below 1, "
            f"not {e.mvm_sparse_tops_per_w:g} at {e.mvm_sparse_active_fraction:g}"
        )
    if not 0 < mvm.utilization_step <= 1:
        raise ArchError(f"mvm.utilization_step must be in (0, 1], not {mvm.utilization_step}")
    clock = arch.clock
    if not clock.min_hz <= clock.default_hz <= clock.max_hz:
        raise ArchError(
            f"clock.default_hz must lie in [{clock.min_hz}, {clock.max_hz}], not {clock.default_hz}"
        )
    if not any(p.max_hz >= clock.max_hz for p in clock.vf_points):
        raise ArchError(
            f"clock.vf_points must include a point reaching clock.max_hz ({clock.max_hz})"
        )
    points = sorted(clock.vf_points, key=lambda p: p.max_hz)
    for slow, fast in itertools.pairwise(points):
        if slow.voltage_v > fast.voltage_v:
            raise ArchError(
                "clock.vf_points must not need more voltage for a lower clock, not "
                f"{slow.voltage_v:g} V up to {slow.max_hz / 1e6:g} MHz and {fast.voltage_v:g} V "
                f"up to {fast.max_hz / 1e6:g} MHz"
            )
    _validate_ddr(arch)
    if arch.dma.channels_per_core not in (1, 2):
        raise ArchError(f"dma.channels_per_core must be 1 or 2, not {arch.dma.channels_per_core}")


#: The refresh schemes of LPDDR4 (JESD209-4): per-bank REFpb or all-bank REFab.
DDR_REFRESH_MODES = ("per_bank", "all_bank")


def _validate_ddr(arch: Arch) -> None:
    d = arch.ddr
    if d.refresh_mode not in DDR_REFRESH_MODES:
        raise ArchError(
            f"ddr.refresh_mode must be one of {', '.join(DDR_REFRESH_MODES)}, "
            f"not {d.refresh_mode!r}"
        )
    if d.write_drain_low_fraction > d.write_drain_high_fraction:
        raise ArchError(
            "ddr.write_drain_low_fraction must not exceed ddr.write_drain_high_fraction "
            f"({d.write_drain_high_fraction:g}), not {d.write_drain_low_fraction:g}"
        )
    if d.t_ccd_tck * 2 < d.burst_length:
        raise ArchError(
            f"ddr.t_ccd_tck must be at least burst_length / 2 ({d.burst_length // 2}) so "
            f"bursts do not overlap on the data bus, not {d.t_ccd_tck}"
        )
