"""One AIPU core in the run: its tokens, its control core and one process per unit queue.

A unit process walks its own pre-split queue of records. It keeps its own clock ``t`` (the
cycle its previous task ended) and only yields to SimPy when something can block it: a
dispatch held back by a ``ctrl`` task or a tasklist chunk, a token not yet signalled, a
barrier, a link reservation (see `clock` for what a yield costs). Compute tasks advance
``t`` arithmetically, so most tasks cost no event at all; they book their L1 bytes on the
core's L1 ports (`ports`), which stretches them only when the ports are over-subscribed.
Signals carry their visibility cycle (see `tokens`; a global token's crosses the NoC), so
a unit can signal as soon as it knows its end cycle. Every clock value is known at a
simulated time no later than itself, which keeps link reservations in time order (see
`links.transfer`).
"""

from __future__ import annotations

from array import array
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import simpy

from aipusim.isa.cost import Pool
from aipusim.simulator.clock import PARKED
from aipusim.simulator.control import ControlCore
from aipusim.simulator.links import book_burst, transfer
from aipusim.simulator.tokens import Token
from aipusim.simulator.units import K_BARRIER, K_COMPUTE, K_DMA

if TYPE_CHECKING:
    from aipusim.isa.cost import Transfer
    from aipusim.simulator.clock import RunEnvironment
    from aipusim.simulator.detail.l1 import L1Calendar
    from aipusim.simulator.engine import Replica
    from aipusim.simulator.links import Route
    from aipusim.simulator.parts import Fabric, Ledger, RunConfig
    from aipusim.simulator.ports import PortGroup
    from aipusim.simulator.prepare import CoreCode
    from aipusim.simulator.trace import Tracer


class CoreRun:
    """A physical core running one logical core of an instance replica.

    It is given the parts of the run it uses: the environment, the run's constants, the
    links and L1 ports (``fabric``), the log of executed tasks, the tracer, and how many
    ops the run has (``n_ops``, the size of its route cache)."""

    def __init__(
        self,
        env: RunEnvironment,
        config: RunConfig,
        fabric: Fabric,
        ledger: Ledger,
        tracer: Tracer | None,
        n_ops: int,
        replica: Replica,
        logical: int,
        physical: int,
        code: CoreCode,
    ) -> None:
        self.env = env
        self.config = config
        self.fabric = fabric
        self.ledger = ledger
        self.tracer = tracer
        self.n_ops = n_ops
        self.replica = replica
        self.logical = logical
        self.physical = physical
        self.code = code
        self.ctl = ControlCore(env, config.dispatch_cycles_per_task, config.chunk_records)
        self.ltok = [Token(f"core{physical}.local{i}") for i in range(config.local_tokens)]
        self.gtok = replica.gtok
        #: unit -> (seq, kind, object, count) while the unit is blocked (deadlock reports).
        self.blocked: dict[str, tuple[int, str, Any, Any]] = {}
        self.current_phase: dict[str, int] = {}
        self._phase_ev: dict[int, simpy.Event] = {}
        self._done_ev: dict[int, simpy.Event] = {}
        self._pending: dict[int, int] = {}
        self._done_t: dict[int, int] = {}
        self.n_units = len(code.unit_names)
        #: The `Route` of each op's transfer (by `Op.index`), made when first needed.
        self.routes: list[Route | None] = [None] * n_ops
        #: (first check, resolution) of every polled wait (use_hw_tokens=false).
        self.poll_spans: list[tuple[int, int]] = []
        self.finished_units = 0

    def route(self, x: Transfer, unit: str) -> Route:
        """The `Route` of a transfer that ``unit`` of this core issues: the shared links,
        its bursts, and the L1 ports it passes: this core's read ports, each destination
        core's write ports (with contention off: private links, no L1 port sharing)."""
        fabric = self.fabric
        engine = (self.physical, unit)
        dests = [self.physical]
        if x.dst_cores:
            cores = self.replica.cores
            dests = [c.physical for i, c in enumerate(cores) if x.dst_cores >> i & 1]
        l1: list[tuple[PortGroup, int]] = []
        me = fabric.requester[unit]
        if fabric.banks:
            # detailed mode: the banked L1s, (calendar, requester, write)
            banks = []
            if x.src == Pool.L1:
                banks.append((fabric.banks[self.physical], me, False))
            if x.dst == Pool.L1:
                for p in dests:
                    who = me if p == self.physical else fabric.remote
                    banks.append((fabric.banks[p], who, True))
            return fabric.route(x, engine, (), banks)
        if x.src == Pool.L1:
            rd = fabric.ports[self.physical][0]
            if rd is not None:
                l1.append((rd, me))
        if x.dst == Pool.L1:
            for p in dests:
                wr = fabric.ports[p][1]
                if wr is not None:
                    l1.append((wr, me if p == self.physical else fabric.remote))
        return fabric.route(x, engine, l1)

    # -- phases ------------------------------------------------------------------------
    def phase_event(self, phase: int) -> simpy.Event:
        ev = self._phase_ev.get(phase)
        if ev is None:
            ev = self._phase_ev[phase] = self.env.event()
        return ev

    def done_event(self, phase: int) -> simpy.Event:
        ev = self._done_ev.get(phase)
        if ev is None:
            ev = self._done_ev[phase] = self.env.event()
        return ev

    def start_phase(self, phase: int, start: int) -> None:
        code = self.code.phase(phase)
        gp_base = 0 if phase < 0 else self.config.gp_base(self.code, phase)
        bulk = not code.has_ctrl and (self.tracer is None or not self.tracer.per_task)
        self.ctl.begin_phase(code.ops, gp_base, start, bulk)
        self._pending[phase] = self.n_units
        self._done_t[phase] = start
        self.phase_event(phase).succeed(start)
        if self.n_units == 0:
            self.done_event(phase).succeed(start)

    def unit_done(self, phase: int, t: int) -> None:
        if t > self._done_t[phase]:
            self._done_t[phase] = t
        self._pending[phase] -= 1
        if self._pending[phase] == 0:
            self.done_event(phase).succeed(self._done_t[phase])

    def frame_of(self, phase: int) -> int:
        if phase < 0:
            return -1
        per_start = self.config.frames_per_start
        return phase * per_start + (self.logical if per_start > 1 else 0)


def unit_process(core: CoreRun, unit: str) -> Generator[Any, Any, None]:
    """Run one unit queue of ``core`` through the INIT phase and every frame.

    The hot loop of the simulator, one generator per queue so that a wake-up resumes it
    directly."""
    cfg = core.config
    env = core.env
    ctl = core.ctl
    ltok, gtok = core.ltok, core.gtok
    hw_tokens = cfg.use_hw_tokens
    sig_lat, glob_lat = cfg.token_latency_cycles, cfg.global_token_latency_cycles
    poll_interval, poll_cost = cfg.poll_interval_cycles, cfg.poll_cost_cycles
    tracer = core.tracer
    tracing = tracer is not None and tracer.per_task
    # with contention off each unit has its own links, so its own routes
    routes = core.routes if cfg.contention else [None] * core.n_ops
    burst = cfg.burst_bytes
    streams = core.fabric.streams
    segments = core.ledger.segments
    # the core's L1 ports (None: contention off, each task alone) and this unit's place
    rd, wr = core.fabric.ports[core.physical]
    me = core.fabric.requester[unit]
    l1_books = rd is not None or wr is not None
    if rd is not None:
        r_ends, r_rates, r_others, r_ports = rd.ends, rd.rates, rd.others[me], rd.ports
        r_cap = rd.capacity
    if wr is not None:
        w_ends, w_rates, w_others, w_ports = wr.ends, wr.rates, wr.others[me], wr.ports
        w_cap = wr.capacity
    # detailed mode: the core's banked L1 and each task's L1 addresses (per phase)
    bank = core.fabric.banks.get(core.physical)
    blocked = core.blocked
    queues = (core.code.init.by_unit.get(unit), core.code.frame.by_unit.get(unit))
    t = 0
    for phase in range(-1, cfg.starts):
        start = yield core.phase_event(phase)
        if start > t:
            t = start
        core.current_phase[unit] = phase
        queue = queues[0 if phase < 0 else 1]
        if queue is None:
            core.unit_done(phase, t)
            continue
        starts, ends = array("q"), array("q")
        segments.append((core.physical, phase, queue.rids, starts, ends))
        log_start, log_end = starts.append, ends.append
        times = ctl.times  # this phase's dispatch cycles (grows, never changes identity)
        l1_addr = core.code.phase(phase).l1_addr
        for seq, op in zip(queue.seqs, queue.ops, strict=True):
            try:
                d = times[seq]
            except IndexError:
                d = ctl.dispatch_time(seq)
            if d is None:
                blocked[unit] = (seq, "dispatch", None, 0)
                while d is None:
                    yield ctl.progress
                    d = ctl.dispatch_time(seq)
                del blocked[unit]
            if d > t:
                t = d
            if op.waits:
                check = t
                for is_global, idx, n in op.waits:
                    tok = gtok[idx] if is_global else ltok[idx]
                    units = tok.units
                    if len(units) >= n and not tok.waiters:  # Token.try_take, inlined
                        vis = units.popleft() if n == 1 else tok.take(n)
                    else:
                        blocked[unit] = (seq, "token", tok, n)
                        tok.waiters.append((n, env.active))  # woken by the signal's succeed
                        vis = yield PARKED
                        del blocked[unit]
                    if vis > t:
                        t = vis
                    if tracing and tracer.t:
                        tracer.token(core, t, idx, is_global, "wait", seq)
                if not hw_tokens:
                    # The control core's polling loop ticks every poll_interval cycles and checks
                    # all pending token words in one pass: a wait resolves on the first tick
                    # after the token became visible, poll_cost cycles later.
                    tick = -(-t // poll_interval) * poll_interval
                    core.poll_spans.append((check, tick + poll_cost))
                    t = tick + poll_cost
            kind = op.kind
            s = t
            if kind == K_COMPUTE:
                t = s + op.dur
                if l1_books:
                    # PortGroup.book, inlined (see `ports`): squeezed only when at least as many
                    # others as there are ports are still running at s
                    if rd is not None:
                        n = op.l1_read
                        if n:
                            old = r_rates[me]
                            if rd.total - old + n / (t - s) > r_cap:
                                running = 0
                                for o in r_others:
                                    if r_ends[o] > s:
                                        running += 1
                                if running >= r_ports:
                                    t = rd.share(me, s, t - s, n)
                            r_ends[me] = t
                            r_rates[me] = rate = n / (t - s)
                            rd.total += rate - old
                    if wr is not None:
                        n = op.l1_write
                        if n:
                            old = w_rates[me]
                            if wr.total - old + n / (t - s) > w_cap:
                                running = 0
                                for o in w_others:
                                    if w_ends[o] > s:
                                        running += 1
                                if running >= w_ports:
                                    t = wr.share(me, s, t - s, n)
                            w_ends[me] = t
                            w_rates[me] = rate = n / (t - s)
                            wr.total += rate - old
                elif bank is not None:
                    t = book_banks(bank, me, s, t, op.l1_streams, l1_addr[seq], env.now)
            elif kind == K_DMA:
                x = op.xfer
                route = routes[op.index]
                if route is None:
                    route = routes[op.index] = core.route(x, unit)
                ready = s + x.setup_cycles
                if x.nbytes > burst or route.slow:
                    at = l1_addr[seq] if bank is not None else (0, 0)
                    t = yield from transfer(env, route, x.nbytes, burst, ready, next(streams), at)
                else:
                    # One burst (the common tile), booked inline. Bookings wait for the simulated
                    # present to reach their ready cycle, so links serve bursts first come first
                    # served in time, whatever order the run-ahead units reach them in.
                    now = env.now
                    if ready > now:
                        if not env.advance_to(ready):
                            yield ready
                        now = ready
                    links, cases, spans, n, latency, l1, ddr, w, shared = route.one
                    # the booking of `links.transfer`, inlined: a transfer of one burst is a
                    # stream of its own, so on DDR it always opens a fresh row
                    if ddr is None:
                        case = 0
                    elif shared:
                        last = ddr.last_write
                        case = 3 if last is not None and last != w else 2
                        ddr.last_stream = -1
                        ddr.last_write = w
                    else:
                        case = 2
                    cycles = cases[case]
                    for link in links:
                        if link.free_at > ready:
                            t = book_burst(links, cycles, n, ready, now, route.bursts[1].own)
                            break
                    else:
                        # every link free at ready (= now): the common case of book_burst
                        t = ready + spans[case]
                        for link, d in zip(links, cycles):  # noqa: B905 (same length: hot)
                            link.free_at = ready + d
                            link.busy_cycles += d
                            link.nbytes += n
                    if l1:
                        d = spans[case]
                        s1, e0 = t - d, t
                        for ends, rates, others, ports, who, group in l1:
                            # PortGroup.book, inlined
                            old = rates[who]
                            e = e0
                            if group.total - old + n / d > group.capacity:
                                running = 0
                                for o in others:
                                    if ends[o] > s1:
                                        running += 1
                                if running >= ports:
                                    e = group.share(who, s1, d, n)
                            ends[who] = e
                            rates[who] = rate = n / (e - s1)
                            group.total += rate - old
                            if e > t:
                                t = e
                    t += latency
            elif kind == K_BARRIER:
                barrier_id, mask = op.barrier
                cores = core.replica.barrier_cores(mask, seq, phase, core)
                blocked[unit] = (seq, "barrier", barrier_id, sorted(cores))
                t = (
                    yield core.replica.barriers.arrive(barrier_id, core.logical, cores, s)
                ) + op.dur
                del blocked[unit]
            log_start(s)
            log_end(t)
            if op.is_ctrl:
                ctl.ctrl_finished(t)
            if op.signals:
                local = t + sig_lat
                for is_global, idx, n in op.signals:
                    if is_global:
                        tok = gtok[idx]
                        vis = t + glob_lat
                    else:
                        tok = ltok[idx]
                        vis = local
                    waiters = tok.waiters
                    if n == 1 and not waiters:
                        tok.units.append(vis)  # fast path of Token.signal
                    elif n == 1 and waiters[0][0] == 1 and not tok.units:
                        # Fast path of Token.signal handing its one unit straight to the first
                        # waiter (which needs just that one): what signal + take would do.
                        waiters.popleft()[1].succeed(vis)
                    else:
                        tok.signal(n, vis)
                    if tracing and tracer.t:
                        tracer.token(core, t, idx, is_global, "signal", seq)
            if tracing:
                tracer.task(core, unit, seq, op, phase, s, t)
        core.unit_done(phase, t)
    core.finished_units += 1


def book_banks(
    bank: L1Calendar,
    who: int,
    s: int,
    t: int,
    streams: tuple[tuple[tuple[str, int], ...], ...],
    addrs: tuple[tuple[int, ...], tuple[int, ...]],
    now: int,
) -> int:
    """A compute task of requester ``who`` from ``s`` to ``t`` (its cost-model time) with
    its L1 ``streams`` (`Op.l1_streams`) from ``addrs``, through the core's banked L1
    (detailed mode): the cycle its compute and both directions' streams are through."""
    end = t
    for write, (stream, at) in enumerate(zip(streams, addrs, strict=True)):
        if stream:
            sizes = tuple(n for _, n in stream)
            e = bank.book(who, s, t - s, at, sizes, write=bool(write), now=now)
            if e > end:
                end = e
    return end


def describe_block(what: tuple) -> str:
    """Human text of a ``CoreRun.blocked`` entry (for deadlock reports)."""
    _, kind, obj, n = what
    if kind == "token":
        return f"token {obj.name} (needs {n}, holds {obj.count})"
    if kind == "barrier":
        return f"barrier {obj} of cores {n}"
    return "dispatch (held by a ctrl task or a tasklist chunk not yet fetched)"
