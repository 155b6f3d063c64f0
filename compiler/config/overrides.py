"""``key=value`` overrides (the CLI's ``--set``), typed through the property table.

>>> parse_assignment("frequency=400e6")
('frequency', 400000000)
>>> parse_assignments(["aipu-cores-used=4", "profiling_levels=B,PB"])["profiling_levels"]
(<ProfilingLevel.FRAME: 'B'>, <ProfilingLevel.LAYER_BEGIN: 'PB'>)
"""

from __future__ import annotations

from collections.abc import Iterable

from aipusim.base.errors import ConfigError
from aipusim.compiler.config.compiler_config import canonical_name
from aipusim.compiler.config.spec import ConfigValue
from aipusim.compiler.config.table import PROPERTIES


def parse_assignment(text: str) -> tuple[str, ConfigValue]:
    """``"key=value"`` -> (property name, checked value). Dashes in the key mean underscores."""
    key, sep, raw = text.partition("=")
    key = key.strip().replace("-", "_")
    if not sep or not key:
        raise ConfigError(f"--set must be given as key=value, not {text!r}")
    name = canonical_name(key)
    return name, PROPERTIES[name].parse(raw)


def parse_assignments(items: Iterable[str]) -> dict[str, ConfigValue]:
    """Several ``key=value`` texts -> {property: value}; a later one wins over an earlier one."""
    return dict(parse_assignment(item) for item in items)


__all__ = ["parse_assignment", "parse_assignments"]
