from __future__ import annotations

import pytest

import aipusim
from aipusim.api.optlevels import OPTIMIZATION_LEVELS, apply_optimization_level
from aipusim.base.errors import ConfigError
from aipusim.compiler.config import CompilerConfig


def test_level_3_is_the_compiler_default() -> None:
    assert apply_optimization_level(CompilerConfig(), 3) == CompilerConfig()


def test_levels_set_the_documented_knobs() -> None:
    one = apply_optimization_level(CompilerConfig(), 1)
    assert not (one.pipeline_spatial_tiles or one.pipeline_channel_tiles)
    assert not one.inter_operator_async
    two = apply_optimization_level(CompilerConfig(), 2)
    assert two.pipeline_spatial_tiles and not two.inter_operator_async
    four = apply_optimization_level(CompilerConfig(), 4)
    assert four.use_list_scheduler and four.tiling_depth > 1
    # every preset names the same knobs, so levels differ only in values
    assert len({frozenset(p) for p in OPTIMIZATION_LEVELS.values()}) == 1


def test_a_knob_the_user_set_wins_over_the_level() -> None:
    cfg = apply_optimization_level(CompilerConfig(inter_operator_async=False), 4)
    assert cfg.inter_operator_async is False
    assert cfg.use_list_scheduler is True


def test_the_callers_config_is_not_changed() -> None:
    cfg = CompilerConfig()
    apply_optimization_level(cfg, 1)
    assert cfg.pipeline_spatial_tiles is True


@pytest.mark.parametrize("level", [0, 5, 2.0, True, "3"])
def test_bad_levels_are_refused(level: object) -> None:
    with pytest.raises(ConfigError, match=r"optimization_level must be an integer 1-4, not"):
        apply_optimization_level(CompilerConfig(), level)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"optimization_level must be an integer 1-4"):
        aipusim.compile("tiny_cnn", optimization_level=level)  # type: ignore[arg-type]


def test_compile_applies_the_level() -> None:
    m = aipusim.compile("tiny_cnn", optimization_level=1)
    assert m.optimization_level == 1
    assert m.config.pipeline_channel_tiles is False
