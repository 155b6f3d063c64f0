"""The back end's Target: the batch rule once, one cost model, frozen, typed knobs."""

from __future__ import annotations

import dataclasses

import pytest
from backend_helpers import ARCH

from aipusim.compiler import CompilerConfig
from aipusim.compiler.backend.common.layout import CoreLayout
from aipusim.compiler.backend.common.target import Knobs, Target
from aipusim.isa.cost import Link, cost_model
from aipusim.isa.program import MulticoreMode, frames_per_start


@pytest.mark.parametrize("mode", list(MulticoreMode))
@pytest.mark.parametrize("cores", [1, 4])
def test_the_effective_mode_and_frames_per_start_follow_one_rule(
    mode: MulticoreMode, cores: int
) -> None:
    t = Target.of(CompilerConfig(multicore_mode=mode, aipu_cores_used=cores), ARCH)
    batch1 = mode in (MulticoreMode.MULTIPROCESS, MulticoreMode.MULTITHREAD)
    runs_as = MulticoreMode.BATCH if batch1 and cores > 1 else mode
    assert (t.mode, t.effective_mode) == (mode, runs_as)
    assert t.frames_per_start == (cores if runs_as is MulticoreMode.BATCH else 1)
    assert t.frames_per_start == frames_per_start(mode, cores)  # what the simulator uses
    layout = CoreLayout(cores, t.effective_mode)
    assert layout.replicate == (cores > 1 and runs_as is MulticoreMode.BATCH)
    assert layout.cooperative == (cores > 1 and mode is MulticoreMode.COOPERATIVE)
    assert layout.pipeline == (cores > 1 and mode is MulticoreMode.PIPELINE)


def test_the_cost_model_is_the_compiled_clock_and_limit() -> None:
    t = Target.of(CompilerConfig(frequency=600_000_000, mvm_utilization_limit=0.5), ARCH)
    assert (t.cost.freq_hz, t.cost.mvm_utilization_limit) == (600_000_000, 0.5)
    assert t.cost.active_cols == ARCH.mvm.active_cols(0.5)
    assert t.cost is cost_model(ARCH, 600_000_000, 0.5)  # one shared model, not a new one


def test_a_target_is_frozen_and_a_knob_change_derives_everything_again() -> None:
    t = Target.of(CompilerConfig(aipu_cores_used=4, resources_used=1.0), ARCH)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.knobs.tiling_depth = 1  # type: ignore[misc]
    one = t.with_knobs(aipu_cores_used=1, tiling_depth=1)
    assert (one.knobs.tiling_depth, one.effective_mode, one.frames_per_start) == (
        1,
        MulticoreMode.MULTIPROCESS,
        1,
    )
    assert t.knobs.tiling_depth == CompilerConfig().tiling_depth  # the original is unchanged


def test_the_knobs_are_the_configs_values() -> None:
    config = CompilerConfig(force_h_tiling=4, profiling_levels=["K", "M"])
    knobs = Knobs.of(config)
    assert knobs.force_h_tiling == 4 and knobs.profiling_levels == ("K", "M")
    for f in dataclasses.fields(Knobs):
        if f.name != "profiling_levels":
            assert getattr(knobs, f.name) == getattr(config, f.name), f.name


def test_a_shared_weight_fetch_gets_its_share_of_the_slowest_link() -> None:
    cost = cost_model(ARCH)
    ddr, l2 = cost.link_bw(Link.DDR), cost.link_bw(Link.L2)
    alone = cost.weight_fetch_bw((Link.L2, Link.DDR))
    assert alone == max(1.0, min(cost.channel_bw, ddr, l2))
    assert cost.weight_fetch_bw((Link.L2, Link.DDR), 4) == max(
        1.0, min(cost.channel_bw, min(ddr, l2) / 4)
    )
    assert cost.weight_fetch_cycles(4096, 64.0) == 64
    assert cost.weight_fetch_cycles(4097, 64.0) == 65
