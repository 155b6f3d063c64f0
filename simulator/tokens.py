"""Hardware tokens (counting semaphores) and cross-core barriers.

A signal adds ``count`` to a token, visible to waiters from ``visible_at`` on (the end of
the signalling task plus the token latency). A wait takes ``count`` away, first come first
served, and learns the latest visibility time of what it took, which is the earliest cycle it
may start. Because a signal carries its visibility time, a unit may signal as soon as it knows
its end cycle, without an event at that cycle. The token keeps one visibility cycle per unit
of count (counts are small), so a take is a few deque pops.

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

    __slots__ = ("name", "units", "waiters")

    def __init__(self, name: str) -> None:
        self.name = name
        self.units: deque[int] = deque()  # visibility cycle of each unit of count, FIFO
        self.waiters: deque[tuple[int, simpy.Event]] = deque()

    @property
    def count(self) -> int:
        return len(self.units)

    def take(self, n: int) -> int:
        """Take ``n`` (caller checked they are there); the latest visibility cycle."""
        pop = self.units.popleft
        visible = pop()
        for _ in range(n - 1):
            v = pop()
            if v > visible:
                visible = v
        return visible

    def try_take(self, n: int) -> int | None:
        """Take ``n`` now if nobody waits before us; the visibility cycle, or None."""
        if self.waiters or len(self.units) < n:
            return None
        return self.take(n)

    def wait(self, env: simpy.Environment, n: int) -> simpy.Event:
        """An event that fires with the visibility cycle once ``n`` could be taken."""
        ev = env.event()
        self.waiters.append((n, ev))
        return ev

    def signal(self, n: int, visible_at: int) -> None:
        units = self.units
        if n == 1:
            units.append(visible_at)
        else:
            units.extend([visible_at] * n)
        waiters = self.waiters
        while waiters and len(units) >= waiters[0][0]:
            need, ev = waiters.popleft()
            ev.succeed(self.take(need))


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
