"""Remaining back-end knobs: pools, weight buffers in tiling, memplan attempts, clock,
host-side settings handed to the runtime."""

from __future__ import annotations

import pytest
from backend_helpers import compile_backend

from aipusim.base.errors import MemoryPlanError
from aipusim.compiler.backend.emit.files import build_program
from aipusim.compiler.backend.lower.layer import LayerUnit
from aipusim.compiler.backend.memplan.buffers import BufKind
from aipusim.isa.tasks import Pool


def _pools(r, kind: BufKind) -> set[Pool]:
    return {b.pool for b in r.memory.buffers.values() if b.kind is kind}


def test_constant_and_workspace_pools_set_the_homes() -> None:
    r = compile_backend(
        "tiny_cnn",
        enable_buffer_promotion=False,
        constant_memory_pool="global.l2",
        workspace_memory_pool="global.l2",
    )
    assert _pools(r, BufKind.WEIGHT) == {Pool.L2}
    assert _pools(r, BufKind.ACTIVATION) == {Pool.L2}
    d = compile_backend("tiny_cnn", enable_buffer_promotion=False)
    assert _pools(d, BufKind.WEIGHT) == {Pool.DDR} and _pools(d, BufKind.ACTIVATION) == {Pool.DDR}


def test_ignore_weight_buffers_false_budgets_weight_staging_in_tiling() -> None:
    kw = dict(l1_constraint=400_000)
    counted = compile_backend("resnet18", 224, ignore_weight_buffers=False, **kw)
    staged = [
        t for p, t in zip(counted.layers, counted.tilings, strict=True) if p.unit is LayerUnit.MVM
    ]
    assert all(t.weight_stage_bytes > 0 for t in staged)
    assert all(t.l1_bytes <= 400_000 for t in staged)
    ignored = compile_backend("resnet18", 224, **kw)
    assert all(t.weight_stage_bytes == 0 for t in ignored.tilings)


def test_max_memplan_attempts_bounds_the_retries() -> None:
    kw = dict(l1_constraint=200_000)
    assert compile_backend("resnet18", 128, **kw).memory.attempts > 1
    with pytest.raises(MemoryPlanError, match="must fit a memory pool"):
        compile_backend("resnet18", 128, max_memplan_attempts=1, **kw)


def test_frequency_changes_ddr_transfer_cycles() -> None:
    fast = compile_backend("resnet18", 224, enable_buffer_promotion=False)
    slow = compile_backend("resnet18", 224, enable_buffer_promotion=False, frequency=200_000_000)

    def cycles(r):
        return sum(s.cycles for s in r.schedule.steps if s.fields.get("src_pool") is Pool.DDR)

    assert cycles(slow) < cycles(fast)  # DDR keeps its GB/s: fewer core cycles per byte
    assert build_program(slow, "m", "id", {}).frequency_hz == 200_000_000


def test_host_side_knobs_reach_the_runtime() -> None:
    r = compile_backend("tiny_cnn", host_processes_used=2, input_dmabuf=True)
    host = build_program(r, "m", "id", {}).extra["host"]
    assert host == {"host_processes_used": 2, "input_dmabuf": True, "output_dmabuf": False}


def test_profiling_levels_and_utilization_reach_the_runtime() -> None:
    r = compile_backend("tiny_cnn", profiling_levels=["K", "M"], mvm_utilization_limit=0.5)
    program = build_program(r, "m", "id", {})
    assert program.profiling_levels == ("K", "M") and program.mvm_utilization_limit == 0.5
