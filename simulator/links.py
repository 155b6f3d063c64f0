"""Shared links (DDR controller, L2/NoC port, system DMA, PCIe each way, DMA channels).

A link is a serial server with a bandwidth. A transfer is cut into bursts of
``arch.dma.burst_bytes``; each burst reserves every link of the transfer's path from the
moment all of them are free, for ``bytes / bandwidth`` cycles of each, and the next burst is
requested only when the current one ends. Two transfers over one link therefore take turns
burst by burst and each sees half the bandwidth, which is how concurrent transfers really
share a link. Reservation is arithmetic (no SimPy `Resource`), so a burst costs one event.

>>> import simpy
>>> env = simpy.Environment()
>>> ddr = Link("ddr", 32.0)
>>> p = env.process(transfer(env, (ddr,), 64, 32, 0, 5))
>>> env.run()
>>> p.value, ddr.busy_cycles
(7, 2)
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence
from typing import Any

import simpy


class Link:
    """A shared link: ``bw`` bytes per cycle, reserved up to ``free_at``."""

    __slots__ = ("busy_cycles", "bw", "free_at", "name", "nbytes")

    def __init__(self, name: str, bw_bytes_per_cycle: float) -> None:
        assert bw_bytes_per_cycle > 0, name
        self.name = name
        self.bw = float(bw_bytes_per_cycle)
        self.free_at = 0
        self.busy_cycles = 0
        self.nbytes = 0

    def cycles(self, nbytes: int) -> int:
        return math.ceil(nbytes / self.bw)


def transfer(
    env: simpy.Environment,
    links: Sequence[Link],
    nbytes: int,
    burst_bytes: int,
    t_ready: int,
    latency_cycles: int,
) -> Generator[Any, Any, int]:
    """Move ``nbytes`` over ``links`` from ``t_ready`` on; returns the cycle the data has landed.

    The caller's clock may be ahead of ``env.now`` (units run ahead when nothing can block
    them); the first reservation waits until ``t_ready`` so that reservations happen in time
    order and an earlier transfer is never queued behind a later one.
    """
    if t_ready > env.now:
        yield env.timeout(t_ready - env.now)
    remaining = nbytes
    t = t_ready
    while True:
        b = burst_bytes if remaining > burst_bytes else remaining
        remaining -= b
        s = t
        for link in links:
            if link.free_at > s:
                s = link.free_at
        end = s
        for link in links:
            d = math.ceil(b / link.bw)
            link.free_at = s + d
            link.busy_cycles += d
            link.nbytes += b
            if s + d > end:
                end = s + d
        t = end
        if remaining <= 0:
            return t + latency_cycles
        # Take turns: ask for the next burst only when this one is through.
        yield env.timeout(t - env.now)
