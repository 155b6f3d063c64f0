"""Exact event logs of tiny hand-written programs (default arch, no host setup cost).

Numbers follow from arch/metis.toml: dispatch 8 cycles per task, token latency 2, MVM 8
cycles per vector + 16 fill, DPU 64 lanes + 16, DMA setup 32, DDR 24 GB/s = 30 B/cycle at
800 MHz with 100 ns (80 cycles) access latency, bursts of 16 KiB (547 cycles on DDR).
"""

from __future__ import annotations

import pytest
from helpers import dma, mvm, program, tok

from aipusim.arch import load_arch
from aipusim.base.errors import DeadlockError
from aipusim.isa.tasks import (
    Barrier,
    DpuKind,
    DpuOp,
    DwpuKind,
    DwpuOp,
    TokenSignal,
    TokenWait,
    Unit,
    WeightLoad,
)
from aipusim.simulator import simulate

ARCH = load_arch(overrides={"host_link.setup_us": 0.0})


def dpu(elements: int, **kw: object) -> DpuOp:
    return DpuOp(unit=Unit.DPU, kind=DpuKind.ADD, in_addr0=0, out_addr=0, elements=elements, **kw)


def pool(**kw: object) -> DwpuOp:
    return DwpuOp(
        unit=Unit.DWPU, kind=DwpuKind.MAXPOOL, in_addr=0, out_addr=0, channels=64,
        h=8, w=8, out_h=8, out_w=8, kh=3, kw=3, stride=1, **kw,
    )  # fmt: skip


class Run:
    """A result whose event times count from the start of frame 0 (after the tasklist
    has been fetched into the L2 window)."""

    def __init__(self, result) -> None:
        self.result = result
        self.t0 = int(result.start_cycles[0])

    def events(self) -> list[tuple]:
        t0 = self.t0
        return [(c, u, f, k, s - t0, e - t0) for c, u, f, k, s, e in self.result.events()]


def run(tasks_by_core: dict, cores: int = 1, frames: int = 1, **knobs: object) -> Run:
    knobs.setdefault("stream_tasklist", False)
    return Run(simulate(program(cores, **knobs), tasks_by_core, arch=ARCH, frames=frames))


def test_token_chain_orders_units_exactly() -> None:
    tasks = [
        dpu(640, signals=(tok(0),)),  # 640/64 + 16 = 26 cycles
        mvm(10, waits=(tok(0),), signals=(tok(1),)),  # 10*8 + 16 = 96
        pool(waits=(tok(1),)),  # 64 pixels x 1 window + 16 = 80
    ]
    assert run({0: tasks}).events() == [
        (0, "dpu", 0, 0, 8, 34),
        (0, "mvm", 0, 1, 36, 132),  # token visible at 34 + 2
        (0, "dwpu", 0, 2, 134, 214),
    ]


def test_counting_token_needs_both_signals() -> None:
    tasks = [
        dpu(64, signals=(tok(3),)),  # 17 cycles: 8..25
        dpu(64, signals=(tok(3),)),  # 25..42
        TokenWait(unit=Unit.MVM, waits=(tok(3, 2),)),
        mvm(1),
    ]
    assert run({0: tasks}).events() == [
        (0, "dpu", 0, 0, 8, 25),
        (0, "dpu", 0, 1, 25, 42),
        (0, "mvm", 0, 2, 44, 44),
        (0, "mvm", 0, 3, 44, 68),
    ]


def test_two_dmas_sharing_ddr_take_twice_as_long() -> None:
    one = run({0: [dma(Unit.DMA0, 65536)]}).events()
    # setup 32, 4 bursts of 547 cycles, DDR latency 80
    assert one == [(0, "dma0", 0, 0, 8, 8 + 32 + 4 * 547 + 80)]
    two = run({0: [dma(Unit.DMA0, 65536), dma(Unit.DMA1, 65536)]}).events()
    # Bursts alternate: dma0 at 40, 1134, 2228, 3322; dma1 at 587, 1681, 2775, 3869.
    assert two == [(0, "dma0", 0, 0, 8, 3322 + 547 + 80), (0, "dma1", 0, 1, 16, 3869 + 547 + 80)]
    span_one = one[0][5] - one[0][4]
    span_two = max(e[5] for e in two) - min(e[4] for e in two)
    assert span_two >= 1.9 * span_one


def test_dmas_on_separate_paths_do_not_share() -> None:
    from aipusim.isa.tasks import Pool

    ev = run({0: [dma(Unit.DMA0, 65536), dma(Unit.DMA1, 65536, src=Pool.L1, dst=Pool.L1)]})
    l1 = ev.events()[1]
    # L1 -> L1 uses only the channel: 32 setup + 1024 cycles + 2 L1 latency.
    assert l1 == (0, "dma1", 0, 1, 16, 16 + 32 + 1024 + 2)


def test_weight_set_load_overlaps_compute() -> None:
    tasks = [
        mvm(400, weight_set=0),  # 3216 cycles: 8..3224
        WeightLoad(
            unit=Unit.WLOAD, weight_set=1, src_addr=0, bytes=262144, rows_used=512,
            cols_used=512, signals=(tok(0),),
        ),  # 262144 / 64 = 4096 cycles: 16..4112
        mvm(100, weight_set=1, waits=(tok(0),)),
    ]  # fmt: skip
    events = run({0: tasks}).events()
    assert events == [
        (0, "mvm", 0, 0, 8, 3224),
        (0, "wload", 0, 1, 16, 4112),
        (0, "mvm", 0, 2, 4114, 4930),
    ]
    # The load of set 1 ran while set 0 computed: the whole is shorter than the sum.
    assert events[-1][5] - 8 < 3216 + 4096 + 816


def test_barrier_across_cores() -> None:
    def core(vectors: int) -> list:
        return [
            mvm(vectors, signals=(tok(0),)),
            Barrier(unit=Unit.CTRL, barrier_id=1, core_mask=0b11, waits=(tok(0),)),
            dpu(64),
        ]

    events = run({0: core(100), 1: core(1000)}, cores=2).events()
    # core 1's MVM ends at 8 + 8016 = 8024; token visible at 8026 = barrier release; the
    # DPU task after the barrier is dispatched 8 cycles later on both cores.
    assert events == [
        (0, "mvm", 0, 0, 8, 824),
        (1, "mvm", 0, 0, 8, 8024),
        (0, "ctrl", 0, 1, 826, 8026),
        (1, "ctrl", 0, 1, 8026, 8026),
        (0, "dpu", 0, 2, 8034, 8051),
        (1, "dpu", 0, 2, 8034, 8051),
    ]


def test_global_token_between_cores() -> None:
    from helpers import gtok

    tasks = {
        0: [mvm(100, signals=(gtok(5),))],
        1: [TokenWait(unit=Unit.DPU, waits=(gtok(5),)), dpu(64)],
    }
    events = run(tasks, cores=2).events()
    assert events[-2:] == [(1, "dpu", 0, 0, 826, 826), (1, "dpu", 0, 1, 826, 843)]


def test_wait_forever_raises_deadlock_naming_task_and_token() -> None:
    tasks = [mvm(10), dpu(64, waits=(tok(5),), layer="relu3")]
    with pytest.raises(DeadlockError, match=r"core 0 dpu task 1 .*relu3.*core0\.local5"):
        run({0: tasks})


def test_barrier_never_met_is_a_deadlock() -> None:
    tasks = {
        0: [Barrier(unit=Unit.CTRL, barrier_id=2, core_mask=0b11)],
        1: [TokenWait(unit=Unit.DPU, waits=(tok(1),))],
    }
    with pytest.raises(DeadlockError, match=r"barrier 2 .*waits for cores \[1\]"):
        run(tasks, cores=2)


def test_signal_only_tokens_do_not_block_later_frames() -> None:
    tasks = [TokenSignal(unit=Unit.DPU, signals=(tok(0),)), mvm(1, waits=(tok(0),))]
    res = run({0: tasks}, frames=3)
    assert [e[2] for e in res.events()] == [0, 0, 1, 1, 2, 2]
