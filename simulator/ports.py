"""A core's L1 ports: one `PortGroup` per direction, shared by the core's requesters.

Each requester (a unit queue of the core; data multicast in from another core counts as one
more) holds at most one port of a direction at a time; that limit is in its task's
cost-model time (`aipusim.isa.cost`). Together the requesters share ``ports x
port_bytes_per_cycle`` bytes per cycle. This is a fluid model at task level, not a
cycle-by-cycle arbiter:

- a task that starts at ``s``, would last ``d`` cycles alone and moves ``n`` bytes through
  the direction wants ``n / d`` bytes per cycle for its whole time;
- the group keeps each requester's latest booking (end cycle, rate); a new booking gets,
  at each instant, what those of the others still running leave (never more than its own
  rate), and ends when its bytes are through, so it is stretched only when the ports are
  over-subscribed;
- bookings are served in the order the units reach their tasks (a unit running ahead
  books first), not by a round-robin arbiter: the total bytes per cycle are right, who
  waits is first come first served.

Two cheap tests spare most bookings the sharing: if the latest rates of all requesters
together fit the ports, nothing can be squeezed; and since every requester moves at most
one port's bytes per cycle, neither can a booking while fewer others than there are ports
are still running (a few compares). The exact sharing is left for the instants with more
requesters than ports and more bytes per cycle than they carry.

>>> g = PortGroup(2, 64.0, requesters=3)
>>> g.book(0, 0, 100, 6400)  # 64 B/cycle: fits
100
>>> g.book(1, 0, 100, 6400)  # another 64: the two fill the ports
100
>>> g.book(2, 0, 50, 3200)  # 64 more: nothing left until cycle 100, then 64/cycle
150
"""

from __future__ import annotations

from math import ceil as _ceil

#: Slack when comparing rates (bytes per cycle are floats).
_EPS = 1e-9


class PortGroup:
    """One direction of one core's L1 ports: ``ports`` ports of ``port_bytes`` bytes per
    cycle shared by the requesters ``users`` (indices below ``requesters``; see the module
    doc)."""

    __slots__ = ("capacity", "ends", "others", "ports", "rates", "total", "users")

    def __init__(
        self, ports: int, port_bytes: float, requesters: int, users: tuple[int, ...] = ()
    ) -> None:
        assert ports > 0 and port_bytes > 0
        self.ports = ports
        self.capacity = float(ports * port_bytes)
        self.ends = [0] * requesters  # end of each requester's latest booking (0: none)
        self.rates = [0.0] * requesters
        #: The latest rates of all requesters together (the most they can ever add up to).
        self.total = 0.0
        #: The requesters that book here, and for each requester the others among them.
        self.users = users or tuple(range(requesters))
        self.others = [tuple(u for u in self.users if u != r) for r in range(requesters)]

    def book(self, who: int, s: int, d: int, nbytes: int) -> int:
        """Book ``nbytes`` for requester ``who`` from cycle ``s`` at up to ``nbytes / d``
        bytes per cycle; returns the cycle they are through (``s + d`` unless the ports
        are over-subscribed). (`unit_process` inlines this.)"""
        ends, rates = self.ends, self.rates
        old = rates[who]
        end = s + d
        if self.total - old + nbytes / d > self.capacity:
            running = 0
            for o in self.others[who]:
                if ends[o] > s:
                    running += 1
            if running >= self.ports:
                end = self.share(who, s, d, nbytes)
        ends[who] = end
        rates[who] = rate = nbytes / (end - s)
        self.total += rate - old
        return end

    def share(self, who: int, s: int, d: int, nbytes: int) -> int:
        """The end of a booking of ``who`` that may have to share the ports, given that at
        least as many others as there are ports are running at ``s`` (the slow path):
        at each instant it gets what the others still running leave, up to its own rate."""
        rate = nbytes / d
        ends, rates = self.ends, self.rates
        running = []
        load = 0.0
        for i in self.others[who]:
            e = ends[i]
            if e > s:
                r = rates[i]
                load += r
                running.append((e, r))
        cap = self.capacity
        end = s + d
        if load + rate <= cap + _EPS:
            return end
        if len(running) == 2:
            # what sort() does with two (the common case: one port fewer than requesters)
            a, b = running
            if b < a:
                running = [b, a]
        else:
            running.sort()
        t, left = s, float(nbytes)
        for e, r in running:
            give = cap - load
            if give > rate:
                give = rate
            if give > _EPS:
                need = left / give
                if t + need <= e:
                    c = _ceil(t + need - _EPS)
                    return c if c > end else end
                left -= give * (e - t)
            t = e
            load -= r
        give = cap - load
        if give > rate:
            give = rate
        c = _ceil(t + left / give - _EPS)
        return c if c > end else end


__all__ = ["PortGroup"]
