"""The banked L1 inside the detailed simulation (``detail="cycle"``): `L1Calendar` books
each stream cycle by cycle against the banks and ports earlier bookings hold, and the
simulator feeds it every task's streams from their L1 addresses."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from aipusim.isa.cost import CostModel
from aipusim.isa.tasks import Pool, Unit
from aipusim.simulator import simulate
from aipusim.simulator.detail.l1 import BankedL1, L1Calendar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import dma, mvm, program

L1 = BankedL1(banks=16, bank_bytes=16, read_ports=2, write_ports=2, port_bytes=64)


def test_a_stream_alone_takes_its_own_time_at_any_rate_up_to_a_port() -> None:
    cal = L1Calendar(L1, requesters=1)
    assert cal.book(0, 0, 100, (0,), (6400,), write=False) == 100
    # 63.8 B per cycle: an access every cycle once a port's width of credit is there,
    # not every second cycle
    assert cal.book(0, 200, 100, (0,), (6380,), write=True) == 300
    assert cal.waits.tolist() == [[0, 0, 200]]


def test_streams_that_need_the_same_banks_wait_and_more_than_the_ports_queue() -> None:
    cal = L1Calendar(L1, requesters=3)
    cal.book(0, 0, 100, (0,), (6400,), write=False)
    # half a port behind: the banks the first one holds now or next; booked later, it
    # waits until the first is two accesses ahead, then trails it without meeting it
    assert cal.book(1, 0, 100, (32,), (6400,), write=False) == 102
    assert cal.waits[1].tolist() == [2, 0, 100]
    cal = L1Calendar(L1, requesters=3)
    for who in range(3):  # far apart banks: only the two ports limit them
        cal.book(who, 0, 100, (who * 4096 + 64 * who,), (6400,), write=False)
    assert cal.waits[2, 1] == 100 and cal.waits[:, 0].sum() == 0


def test_a_stream_of_several_ranges_walks_them_together() -> None:
    cal = L1Calendar(L1, requesters=1)
    # 4096 + 1024 bytes in 80 accesses, the smaller range a fifth of them throughout
    assert cal.book(0, 0, 80, (0, 1 << 20), (4096, 1024), write=False) == 80
    assert cal.waits[0, 2] == 80


def test_the_calendar_drops_the_past_and_grows_into_the_future() -> None:
    cal = L1Calendar(L1, requesters=1)
    far = 10 * len(cal.banks)
    assert cal.book(0, far, 50, (0,), (3200,), write=False, now=far) == far + 50
    assert cal.base == far  # nothing can be booked before the present
    assert cal.book(0, far, 50, (0,), (3200,), write=False, now=far) == far + 51


def _mvm(in_addr: int, out_addr: int, vectors: int = 64) -> object:
    return dataclasses.replace(mvm(vectors), in_addr=in_addr, out_addr=out_addr)


def test_an_mvm_whose_input_and_results_use_other_banks_takes_its_cost_model_time() -> None:
    prog = program()
    fast = simulate(prog, {0: [_mvm(0, 128)]}, frames=1)
    cycle = simulate(prog, {0: [_mvm(0, 128)]}, frames=1, detail="cycle")
    assert cycle.device_latency_cycles.tolist() == fast.device_latency_cycles.tolist()
    assert fast.l1_waits is None
    # one access per port's width of each stream: 64 vectors x 512 B in, 64 x 512 out
    assert cycle.l1_waits == {"mvm": {"bank_waits": 0, "port_waits": 0, "accesses": 1024}}


def test_a_dma_writing_the_banks_the_mvm_reads_slows_one_of_them() -> None:
    # the MVM reads L1 from 0 while DMA1 writes 64 KiB from L2 to the same bytes, burst by
    # burst at the DMA's rate: whenever their accesses land on the same banks one waits
    tasks = [_mvm(0, 1 << 20, vectors=256), dma(Unit.DMA1, 64 * 1024, src=Pool.L2)]
    prog = program()
    fast = simulate(prog, {0: tasks}, frames=1)
    cycle = simulate(prog, {0: tasks}, frames=1, detail="cycle")
    waits = cycle.l1_waits
    assert waits is not None and {"mvm", "dma1"} <= set(waits)
    assert waits["mvm"]["bank_waits"] + waits["dma1"]["bank_waits"] > 0
    assert cycle.device_latency_cycles[0] >= fast.device_latency_cycles[0]


def test_l1_streams_split_the_cost_models_l1_bytes() -> None:
    from aipusim.arch import load_arch

    model = CostModel(load_arch(), 800_000_000)
    task = dataclasses.replace(mvm(10), accumulate=True, psum_addr=4096)
    reads, writes = model.l1_streams(task)
    traffic = model.task(task).traffic
    assert [f for f, _ in reads] == ["in_addr", "psum_addr"]
    assert sum(n for _, n in reads) == traffic.l1_read
    assert sum(n for _, n in writes) == traffic.l1_write
