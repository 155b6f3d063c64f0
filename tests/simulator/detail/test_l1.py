"""The detailed L1: banks behind a crossbar, ports per direction, the arbiter, cycle by
cycle; and where it parts from the fast model's fluid ports."""

from __future__ import annotations

import pytest

from aipusim.arch import load_arch
from aipusim.arch.model import Arbitration
from aipusim.base.errors import ArchError, ConfigError
from aipusim.simulator.detail.l1 import BankedL1, L1Access, compare_l1_with_ports

L1 = BankedL1(banks=16, bank_bytes=16, read_ports=2, write_ports=2, port_bytes=64)


def read(who: int, nbytes: int, addr: int = 0, rate: float = 64.0, start: int = 0) -> L1Access:
    return L1Access(who, start, nbytes, addr, rate, write=False)


def test_a_stream_alone_moves_a_port_per_cycle_or_its_rate() -> None:
    assert L1.serve([read(0, 6400)]).end.tolist() == [100]
    # 32 B per cycle: a port's width of credit every second cycle, the first at cycle 1
    assert L1.serve([read(0, 6400, rate=32.0, start=10)]).end.tolist() == [10 + 200]
    # the last access moves what is left
    assert L1.serve([read(0, 100)]).end.tolist() == [2]


def test_aligned_streams_meet_once_then_run_apart() -> None:
    out = L1.serve([read(0, 6400), read(1, 6400)])
    assert out.end.tolist() == [100, 101]
    assert out.bank_waits.tolist() == [0, 1]


def test_streams_half_a_port_apart_take_turns_under_round_robin() -> None:
    # banks 0-3 against 2-5: whoever goes first takes banks the other needs next
    out = L1.serve([read(0, 6400), read(1, 6400, addr=32)])
    assert out.end.tolist() == [199, 200]
    assert out.bank_waits.tolist() == [99, 100]
    # a fixed order lets requester 0 run ahead until the two are apart
    fixed = BankedL1(16, 16, 2, 2, 64, Arbitration.FIXED)
    out = fixed.serve([read(0, 6400), read(1, 6400, addr=32)])
    assert out.end.tolist() == [100, 102] and out.bank_waits.tolist() == [0, 2]


def test_more_requesters_than_ports_share_them_cycle_by_cycle() -> None:
    out = L1.serve([read(i, 6400, addr=i * 64) for i in range(3)])
    # 300 port accesses over 2 ports: none can be done before cycle 150
    assert 150 <= max(out.end.tolist()) <= 152
    # at a port's rate a requester is granted or waits every cycle until its 100 accesses
    for end, banks, ports in zip(out.end, out.bank_waits, out.port_waits, strict=True):
        assert end == 100 + banks + ports and ports > 0


def test_reads_and_writes_have_their_own_ports_but_share_the_banks() -> None:
    write = L1Access(1, 0, 6400, 0, 64.0, write=True)
    out = L1.serve([read(0, 6400), write])
    assert out.end.tolist() == [100, 101] and out.bank_waits.tolist() == [0, 1]


def test_the_fluid_ports_and_the_banks_compared() -> None:
    rows = compare_l1_with_ports(L1, [read(i, 6400, addr=i * 64) for i in range(3)])
    # fluid: each requester holds a port for its whole stream, the third waits for one;
    # the crossbar shares the ports cycle by cycle, so all three end near cycle 150
    assert [r["cycles_fast"] for r in rows] == [100, 100, 200]
    assert 150 <= max(r["cycles_detailed"] for r in rows) <= 152
    assert rows[2]["cycles_detailed"] < rows[2]["cycles_fast"] - 40


def test_the_arch_file_gives_the_l1() -> None:
    l1 = BankedL1.of(load_arch())
    assert (l1.banks, l1.bank_bytes, l1.port_bytes) == (16, 16, 64)
    with pytest.raises(ArchError, match=r"l1\.arbitration must be one of round_robin, fixed"):
        load_arch(overrides={"l1.arbitration": "lottery"})


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"banks": 0}, "banks must be an integer >= 1, not 0"),
        ({"bank_bytes": 1.5}, "bank_bytes must be an integer >= 1, not 1.5"),
        ({"arbitration": "lottery"}, "arbitration must be one of round_robin, fixed"),
    ],
)
def test_a_bad_l1_is_named(bad: dict, message: str) -> None:
    args = {"banks": 16, "bank_bytes": 16, "read_ports": 2, "write_ports": 2, "port_bytes": 64}
    with pytest.raises(ConfigError, match=message):
        BankedL1(**{**args, **bad})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("access", "message"),
    [
        (read(0, 0), "must move nbytes >= 1 from start >= 0 and addr >= 0, not nbytes=0"),
        (read(0, 64, addr=-1), "addr=-1"),
        (read(0, 64, rate=0.0), "rate must be > 0 bytes per cycle, not 0.0"),
    ],
)
def test_a_bad_access_is_named(access: L1Access, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        L1.serve([access])
