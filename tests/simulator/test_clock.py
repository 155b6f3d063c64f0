"""RunEnvironment: light processes keep SimPy's order of events; advance_to is exact."""

from __future__ import annotations

import random
from collections.abc import Generator
from typing import Any

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

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


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 5), st.integers(1, 12))
def test_the_order_of_steps_is_simpys(seed: int, n_procs: int, steps: int) -> None:
    program = _program(seed, n_procs, steps)
    assert _run(False, program) == _run(True, program)
