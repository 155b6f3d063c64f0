"""``simulate(..., detail="cycle")``: DDR bursts timed by the cycle-level LPDDR4 model."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from aipusim.base.errors import ConfigError
from aipusim.isa.tasks import Pool, Unit
from aipusim.simulator import simulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import dma, program


def _ddr_program() -> tuple:
    # a 256 KiB read from DDR on one DMA channel, a 128 KiB write to DDR on the other
    tasks = [dma(Unit.DMA0, 256 * 1024), dma(Unit.DMA1, 128 * 1024, src=Pool.L1, dst=Pool.DDR)]
    return program(), {0: tasks}


def test_the_cycle_level_ddr_times_the_bursts_near_the_closed_form() -> None:
    prog, lists = _ddr_program()
    fast = simulate(prog, lists, frames=1)
    cycle = simulate(prog, lists, frames=1, detail="cycle")
    f, c = int(fast.device_latency_cycles[0]), int(cycle.device_latency_cycles[0])
    # a different model of the same device: not the same cycles, but the same ballpark
    # (reports/ddr/README.md: the closed form is within ~5 % on sequential streams)
    assert c != f
    assert 0.8 < c / f < 1.25


def test_with_contention_off_ddr_keeps_the_closed_form() -> None:
    # private links: every engine its own DDR, which one memory cannot be; the detailed DDR
    # is left out and the run is the fast model's (this program crosses no PCIe)
    prog, lists = _ddr_program()
    fast = simulate(prog, lists, frames=1, contention=False)
    cycle = simulate(prog, lists, frames=1, contention=False, detail="cycle")
    assert cycle.device_latency_cycles.tolist() == fast.device_latency_cycles.tolist()


def test_a_bad_detail_is_named() -> None:
    prog, lists = _ddr_program()
    with pytest.raises(ConfigError, match=r"detail must be one of fast, cycle, not 'fine'"):
        simulate(prog, lists, frames=1, detail="fine")
