"""Cooperative barriers: the intervals of groups a cross-core dependency spans, the fewest
barriers that order them, which token pairs stay tokens, and a halo swap with no barrier."""

from __future__ import annotations

from typing import Any

import pytest
from backend_helpers import ARCH, check_ok, front_graph, halo_graph

from aipusim.compiler import CompilerConfig
from aipusim.compiler.backend.run import run_backend
from aipusim.compiler.backend.schedule.barriers import choose_barriers, cross_core_spans, stabbing
from aipusim.compiler.backend.schedule.build import build_steps, schedule_of
from aipusim.compiler.backend.schedule.inputs import ScheduleInputs
from aipusim.compiler.backend.schedule.memdeps import WarPlan, add_memory_war
from aipusim.compiler.backend.schedule.steps import FrameSteps, ProducerMap, Step
from aipusim.compiler.backend.schedule.weight_plan import plan_weights
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.pipeline import BACK
from aipusim.isa.tasks import Barrier, DmaCopy, Mvm, Phase, TokenScope, Unit


def test_the_fewest_barriers_order_every_interval() -> None:
    # (0, 2) and (1, 3) share the barrier after group 1; (3, 4) needs its own after 3
    assert stabbing([(0, 2), (1, 3), (3, 4)]) == [1, 3]
    # an interval inside one group (or backwards) no barrier orders: left out
    assert stabbing([(2, 2), (3, 1)]) == []
    assert stabbing([]) == []


def test_the_pairs_that_force_most_barriers_stay_tokens() -> None:
    spans = {
        "halo": {(0, 1), (2, 3), (4, 5)},  # alone, barriers after 0, 2 and 4
        "war": {(1, 2)},  # after 1
        "gather": {(0, 5)},  # one barrier anywhere in 0..4
        "weights": {(3, 3)},  # inside group 3: a token whatever it costs
    }
    # one token: only the forced pair; barriers after 0, 2, 4 (gather too) and 1
    assert choose_barriers(spans, 1) == frozenset({0, 1, 2, 4})
    # two: the halo too; the war's barrier after 1 also orders the gather
    assert choose_barriers(spans, 2) == frozenset({1})
    assert choose_barriers(spans, 3) == frozenset({1})
    assert choose_barriers(spans, 4) == frozenset()
    # no token at all still keeps the forced pair (the token pass reports the overflow)
    assert choose_barriers(spans, 0) == frozenset({0, 1, 2, 4})


def _step(sid: int, core: int, unit: Unit, group: int, deps: set[int], **kw: object) -> Step:
    return Step(sid, core, unit, Mvm, {}, "l", 0, kw.get("phase", Phase.FRAME), 0, deps,
                group=group, epoch=int(kw.get("epoch", 1)))  # fmt: skip


def test_only_frame_dependencies_across_cores_no_barrier_orders_count() -> None:
    steps = [
        _step(0, 0, Unit.DMA0, 0, set()),
        _step(1, 1, Unit.MVM, 2, {0}),  # core 0's group 0 -> core 1's group 2
        _step(2, 1, Unit.DMA0, 2, {1}),  # same core: no token
        _step(3, 0, Unit.DMA0, -1, set(), epoch=0),
        _step(4, 1, Unit.MVM, 3, {3}),  # the input barrier orders it already
        _step(5, 0, Unit.DMA1, 0, set(), phase=Phase.INIT, epoch=0),
        _step(6, 1, Unit.WLOAD, 3, {5, 0}),  # INIT comes before the frame
    ]
    assert cross_core_spans(steps) == {
        (0, Unit.DMA0, 1, Unit.MVM): {(0, 2)},
        (0, Unit.DMA0, 1, Unit.WLOAD): {(0, 3)},
    }


def test_an_init_dependency_across_cores_is_always_a_token() -> None:
    # INIT has no barrier: core 1's fetch of weights core 0 copied into L2 (both in INIT's
    # one group) is an interval no barrier cuts, so its pair stays a token at any budget
    steps = [
        _step(0, 0, Unit.DMA1, 0, set(), phase=Phase.INIT, epoch=0),
        _step(1, 1, Unit.DMA1, 0, {0}, phase=Phase.INIT, epoch=0),
        _step(2, 0, Unit.DMA1, 0, {0}, phase=Phase.INIT, epoch=0),  # same core: no token
    ]
    spans = cross_core_spans(steps)
    assert spans == {(0, Unit.DMA1, 1, Unit.DMA1): {(0, 0)}}
    assert choose_barriers(spans, 0) == frozenset()


def test_two_cores_swap_halo_rows_through_tokens_not_barriers() -> None:
    cfg = CompilerConfig(multicore_mode="cooperative", aipu_cores_used=2, resources_used=0.5,
                         tiling_depth=1)  # fmt: skip
    r = run_backend(halo_graph(8, 8), cfg, ARCH)
    check_ok(r)
    # one barrier a frame: after the input transfer, none between the two convs
    for tasks in r.tasks.values():
        assert sum(isinstance(t, Barrier) and t.phase is Phase.FRAME for t in tasks) == 1
    # each core's c1 compute waits for the other core's halo multicast on a global token
    for core in (0, 1):
        halo = [t for t in r.tasks[1 - core] if isinstance(t, DmaCopy) and t.dst_core_mask]
        assert len(halo) == 1
        sent = {s for s in halo[0].signals if s.scope is TokenScope.GLOBAL}
        c1 = [t for t in r.tasks[core] if isinstance(t, Mvm) and t.layer == "c1"]
        assert sent and sent <= {w for t in c1 for w in t.waits}


def _built(steps: list[Step], group_barriers: set[int], fetch_loads: dict) -> FrameSteps:
    return FrameSteps(steps, {}, ProducerMap([]), frozenset(group_barriers), {}, fetch_loads,
                      {}, {})  # fmt: skip


def test_a_rebuild_adds_the_probes_write_after_read_edges_past_its_barriers() -> None:
    # the probe's steps 0..3; the rebuild has a barrier on each core after group 0 (its
    # steps 2 and 3), so the probe's steps are the rebuild's 0, 1, 4, 5
    steps = [
        _step(0, 0, Unit.DMA0, 0, set()),
        _step(1, 0, Unit.DMA1, 0, set()),  # multicasts into core 1's L1
        _step(2, 0, Unit.CTRL, 0, set()),
        _step(3, 1, Unit.CTRL, 0, set()),
        _step(4, 1, Unit.WLOAD, 1, {1}),  # core 1's load of the multicast
        _step(5, 1, Unit.MVM, 1, set()),
    ]
    rebuild = _built(steps, {2, 3}, {1: {1: 4}})
    # the probe's step 3 (core 1) overwrites bytes its steps 0 and 1 accessed
    war = WarPlan([(3, (0, 1), None)], 4)
    plan: Any = None  # (a given analysis reads no memory plan)
    assert add_memory_war(rebuild, plan, True, war) is war
    # core 1 learns the multicast is done from its own load of it
    assert [s.deps for s in steps] == [set(), set(), set(), set(), {1}, {0, 4}]
    other = _built(steps, {2}, {1: {1: 4}})  # a rebuild whose steps are not the probe's
    with pytest.raises(AssertionError, match="not this build's"):
        add_memory_war(other, plan, True, war)


def test_a_rebuild_with_the_probes_analysis_is_the_full_rebuild() -> None:
    cfg = CompilerConfig(multicore_mode="cooperative", aipu_cores_used=4)
    ctx = PassContext(cfg, arch=ARCH)
    ir: Any = front_graph("resnet18", 64)
    for p in BACK[: [p.name for p in BACK].index("schedule")]:
        ir = p.run(ir, ctx)
    inp = ScheduleInputs(ir.layers, ir.tilings, ir.groups, ir.mappings, ir.constants,
                         ir.memory, ir.graph, ir.target, ir.layout, ir.program)  # fmt: skip
    wplan = plan_weights(inp)
    probe, war = build_steps(inp, wplan)
    barriers = choose_barriers(cross_core_spans(probe.steps), ARCH.tokens.global_count)
    assert barriers
    full = build_steps(inp, wplan, barriers)[0]
    reused = build_steps(inp, wplan, barriers, war)[0]
    # the same steps, every dependency set iterating in the same order, the same tasks
    assert [(s.kind, s.fields, list(s.deps)) for s in full.steps] == [
        (s.kind, s.fields, list(s.deps)) for s in reused.steps
    ]
    assert schedule_of(inp, wplan, full).tasks == schedule_of(inp, wplan, reused).tasks
