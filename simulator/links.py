"""Shared links (DDR, NoC, L2 banks, the cores' NoC ports, system DMA, PCIe each way) and
the routes transfers take over them.

A link is a serial server. A transfer is cut into bursts of ``arch.dma.burst_bytes``; each
burst reserves every link of the transfer's path from the moment all of them are free, for
the cycles the cost model gives it on each (`aipusim.isa.cost.CostModel.burst`), and the
next burst is requested only when the current one ends. Two transfers over one link
therefore take turns burst by burst and each sees half the bandwidth, which is how
concurrent transfers really share a link. Reservation is arithmetic (no SimPy `Resource`),
so a burst costs one event.

The DDR link remembers the stream and direction of its last burst: a burst of another
transfer opens a fresh row (the previous stream's row is closed first), a change of
direction pays the read/write turnaround; the cost model prices each case. A burst that
reads or writes a core's L1 also books that core's L1 ports (`ports.PortGroup`), which may
stretch it when the core's units keep the ports busy.

>>> from aipusim.simulator.clock import RunEnvironment
>>> env = RunEnvironment()
>>> noc = Link("noc", 32.0)
>>> route = Route([noc], [Burst(32, (1,), 0, None)] * 2, latency=5)  # two 32-byte bursts
>>> p = env.process(transfer(env, route, 64, 32, 0, stream=0))
>>> env.run()
>>> p.value, noc.busy_cycles
(7, 2)
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Generator, Sequence
from typing import Any

from aipusim.isa.cost import Burst
from aipusim.simulator.clock import RunEnvironment
from aipusim.simulator.ports import PortGroup


class Link:
    """A shared link: ``bw`` bytes per cycle, booked burst by burst.

    Bursts are booked when the simulated present reaches their ready cycle, so nothing is
    ever booked before the present and the link only needs to know when its last booking
    ends (``free_at``) and which stretches before that are still free (``gaps``): a burst of
    a multi-link path that must start later than its ready cycle leaves a gap that another
    burst can still use. Gaps that end in the past are forgotten.
    """

    __slots__ = (
        "busy_cycles",
        "bw",
        "detail",
        "free_at",
        "gap_ends",
        "gap_starts",
        "last_stream",
        "last_write",
        "name",
        "nbytes",
    )

    def __init__(self, name: str, bw_bytes_per_cycle: float) -> None:
        assert bw_bytes_per_cycle > 0, name
        self.name = name
        self.bw = float(bw_bytes_per_cycle)
        self.free_at = 0  # end of the latest booking
        self.busy_cycles = 0
        self.nbytes = 0  # bytes of every burst booked (`Simulation.link_totals`)
        # DDR only: the stream (transfer) and direction of the latest burst
        self.last_stream = -1
        self.last_write: bool | None = None
        #: DDR with ``detail="cycle"``: the cycle-level model that times its bursts
        #: (`aipusim.simulator.detail.ddr_link.DdrBurstTimer`); None: the closed form
        self.detail: Any = None
        # Free stretches [start, end) before free_at, sorted and disjoint.
        self.gap_starts: list[int] = []
        self.gap_ends: list[int] = []

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
    engine itself (its channel, one L1 port: never contended, its queue is serial).
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


class Route:
    """How one transfer crosses the links: ``links`` (shared, or private copies when
    contention is off), the `Burst` of a full burst and of the last one, the access
    latency, where DDR sits on the path, and the L1 port groups its bytes pass through
    (``(group, requester)`` pairs: the source core's read ports, each destination core's
    write ports)."""

    __slots__ = (
        "banks",
        "bursts",
        "cases",
        "ddr",
        "ddr_k",
        "detailed",
        "l1",
        "latency",
        "links",
        "one",
        "shared",
        "side",
        "slow",
        "spans",
        "write",
    )

    def __init__(
        self,
        links: Sequence[Link],
        bursts: Sequence[Burst],
        latency: int,
        l1: Sequence[tuple[PortGroup, int]] = (),
        *,
        ddr_k: int = -1,
        write: bool = False,
        shared: bool = True,
        side: Sequence[Sequence[tuple[Link, int]]] | None = None,
        banks: Sequence[tuple[Any, int, bool]] = (),
    ) -> None:
        self.links = list(links)
        #: (a full burst, the last burst) of the transfer (the same one if it has one)
        self.bursts = tuple(bursts)
        self.latency = latency
        self.l1 = tuple(l1)
        self.ddr = self.links[ddr_k] if ddr_k >= 0 else None
        self.ddr_k = ddr_k
        #: DDR on the path timed by the cycle-level model: every burst goes through `transfer`
        self.detailed = self.ddr is not None and self.ddr.detail is not None and shared
        #: detailed mode: the banked L1s its bytes pass, ``(calendar, requester, write)``
        #: (`aipusim.simulator.detail.l1.L1Calendar`; the source core's, each destination's)
        self.banks = tuple(banks)
        #: every burst goes through `transfer` (cycle-level DDR or banked L1 on the path),
        #: never the simulator's inlined one-burst booking
        self.slow = self.detailed or bool(self.banks)
        #: per burst of `bursts`, its cycles on each link in the four DDR cases
        #: (``2 * fresh + turnaround``), or just its cycles without DDR on the path
        self.cases: tuple[tuple[tuple[int, ...], ...], ...] = tuple(
            tuple(
                (*b.cycles[:ddr_k], c, *b.cycles[ddr_k + 1 :])
                for c in b.ddr  # type: ignore[union-attr]
            )
            if ddr_k >= 0
            else (b.cycles,)
            for b in self.bursts
        )
        #: the longest of each case's cycles and the burst's own (how long it lasts alone)
        self.spans = tuple(
            tuple(max([b.own, *c]) for c in cases)
            for b, cases in zip(self.bursts, self.cases, strict=True)
        )
        self.write = write
        #: per burst of `bursts`, time it draws on links off its path, added to what they
        #: already carry without holding the burst back (detailed mode: the other PCIe line's
        #: DLLPs and read requests, `aipusim.simulator.detail`)
        self.side = tuple(tuple(s) for s in side) if side is not None else ((), ())
        #: False: private links, each transfer alone on them (DDR: no turnaround, a
        #: fresh row for its first burst only)
        self.shared = shared
        last = self.bursts[1]
        #: What booking the last (for a one-burst transfer: the only) burst reads, in one
        #: tuple for the simulator's inlined booking (see `core.unit_process`).
        self.one = (
            self.links,
            self.cases[1],
            self.spans[1],
            last.nbytes,
            latency,
            tuple((g.ends, g.rates, g.others[who], g.ports, who, g) for g, who in self.l1),
            self.ddr,
            write,
            shared,
        )


def transfer(
    env: RunEnvironment,
    route: Route,
    nbytes: int,
    burst_bytes: int,
    t_ready: int,
    stream: int,
    l1_addr: tuple[int, int] = (0, 0),
) -> Generator[Any, Any, int]:
    """Move ``nbytes`` over ``route`` from ``t_ready`` on; returns the cycle the data has
    landed (the latency included). ``l1_addr``: where the bytes start in the source and
    the destination L1 (read by the banked L1s of ``route.banks``, detailed mode).

    Bursts are booked one at a time when the previous one has passed, so concurrent
    transfers take turns. The caller's clock may be ahead of ``env.now`` (units run ahead
    when nothing can block them); the first burst is booked at ``t_ready``.
    """
    if t_ready > env.now and not env.advance_to(t_ready):
        yield t_ready
    # The route's fields, read once: the loop below runs once per burst, the simulator's
    # hottest path after the unit loop.
    links, cases, spans, bursts = route.links, route.cases, route.spans, route.bursts
    ddr, shared, write, side, l1 = route.ddr, route.shared, route.write, route.side, route.l1
    detailed, ddr_k, banks = route.detailed, route.ddr_k, route.banks
    remaining = nbytes
    t = t_ready
    first = True
    while True:
        # Burst i (0: a full one, 1: the last) from t on; t becomes the cycle it has passed.
        i = 0 if remaining > burst_bytes else 1
        now = env.now
        b = bursts[i]
        if ddr is None:
            cycles = cases[i][0]
            d = spans[i][0]
        elif detailed:
            # the cycle-level model times DDR from the cycle every link of the path is free
            for link in links:
                if link.free_at > t:
                    t = link.free_at
            c = ddr.detail.burst_cycles(t, b.nbytes, write, stream)
            cycles = (*cases[i][0][:ddr_k], c, *cases[i][0][ddr_k + 1 :])
            d = max(b.own, *cycles)
        else:
            if shared:
                # on DDR: another stream's row is closed first; a change of direction turns
                last = ddr.last_write
                case = 2 * (ddr.last_stream != stream) + (last is not None and last != write)
                ddr.last_stream, ddr.last_write = stream, write
            else:
                # private links: a fresh row for the first burst only, no turnaround
                case = 2 * first
            cycles = cases[i][case]
            d = spans[i][case]
        # d: the burst's longest cycles on a link or on its own engine
        t = book_burst(links, cycles, b.nbytes, t, now, b.own)
        for link, extra in side[i]:
            # appended to what the line already carries (never into a gap, which would split
            # a free stretch that a whole burst needs): DLLPs slot in between TLPs
            link.book(max(link.free_at, int(now)), extra, now)
        if l1 and d > 0:
            s = t - d
            for group, who in l1:
                e = group.book(who, s, d, b.nbytes)
                if e > t:
                    t = e
        if banks and d > 0:
            # the burst's bytes through each banked L1, cycle by cycle, at its rate
            s, done = t - d, nbytes - remaining
            for cal, who, to_l1 in banks:
                at = l1_addr[to_l1] + done
                e = cal.book(who, s, d, (at,), (b.nbytes,), write=to_l1, now=int(now))
                if e > t:
                    t = e
        first = False
        remaining -= burst_bytes
        if remaining <= 0:
            return t + route.latency
        # Take turns: ask for the next burst only when this one is through.
        if not env.advance_to(t):
            yield t
