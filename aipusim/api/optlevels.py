"""Optimization levels 1-4: documented presets of the compiler's scheduling knobs.

=====  ==========================================================================
level  what the scheduler does
=====  ==========================================================================
1      one tile and one operator at a time: no software pipelining of tile DMAs,
       no overlap between operators (the easiest schedule to read in a trace)
2      software-pipelined tiles (the next tile loads while the current one
       computes and the previous one stores), operators still one after another
3      the compiler defaults: pipelined tiles and operators that start before the
       previous one has fully finished
4      level 3 plus the list scheduler (tasks ordered by critical path) and
       depth-first tiling of up to 6 consecutive operators
=====  ==========================================================================

A preset only sets the knobs a config leaves at their default: a value the user chose
(``config.changed()``) wins over the level.

>>> from aipusim.compiler.config import CompilerConfig
>>> apply_optimization_level(CompilerConfig(), 1).pipeline_spatial_tiles
False
>>> cfg = apply_optimization_level(CompilerConfig(tiling_depth=3), 4)
>>> cfg.use_list_scheduler, cfg.tiling_depth
(True, 3)
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from aipusim.base.errors import ConfigError

#: Depth-first fusion depth of level 4 (the "typical" value of the config reference).
_DEPTH_FIRST_TILING_DEPTH = 6

#: Level -> the scheduling knobs it sets (the table of the module doc).
OPTIMIZATION_LEVELS: Mapping[int, Mapping[str, Any]] = MappingProxyType(
    {
        1: {
            "pipeline_spatial_tiles": False,
            "pipeline_channel_tiles": False,
            "inter_operator_async": False,
            "use_list_scheduler": False,
            "tiling_depth": 1,
        },
        2: {
            "pipeline_spatial_tiles": True,
            "pipeline_channel_tiles": True,
            "inter_operator_async": False,
            "use_list_scheduler": False,
            "tiling_depth": 1,
        },
        3: {
            "pipeline_spatial_tiles": True,
            "pipeline_channel_tiles": True,
            "inter_operator_async": True,
            "use_list_scheduler": False,
            "tiling_depth": 1,
        },
        4: {
            "pipeline_spatial_tiles": True,
            "pipeline_channel_tiles": True,
            "inter_operator_async": True,
            "use_list_scheduler": True,
            "tiling_depth": _DEPTH_FIRST_TILING_DEPTH,
        },
    }
)


def check_level(level: Any, what: str = "optimization_level") -> int:
    """``level`` if it is an integer 1-4, else a `ConfigError` naming ``what``."""
    if isinstance(level, bool) or not isinstance(level, int) or level not in OPTIMIZATION_LEVELS:
        raise ConfigError(f"{what} must be an integer 1-4, not {level!r}")
    return level


def apply_optimization_level(config: Any, level: int) -> Any:
    """A copy of ``config`` (a `CompilerConfig`) with ``level``'s preset applied to every
    knob the config leaves at its default."""
    check_level(level)
    chosen = config.changed()
    preset = {k: v for k, v in OPTIMIZATION_LEVELS[level].items() if k not in chosen}
    return config.replace(**preset)


def level_of(config: Any) -> int | None:
    """The level whose preset ``config`` (a `CompilerConfig`) holds knob for knob, or None
    when it holds none (a config compiled outside the API with its own knobs).

    >>> from aipusim.compiler.config import CompilerConfig
    >>> level_of(CompilerConfig()), level_of(apply_optimization_level(CompilerConfig(), 1))
    (3, 1)
    """
    for level, preset in OPTIMIZATION_LEVELS.items():
        if all(getattr(config, k) == v for k, v in preset.items()):
            return level
    return None


__all__ = ["OPTIMIZATION_LEVELS", "apply_optimization_level", "check_level", "level_of"]
