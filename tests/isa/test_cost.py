"""The cost model: every task kind costs in the simulator exactly what the model says."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aipusim.arch import load_arch
from aipusim.isa.cost import COMPONENTS, C, CostModel, Link, Traffic, cost_model
from aipusim.isa.program import Instance, MulticoreMode, Program
from aipusim.isa.tasks import (
    Barrier,
    DmaCopy,
    DpuKind,
    DpuOp,
    DwpuKind,
    DwpuOp,
    Mvm,
    Pool,
    PostOp,
    Task,
    TokenSignal,
    Unit,
    WeightLoad,
)
from aipusim.isa.trace_schema import Component
from aipusim.simulator import simulate

ARCH = load_arch()
MODEL = CostModel(ARCH)


def _alone(task: Task, **program: object) -> int:
    """Cycles ``task`` holds its unit when it is the only task of a one-core program."""
    prog = Program(
        model="one",
        multicore_mode=MulticoreMode.MULTIPROCESS,
        aipu_cores_used=1,
        resources_used=1.0,
        instance=Instance((0,), ("core0.tasklist",), 0, 0),
        **program,
    )
    log = simulate(prog, {0: [task]}, frames=1).task_log
    (row,) = log[log["unit"] == task.unit.value].itertuples()
    return int(row.end - row.start)


def _mvm(vectors: int, rows: int, cols: int, **kw: object) -> Mvm:
    fields = (
        dict(weight_set=0, in_addr=0, out_addr=0, vectors=vectors, rows_used=rows, cols_used=cols)
        | kw
    )
    return Mvm(unit=Unit.MVM, **fields)


def _dma(unit: Unit, src: Pool, dst: Pool, nbytes: int, mask: int = 0) -> DmaCopy:
    return DmaCopy(
        unit=unit,
        src_pool=src,
        src_addr=0,
        dst_pool=dst,
        dst_addr=0,
        bytes=nbytes,
        dst_core_mask=mask,
    )


KINDS: list[Task] = [
    _mvm(100, 512, 512),
    _mvm(7, 147, 64, accumulate=1, post=PostOp.NONE),
    WeightLoad(
        unit=Unit.WLOAD, weight_set=1, src_addr=0, bytes=65_536, rows_used=256, cols_used=256
    ),
    DpuOp(
        unit=Unit.DPU,
        kind=DpuKind.ADD,
        in_addr0=0,
        in_addr1=0,
        out_addr=0,
        elements=6400,
        operands=2,
    ),
    DpuOp(unit=Unit.DPU, kind=DpuKind.LAYERNORM, in_addr0=0, out_addr=0, elements=192 * 197),
    DpuOp(
        unit=Unit.DPU,
        kind=DpuKind.MATMUL,
        in_addr0=0,
        in_addr1=0,
        out_addr=0,
        elements=64 * 197 * 197,
        operands=2,
    ),
    DwpuOp(
        unit=Unit.DWPU,
        kind=DwpuKind.DWCONV,
        in_addr=0,
        out_addr=0,
        channels=144,
        h=58,
        w=58,
        out_h=56,
        out_w=56,
        kh=3,
        kw=3,
        stride=1,
    ),
    DwpuOp(
        unit=Unit.DWPU,
        kind=DwpuKind.RESIZE_LINEAR,
        in_addr=0,
        out_addr=0,
        channels=64,
        h=20,
        w=20,
        out_h=40,
        out_w=40,
        kh=2,
        kw=2,
        stride=1,
    ),
    *[
        _dma(unit, src, dst, n)
        for unit in (Unit.DMA0, Unit.DMA1)
        for src, dst in [
            (Pool.DDR, Pool.L1),
            (Pool.L2, Pool.L1),
            (Pool.L1, Pool.L2),
            (Pool.L1, Pool.L1),
            (Pool.DDR, Pool.L2),
            (Pool.HOST, Pool.L2),
        ]
        for n in (64, 16_384, 100_001)
    ],
    _dma(Unit.SYSDMA, Pool.DDR, Pool.L2, 1_000_000),
]


@pytest.mark.parametrize("task", KINDS, ids=lambda t: f"{type(t).__name__}")
def test_the_simulator_runs_every_kind_for_exactly_its_cost(task: Task) -> None:
    assert _alone(task) == MODEL.task(task).cycles


@settings(max_examples=40, deadline=None)
@given(
    vectors=st.integers(1, 5000),
    rows=st.integers(1, 512),
    cols=st.integers(1, 512),
    u=st.sampled_from([0.125, 0.25, 0.5, 1.0]),
)
def test_mvm_costs_agree_at_any_size_and_utilization(vectors, rows, cols, u) -> None:
    task = _mvm(vectors, rows, cols)
    assert _alone(task, mvm_utilization_limit=u) == CostModel(ARCH, None, u).task(task).cycles


@settings(max_examples=40, deadline=None)
@given(
    nbytes=st.integers(1, 300_000),
    pools=st.sampled_from([(Pool.DDR, Pool.L1), (Pool.L1, Pool.DDR), (Pool.L2, Pool.L1)]),
    freq=st.sampled_from([100_000_000, 400_000_000, 800_000_000]),
)
def test_transfers_agree_at_any_size_and_clock(nbytes, pools, freq) -> None:
    task = _dma(Unit.DMA0, *pools, nbytes)
    assert _alone(task, frequency_hz=freq) == CostModel(ARCH, freq).task(task).cycles


def test_an_mvm_pass_is_the_slower_of_compute_and_drain_plus_the_pipeline() -> None:
    mvm = ARCH.mvm
    # full width: 8 cycles a vector; 512 outputs drain at 64 a cycle, also 8
    assert MODEL.mvm_cycles(100, 512) == 800 + mvm.pipeline_latency_cycles
    # half the banks active: the 512 columns need two passes of the same vectors
    half = CostModel(ARCH, None, 0.5)
    assert half.mvm_cycles(100, 512) == 1600 + mvm.pipeline_latency_cycles


def test_a_transfer_is_setup_then_bursts_at_its_slowest_link_then_latency() -> None:
    n = 3 * ARCH.dma.burst_bytes + 100
    tr = MODEL.dma_transfer(Unit.DMA0, Pool.DDR, Pool.L1, n)
    assert tr.links == (Link.DDR, Link.L2)
    ddr = MODEL.link_bw(Link.DDR)  # 30 B/cycle at 800 MHz: slower than the 64 B/cycle channel
    per_burst = math.ceil(ARCH.dma.burst_bytes / ddr)
    expected = (
        ARCH.dma.setup_cycles
        + 3 * per_burst
        + math.ceil(100 / ddr)
        + MODEL.ddr_latency_cycles  # (DDR data crosses the L2 port but no L2 bank)
    )
    assert MODEL.transfer_cycles(tr) == expected


def test_traffic_counts_every_byte_a_task_moves() -> None:
    assert MODEL.task(_dma(Unit.DMA0, Pool.DDR, Pool.L1, 1000)).traffic == Traffic(
        ddr=1000, l2=1000, l1_write=1000
    )
    # a multicast reads once and writes every destination core's L1
    assert MODEL.task(_dma(Unit.DMA1, Pool.L2, Pool.L1, 1000, mask=0b1111)).traffic == Traffic(
        l2=1000, l1_write=4000
    )
    mvm = MODEL.task(_mvm(10, 100, 64, accumulate=1, post=PostOp.NONE))
    assert mvm.traffic == Traffic(l1_read=10 * 100 + 10 * 64 * 4, l1_write=10 * 64 * 4)


def test_energy_is_charged_per_action_and_component() -> None:
    e = ARCH.energy
    mvm = MODEL.task(_mvm(10, 100, 64))
    assert mvm.energy_pj[C[Component.MVM]] == pytest.approx(10 * 100 * 64 * e.mvm_mac_pj)
    assert mvm.energy_pj[C[Component.DPU]] == pytest.approx(10 * 64 * e.dpu_requant_act_pj)
    assert mvm.energy_pj[C[Component.CONTROL]] == e.control_task_pj
    assert len(mvm.energy_pj) == len(COMPONENTS)
    flag = MODEL.task(TokenSignal(unit=Unit.DMA0))
    assert flag.cycles == 0 and flag.energy_total_pj == e.control_task_pj
    assert MODEL.task(Barrier(unit=Unit.CTRL, barrier_id=1, core_mask=1)).cycles == 0


def test_the_model_refuses_tasks_the_arch_cannot_run() -> None:
    from aipusim.base.errors import TasklistError

    with pytest.raises(TasklistError, match=r"rows_used/cols_used must be 1-512/1-512, not 0/64"):
        MODEL.task(_mvm(1, 0, 64))
    with pytest.raises(TasklistError, match="weight_set must be 0-3, not 4"):
        MODEL.task(_mvm(1, 1, 64, weight_set=4))


def test_one_model_per_setting_is_shared() -> None:
    assert cost_model(ARCH) is cost_model(ARCH)
    assert cost_model(ARCH, 400_000_000) is not cost_model(ARCH)
