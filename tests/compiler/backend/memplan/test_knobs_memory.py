"""Memory knobs: promotion, pools, constraints, sysdma, paging, ELF/tasklist placement."""

from __future__ import annotations

from backend_helpers import ARCH, check_ok, compile_backend

from aipusim.compiler.backend.memplan.buffers import BufKind
from aipusim.isa.tasks import DmaCopy, Phase, Pool, Unit


def _frame_dma(r) -> list[DmaCopy]:
    return [
        t
        for ts in r.tasks.values()
        for t in ts
        if isinstance(t, DmaCopy) and t.phase is Phase.FRAME
    ]


def _ddr_bytes(r) -> int:
    return sum(t.bytes for t in _frame_dma(r) if Pool.DDR in (t.src_pool, t.dst_pool))


def test_buffer_promotion_moves_traffic_off_ddr() -> None:
    on = compile_backend("resnet18", 224)
    off = compile_backend("resnet18", 224, enable_buffer_promotion=False)
    assert all(b.pool is b.home for b in off.memory.buffers.values())
    assert _ddr_bytes(on) < _ddr_bytes(off)


def test_resources_used_quarter_keeps_resnet50_weights_in_ddr() -> None:
    full = compile_backend("resnet50", 224)
    quarter = compile_backend("resnet50", 224, resources_used=0.25)

    def ddr_weight_bytes(r) -> int:
        return sum(
            b.size_bytes
            for b in r.memory.buffers.values()
            if b.kind is BufKind.WEIGHT and b.pool is Pool.DDR
        )

    assert ddr_weight_bytes(quarter) > 2 * ddr_weight_bytes(full)
    assert _ddr_bytes(quarter) > _ddr_bytes(full)


def test_split_buffer_promotion_fills_l1_before_l2() -> None:
    r = compile_backend("resnet18", 224, split_buffer_promotion=True)
    check_ok(r)
    plain = compile_backend("resnet18", 224)

    def l1(x):
        return sum(
            b.size_bytes
            for b in x.memory.buffers.values()
            if b.pool is Pool.L1 and b.kind is not BufKind.TILE_IN
        )

    assert l1(r) >= l1(plain)


def test_io_memory_pool_l2_homes_inputs_on_chip() -> None:
    r = compile_backend("tiny_cnn", io_memory_pool="global.l2", enable_buffer_promotion=False)
    inputs = [b for b in r.memory.buffers.values() if b.kind is BufKind.INPUT]
    assert inputs and all(b.pool is Pool.L2 for b in inputs)


def test_dpu_constants_home_ddr_reads_constants_from_ddr() -> None:
    r = compile_backend("tiny_cnn", dpu_constants_home="global.ddr", enable_buffer_promotion=False)
    consts = [b for b in r.memory.buffers.values() if b.kind is BufKind.DPU_CONST]
    assert consts and all(b.pool is Pool.DDR for b in consts)
    l2 = compile_backend("tiny_cnn", enable_buffer_promotion=False)
    assert all(b.pool is Pool.L2 for b in l2.memory.buffers.values() if b.kind is BufKind.DPU_CONST)
    assert _ddr_bytes(r) > _ddr_bytes(l2)


def test_use_sysdma_brings_ddr_weights_through_l2() -> None:
    base = dict(resources_used=0.25)
    r = compile_backend("resnet50", 224, use_sysdma=True, **base)
    check_ok(r)
    sys_tasks = [t for t in _frame_dma(r) if t.unit is Unit.SYSDMA]
    assert sys_tasks and all(t.src_pool is Pool.DDR and t.dst_pool is Pool.L2 for t in sys_tasks)
    assert not [
        t for t in _frame_dma(compile_backend("resnet50", 224, **base)) if t.unit is Unit.SYSDMA
    ]


def test_page_memory_aligns_l2_and_ddr_buffers_to_pages() -> None:
    r = compile_backend("resnet18", 224, page_memory=True)
    page = ARCH.dma.burst_bytes
    for b in r.memory.buffers.values():
        if b.pool in (Pool.L2, Pool.DDR):
            assert b.addr % page == 0
    off = compile_backend("resnet18", 224, page_memory=False)
    assert any(b.addr % page for b in off.memory.buffers.values() if b.pool is Pool.L2)


def test_tasklist_in_l2_when_not_in_ddr_and_not_streamed() -> None:
    r = compile_backend("tiny_cnn", elf_in_ddr=False, stream_tasklist=False)
    tl = r.memory.buffers["tasklist"]
    assert tl.pool is Pool.L2 and tl.size_bytes > 0
    assert "tasklist" not in compile_backend("tiny_cnn").memory.buffers


def test_l1_constraint_shrinks_l1_use() -> None:
    r = compile_backend("resnet18", 224, l1_constraint=1_000_000)
    st = r.memory.pools[(Pool.L1, 0)]
    assert st.capacity == 1_000_000 and st.high_water_bytes <= 1_000_000
