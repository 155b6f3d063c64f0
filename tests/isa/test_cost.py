"""The cost model: every task kind costs in the simulator exactly what the model says."""

from __future__ import annotations

import functools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from aipusim.arch import load_arch
from aipusim.isa.cost import (
    COMPONENTS,
    C,
    CostModel,
    Link,
    Traffic,
    cost_model,
    mvm_clock_pj_per_mac,
)
from aipusim.isa.program import Instance, MulticoreMode, Program
from aipusim.isa.tasks import (
    Barrier,
    DmaCopy,
    DpuKind,
    DpuOp,
    DwpuKind,
    DwpuOp,
    LutKind,
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
    """Cycles ``task`` holds its unit when it is the only task of a one-core program, alone
    on the links (with contention on, the tasklist fetch before it is another stream on
    DDR: a write would pay the read-to-write turnaround after it)."""
    prog = Program(
        model="one",
        multicore_mode=MulticoreMode.MULTIPROCESS,
        aipu_cores_used=1,
        resources_used=1.0,
        instance=Instance((0,), ("core0.tasklist",), 0, 0),
        **program,
    )
    log = simulate(prog, {0: [task]}, frames=1, contention=False).task_log
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
    DpuOp(
        unit=Unit.DPU,
        kind=DpuKind.MUL,
        in_addr0=0,
        in_addr1=0,
        out_addr=0,
        elements=6400,
        operands=2,
        lut=LutKind.SIGMOID,
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


@settings(max_examples=examples(40), deadline=None)
@given(
    vectors=st.integers(1, 5000),
    rows=st.integers(1, 512),
    cols=st.integers(1, 512),
    u=st.sampled_from([0.125, 0.25, 0.5, 1.0]),
)
def test_mvm_costs_agree_at_any_size_and_utilization(vectors, rows, cols, u) -> None:
    task = _mvm(vectors, rows, cols)
    assert _alone(task, mvm_utilization_limit=u) == CostModel(ARCH, None, u).task(task).cycles


@settings(max_examples=examples(40), deadline=None)
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
    assert tr.links == (Link.DDR, Link.NOC)  # DDR data crosses the NoC but no L2 port
    assert tr.channel_bw == 64  # the channel, and one L1 write port: 64 B/cycle each
    # LPDDR4x-4266, 4 channels of 8.532 B/ns, refresh 280 of every 3904 ns (x 1/0.92828):
    # 16 KiB = 4 KiB per channel = 480.08 ns -> 517.17 ns = 414 cycles at 800 MHz;
    # the first burst opens its rows (tRP + tRCD = 36 ns more): 555.95 ns = 445 cycles;
    # the last 100 bytes fit one channel's 256-byte piece: 11.72 ns -> 12.63 ns = 11 cycles
    # (the NoC needs 1, the channel 2). Setup 32, latency 100 ns = 80.
    assert MODEL.transfer_cycles(tr) == 32 + 445 + 2 * 414 + 11 + 80


def test_ddr_bursts_pay_for_fresh_rows_turnarounds_and_refresh() -> None:
    burst = ARCH.dma.burst_bytes
    cycles = functools.partial(MODEL.ddr_burst_cycles, burst)
    assert cycles(fresh=False, turnaround=False, write=False) == 414
    assert cycles(fresh=True, turnaround=False, write=False) == 445
    # read after write: tWTR 10 ns; write after read: tRTW 16 ns
    assert cycles(fresh=True, turnaround=True, write=False) == math.ceil(
        (480.0750 + 36 + 10) / (1 - 280 / 3904) * 0.8
    )
    assert cycles(fresh=True, turnaround=True, write=True) == math.ceil(
        (480.0750 + 36 + 16) / (1 - 280 / 3904) * 0.8
    )
    # a long stream sustains the peak less the refresh: 34.13 x 0.928 = 31.7 GB/s
    assert MODEL.stream_bw(Pool.DDR) * 0.8 == pytest.approx(31.7, abs=0.05)
    # slower rows: 3200 MT/s takes 4266/3200 as long for the data
    slow = CostModel(load_arch(overrides={"ddr.data_rate_mt_s": 3200}))
    assert slow.ddr_burst_cycles(burst, fresh=False, turnaround=False, write=False) == (
        math.ceil(4096 / 6.4 / (1 - 280 / 3904) * 0.8)
    )


def test_a_small_l2_burst_reaches_only_the_banks_it_rotates_over() -> None:
    # 512 bytes in 256-byte pieces: two banks of 32 B/cycle = 64 B/cycle, 8 cycles
    tr = MODEL.dma_transfer(Unit.DMA0, Pool.L2, Pool.L1, 512)
    assert MODEL.burst(tr, 512).own == 8
    # 200 bytes: one bank, 7 cycles (not the channel's 4)
    assert MODEL.burst(MODEL.dma_transfer(Unit.DMA0, Pool.L2, Pool.L1, 200), 200).own == 7
    # a long burst spreads over all 16 banks: the 64 B/cycle channel limits it
    assert MODEL.burst(tr, 16_384).own == 256


def test_a_compute_task_moves_its_l1_bytes_through_one_port_each_way() -> None:
    model = CostModel(load_arch(overrides={"l1.port_bytes_per_cycle": 64}))
    # int32 partial sums: 100 vectors x 512 columns x 4 bytes through a 64 B/cycle port
    psums = _mvm(100, 512, 512, post=PostOp.NONE)
    assert model.task(psums).cycles == 100 * 512 * 4 // 64 + 16
    # accumulating reads the inputs and the partial sums through one read port
    acc = _mvm(100, 512, 512, accumulate=1)
    assert model.task(acc).cycles == (100 * 512 + 100 * 512 * 4) // 64 + 16
    # a two-operand add reads 2 bytes and writes 1 per element: the read port limits it
    add = DpuOp(unit=Unit.DPU, kind=DpuKind.ADD, in_addr0=0, out_addr=0, elements=6400,
                operands=2)  # fmt: skip
    assert model.task(add).cycles == 2 * 6400 // 64 + 16
    # half-width ports: the MVM's input stream alone takes twice its compute time
    narrow = CostModel(load_arch(overrides={"l1.port_bytes_per_cycle": 32}))
    assert narrow.task(_mvm(100, 512, 512)).cycles == 2 * 800 + 16
    # the file's 192 B/cycle ports: partial sums at 192 B/cycle, not the 256 they need
    assert MODEL.task(psums).cycles == math.ceil(100 * 512 * 4 / ARCH.l1.port_bytes_per_cycle) + 16


def test_a_table_after_an_element_wise_op_is_one_more_lane_operation() -> None:
    model = CostModel(load_arch(overrides={"l1.port_bytes_per_cycle": 1024, "dpu.lanes": 64}))
    fields = dict(unit=Unit.DPU, kind=DpuKind.ADD, in_addr0=0, out_addr=0, elements=6400,
                  operands=2)  # fmt: skip
    add = model.task(DpuOp(**fields))
    # two operand reads per element over 64 lanes, plus the 16-cycle pipeline
    assert add.cycles == 2 * 6400 // 64 + 16
    fused = model.task(DpuOp(**fields, lut=LutKind.SIGMOID))
    assert fused.cycles == 3 * 6400 // 64 + 16  # and the lookup: one pass, not two tasks
    assert fused.traffic == add.traffic == Traffic(l1_read=2 * 6400, l1_write=6400)
    e = ARCH.energy
    extra = fused.energy_pj[C[Component.DPU]] - add.energy_pj[C[Component.DPU]]
    assert extra == pytest.approx(6400 * e.dpu_requant_act_pj)
    # a relu after the add is the record's clamp: the add's cost alone
    assert model.task(DpuOp(**fields, lut=LutKind.RELU)).cycles == add.cycles


def test_global_tokens_and_barriers_cross_the_noc() -> None:
    # local: the token register, 2 cycles; global: 2 + to the hub and back (2 x 2 hops x 2
    # cycles) + the hub's update (4)
    assert MODEL.token_latency_cycles(False) == 2
    assert MODEL.token_latency_cycles(True) == 2 + 8 + 4
    assert MODEL.barrier_cycles() == 8 + 4


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
    # a MAC less the array's clock, which the simulator charges per busy cycle
    per_mac = e.mvm_mac_pj - mvm_clock_pj_per_mac(ARCH)
    assert mvm.energy_pj[C[Component.MVM]] == pytest.approx(10 * 100 * 64 * per_mac)
    assert mvm.energy_pj[C[Component.DPU]] == pytest.approx(10 * 64 * e.dpu_requant_act_pj)
    assert mvm.energy_pj[C[Component.CONTROL]] == e.control_task_pj
    assert len(mvm.energy_pj) == len(COMPONENTS)
    flag = MODEL.task(TokenSignal(unit=Unit.DMA0))
    assert flag.cycles == 0 and flag.energy_total_pj == e.control_task_pj
    barrier = MODEL.task(Barrier(unit=Unit.CTRL, barrier_id=1, core_mask=1))
    assert barrier.cycles == MODEL.barrier_cycles()


def test_the_model_refuses_tasks_the_arch_cannot_run() -> None:
    from aipusim.base.errors import TasklistError

    with pytest.raises(TasklistError, match=r"rows_used/cols_used must be 1-512/1-512, not 0/64"):
        MODEL.task(_mvm(1, 0, 64))
    with pytest.raises(TasklistError, match="weight_set must be 0-3, not 4"):
        MODEL.task(_mvm(1, 1, 64, weight_set=4))


def test_one_model_per_setting_is_shared() -> None:
    assert cost_model(ARCH) is cost_model(ARCH)
    assert cost_model(ARCH, 400_000_000) is not cost_model(ARCH)


def test_strided_operands_move_their_span_through_the_ports() -> None:
    """Attention's operands with 3 heads interleaved: every third byte is the head's."""
    model = CostModel(load_arch(overrides={"l1.port_bytes_per_cycle": 64}))
    plain = model.task(_mvm(99, 128, 394))
    strided = model.task(_mvm(99, 128, 394, in_chan_pitch=3, out_chan_pitch=3))
    assert plain.traffic == Traffic(l1_read=99 * 128, l1_write=99 * 394)
    assert strided.traffic == Traffic(l1_read=3 * 99 * 128, l1_write=3 * 99 * 394)
    # plain: 99 vectors x 8 cycles; strided: 117,018 output bytes through the write port
    assert plain.cycles == 99 * 8 + 16
    assert strided.cycles == math.ceil(3 * 99 * 394 / 64) + 16
    # a load of 2 ICR copies of a 64 x 197 operand: 50,432 weights written at 96 B/cycle,
    # the source's span (64 x 197 x 3) read at 64 B/cycle; a row-major block reads it all
    block = dict(weight_set=0, src_addr=0, bytes=128 * 394, rows_used=128, cols_used=394)
    row_major = model.task(WeightLoad(unit=Unit.WLOAD, **block))
    operand = model.task(
        WeightLoad(unit=Unit.WLOAD, src_rows=64, src_pitch=3, copies=2, col_sums=1, **block)
    )
    assert row_major.cycles == 128 * 394 // 64
    assert operand.cycles == math.ceil(64 * 197 * 3 / 64)
    assert operand.traffic == Traffic(l1_read=64 * 197 * 3, imc_write=128 * 394)
    e = ARCH.energy
    extra = operand.energy_pj[C[Component.WLOAD]] - row_major.energy_pj[C[Component.WLOAD]]
    assert extra == pytest.approx(128 * 394 * e.imc_col_sum_pj_per_byte)
