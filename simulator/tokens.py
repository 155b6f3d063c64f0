"""Hardware tokens (counting semaphores) and cross-core barriers.

A signal adds ``count`` to a token, visible to waiters from ``visible_at`` on (the end of
the signalling task plus the token latency). A wait takes ``count`` away, first come first
served, and learns the latest visibility time of what it took, which is the earliest cycle it
may start. Because a signal carries its visibility time, a unit may signal as soon as it knows
its end cycle, without an event at that cycle.

>>> import simpy
>>> env = simpy.Environment()
>>> tok = Token("core0.local3")
>>> tok.try_take(1) is None
True
>>> tok.signal(2, 100)
>>> tok.try_take(1), tok.count
(100, 1)
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import simpy


class Token:
    """One counting semaphore."""

    __slots__ = ("chunks", "count", "name", "signals", "waiters", "waits")

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.chunks: deque[list[int]] = deque()  # [visible_at, count], in signal order
        self.waiters: deque[tuple[int, simpy.Event]] = deque()
        self.signals = 0
        self.waits = 0

    def _take(self, n: int) -> int:
        self.count -= n
        self.waits += 1
        visible = 0
        chunks = self.chunks
        while n:
            chunk = chunks[0]
            if chunk[0] > visible:
                visible = chunk[0]
            if chunk[1] <= n:
                n -= chunk[1]
                chunks.popleft()
            else:
                chunk[1] -= n
                n = 0
        return visible

    def try_take(self, n: int) -> int | None:
        """Take ``n`` now if nobody waits before us; the visibility cycle, or None."""
        if self.waiters or self.count < n:
            return None
        return self._take(n)

    def wait(self, env: simpy.Environment, n: int) -> simpy.Event:
        """An event that fires with the visibility cycle once ``n`` could be taken."""
        ev = env.event()
        self.waiters.append((n, ev))
        return ev

    def signal(self, n: int, visible_at: int) -> None:
        self.count += n
        self.signals += 1
        self.chunks.append([visible_at, n])
        waiters = self.waiters
        while waiters and self.count >= waiters[0][0]:
            need, ev = waiters.popleft()
            ev.succeed(self._take(need))


@dataclass
class _Gathering:
    needed: frozenset[int]
    event: simpy.Event
    arrived: dict[int, int] = field(default_factory=dict)


class BarrierHub:
    """Barriers of one instance replica: the k-th arrival of each core at barrier ``id``
    meets the k-th arrival of the others; all leave at the latest arrival cycle."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.generation: dict[tuple[int, int], int] = {}
        self.open: dict[tuple[int, int], _Gathering] = {}

    def arrive(self, barrier_id: int, core: int, cores: frozenset[int], t: int) -> simpy.Event:
        gen = self.generation.get((barrier_id, core), 0)
        self.generation[(barrier_id, core)] = gen + 1
        key = (barrier_id, gen)
        gathering = self.open.get(key)
        if gathering is None:
            gathering = self.open[key] = _Gathering(cores, self.env.event())
        gathering.arrived[core] = t
        if set(gathering.arrived) >= gathering.needed:
            del self.open[key]
            gathering.event.succeed(max(gathering.arrived.values()))
        return gathering.event

    def pending(self) -> list[str]:
        """Barriers some cores reached and others never did (for deadlock reports)."""
        out = []
        for (bid, gen), g in sorted(self.open.items()):
            missing = sorted(g.needed - set(g.arrived))
            out.append(f"barrier {bid} (round {gen}) waits for cores {missing}")
        return out
