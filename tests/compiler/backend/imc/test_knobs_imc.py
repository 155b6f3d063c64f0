"""IMC knobs change the mapping and the tasks in the documented direction."""

from __future__ import annotations

import pytest
from backend_helpers import ARCH, COST, check_ok, compile_backend

from aipusim.compiler.backend.estimate.costs import plan_cost
from aipusim.compiler.backend.imc.mapper import ImcOptions, map_layer
from aipusim.compiler.backend.lower.layer import ConvGeometry
from aipusim.isa.cost import cost_model
from aipusim.isa.tasks import Mvm, WeightLoad


def _mvms(result) -> list[Mvm]:
    return [t for ts in result.tasks.values() for t in ts if isinstance(t, Mvm)]


def test_mvm_utilization_limit_half_uses_fewer_columns_and_more_passes() -> None:
    full = compile_backend("resnet18", 64)
    half = compile_backend("resnet18", 64, mvm_utilization_limit=0.5)
    check_ok(half)
    assert max(t.cols_used for t in _mvms(half)) <= ARCH.mvm.active_cols(0.5) == 256
    assert len(_mvms(half)) > len(_mvms(full))
    cycles = lambda r: sum(e.compute_cycles for e in r.estimates)  # noqa: E731
    assert cycles(half) > cycles(full)


def test_enable_icr_false_gives_no_replication() -> None:
    on = compile_backend("resnet18", 64)
    off = compile_backend("resnet18", 64, enable_icr=False, enable_swicr=False)
    assert any(t.icr > 1 for t in _mvms(on))
    assert all(t.icr == 1 for t in _mvms(off))
    assert sum(t.vectors for t in _mvms(off)) > sum(t.vectors for t in _mvms(on))


def test_icrx_force_and_max_factor_bound_the_factor() -> None:
    geo = ConvGeometry(64, 32, 1, 1, 1, 1, 28, 28, 28, 28)
    assert map_layer(geo, COST, ImcOptions(icrx_max_factor=2), first_layer=False).icr == 2
    assert map_layer(geo, COST, ImcOptions(icrx_force=3), first_layer=False).icr == 3
    chosen = map_layer(geo, COST, ImcOptions(), first_layer=False)
    widest = map_layer(geo, COST, ImcOptions(icrx_force=8), first_layer=False)
    assert widest.icr == 8
    # The automatic factor is the cheapest one: replication multiplies the weight bytes to
    # load, so the widest factor is not the fastest for this small 1x1 layer.
    assert 1 < chosen.icr < 8
    cost = lambda m: m.compute_cycles + m.weight_load_cycles  # noqa: E731
    assert cost(chosen) <= cost(widest)


@pytest.mark.parametrize(
    "geo",
    [
        ConvGeometry(64, 32, 1, 1, 1, 1, 28, 28, 28, 28),
        ConvGeometry(64, 64, 3, 3, 1, 1, 56, 56, 56, 56),
        ConvGeometry(3, 16, 3, 3, 2, 2, 224, 224, 112, 112),
        ConvGeometry(128, 128, 1, 1, 1, 1, 8, 8, 8, 8),
        ConvGeometry(256, 512, 3, 3, 1, 1, 14, 14, 14, 14),
    ],
)
def test_throttling_the_array_never_lowers_estimated_cycles(geo: ConvGeometry) -> None:
    # Compute + load only: with a per-frame fetch, narrower blocks overlap their fetches
    # with compute better, so there throttling can legitimately help (see the next test).
    # Each weight set's load is a whole number of cycles (bytes over the load path's bytes
    # per cycle, rounded up), so another cut into sets may round up to one cycle a set less.
    def cycles(u: float) -> tuple[int, int]:
        m = map_layer(geo, cost_model(ARCH, None, u), ImcOptions(), first_layer=geo.cin < 64)
        return m.compute_cycles + m.weight_load_cycles, len(m.blocks)

    steps = [cycles(k / 8) for k in range(1, 9)]
    for i, (slower, _) in enumerate(steps):
        for faster, sets in steps[i + 1 :]:
            assert slower >= faster - sets, steps


@pytest.mark.parametrize("fetch_bw", [64, 16, 4])
def test_a_per_frame_weight_fetch_never_widens_icr(fetch_bw: int) -> None:
    # Replication multiplies the bytes fetched each frame, so charging the fetch can only
    # make the factor narrower; a slow enough fetch makes replication pointless.
    geos = [
        ConvGeometry(64, 32, 1, 1, 1, 1, 28, 28, 28, 28),
        ConvGeometry(16, 16, 3, 3, 1, 1, 8, 8, 8, 8),
        ConvGeometry(3, 16, 3, 3, 2, 2, 32, 32, 16, 16),
    ]
    for geo in geos:
        free = map_layer(geo, COST, ImcOptions(), first_layer=geo.cin < 64)
        paid = map_layer(geo, COST, ImcOptions(), first_layer=geo.cin < 64, fetch_bw=fetch_bw)
        assert paid.icr <= free.icr, (geo, fetch_bw)
    small = ConvGeometry(16, 16, 3, 3, 1, 1, 8, 8, 8, 8)
    assert map_layer(small, COST, ImcOptions(), first_layer=False).icr > 1
    assert map_layer(small, COST, ImcOptions(), first_layer=False, fetch_bw=1).icr == 1


def test_icrx_parallel_block_threshold_limits_icr_to_small_layers() -> None:
    geo = ConvGeometry(128, 64, 3, 3, 1, 1, 28, 28, 28, 28)  # 3 row blocks
    assert map_layer(geo, COST, ImcOptions(), first_layer=False).icr > 1
    low = ImcOptions(icrx_parallel_block_threshold=1)
    assert map_layer(geo, COST, low, first_layer=False).icr == 1


def test_enable_swicr_changes_the_first_layer_rows() -> None:
    on = compile_backend("resnet18", 64)
    off = compile_backend("resnet18", 64, enable_swicr=False)
    first = lambda r: next(m.whole for m in r.mappings if m is not None)  # noqa: E731
    assert first(on).swicr and not first(off).swicr
    assert first(on).rows_needed < first(off).rows_needed


def _planned_exposed_weight_cycles(r) -> int:
    """Weight fetch and load cycles the planner expects compute not to hide."""
    cost = cost_model(ARCH)
    total = 0
    for layer, t, m in zip(r.layers, r.tilings, r.mappings, strict=True):
        cfg = r.target.knobs
        double = cfg.imc_double_buffer_pipeline if t.tiles > 1 else cfg.imc_double_buffer_sequential
        whole = m.whole if m is not None else None
        planned = plan_cost(layer, whole, t, cfg, cost, weights_double_buffered=double)
        total += planned.exposed_weight_cycles
    return total


def test_imc_double_buffering_lets_loads_overlap_compute() -> None:
    off = compile_backend("resnet18", 64)
    on = compile_backend(
        "resnet18", 64, imc_double_buffer_sequential=True, imc_double_buffer_pipeline=True
    )
    check_ok(on)
    assert _planned_exposed_weight_cycles(on) < _planned_exposed_weight_cycles(off)
    mvm_deps = lambda r: sum(  # noqa: E731
        1
        for s in r.schedule.steps
        if s.kind is WeightLoad
        for d in s.deps
        if r.schedule.steps[d].kind is Mvm
    )
    assert mvm_deps(on) < mvm_deps(off)


def test_group_ifdw_tasks_frees_weight_loads_from_the_layer_input() -> None:
    off = compile_backend("resnet18", 64)
    on = compile_backend("resnet18", 64, group_ifdw_tasks=True)
    check_ok(on)
    deps = lambda r: sum(  # noqa: E731
        len(s.deps) for s in r.schedule.steps if s.kind is WeightLoad
    )
    assert deps(on) < deps(off)
