"""RunEnvironment: light processes keep SimPy's order of events; advance_to is exact."""

from __future__ import annotations

import random
from collections.abc import Generator
from typing import Any

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from aipusim.simulator.clock import PARKED, RunEnvironment


def test_a_runner_resumes_at_a_cycle_on_an_event_and_when_woken() -> None:
    env = RunEnvironment()
    log: list[tuple[str, int, Any]] = []
    parked: list[Any] = []

    def sleeper(env: RunEnvironment) -> Generator[Any, Any, str]:
        yield 5
        log.append(("cycle", env.now, None))
        value = yield env.timeout(3, value="t")
        log.append(("event", env.now, value))
        parked.append(env.active)
        value = yield PARKED
        log.append(("woken", env.now, value))
        return "done"

    def waker(env: RunEnvironment) -> Generator[Any, Any, None]:
        yield 20
        parked[0].succeed("hello")

    r = env.process(sleeper(env))
    env.process(waker(env))
    env.run()
    assert log == [("cycle", 5, None), ("event", 8, "t"), ("woken", 20, "hello")]
    assert r.value == "done"


def test_a_processed_event_is_taken_at_once_and_a_failed_one_is_thrown_in() -> None:
    env = RunEnvironment()
    done = env.event()
    failed = env.event()
    seen: list[Any] = []

    def first(env: RunEnvironment) -> Generator[Any, Any, None]:
        done.succeed(7)
        yield 1
        failed.fail(ValueError("`x` must be 1, not 2"))

    def second(env: RunEnvironment) -> Generator[Any, Any, None]:
        try:
            yield failed
        except ValueError as exc:
            seen.append((str(exc), env.now))
        seen.append((yield done))  # processed long ago: no wait
        seen.append(env.now)

    env.process(first(env))
    env.process(second(env))
    env.run()
    assert seen == [("`x` must be 1, not 2", 1), 7, 1]


def test_an_error_in_a_runner_stops_the_run_with_its_message() -> None:
    env = RunEnvironment()

    def bad(env: RunEnvironment) -> Generator[Any, Any, None]:
        yield 3
        raise RuntimeError("`core_mask` must name core 0, not 0b10")

    env.process(bad(env))
    with pytest.raises(RuntimeError, match="core_mask` must name core 0, not 0b10"):
        env.run()


def test_advance_to_refuses_when_something_is_due_or_another_callback_waits() -> None:
    env = RunEnvironment()
    answers: list[bool] = []
    shared = env.event()

    def waiter(env: RunEnvironment) -> Generator[Any, Any, None]:
        yield shared
        answers.append(env.advance_to(env.now + 100))

    env.process(waiter(env))
    env.process(waiter(env))
    shared.succeed()
    env.run()
    # The first of the two callbacks of `shared` may not move the present; the last may.
    assert answers == [False, True]
    env2 = RunEnvironment()
    env2.timeout(10)
    assert not env2.advance_to(10) and env2.advance_to(9) and env2.now == 9


def _program(seed: int, n_procs: int, steps: int) -> list[list[tuple[str, int]]]:
    rng = random.Random(seed)
    ops = ["sleep", "zero", "wait", "signal", "advance"]
    return [[(rng.choice(ops), rng.randrange(6)) for _ in range(steps)] for _ in range(n_procs)]


def _run(plain: bool, program: list[list[tuple[str, int]]]) -> list[tuple[int, int, int]]:
    """Processes that sleep, hand values to each other through mailboxes and (on the run
    environment) fast-forward; returns (time, process, step) of every step taken."""
    env = simpy.Environment() if plain else RunEnvironment()
    log: list[tuple[int, int, int]] = []
    mailbox: dict[int, list[Any]] = {i: [] for i in range(len(program))}
    waiting: dict[int, Any] = {}

    def proc(i: int, ops: list[tuple[str, int]]) -> Generator[Any, Any, None]:
        for k, (op, arg) in enumerate(ops):
            log.append((int(env.now), i, k))
            if op == "sleep" or (op == "advance" and plain):
                yield env.timeout(arg + 1)
            elif op == "advance":
                if not env.advance_to(env.now + arg + 1):
                    yield int(env.now + arg + 1)
            elif op == "zero":
                yield env.timeout(0)
            elif op == "wait":
                if mailbox[i]:
                    mailbox[i].pop(0)
                    continue
                if plain:
                    ev = waiting[i] = env.event()
                    yield ev
                else:
                    waiting[i] = env.active
                    yield PARKED
            else:
                target = arg % len(program)
                w = waiting.pop(target, None)
                if w is None:
                    mailbox[target].append(k)
                else:
                    w.succeed(k)

    for i, ops in enumerate(program):
        env.process(proc(i, ops))
    env.run()
    return log


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 5), st.integers(1, 12))
def test_the_order_of_steps_is_simpys(seed: int, n_procs: int, steps: int) -> None:
    program = _program(seed, n_procs, steps)
    assert _run(False, program) == _run(True, program)


def test_the_simpy_internals_the_clock_relies_on() -> None:
    """simulator/clock.py (and only it) works on SimPy's private queue and event fields,
    because a public-API version loses a third to three fifths of the simulated tasks per
    second. pyproject pins SimPy to the minor version checked here; a release that changes
    any of these must fail here, with the field named, before it changes a run."""
    import simpy.core
    import simpy.events

    env = simpy.Environment()
    problems = []
    for name, kind in (("_queue", list), ("_now", int)):
        if not isinstance(getattr(env, name, None), kind):
            problems.append(f"Environment.{name} must be a {kind.__name__}")
    if not hasattr(getattr(env, "_eid", None), "__next__"):
        problems.append("Environment._eid must be an id counter (itertools.count)")
    for name in ("NORMAL", "URGENT", "EventPriority"):
        if not hasattr(simpy.events, name):
            problems.append(f"simpy.events.{name} must exist")
    for name in ("EmptySchedule", "StopSimulation"):
        if not hasattr(simpy.core, name):
            problems.append(f"simpy.core.{name} must exist")
    ev = env.timeout(3, value="v")
    if env._queue and not (
        len(env._queue[0]) == 4 and env._queue[0][0] == 3 and env._queue[0][3] is ev
    ):
        problems.append("queue entries must be (time, priority, id, event)")
    if env._queue and env._queue[0][1] != simpy.events.NORMAL:
        problems.append("a timeout must be queued with priority NORMAL")
    for name in ("_ok", "_value", "callbacks"):
        if not hasattr(ev, name):
            problems.append(f"Event.{name} must exist")
    if getattr(ev, "_ok", None) is not True or getattr(ev, "_value", None) != "v":
        problems.append("a triggered Event must hold _ok=True and its _value")
    failed = env.event()
    failed.fail(ValueError("x"))
    failed._defused = True  # the clock defuses failures it hands to a runner
    env.run()
    if env.now != 3:
        problems.append("Environment.run must process the queue the clock fills")
    assert not problems, (
        f"SimPy {simpy.__version__} changed what simulator/clock.py relies on: "
        + "; ".join(problems)
        + ". Adapt clock.py (and the pin in pyproject.toml) to it."
    )
