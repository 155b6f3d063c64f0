"""One AIPU core in the run: its tokens, its control core and one process per unit queue.

A unit process walks its own pre-split queue of records. It keeps its own clock ``t`` (the
cycle its previous task ended) and only yields to SimPy when something can block it: a
dispatch held back by a ``ctrl`` task or a tasklist chunk, a token not yet signalled, a
barrier, a link reservation (see `clock` for what a yield costs). Compute tasks advance
``t`` arithmetically, so most tasks cost no event at all. Signals carry their visibility
cycle (see `tokens`), so a unit can signal as soon as it knows its end cycle. Every clock
value is known at a simulated time no later than itself, which keeps link reservations in
time order (see `links.transfer`).
"""

from __future__ import annotations

from array import array
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import simpy

from aipusim.simulator.clock import PARKED
from aipusim.simulator.control import ControlCore
from aipusim.simulator.links import Link, book_burst, burst_cycles, transfer
from aipusim.simulator.tokens import Token
from aipusim.simulator.units import K_BARRIER, K_COMPUTE, K_DMA

if TYPE_CHECKING:
    from aipusim.isa.cost import Transfer
    from aipusim.simulator.engine import Replica, Simulation
    from aipusim.simulator.prepare import CoreCode


class CoreRun:
    """A physical core running one logical core of an instance replica."""

    def __init__(
        self, sim: Simulation, replica: Replica, logical: int, physical: int, code: CoreCode
    ) -> None:
        self.sim = sim
        self.replica = replica
        self.logical = logical
        self.physical = physical
        self.code = code
        env = sim.env
        self.ctl = ControlCore(env, sim.arch.control.dispatch_cycles_per_task, sim.chunk_records)
        self.ltok = [
            Token(f"core{physical}.local{i}") for i in range(sim.arch.tokens.local_per_core)
        ]
        self.gtok = replica.gtok
        #: unit -> (seq, kind, object, count) while the unit is blocked (deadlock reports).
        self.blocked: dict[str, tuple[int, str, Any, Any]] = {}
        self.current_phase: dict[str, int] = {}
        self._phase_ev: dict[int, simpy.Event] = {}
        self._done_ev: dict[int, simpy.Event] = {}
        self._pending: dict[int, int] = {}
        self._done_t: dict[int, int] = {}
        self.n_units = len(code.unit_names)
        #: id of a `Transfer` -> its `route`; ops hold their `Transfer` for the whole run,
        #: so an id is never reused (an int key hashes faster than the Transfer).
        self.routes: dict[int, tuple] = {}
        #: (first check, resolution) of every polled wait (use_hw_tokens=false).
        self.poll_spans: list[tuple[int, int]] = []
        self.finished_units = 0

    def route(
        self, x: Transfer, unit: str
    ) -> tuple[list[Link], tuple[int, ...] | None, int, float]:
        """(shared links, cycles of its one burst on each or None if it has several, cycles
        on the issuing engine's own channel, that channel's bandwidth) of a transfer that
        ``unit`` issues. The own channel's queue is serial, so it bounds the duration only."""
        engine = (self.physical, unit)
        shared = [self.sim.link_for(n, engine) for n in x.links]
        if x.nbytes > self.sim.burst_bytes:
            return shared, None, 0, x.channel_bw
        cycles, own_cycles = burst_cycles(shared, x.nbytes, x.channel_bw)
        return shared, cycles, own_cycles, x.channel_bw

    # -- phases ------------------------------------------------------------------------
    def phase_event(self, phase: int) -> simpy.Event:
        ev = self._phase_ev.get(phase)
        if ev is None:
            ev = self._phase_ev[phase] = self.sim.env.event()
        return ev

    def done_event(self, phase: int) -> simpy.Event:
        ev = self._done_ev.get(phase)
        if ev is None:
            ev = self._done_ev[phase] = self.sim.env.event()
        return ev

    def start_phase(self, phase: int, start: int) -> None:
        code = self.code.phase(phase)
        gp_base = 0 if phase < 0 else self.sim.gp_base(self.code, phase)
        bulk = not code.has_ctrl and (self.sim.tracer is None or not self.sim.tracer.per_task)
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
        return phase * self.sim.frames_per_start + (
            self.logical if self.sim.frames_per_start > 1 else 0
        )


def unit_process(core: CoreRun, unit: str) -> Generator[Any, Any, None]:
    """Run one unit queue of ``core`` through the INIT phase and every frame.

    The hot loop of the simulator, one generator per queue so that a wake-up resumes it
    directly."""
    sim = core.sim
    env = sim.env
    ctl = core.ctl
    ltok, gtok = core.ltok, core.gtok
    hw_tokens = sim.use_hw_tokens
    sig_lat = sim.token_latency
    poll_interval, poll_cost = sim.poll_interval, sim.poll_cost
    tracer = sim.tracer
    tracing = tracer is not None and tracer.per_task
    # with contention off each unit has its own links, so its own routes
    routes = core.routes if sim.contention else {}
    burst = sim.burst_bytes
    blocked = core.blocked
    queues = (core.code.init.by_unit.get(unit), core.code.frame.by_unit.get(unit))
    t = 0
    for phase in range(-1, sim.starts):
        start = yield core.phase_event(phase)
        if start > t:
            t = start
        core.current_phase[unit] = phase
        queue = queues[0 if phase < 0 else 1]
        if queue is None:
            core.unit_done(phase, t)
            continue
        starts, ends = array("q"), array("q")
        sim.segments.append((core.physical, phase, queue.rids, starts, ends))
        log_start, log_end = starts.append, ends.append
        times = ctl.times  # this phase's dispatch cycles (grows, never changes identity)
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
            elif kind == K_DMA:
                x = op.xfer
                route = routes.get(id(x))
                if route is None:
                    route = routes[id(x)] = core.route(x, unit)
                path, cycles, own_cycles, own_bw = route
                ready = s + x.setup_cycles
                if cycles is None:
                    nbytes, lat = x.nbytes, x.latency_cycles
                    t = yield from transfer(env, path, nbytes, burst, ready, lat, own_bw)
                else:
                    # One burst (the common tile), booked inline. Bookings wait for the simulated
                    # present to reach their ready cycle, so links serve bursts first come first
                    # served in time, whatever order the run-ahead units reach them in.
                    if ready > env.now and not env.advance_to(ready):
                        yield ready
                    t = book_burst(path, cycles, x.nbytes, ready, env.now, own_cycles)
                    t += x.latency_cycles
            elif kind == K_BARRIER:
                barrier_id, mask = op.barrier
                cores = core.replica.barrier_cores(mask, seq, phase, core)
                blocked[unit] = (seq, "barrier", barrier_id, sorted(cores))
                t = yield core.replica.barriers.arrive(barrier_id, core.logical, cores, s)
                del blocked[unit]
            log_start(s)
            log_end(t)
            if op.is_ctrl:
                ctl.ctrl_finished(t)
            if op.signals:
                vis = t + sig_lat
                for is_global, idx, n in op.signals:
                    tok = gtok[idx] if is_global else ltok[idx]
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


def describe_block(what: tuple) -> str:
    """Human text of a ``CoreRun.blocked`` entry (for deadlock reports)."""
    _, kind, obj, n = what
    if kind == "token":
        return f"token {obj.name} (needs {n}, holds {obj.count})"
    if kind == "barrier":
        return f"barrier {obj} of cores {n}"
    return "dispatch (held by a ctrl task or a tasklist chunk not yet fetched)"
