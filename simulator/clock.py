"""The run's SimPy environment, with one addition: fast-forwarding an idle present.

A unit that must wait until cycle ``t`` (a link booking waits for its ready cycle, a burst
for the previous one to pass) would yield a timeout to ``t``. When no event at all is
scheduled at or before ``t`` and no other process still has to run for the event being
processed, that timeout would be the very next thing to happen, so nothing else can happen
in between: moving the present to ``t`` and carrying on is the same run, one event cheaper.
Ties are untouched: an event already due at ``t`` wins, as it would over a new timeout.

>>> env = RunEnvironment()
>>> env.advance_to(40), env.now
(True, 40)
>>> _ = env.timeout(10)
>>> env.advance_to(50), env.advance_to(49), env.now
(False, True, 49)
"""

from __future__ import annotations

from heapq import heappop

import simpy
from simpy.core import EmptySchedule, StopSimulation
from simpy.events import EventPriority


class RunEnvironment(simpy.Environment):
    """`simpy.Environment` whose running process may move an idle present forward."""

    def __init__(self) -> None:
        super().__init__()
        # False while callbacks of the event being processed are still to run: they must
        # all see the event's own time, so none of the earlier ones may move it.
        self._last_callback = True

    def advance_to(self, t: int) -> bool:
        """Move the present to ``t`` if nothing is due at or before it; False otherwise
        (the caller then yields a timeout as usual)."""
        queue = self._queue
        if (queue and queue[0][0] <= t) or not self._last_callback:
            return False
        self._now = t
        return True

    def step(self) -> None:
        """`simpy.Environment.step`, telling `advance_to` whether the callback running is
        the event's last one."""
        try:
            self._now, _, _, event = heappop(self._queue)
        except IndexError:
            raise EmptySchedule from None
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
