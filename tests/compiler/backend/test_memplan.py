"""Pass 8, memplan: pools, promotion, liveness, capacities, the verifier and its errors."""

from __future__ import annotations

import pytest
from backend_helpers import ARCH, compile_backend

from aipusim.base.errors import MemoryPlanError
from aipusim.compiler import CompilerConfig
from aipusim.compiler.backend.memplan import (
    Buffer,
    BufKind,
    MemPlan,
    PoolState,
    pool_capacities,
    verify_memplan,
)
from aipusim.isa.tasks import Pool


def _plan(*bufs: Buffer, capacity: int = 1000) -> MemPlan:
    st = PoolState(Pool.L2, 0, capacity, 1)
    for b in bufs:
        st.place(b, b.addr)
    return MemPlan({b.name: b for b in bufs}, {(Pool.L2, 0): st}, 2, {})


def _buf(name: str, addr: int, size: int, start: int, end: int) -> Buffer:
    b = Buffer(name, BufKind.ACTIVATION, size, start, end, Pool.L2)
    b.addr = addr
    return b


def test_verifier_accepts_reuse_after_death_and_rejects_overlap() -> None:
    verify_memplan(_plan(_buf("a", 0, 100, 0, 0), _buf("b", 50, 100, 1, 1)))
    with pytest.raises(MemoryPlanError, match=r"buffers a and b must not overlap in l2"):
        verify_memplan(_plan(_buf("a", 0, 100, 0, 1), _buf("b", 50, 100, 1, 1)))
    with pytest.raises(MemoryPlanError, match=r"buffer a must lie within l2"):
        verify_memplan(_plan(_buf("a", 950, 100, 0, 1)))


def test_zoo_plans_verify_and_stay_within_capacity() -> None:
    for name, size in (("resnet18", 224), ("yolov8n", 320)):
        r = compile_backend(name, size)
        verify_memplan(r.memory)
        for st in r.memory.pools.values():
            assert st.high_water_bytes <= st.capacity


def test_capacities_follow_resources_and_constraints() -> None:
    full = pool_capacities(CompilerConfig(), ARCH)
    quarter = pool_capacities(CompilerConfig(resources_used=0.25), ARCH)
    assert quarter[Pool.L2] == full[Pool.L2] // 4
    assert quarter[Pool.DDR] == full[Pool.DDR] // 4
    assert pool_capacities(CompilerConfig(l2_constraint=1000), ARCH)[Pool.L2] == 1000
    assert pool_capacities(CompilerConfig(l1_constraint=5000), ARCH)[Pool.L1] == 5000


def test_a_model_that_fits_no_memory_names_buffer_size_and_free_space() -> None:
    with pytest.raises(MemoryPlanError) as info:
        compile_backend("resnet18", 224, ddr_constraint=100_000, l2_constraint=50_000)
    msg = str(info.value)
    assert "buffer " in msg and "bytes" in msg and "free space" in msg
    assert info.value.status == "LOWER_TIR_ERROR"


def test_liveness_lets_activations_share_addresses() -> None:
    r = compile_backend("resnet50", 224, enable_buffer_promotion=False)
    acts = [b for b in r.memory.buffers.values() if b.kind is BufKind.ACTIVATION]
    assert all(b.pool is Pool.DDR for b in acts)
    total = sum(b.size_bytes for b in acts)
    footprint = max(b.addr + b.size_bytes for b in acts) - min(b.addr for b in acts)
    assert footprint < total / 2


def test_batch_cores_never_share_l2_or_ddr_bytes() -> None:
    # every core of a batch runs its own frame at its own pace: one core's activation may
    # not reuse the bytes of another core's dead one (nothing orders the two); without
    # promotion tiny_cnn's activations stay in their shared home pool, where they did
    r = compile_backend(
        "tiny_cnn", 64, multicore_mode="batch", aipu_cores_used=4, resources_used=1.0,
        enable_buffer_promotion=False,
    )  # fmt: skip
    shared = [b for b in r.memory.buffers.values() if b.pool in (Pool.L2, Pool.DDR)]
    acts = [b for b in shared if b.kind is BufKind.ACTIVATION]
    assert {b.core for b in acts} == {0, 1, 2, 3}
    for i, a in enumerate(shared):
        for b in shared[i + 1 :]:
            if a.pool is b.pool and a.core != b.core:
                apart = a.addr + a.size_bytes <= b.addr or b.addr + b.size_bytes <= a.addr
                assert apart, f"{a.name} and {b.name} share {a.pool.value} bytes"
    # within one core, liveness still lets activations share addresses
    core0 = [b for b in acts if b.core == 0]
    assert len({b.addr for b in core0}) < len(core0)
