"""Load a hardware TOML into `Arch`: parse, apply dotted overrides, type-check, validate.

The loader is generic over the dataclasses of `model`: a table becomes the dataclass of the
field of the same name, an array of tables a tuple of dataclasses. Unknown and missing keys,
wrong types and impossible values are `ArchError`s naming the key and what is valid.
"""

from __future__ import annotations

import difflib
import math
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from aipusim.arch.model import Arch
from aipusim.arch.ranges import range_of
from aipusim.base.errors import ArchError

DEFAULT_ARCH_PATH = Path(__file__).with_name("metis.toml")


def load_arch(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> Arch:
    """Read a hardware TOML (default: the bundled ``metis.toml``) into a validated `Arch`.

    ``overrides`` maps dotted keys to values, e.g. ``{"ddr.effective_bw_gb_s": 12.0}``.

    >>> arch = load_arch(overrides={"ddr.effective_bw_gb_s": 12.0})
    >>> arch.ddr.effective_bw_gb_s
    12.0
    """
    source = Path(path) if path is not None else DEFAULT_ARCH_PATH
    raw = read_toml(source)
    for key, value in (overrides or {}).items():
        _apply_override(raw, key, value)
    arch = _build(Arch, raw, "")
    _validate(arch)
    return arch


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
    *tables, key = dotted.split(".")
    node: Any = raw
    for i, table in enumerate(tables):
        if not isinstance(node, dict) or table not in node:
            where = ".".join(tables[: i + 1])
            raise ArchError(f"arch override {dotted!r}: there is no table {where!r}")
        node = node[table]
    if not isinstance(node, dict) or key not in node:
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
    if arch.dma.channels_per_core not in (1, 2):
        raise ArchError(f"dma.channels_per_core must be 1 or 2, not {arch.dma.channels_per_core}")
