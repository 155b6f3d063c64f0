"""The run's SimPy environment: SimPy's event queue and clock, with lighter processes.

Two additions, both keeping SimPy's order of events exactly (same queue, same
``(time, priority, id)`` keys, same id counter):

- **Light processes** (`Runner`). ``env.process(gen)`` starts a runner instead of a
  `simpy.Process`. A runner's generator may yield a SimPy event (resumed when it fires,
  with its value), an ``int`` cycle (resumed then, like a timeout to it) or `PARKED` (it
  registered itself somewhere, e.g. as a token waiter, and someone calls its ``succeed``).
  The cycle and the wake-up are queue entries that name the runner directly, so they cost
  no `Event` object and no callback list: the simulator makes one per blocked token wait
  and per contended link booking, millions in a big run.
- **Fast-forwarding an idle present** (`RunEnvironment.advance_to`). A unit that must wait
  until cycle ``t`` (a link booking waits for its ready cycle, a burst for the previous one
  to pass) would be resumed at ``t``. When nothing is due at or before ``t`` and no other
  callback of the event being processed is still to run, that resumption would be the very
  next thing to happen, so moving the present to ``t`` and carrying on is the same run.

This module is the only one that touches SimPy's private fields (``_queue``, ``_eid``,
``_now``, an event's ``_ok``/``_value``/``_defused``). A version on SimPy's public API
(a `simpy.Process` per generator, an `Event` per parked wait, a timeout per cycle yield,
no fast-forward) gives the same cycles but measured 35-60 % fewer simulated tasks per
second (`tests/benchmarks/test_simulator_bench.py`), so pyproject pins SimPy to the minor
version tested (``simpy>=4.1,<4.2``) and ``tests/simulator/test_clock.py`` fails, naming
the field, if a release changes what this relies on.

>>> env = RunEnvironment()
>>> def proc(env):
...     yield 40                   # resume at cycle 40
...     yield env.timeout(2)       # any SimPy event
...     return env.now
>>> r = env.process(proc(env))
>>> env.run()
>>> r.value
42
>>> env.advance_to(50), env.now
(True, 50)
>>> _ = env.timeout(10)
>>> env.advance_to(61), env.advance_to(59), env.now
(False, True, 59)
"""

from __future__ import annotations

from collections.abc import Generator
from heapq import heappop, heappush
from typing import Any

import simpy
from simpy.core import EmptySchedule, StopSimulation
from simpy.events import NORMAL, URGENT, EventPriority

#: Yielded by a runner that registered itself to be woken by someone's ``succeed``.
PARKED = object()


class Runner:
    """One light process: drives a generator on the environment's queue.

    Its queue entries are ``(runner, value)`` pairs; ``value`` is what the generator
    receives. ``value`` holds the generator's return value once it has finished.
    """

    __slots__ = ("env", "gen", "resume_on", "value")

    def __init__(self, env: RunEnvironment, gen: Generator[Any, Any, Any]) -> None:
        self.env = env
        self.gen = gen
        self.value: Any = None
        # One bound method for every event this runner waits for.
        self.resume_on = self._resume_on

    def succeed(self, value: Any = None) -> None:
        """Wake the runner now with ``value`` (what `simpy.Event.succeed` would do)."""
        env = self.env
        heappush(env._queue, (env._now, NORMAL, next(env._eid), (self, value)))

    def _resume_on(self, event: simpy.Event) -> None:
        if event._ok:
            self.resume(event._value)
        else:
            event._defused = True
            self.resume(None, event._value)

    def resume(self, value: Any, error: BaseException | None = None) -> None:
        """Run the generator until it waits again."""
        gen = self.gen
        env = self.env
        env.active = self
        while True:
            try:
                req = gen.throw(error) if error is not None else gen.send(value)
            except StopIteration as stop:
                self.value = stop.value
                return
            error = None
            if type(req) is int:
                heappush(env._queue, (req, NORMAL, next(env._eid), (self, None)))
                return
            if req is PARKED:
                return
            callbacks = req.callbacks
            if callbacks is not None:
                callbacks.append(self.resume_on)
                return
            # Already processed: carry on with its outcome at once (as SimPy does).
            if req._ok:
                value = req._value
            else:
                error = req._value

    def wait_for(self, event: simpy.Event) -> None:
        """Resume when ``event`` fires (at once if it already has been processed)."""
        callbacks = event.callbacks
        if callbacks is not None:
            callbacks.append(self.resume_on)
        elif event._ok:
            self.resume(event._value)
        else:
            event._defused = True
            self.resume(None, event._value)


class RunEnvironment(simpy.Environment):
    """`simpy.Environment` with light processes and a fast-forward of an idle present."""

    def __init__(self) -> None:
        super().__init__()
        # False while callbacks of the event being processed are still to run: they must
        # all see the event's own time, so none of the earlier ones may move it.
        self._last_callback = True
        #: The runner whose generator is running (so that it can park itself).
        self.active: Runner | None = None

    def process(self, generator: Generator[Any, Any, Any]) -> Runner:  # type: ignore[override]
        """Start ``generator`` as a `Runner` (first run at once, before other events due
        now, as SimPy starts a process)."""
        runner = Runner(self, generator)
        heappush(self._queue, (self._now, URGENT, next(self._eid), (runner, None)))
        return runner

    def advance_to(self, t: int) -> bool:
        """Move the present to ``t`` if nothing is due at or before it; False otherwise
        (the caller then waits for ``t`` as usual)."""
        queue = self._queue
        if (queue and queue[0][0] <= t) or not self._last_callback:
            return False
        self._now = t
        return True

    def run(self, until: Any = None) -> Any:
        """`simpy.Environment.run`; without ``until`` (how the simulator runs), `step` is
        inlined in one loop: the same entries in the same order, without a method call
        per event."""
        if until is not None:
            return super().run(until)
        queue, eid = self._queue, self._eid
        try:
            while queue:
                self._now, _, _, event = heappop(queue)
                if type(event) is not tuple:
                    self._fire(event)
                    continue
                runner, value = event
                self.active = runner
                try:
                    req = runner.gen.send(value)
                except StopIteration as stop:
                    runner.value = stop.value
                    continue
                if req is PARKED:
                    continue
                if type(req) is int:
                    heappush(queue, (req, NORMAL, next(eid), (runner, None)))
                    continue
                runner.wait_for(req)
        except StopSimulation as exc:
            return exc.args[0]
        return None

    def step(self) -> None:
        """Process the next queue entry: a runner's wake-up or a SimPy event."""
        try:
            self._now, _, _, event = heappop(self._queue)
        except IndexError:
            raise EmptySchedule from None
        if type(event) is tuple:
            # A runner's wake-up: the common case, so its first send is inlined here.
            runner, value = event
            self.active = runner
            try:
                req = runner.gen.send(value)
            except StopIteration as stop:
                runner.value = stop.value
                return
            if req is PARKED:
                return
            if type(req) is int:
                heappush(self._queue, (req, NORMAL, next(self._eid), (runner, None)))
                return
            runner.wait_for(req)
            return
        self._fire(event)

    def _fire(self, event: simpy.Event) -> None:
        """Run the callbacks of a SimPy event that has come due."""
        callbacks, event.callbacks = event.callbacks, None
        last = len(callbacks) - 1
        i = 0
        try:
            for i, callback in enumerate(callbacks):
                self._last_callback = i == last
                callback(event)
        except StopSimulation:
            # ``run(until=...)`` stops here: the rest of the callbacks run on resumption.
            event.callbacks = callbacks[i + 1 :]
            self.schedule(event, EventPriority(-1))
            raise
        finally:
            self._last_callback = True
        if not event._ok and not hasattr(event, "_defused"):
            # Nobody handled the failure: stop the run with it (as SimPy does).
            exc = type(event._value)(*event._value.args)
            exc.__cause__ = event._value
            raise exc
