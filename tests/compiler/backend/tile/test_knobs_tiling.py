"""Tiling knobs: forced factors, attempts, depth-first fusion and its search constraint."""

from __future__ import annotations

from backend_helpers import check_ok, compile_backend

from aipusim.compiler.backend.lower.layer import LayerUnit
from aipusim.isa.tasks import DmaCopy, Mvm, Phase, Pool


def _frame(result, kind):
    return [
        t
        for ts in result.tasks.values()
        for t in ts
        if isinstance(t, kind) and t.phase is Phase.FRAME
    ]


def test_force_h_tiling_cuts_every_tall_layer() -> None:
    r = compile_backend("resnet18", 64, force_h_tiling=4)
    check_ok(r)
    for p, t in zip(r.layers, r.tilings, strict=True):
        if p.unit is LayerUnit.MVM and p.geometry.out_h >= 4:
            assert t.h_tiles == 4
    assert len(_frame(r, Mvm)) > len(_frame(compile_backend("resnet18", 64), Mvm))


def test_force_oc_tiling_cuts_output_channels() -> None:
    r = compile_backend("resnet18", 64, force_oc_tiling=2)
    check_ok(r)
    mvm_tilings = [t for p, t in zip(r.layers, r.tilings, strict=True) if p.unit is LayerUnit.MVM]
    assert all(t.oc_tiles == 2 for t in mvm_tilings)
    assert max(t.cols_used for t in _frame(r, Mvm)) <= max(
        t.cols_used for t in _frame(compile_backend("resnet18", 64), Mvm)
    )


def _offchip_bytes(result) -> int:
    return sum(
        t.bytes
        for t in _frame(result, DmaCopy)
        if Pool.DDR in (t.src_pool, t.dst_pool) or Pool.L2 in (t.src_pool, t.dst_pool)
    )


def test_tiling_depth_keeps_intermediates_on_chip() -> None:
    base = dict(enable_buffer_promotion=False)
    flat = compile_backend("mobilenetv2", 96, **base)
    deep = compile_backend("mobilenetv2", 96, tiling_depth=6, **base)
    check_ok(deep)
    assert max(len(g.layers) for g in deep.groups) > 1
    assert max(len(g.layers) for g in deep.groups) <= 6
    assert _offchip_bytes(deep) < _offchip_bytes(flat)


def test_dfs_search_constraint_limits_the_group_search() -> None:
    free = compile_backend("mobilenetv2", 96, tiling_depth=6)
    greedy = compile_backend("mobilenetv2", 96, tiling_depth=6, dfs_search_constraint=1)
    check_ok(greedy)
    fused = lambda r: sum(len(g.layers) > 1 for g in r.groups)  # noqa: E731
    assert fused(greedy) <= fused(free)


def test_pipeline_spatial_tiles_double_buffers_tile_streams() -> None:
    on = compile_backend("resnet18", 64, force_h_tiling=4, enable_buffer_promotion=False)
    off = compile_backend(
        "resnet18",
        64,
        force_h_tiling=4,
        enable_buffer_promotion=False,
        pipeline_spatial_tiles=False,
    )
    check_ok(off)
    tiled_on = [t for t in on.tilings if t.h_tiles > 1]
    tiled_off = [t for t in off.tilings if t.h_tiles > 1]
    assert all(t.slots == 2 for t in tiled_on) and all(t.slots == 1 for t in tiled_off)
    waits = lambda r: sum(len(s.deps) for s in r.schedule.steps)  # noqa: E731
    assert waits(off) > waits(on)


def test_pipeline_channel_tiles_double_buffers_channel_tiles() -> None:
    on = compile_backend("resnet18", 64, force_oc_tiling=2)
    off = compile_backend("resnet18", 64, force_oc_tiling=2, pipeline_channel_tiles=False)
    slots = lambda r: {t.slots for t in r.tilings if t.oc_tiles > 1}  # noqa: E731
    assert slots(on) == {2} and slots(off) == {1}


def test_pipelined_tiles_prefetch_the_next_input_before_the_current_store() -> None:
    def first_store_before_second_load(r) -> bool:
        layer = next(
            p for p, t in zip(r.layers, r.tilings, strict=True) if t.h_tiles > 1 and t.in_tile_bytes
        )
        dmas = [
            t
            for t in r.tasks[0]
            if isinstance(t, DmaCopy)
            and t.layer == layer.name
            and Pool.L1 in (t.src_pool, t.dst_pool)
            and t.phase is Phase.FRAME
        ]
        second_load = next(i for i, t in enumerate(dmas) if t.dst_pool is Pool.L1 and t.tile == 1)
        first_store = next(i for i, t in enumerate(dmas) if t.src_pool is Pool.L1)
        return first_store < second_load

    kw = dict(force_h_tiling=4, enable_buffer_promotion=False)
    assert not first_store_before_second_load(compile_backend("resnet18", 64, **kw))
    off = compile_backend("resnet18", 64, pipeline_spatial_tiles=False, **kw)
    assert first_store_before_second_load(off)
