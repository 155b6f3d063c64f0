"""The control core of one AIPU core: streams the tasklist and dispatches its tasks.

Dispatch is arithmetic, not one event per task: task ``j`` is dispatched at
``max(dispatch of j-1, control core free, phase start, chunk arrival) + dispatch_cycles``,
computed lazily (in tasklist order) when a unit first asks for it. The control core is also
busy writing trace lines, polling tokens (``use_hw_tokens=false``) and running its own
``ctrl`` tasks; a ``ctrl`` task (barrier, host handshake) blocks the dispatch of everything
after it until it completes, as an in-order control core does.

Tasklist streaming: the core's L2 tasklist window (``l2.tasklist_reserved_bytes_per_core``)
holds two chunks. A tasklist that fits the window is fetched from DDR once when the instance
starts; a larger one is streamed chunk by chunk (every frame again) when
``stream_tasklist`` is on, and refused when it is off. A task cannot be dispatched before its
chunk has arrived.
"""

from __future__ import annotations

import simpy

from aipusim.simulator.units import Op


class ControlCore:
    """Dispatch clock and busy accounting of one core's control core."""

    def __init__(self, env: simpy.Environment, dispatch_cycles: int, chunk_records: int) -> None:
        self.env = env
        self.dispatch_cycles = dispatch_cycles
        self.chunk_records = chunk_records
        self.free_at = 0  # the control core is busy until this cycle
        self.busy_cycles = 0
        self.last_dispatch = 0
        self.times: list[int] = []  # dispatch cycles of the current phase, by task index
        self.ops: list[Op] = []  # the phase's ops, in dispatch order
        self.gp_base = 0  # global stream position of the phase's task 0
        self.gate = 0
        self.blocked_by: Op | None = None  # a ctrl task dispatched and not yet finished
        self.arrival: dict[int, int] | None = None  # chunk -> cycle it landed (None: resident)
        self.progress = env.event()
        self.dispatched_gp = -1
        self.bulk = False

    def begin_phase(self, ops: list[Op], gp_base: int, start: int, bulk: bool) -> None:
        """Start dispatching the phase's ``ops`` from cycle ``start``.

        ``bulk``: nothing can hold dispatch back in this phase (no ctrl task, no trace
        line, the whole tasklist already resident), so every dispatch cycle is known now.
        """
        self.ops = ops
        self.times = []
        self.gp_base = gp_base
        self.gate = start
        self.bulk = bulk
        if bulk and self.arrival is not None:
            last = self.gp_base + len(ops) - 1
            landed = [
                self.arrival.get(c)
                for c in range(gp_base // self.chunk_records, last // self.chunk_records + 1)
            ]
            if None in landed:
                return
            start = max([start, *landed])
        if bulk and ops:
            step = self.dispatch_cycles
            first = max(self.last_dispatch, self.free_at, start) + step
            self.times = (
                list(range(first, first + step * len(ops), step)) if step else [first] * len(ops)
            )
            self.last_dispatch = self.free_at = self.times[-1]
            self.busy_cycles += step * len(ops)
            self.dispatched_gp = gp_base + len(ops) - 1

    def wake(self) -> None:
        """Wake whoever waits for dispatch progress (a ctrl task ended, a chunk landed)."""
        ev = self.progress
        self.progress = self.env.event()
        ev.succeed()

    def dispatch_time(self, seq: int) -> int | None:
        """Cycle task ``seq`` of the current phase is dispatched, or None if blocked."""
        times = self.times
        if self.bulk and self.arrival is not None:
            self._dispatch_chunk(seq)
        while len(times) <= seq:
            if self.blocked_by is not None:
                return None
            j = len(times)
            d = self.last_dispatch
            if self.free_at > d:
                d = self.free_at
            if self.gate > d:
                d = self.gate
            if self.arrival is not None:
                gp = self.gp_base + j
                landed = self.arrival.get(gp // self.chunk_records)
                if landed is None:
                    return None
                if landed > d:
                    d = landed
                if gp % self.chunk_records == self.chunk_records - 1:
                    self.dispatched_gp = gp
                    self.wake()
                else:
                    self.dispatched_gp = gp
            d += self.dispatch_cycles
            self.busy_cycles += self.dispatch_cycles
            self.free_at = d
            self.last_dispatch = d
            times.append(d)
            op = self.ops[j]
            if op.is_ctrl:
                self.blocked_by = op
        return times[seq]

    def _dispatch_chunk(self, seq: int) -> None:
        """Bulk phases: dispatch up to the end of ``seq``'s chunk at once if it has landed
        (nothing else can hold dispatch back, so this equals task-by-task dispatch)."""
        times = self.times
        per = self.chunk_records
        while len(times) <= seq:
            gp = self.gp_base + len(times)
            landed = self.arrival.get(gp // per) if self.arrival is not None else 0
            if landed is None:
                return
            n = min(per - gp % per, len(self.ops) - len(times))
            step = self.dispatch_cycles
            first = max(self.last_dispatch, self.free_at, self.gate, landed) + step
            times.extend(range(first, first + step * n, step) if step else [first] * n)
            self.last_dispatch = self.free_at = times[-1]
            self.busy_cycles += step * n
            self.dispatched_gp = gp + n - 1
            if (gp + n) % per == 0:
                self.wake()

    def ctrl_finished(self, end: int) -> None:
        """A ctrl task ended at ``end``: dispatch resumes from there."""
        self.blocked_by = None
        if end > self.free_at:
            self.free_at = end
        self.wake()

    def charge(self, t: int, cycles: int) -> None:
        """Occupy the control core for ``cycles`` from ``t`` on (trace line, poll)."""
        if t > self.free_at:
            self.free_at = t
        self.free_at += cycles
        self.busy_cycles += cycles
