"""The cycle-level LPDDR4 model on cases small enough to time by hand.

The hand config: tCK = 1 ns, one channel of one rank, 8 banks of 2 KiB rows, 32-byte bursts
(x16, BL16), CL 10, CWL 5, tRCD = tRP = 6, tRAS 14, tRRD 4, tCCD 8, tRTP 4, tWTR 5, tRTW 12,
every command one clock. Bank = address // 2048 % 8, row = address // 16384. A read's data
ends CL + BL/2 = 18 clocks after its READ; a write's CWL + BL/2 = 13 after its WRITE.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from aipusim.arch import load_arch
from aipusim.base.errors import ArchError, InvalidArgument
from aipusim.simulator.detail.lpddr4 import Lpddr4Config, simulate_requests

HAND = Lpddr4Config(
    tck_ns=1.0,
    channels=1,
    ranks=1,
    banks=8,
    rows=1024,
    page_bytes=2048,
    bus_bytes=2,
    burst_length=16,
    interleave_bytes=2048,
    cl=10,
    cwl=5,
    t_ccd=8,
    t_rcd=6,
    t_rp=6,
    t_rp_ab=7,
    t_ras=14,
    t_rc=20,
    t_rrd=4,
    t_faw=60,
    t_wr=6,
    t_rtp=4,
    t_wtr=5,
    t_rtw=12,
    t_rtrs=2,
    t_rfc_ab=50,
    t_rfc_pb=30,
    t_refi=800,
    act_tck=1,
    cas_tck=1,
    pre_tck=1,
    refresh_mode="none",
    read_queue_depth=8,
    write_queue_depth=8,
    drain_high=6,
    drain_low=2,
)
ROW = 16384  # the next row of bank 0
BANK = 2048  # the next bank


def run(requests: list[tuple[int, bool, int]], cfg: Lpddr4Config = HAND) -> list[int]:
    """Completion clock of each (address, write, arrival) 32-byte request."""
    addresses, writes, arrivals = zip(*requests, strict=True)
    res = simulate_requests(
        cfg, list(addresses), [32] * len(requests), list(writes), list(arrivals)
    )
    return res.done_tck.tolist()


def test_a_row_miss_a_row_hit_and_a_bank_conflict() -> None:
    # miss on a closed bank: ACT 0, READ 6 (tRCD), data ends 6 + 18
    assert run([(0, False, 0)]) == [24]
    # a hit on the row left open: READ at arrival, CL + BL/2 later
    assert run([(0, False, 0), (32, False, 100)]) == [24, 118]
    # a conflict: PRE 100, ACT 106 (tRP), READ 112 (tRCD), 18 more
    assert run([(0, False, 0), (ROW, False, 100)]) == [24, 130]
    # another bank, closed: a plain miss
    assert run([(0, False, 0), (BANK, False, 100)]) == [24, 124]


def test_tfaw_holds_back_the_fifth_activate() -> None:
    reads = [(b * BANK, False, 0) for b in range(5)]
    # ACTs at 0, 4, 8, 12 (tRRD); the fifth waits for the window: 0 + tFAW = 60, READ 66
    assert run(reads)[4] == 66 + 18
    # without the window the fifth is limited by the data bus (a READ every tCCD)
    assert run(reads, replace(HAND, t_faw=1))[4] < 66 + 18


def test_an_all_bank_refresh_blacks_out_a_read() -> None:
    cfg = replace(HAND, refresh_mode="all_bank")
    # REFab due at tREFI = 800 blocks every bank for tRFCab = 50: ACT 850, READ 856
    assert run([(0, False, 801)], cfg) == [874]
    assert run([(0, False, 801)]) == [801 + 24]
    # a row left open is closed first by PREab (tRPab = 7): PREab 800, REF 807, ACT 857
    assert run([(0, False, 0), (32, False, 801)], cfg) == [24, 857 + 24]


def test_a_per_bank_refresh_blacks_out_only_its_bank() -> None:
    cfg = replace(HAND, refresh_mode="per_bank")
    # REFpb of bank 0 at tREFI / 8 = 100 blocks it for tRFCpb = 30; bank 1 runs on, its
    # ACT only tRRD after the REFpb (which counts as an activate): ACT 104, READ 110
    assert run([(0, False, 101)], cfg) == [130 + 24]
    assert run([(BANK, False, 101)], cfg) == [104 + 24]


def test_write_to_read_and_read_to_write_turnarounds() -> None:
    # WRITE at 6 (ACT 0); the read of the same row waits CWL + BL/2 + tWTR = 18 after it
    assert run([(0, True, 0), (32, False, 7)]) == [6 + 13, 24 + 18]
    # READ at 6; the write waits tRTW = 12 after it
    assert run([(0, False, 0), (32, True, 7)]) == [24, 18 + 13]


def test_fr_fcfs_serves_a_younger_row_hit_before_an_older_conflict() -> None:
    # READ of row 0 at 96 (ACT 90); its bank may not precharge before tRAS = 104.
    # A (row 1, older) and B (row 0, younger) wait: B's hit goes first at 104 (tCCD),
    # and the open row is kept for it; A's PRE then waits tRTP after B's READ: PRE 108,
    # ACT 114, READ 120.
    done = run([(0, False, 90), (ROW, False, 97), (64, False, 98)])
    assert done == [114, 120 + 18, 104 + 18]


PER_BANK = replace(HAND, command_queues="per_bank", command_queue_depth=8)


def test_a_full_bank_queue_blocks_the_transaction_queue() -> None:
    # Three reads to bank 0 (rows 0, 1, 2), then one to bank 1; a read queue of 2 feeding
    # command queues of 1. A moves into bank 0's queue at 0 (ACT 1, READ 7); B and C wait
    # in the read queue, which is then full: D enters only when B moves, at A's READ (7),
    # and goes to bank 1's queue at 8 (ACT 9, READ 16 after PRE B at 15 in round-robin
    # order). B: PRE 15 (tRAS), ACT 21 (tRC), READ 27; C: PRE 35, ACT 41, READ 47.
    cfg = replace(PER_BANK, read_queue_depth=2, command_queue_depth=1)
    four = ([0, ROW, 2 * ROW, BANK], [32] * 4, [False] * 4, [0] * 4)
    res = simulate_requests(cfg, *four)
    assert res.accept_tck.tolist() == [0, 1, 2, 7]
    assert res.done_tck.tolist() == [25, 45, 65, 34]
    # deeper command queues take B and C at once: D enters at 3
    assert simulate_requests(replace(cfg, command_queue_depth=8), *four).accept_tck[3] == 3
    # one queue of 1 for the whole rank: D waits for C's READ (47) to move, ACT 48, READ 55
    per_rank = replace(cfg, command_queues="per_rank")
    assert simulate_requests(per_rank, *four).done_tck.tolist() == [25, 45, 65, 73]


def test_reads_and_writes_share_a_bank_queue() -> None:
    # A write to row 0 of bank 0 at 0, a read of row 1 at 1. With command queues and a batch
    # drain (low watermark 0: one write and empty command queues start it) the write moves
    # first and the read waits behind it in bank 0's queue: ACT 1, WRITE 7 (data ends 20),
    # PRE after the write recovery 7 + 13 + tWR 6 = 26, ACT 32, READ 38, data ends 56.
    cfg = replace(PER_BANK, write_drain="batch", drain_low=0)
    assert run([(0, True, 0), (ROW, False, 1)], cfg) == [20, 56]
    # without command queues, watermark drains serve the read first (done 44), the write
    # once no read waits
    assert run([(0, True, 0), (ROW, False, 1)]) == [59, 44]


def test_the_row_hit_limit_lets_an_older_conflict_close_the_row() -> None:
    # A (row 0) at 0, B (row 1) at 1, then three hits of row 0 at 2, 3, 4. FR-FCFS keeps
    # row 0 open for every hit (READs 7, 15, 23, 31), B last.
    reads = [(0, False, 0), (ROW, False, 1), (32, False, 2), (64, False, 3), (96, False, 4)]
    assert run(reads, PER_BANK) == [25, 65, 33, 41, 49]
    # After 2 hits (A's and the first younger one, READ 15) B's PRE may go once tRTP
    # allows: PRE 19, ACT 25, READ 31; the last two hits reopen row 0: PRE 39, ACT 45,
    # READs 51 and 59.
    assert run(reads, replace(PER_BANK, row_hit_limit=2)) == [25, 49, 33, 69, 77]
    # the limit applies without command queues too (ACT 0, one clock earlier)
    assert run(reads, replace(HAND, row_hit_limit=2)) == [24, 48, 32, 68, 76]


def test_the_arch_config_streams_near_peak_and_refreshes() -> None:
    cfg = Lpddr4Config.from_arch(load_arch())
    n = 2048
    res = simulate_requests(cfg, [i * 256 for i in range(n)], [256] * n, [False] * n, [0] * n)
    assert 0.85 * cfg.peak_gb_s < res.bandwidth_gb_s < cfg.peak_gb_s
    assert res.commands["REF"] > 0 and res.commands["RD"] == n * 256 // cfg.burst_bytes
    assert res.p99_latency_ns >= res.avg_latency_ns > 0


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ((-32, 32, False, 0), r"request 0: `address` must lie in \[0, 16777216\) bytes, not -32"),
        ((2**30, 32, False, 0), r"`address` must lie in \[0, 16777216\) bytes, not 1073741824"),
        ((0, 0, False, 0), r"request 0: `size` must be 1-16777216 bytes .*, not 0"),
        (
            (16777184, 64, False, 0),
            r"`size` must be 1-32 bytes \(to the end of the memory\), not 64",
        ),
        ((0, 32, False, -1), r"`arrival` must be >= 0 clocks, not -1"),
        ((0, 32.5, False, 0), r"`size` must be an integer, not 32.5"),
        ((0, 32, "yes", 0), r"`write` must be True or False, not 'yes'"),
    ],
)
def test_bad_requests_are_named(request_: tuple, message: str) -> None:
    a, s, w, t = request_
    with pytest.raises(InvalidArgument, match=message):
        simulate_requests(HAND, [a], [s], [w], [t])


def test_mismatched_columns_and_bad_configs_are_named() -> None:
    with pytest.raises(
        InvalidArgument, match=r"`sizes` must have one entry per address \(2\), not 1"
    ):
        simulate_requests(HAND, [0, 32], [32], [False, False], [0, 0])
    with pytest.raises(InvalidArgument, match=r"`refresh_mode` must be one of .*, not 'sometimes'"):
        simulate_requests(replace(HAND, refresh_mode="sometimes"), [0], [32], [False], [0])
    with pytest.raises(
        InvalidArgument,
        match=r"`drain_high` must lie in \[drain_low, write_queue_depth\] = \[2, 8\], not 9",
    ):
        simulate_requests(replace(HAND, drain_high=9), [0], [32], [False], [0])
    with pytest.raises(
        InvalidArgument, match=r"`command_queues` must be one of none, per_bank, per_rank, not 'x'"
    ):
        simulate_requests(replace(PER_BANK, command_queues="x"), [0], [32], [False], [0])
    with pytest.raises(
        InvalidArgument,
        match=r"`command_queue_depth` must be 0 with no command queues and >= 1 with "
        r"'per_bank' ones, not 0",
    ):
        simulate_requests(replace(PER_BANK, command_queue_depth=0), [0], [32], [False], [0])
    with pytest.raises(
        InvalidArgument, match=r"`write_drain` must be one of watermark, batch, not 'x'"
    ):
        simulate_requests(replace(HAND, write_drain="x"), [0], [32], [False], [0])
    with pytest.raises(InvalidArgument, match=r"`t_rcd` must be an integer >= 1, not 0"):
        simulate_requests(replace(HAND, t_rcd=0), [0], [32], [False], [0])
    with pytest.raises(
        ArchError, match=r"ddr.refresh_mode must be one of per_bank, all_bank, not 'x'"
    ):
        load_arch(overrides={"ddr.refresh_mode": "x"})


def test_the_simpy_form_times_transfers_as_the_request_stream_does() -> None:
    import simpy

    from aipusim.simulator.detail.lpddr4_simpy import Lpddr4Device

    env = simpy.Environment()
    dev = Lpddr4Device(env, HAND, core_hz=1_000_000_000)  # one core cycle per DRAM clock
    first = dev.transfer(0, 64, write=False)
    later: list = []

    def ask_later() -> object:
        yield env.timeout(100)
        later.append(dev.transfer(ROW, 32, write=False))

    env.process(ask_later())
    env.run()
    # READ 6 and 14 after ACT 0; the conflict at 100 as in the hand case above
    assert first.value == 14 + 18
    assert later[0].value == 130
    with pytest.raises(InvalidArgument, match=r"`core_hz` must be a positive integer, not 0"):
        Lpddr4Device(env, HAND, core_hz=0)


@pytest.mark.slow
def test_a_100k_request_trace_runs_well_under_a_minute() -> None:
    import time

    import numpy as np

    cfg = Lpddr4Config.from_arch(load_arch())
    n = 100_000
    rng = np.random.default_rng(28)
    addresses = (rng.integers(0, cfg.size_bytes // 64, n) * 64).tolist()
    start = time.perf_counter()
    res = simulate_requests(cfg, addresses, [64] * n, (rng.random(n) < 1 / 3).tolist(), [0] * n)
    assert time.perf_counter() - start < 45
    assert res.commands["RD"] + res.commands["WR"] == 2 * n


def test_refreshes_due_while_idle_are_not_owed_afterwards() -> None:
    import simpy

    from aipusim.simulator.detail.ddr_link import DdrBurstTimer
    from aipusim.simulator.detail.lpddr4_simpy import Lpddr4Device

    cfg = replace(HAND, refresh_mode="per_bank")
    env = simpy.Environment()
    dev = Lpddr4Device(env, cfg, core_hz=1_000_000_000)
    late: list = []

    def ask_late() -> object:
        yield env.timeout(100_050)  # 1000 REFpb came due and ended meanwhile; none is owed
        late.append(dev.transfer(BANK, 32, write=False))

    env.process(ask_late())
    env.run()
    assert late[0].value == 100_050 + 24
    timer = DdrBurstTimer(cfg, core_hz=1_000_000_000)
    assert timer.burst_cycles(100_050, 32, write=False, stream=1) == 24
