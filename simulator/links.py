"""Shared links (DDR controller, L2/NoC port, system DMA, PCIe each way, DMA channels).

A link is a serial server with a bandwidth. A transfer is cut into bursts of
``arch.dma.burst_bytes``; each burst reserves every link of the transfer's path from the
moment all of them are free, for ``bytes / bandwidth`` cycles of each, and the next burst is
requested only when the current one ends. Two transfers over one link therefore take turns
burst by burst and each sees half the bandwidth, which is how concurrent transfers really
share a link. Reservation is arithmetic (no SimPy `Resource`), so a burst costs one event.

>>> from aipusim.simulator.clock import RunEnvironment
>>> env = RunEnvironment()
>>> ddr = Link("ddr", 32.0)
>>> p = env.process(transfer(env, (ddr,), 64, 32, 0, 5))
>>> env.run()
>>> p.value, ddr.busy_cycles
(7, 2)
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Generator, Sequence
from typing import Any

from aipusim.isa.cost import burst_cycles as cost_burst
from aipusim.simulator.clock import RunEnvironment


class Link:
    """A shared link: ``bw`` bytes per cycle, booked burst by burst.

    Bursts are booked when the simulated present reaches their ready cycle, so nothing is
    ever booked before the present and the link only needs to know when its last booking
    ends (``free_at``) and which stretches before that are still free (``gaps``): a burst of
    a multi-link path that must start later than its ready cycle leaves a gap that another
    burst can still use. Gaps that end in the past are forgotten.
    """

    __slots__ = ("busy_cycles", "bw", "free_at", "gap_ends", "gap_starts", "name", "nbytes")

    def __init__(self, name: str, bw_bytes_per_cycle: float) -> None:
        assert bw_bytes_per_cycle > 0, name
        self.name = name
        self.bw = float(bw_bytes_per_cycle)
        self.free_at = 0  # end of the latest booking
        self.busy_cycles = 0
        self.nbytes = 0
        # Free stretches [start, end) before free_at, sorted and disjoint.
        self.gap_starts: list[int] = []
        self.gap_ends: list[int] = []

    def cycles(self, nbytes: int) -> int:
        return math.ceil(nbytes / self.bw)

    def fit(self, s: int, d: int) -> int:
        """The earliest cycle >= ``s`` that starts a free stretch of ``d`` cycles."""
        if s >= self.free_at:
            return s
        gap_starts, gap_ends = self.gap_starts, self.gap_ends
        for i in range(bisect_right(gap_ends, s), len(gap_ends)):
            start = gap_starts[i] if gap_starts[i] > s else s
            if start + d <= gap_ends[i]:
                return start
        return self.free_at

    def book(self, s: int, d: int, now: float) -> None:
        """Reserve ``[s, s + d)``, which `fit` found free; ``now`` is the present."""
        gap_starts, gap_ends = self.gap_starts, self.gap_ends
        if gap_ends and gap_ends[0] <= now:
            k = bisect_right(gap_ends, now)
            del gap_starts[:k], gap_ends[:k]
        if s >= self.free_at:
            if s > self.free_at and s > now:
                gap_starts.append(self.free_at if self.free_at > now else int(now))
                gap_ends.append(s)
            self.free_at = s + d
        else:
            i = bisect_right(gap_ends, s)  # the gap holding [s, s + d)
            a, b = gap_starts[i], gap_ends[i]
            del gap_starts[i], gap_ends[i]
            if s + d < b:
                gap_starts.insert(i, s + d)
                gap_ends.insert(i, b)
            if a < s:
                gap_starts.insert(i, a)
                gap_ends.insert(i, s)
        self.busy_cycles += d


def burst_cycles(
    links: Sequence[Link], nbytes: int, private_bw: float = 0.0
) -> tuple[tuple[int, ...], int]:
    """Cycles one burst of ``nbytes`` holds each link of a path, and the issuing engine's own
    channel of ``private_bw`` bytes per cycle (0: none)."""
    return tuple(cost_burst(nbytes, link.bw) for link in links), cost_burst(nbytes, private_bw)


def book_burst(
    links: Sequence[Link],
    cycles: Sequence[int],
    nbytes: int,
    ready: int,
    now: float,
    own_cycles: int = 0,
) -> int:
    """Book one burst of ``nbytes`` on every shared link of a path from ``ready`` on, at the
    first cycle all of them are free long enough; returns the cycle the burst has passed.

    ``cycles`` are the burst's cycles on each link and ``own_cycles`` on the issuing
    engine's own channel (never contended: its queue is serial), see `burst_cycles`.
    """
    s = ready
    for link in links:
        if link.free_at > s:
            break
    else:
        # Every link is free from ``ready`` on (the common case): append.
        end = s + own_cycles
        for link, d in zip(links, cycles, strict=True):
            if s > link.free_at and s > now:
                link.book(s, d, now)  # leaves a gap that is still in the future
            else:
                link.free_at = s + d
                link.busy_cycles += d
            link.nbytes += nbytes
            if s + d > end:
                end = s + d
        return end
    moved = True
    while moved:
        moved = False
        for link, d in zip(links, cycles, strict=True):
            if s < link.free_at:  # else fit(s, d) is s
                s2 = link.fit(s, d)
                if s2 != s:
                    s, moved = s2, True
    end = s + own_cycles
    for link, d in zip(links, cycles, strict=True):
        link.book(s, d, now)
        link.nbytes += nbytes
        if s + d > end:
            end = s + d
    return end


def transfer(
    env: RunEnvironment,
    links: Sequence[Link],
    nbytes: int,
    burst_bytes: int,
    t_ready: int,
    latency_cycles: int,
    private_bw: float = 0.0,
) -> Generator[Any, Any, int]:
    """Move ``nbytes`` over ``links`` from ``t_ready`` on; returns the cycle the data has landed.

    Bursts are booked one at a time when the previous one has passed, so concurrent
    transfers take turns. The caller's clock may be ahead of ``env.now`` (units run ahead
    when nothing can block them); the first burst is booked at ``t_ready``.
    """
    if t_ready > env.now and not env.advance_to(t_ready):
        yield t_ready
    remaining = nbytes
    t = t_ready
    full, own = burst_cycles(links, burst_bytes, private_bw)
    while True:
        if remaining > burst_bytes:
            t = book_burst(links, full, burst_bytes, t, env.now, own)
        else:
            last, own_last = burst_cycles(links, remaining, private_bw)
            t = book_burst(links, last, remaining, t, env.now, own_last)
        remaining -= burst_bytes
        if remaining <= 0:
            return t + latency_cycles
        # Take turns: ask for the next burst only when this one is through.
        if not env.advance_to(t):
            yield t
