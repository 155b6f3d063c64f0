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

from aipusim.simulator.clock import RunEnvironment


class Link:
    """A shared link: ``bw`` bytes per cycle and a calendar of booked bursts.

    Bursts are booked when the simulated present reaches their ready cycle, so they mostly
    append; the calendar (sorted, non-overlapping ``[start, end)`` intervals) keeps a burst
    of a multi-link path that must start later than its ready cycle from hiding a gap that
    another burst can still use.
    """

    __slots__ = ("busy_cycles", "bw", "ends", "free_at", "name", "nbytes", "starts")

    #: Bookings kept before the past is forgotten (nothing is booked before the present).
    KEEP = 1024

    def __init__(self, name: str, bw_bytes_per_cycle: float) -> None:
        assert bw_bytes_per_cycle > 0, name
        self.name = name
        self.bw = float(bw_bytes_per_cycle)
        self.free_at = 0  # end of the latest booking (serial servers use only this)
        self.busy_cycles = 0
        self.nbytes = 0
        self.starts: list[int] = []
        self.ends: list[int] = []

    def cycles(self, nbytes: int) -> int:
        return math.ceil(nbytes / self.bw)

    def fit(self, s: int, d: int) -> int:
        """The earliest cycle >= ``s`` that starts a free stretch of ``d`` cycles."""
        if s >= self.free_at:
            return s
        starts, ends = self.starts, self.ends
        i = bisect_right(ends, s)
        n = len(starts)
        while i < n and starts[i] < s + d:
            if ends[i] > s:
                s = ends[i]
            i += 1
        return s

    def book(self, s: int, d: int, now: float) -> None:
        starts, ends = self.starts, self.ends
        if len(ends) > self.KEEP:
            k = bisect_right(ends, now)
            if k:
                del starts[:k], ends[:k]
        if s >= self.free_at:
            starts.append(s)
            ends.append(s + d)
            self.free_at = s + d
        else:
            i = bisect_right(starts, s)
            starts.insert(i, s)
            ends.insert(i, s + d)
        self.busy_cycles += d


def book_burst(
    links: Sequence[Link], nbytes: int, ready: int, now: float, private_bw: float = 0.0
) -> int:
    """Book one burst of ``nbytes`` on every shared link of a path from ``ready`` on, at the
    first cycle all of them are free long enough; returns the cycle the burst has passed.

    ``private_bw`` is the bandwidth of the issuing engine's own channel (never contended:
    its queue is serial), which only bounds the burst's duration.
    """
    s = ready
    for link in links:
        if link.free_at > s:
            break
    else:
        # Every link is free from ``ready`` on (the common case): append.
        end = s + int(-(-nbytes // private_bw)) if private_bw else s
        for link in links:
            d = int(-(-nbytes // link.bw))
            if len(link.ends) > Link.KEEP:
                link.book(s, d, now)
            else:
                link.starts.append(s)
                link.ends.append(s + d)
                link.free_at = s + d
                link.busy_cycles += d
            link.nbytes += nbytes
            if s + d > end:
                end = s + d
        return end
    pairs = [(link, int(-(-nbytes // link.bw))) for link in links]
    moved = True
    while moved:
        moved = False
        for link, d in pairs:
            if s < link.free_at:  # else fit(s, d) is s
                s2 = link.fit(s, d)
                if s2 != s:
                    s, moved = s2, True
    end = s + int(-(-nbytes // private_bw)) if private_bw else s
    keep = Link.KEEP
    for link, d in pairs:
        if s >= link.free_at and len(link.ends) <= keep:
            # Link.book's append branch (nothing to forget yet), inlined.
            link.starts.append(s)
            link.ends.append(s + d)
            link.free_at = s + d
            link.busy_cycles += d
        else:
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
        yield env.timeout(t_ready - env.now)
    remaining = nbytes
    t = t_ready
    while True:
        b = burst_bytes if remaining > burst_bytes else remaining
        remaining -= b
        t = book_burst(links, b, t, env.now, private_bw)
        if remaining <= 0:
            return t + latency_cycles
        # Take turns: ask for the next burst only when this one is through.
        if not env.advance_to(t):
            yield env.timeout(t - env.now)
