"""The host link: PCIe moves TLPs and DLLPs, not raw bytes; the host's own work per frame;
and the detailed mode's other-direction traffic."""

from __future__ import annotations

import math

import pytest
from helpers import mvm, program

from aipusim.arch import load_arch
from aipusim.base.errors import ConfigError
from aipusim.isa.cost import CostModel, Link, Transfer, pcie_wire_bytes
from aipusim.isa.tasks import Pool
from aipusim.simulator import simulate

ARCH = load_arch()
FREQ = ARCH.clock.default_hz


def test_a_write_to_the_host_pays_a_header_per_payload_and_dllps_back() -> None:
    link = ARCH.host_link
    # 1000 bytes: 4 TLPs of at most 256 B, 24 B each on the line; one ACK (per 4) and one
    # credit update (per 8) of 8 B come back
    assert pcie_wire_bytes(link, 1000, h2d=False) == (1000 + 4 * 24, 2 * 8)
    # a read of host memory: 8 completions of 128 B down, 2 requests (512 B each) up and the
    # DLLPs that answer each side's TLPs
    down, up = pcie_wire_bytes(link, 1000, h2d=True)
    assert down == 1000 + 8 * 24 + (1 + 1) * 8
    assert up == 2 * 24 + (2 + 1) * 8
    assert pcie_wire_bytes(link, 0, h2d=True) == (0, 0)


def test_the_line_carries_the_overhead_so_data_moves_below_the_line_rate() -> None:
    cost = CostModel(ARCH, FREQ)
    line = ARCH.host_bw_bytes_per_cycle(FREQ)
    assert ARCH.host_link.line_gb_s == pytest.approx(8.0 * 4 / 8 * 128 / 130)
    nbytes = 16_384
    for link, h2d in ((Link.PCIE_D2H, False), (Link.PCIE_H2D, True)):
        src, dst = (Pool.HOST, Pool.L2) if h2d else (Pool.L2, Pool.HOST)
        tr = Transfer(nbytes, (link,), 0.0, 0, 0, src, dst, 0, h2d)
        wire, _ = pcie_wire_bytes(ARCH.host_link, nbytes, h2d)
        assert cost.burst(tr, nbytes).cycles == (math.ceil(wire / line),)
    # posted writes of 256 B carry data at 256 / 280 of the line; reads at 128 B completions
    # lower
    d2h = nbytes / pcie_wire_bytes(ARCH.host_link, nbytes, False)[0]
    h2d_share = nbytes / pcie_wire_bytes(ARCH.host_link, nbytes, True)[0]
    assert 0.90 < d2h < 0.92 and 0.82 < h2d_share < 0.85


def _run(arch: object, **kw: object) -> object:
    prog = program(1, input_bytes=150_528, output_bytes=4_000)
    return simulate(prog, {0: [mvm(2000)]}, arch=arch, frames=4, **kw)  # type: ignore[arg-type]


def test_host_work_per_frame_adds_to_latency_and_caps_throughput() -> None:
    base = _run(ARCH)
    us = 100.0
    busy = load_arch(overrides={"host_link.pre_frame_us": us, "host_link.post_frame_us": us})
    slow = _run(busy)
    # each frame waits for its pre-processing and its post-processing
    extra = (slow.latency_us - base.latency_us)[-1]
    assert extra == pytest.approx(2 * us, abs=0.01)
    # one pre-processing thread per replica: at most one frame per 100 µs
    assert slow.fps <= 1e6 / us * 1.001
    assert base.fps > slow.fps


def test_the_detailed_mode_puts_dllps_on_the_other_line() -> None:
    fast = _run(ARCH)
    cycle = _run(ARCH, detail="cycle")
    assert fast.detail == "fast" and cycle.detail == "cycle"
    # the device-to-host line now also carries the ACKs and requests of the inputs' reads
    assert cycle.link_utilization["pcie_d2h"] > fast.link_utilization["pcie_d2h"]
    # the device itself: as fast, but for the banked L1 of the detailed mode (a bank wait
    # or two of the DMA against the MVM)
    device = cycle.device_latency_cycles / fast.device_latency_cycles
    assert device.tolist() == pytest.approx([1.0] * len(device), abs=1e-3)
    # it fits in where the line is free: the inputs themselves are held back little
    assert cycle.fps == pytest.approx(fast.fps, rel=0.02)


def test_an_unknown_detail_is_refused() -> None:
    with pytest.raises(ConfigError, match="detail must be one of fast, cycle, not 'exact'"):
        _run(ARCH, detail="exact")
