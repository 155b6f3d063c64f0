"""Pass 7, tile: working sets within the L1 budget, H before output channels, fusion."""

from __future__ import annotations

import pytest
from backend_helpers import ARCH, compile_backend

from aipusim.base.errors import TilingError
from aipusim.compiler import CompilerConfig
from aipusim.compiler.backend.common.target import Target
from aipusim.compiler.backend.lower.layer import LayerUnit
from aipusim.compiler.backend.tile.tiler import budget_of_l1


def test_every_working_set_fits_l1() -> None:
    r = compile_backend("yolov8n", 640 // 2)
    budget = budget_of_l1(Target.of(CompilerConfig(), ARCH))
    groups: dict[int, int] = {}
    for t in r.tilings:
        groups[t.group] = groups.get(t.group, 0) + t.l1_bytes
    assert max(groups.values()) <= budget


def test_tight_l1_splits_rows_first_then_channels() -> None:
    r = compile_backend("resnet18", 224, l1_constraint=600_000, ignore_weight_buffers=False)
    tiled = [(p, t) for p, t in zip(r.layers, r.tilings, strict=True) if p.unit is LayerUnit.MVM]
    assert any(t.h_tiles > 1 for _, t in tiled)
    for p, t in tiled:
        assert t.l1_bytes <= 600_000
        if t.oc_tiles > 1:  # channels are cut only once rows are cut as far as they go
            assert t.h_tiles == p.geometry.out_h


def test_memplan_retries_with_finer_tiles_when_weight_staging_was_ignored() -> None:
    r = compile_backend("resnet18", 128, l1_constraint=200_000)
    assert r.memory.attempts > 1
    mvm = [t for p, t in zip(r.layers, r.tilings, strict=True) if p.unit is LayerUnit.MVM]
    assert any(t.oc_tiles > 1 for t in mvm)


def test_too_few_attempts_is_a_tiling_error_naming_the_layer() -> None:
    with pytest.raises(TilingError, match=r"layer .* must fit the L1 budget of 100000 bytes"):
        compile_backend("resnet18", 128, l1_constraint=100_000, max_tiling_attempts=1)
