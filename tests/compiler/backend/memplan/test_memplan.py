"""Pass 8, memplan: pools, promotion, liveness, capacities, the verifier and its errors."""

from __future__ import annotations

import dataclasses

import pytest
from backend_helpers import ARCH, compile_backend, conv_chain

from aipusim.base.errors import MemoryPlanError
from aipusim.compiler import CompilerConfig
from aipusim.compiler.backend.common.layout import CoreLayout
from aipusim.compiler.backend.common.target import Target
from aipusim.compiler.backend.memplan.buffers import (
    Buffer,
    BufKind,
    MemPlan,
    PoolState,
    verify_memplan,
)
from aipusim.compiler.backend.memplan.build import PlanInputs
from aipusim.compiler.backend.memplan.plan import plan_memory, pool_capacities
from aipusim.compiler.backend.passes import _tasklist_estimate
from aipusim.compiler.backend.run import run_backend
from aipusim.isa.tasks import DmaCopy, Phase, Pool, Unit


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


def test_a_pool_keeps_its_buffers_in_placing_order_and_removes_by_identity() -> None:
    st = PoolState(Pool.L2, 0, 1000, 1)
    a, b, c = _buf("a", 0, 10, 0, 0), _buf("b", 10, 10, 0, 0), _buf("c", 20, 10, 0, 0)
    twin = dataclasses.replace(b)  # equal to b, but another buffer
    assert twin == b
    for buf in (a, b, c, twin):
        st.place(buf, buf.addr)
    st.remove(b)
    assert [x is y for x, y in zip(st.placed, (a, c, twin), strict=True)] == [True] * 3
    assert (b.pool, b.addr) == (None, -1)
    st.place(b, 40)  # put back: now last
    assert [x.name for x in st.placed] == ["a", "c", "b", "b"] and st.placed[3] is b
    assert st.busy(_buf("q", 0, 1, 0, 0)) == [(0, 10), (20, 30), (10, 20), (40, 50)]


def test_zoo_plans_verify_and_stay_within_capacity() -> None:
    for name, size in (("resnet18", 224), ("yolov8n", 320)):
        r = compile_backend(name, size)
        verify_memplan(r.memory)
        for st in r.memory.pools.values():
            assert st.high_water_bytes <= st.capacity


def test_capacities_follow_resources_and_constraints() -> None:
    full = pool_capacities(Target.of(CompilerConfig(), ARCH))
    quarter = pool_capacities(Target.of(CompilerConfig(resources_used=0.25), ARCH))
    assert quarter[Pool.L2] == full[Pool.L2] // 4
    assert quarter[Pool.DDR] == full[Pool.DDR] // 4
    assert pool_capacities(Target.of(CompilerConfig(l2_constraint=1000), ARCH))[Pool.L2] == 1000
    assert pool_capacities(Target.of(CompilerConfig(l1_constraint=5000), ARCH))[Pool.L1] == 5000


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


def test_a_tensor_kept_in_l1_frees_the_tiles_that_copy_it() -> None:
    # two 1x1 convs over a 160 x 160 x 64 image: every tensor is 64*160*160 = 1,638,400
    # bytes, untiled; L1 holds 4 MiB - 512 KiB = 3,670,016. Beside one layer's input tile,
    # output tile (1,638,400 each), weight staging (262,144: one 512 x 512 block) and
    # parameters (1,536) only 129,536 bytes are free: x1 would go to L2. In L1 it makes
    # c0's output tile and c1's input tile needless (the schedule works on it in place),
    # so each step holds x1, one tile, the staging and the parameters: 3,540,480 bytes.
    r = run_backend(conv_chain([64, 64, 64], 160), CompilerConfig(), ARCH)
    bufs = r.memory.buffers
    assert bufs["act:x1"].pool is Pool.L1 and bufs["act:x1"].size_bytes == 1_638_400
    assert "tile_out:c0@0" not in bufs and "tile_in0:c1@0" not in bufs
    assert bufs["tile_in0:c0@0"].size_bytes == bufs["tile_out:c1@0"].size_bytes == 1_638_400
    assert bufs["wstage:c0@0"].size_bytes == 262_144
    assert r.memory.pools[(Pool.L1, 0)].peak_live_bytes == 3_540_480 + 2 * 1_536
    # x1 is written and read in place: the only activation DMAs are x0's fetch into c0's
    # input tile and c1's output tile's store to x2
    copies = [t for t in r.tasks[0] if isinstance(t, DmaCopy) and t.phase is Phase.FRAME]
    acts = [(t.layer, t.src_pool, t.dst_pool) for t in copies if t.unit is Unit.DMA0]
    assert acts == [("c0", Pool.L2, Pool.L1), ("c1", Pool.L1, Pool.L2)]
    verify_memplan(r.memory)


def test_resnet50_residual_branches_stay_in_l1_in_batch_and_on_one_core() -> None:
    # issue 17: the residual branch of layer1 (802,816 bytes per core) went to L2 when the
    # tile buffers copying it took the room; every ResNet-50 activation fits L1 now
    for config in (
        dict(multicore_mode="batch", aipu_cores_used=4),
        dict(multicore_mode="multiprocess", aipu_cores_used=1),
    ):
        r = compile_backend("resnet50", 224, **config)
        acts = [b for b in r.memory.buffers.values() if b.kind is BufKind.ACTIVATION]
        assert [b.name for b in acts if b.pool is not Pool.L1] == []
        branch = r.memory.buffer_of("/layer1/0/downsample/1/BatchNormalization_output_0", 0)
        assert branch is not None and branch.size_bytes == 802_816


def test_plan_inputs_carry_everything_a_plan_is_made_from() -> None:
    # the plan the memplan pass kept, made again from its inputs alone, lands every buffer
    # at the same pool and address; the inputs cannot be changed under a plan
    r = compile_backend("tiny_cnn", 32, aipu_cores_used=4, multicore_mode="cooperative")
    inputs = PlanInputs(
        r.layers, r.tilings, r.groups, r.mappings, r.constants, r.graph, r.target, r.layout,
        _tasklist_estimate(r), r.memory.attempts,
    )  # fmt: skip
    again = plan_memory(inputs)
    assert again.attempts == r.memory.attempts
    assert again.spared == r.memory.spared
    assert {n: (b.pool, b.core, b.addr) for n, b in again.buffers.items()} == {
        n: (b.pool, b.core, b.addr) for n, b in r.memory.buffers.items()
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        inputs.attempt = 2  # type: ignore[misc]
    assert (
        PlanInputs([], [], [], [], [], None, Target.of(CompilerConfig(), ARCH)).layout
        == CoreLayout()
    )
