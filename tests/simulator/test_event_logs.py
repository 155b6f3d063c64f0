"""Exact event logs of tiny hand-written programs (default arch, no host setup cost).

Numbers follow from arch/metis.toml: dispatch 8 cycles per task, token latency 2 (a global
token 2 + 2 x 2 hops x 2 cycles + 4 at the hub = 14), a barrier 12 cycles after the last
arrival, MVM 8 cycles per vector + 16 fill, DPU 64 lanes + 16, L1 ports of 64 B/cycle, DMA
setup 32, bursts of 16 KiB. A 16 KiB burst on LPDDR4x-4266 (4 channels of 8.532 B/ns, 4 KiB
each, two 2 KiB pages, refresh 280 of every 3904 ns): 480.08 ns of data, / (1 - 280/3904)
= 517.17 ns = 414 cycles at 800 MHz when it continues the previous burst, plus tRP + tRCD
= 36 ns (555.95 ns = 445 cycles) when it opens a fresh row; then 100 ns (80 cycles) of
access latency.
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

#: The DPU's 64 lanes and the 64 B/cycle weight-load path the figures below were worked out
#: with (the file's numbers are calibrated, see docs/validation.md).
PINNED = {"host_link.setup_us": 0.0, "dpu.lanes": 64, "mvm.weight_load_bw_bytes_per_cycle": 64}
ARCH = load_arch(overrides=PINNED)


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
    # setup 32, a fresh burst of 445 cycles, 3 that continue it (414 each), latency 80
    assert one == [(0, "dma0", 0, 0, 8, 8 + 32 + 445 + 3 * 414 + 80)]
    two = run({0: [dma(Unit.DMA0, 65536), dma(Unit.DMA1, 65536)]}).events()
    # Bursts alternate, so each opens a fresh row (445 cycles): dma0 at 40, 930, 1820, 2710;
    # dma1 at 485, 1375, 2265, 3155.
    assert two == [(0, "dma0", 0, 0, 8, 2710 + 445 + 80), (0, "dma1", 0, 1, 16, 3155 + 445 + 80)]
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


def test_three_readers_share_two_l1_ports() -> None:
    arch = load_arch(overrides={**PINNED, "l1.port_bytes_per_cycle": 64})
    tasks = [
        mvm(100),  # 816 cycles reading 51,200 bytes: 62.75 B/cycle, 8..824
        WeightLoad(
            unit=Unit.WLOAD, weight_set=1, src_addr=0, bytes=65536, rows_used=256,
            cols_used=256,
        ),  # 1024 cycles at 64 B/cycle, 16..1040
        dpu(6400, operands=2),  # 12,800 bytes read through one port: 200 + 16 cycles alone
    ]  # fmt: skip
    # The DPU starts at 24 with the two others holding 126.75 of the 128 B/cycle: 1.25
    # B/cycle until the MVM ends at 824 (1003.9 bytes), then its own 59.26 B/cycle for the
    # other 11,796.1 bytes (199.06 cycles): through at 1023.06.
    prog = program(1, stream_tasklist=False)
    assert Run(simulate(prog, {0: tasks}, arch=arch, frames=1)).events() == [
        (0, "mvm", 0, 0, 8, 824),
        (0, "wload", 0, 1, 16, 1040),
        (0, "dpu", 0, 2, 24, 1024),
    ]


def test_a_write_after_a_read_on_ddr_turns_the_bus_around() -> None:
    from aipusim.isa.tasks import Pool

    tasks = [dma(Unit.DMA0, 16384), dma(Unit.DMA1, 16384, src=Pool.L1, dst=Pool.DDR)]
    # dma0 reads from 40 (a fresh row: 445 cycles); dma1's write waits for DDR until 485,
    # opens its own row and turns the bus around: (480.08 + 36 + 16) ns / 0.92828 = 459
    # cycles; both then pay the 80-cycle latency.
    assert run({0: tasks}).events() == [
        (0, "dma0", 0, 0, 8, 485 + 80),
        (0, "dma1", 0, 1, 16, 485 + 459 + 80),
    ]


def test_barrier_across_cores() -> None:
    def core(vectors: int) -> list:
        return [
            mvm(vectors, signals=(tok(0),)),
            Barrier(unit=Unit.CTRL, barrier_id=1, core_mask=0b11, waits=(tok(0),)),
            dpu(64),
        ]

    events = run({0: core(100), 1: core(1000)}, cores=2).events()
    # core 1's MVM ends at 8 + 8016 = 8024; token visible at 8026 = its arrival; the release
    # crosses the NoC 12 cycles later (8038); the DPU task after the barrier is dispatched
    # 8 cycles later on both cores.
    assert events == [
        (0, "mvm", 0, 0, 8, 824),
        (1, "mvm", 0, 0, 8, 8024),
        (0, "ctrl", 0, 1, 826, 8038),
        (1, "ctrl", 0, 1, 8026, 8038),
        (0, "dpu", 0, 2, 8046, 8063),
        (1, "dpu", 0, 2, 8046, 8063),
    ]


def test_global_token_between_cores() -> None:
    from helpers import gtok

    tasks = {
        0: [mvm(100, signals=(gtok(5),))],
        1: [TokenWait(unit=Unit.DPU, waits=(gtok(5),)), dpu(64)],
    }
    events = run(tasks, cores=2).events()
    # the MVM ends at 824; the global token crosses the NoC to the hub and back: 824 + 14
    assert events[-2:] == [(1, "dpu", 0, 0, 838, 838), (1, "dpu", 0, 1, 838, 855)]


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
