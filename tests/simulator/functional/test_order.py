"""The run as a partial order, on tasklists the compiler made: a topological run order,
tokens paired, and every removed frame wait found."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from aipusim.arch import load_arch
from aipusim.base.errors import HazardError
from aipusim.cli.main import main
from aipusim.isa.program import Program, load_program
from aipusim.isa.tasks import Phase, Task
from aipusim.simulator.engine import Simulation
from aipusim.simulator.functional.hazards import HappensBefore, check_tokens
from aipusim.simulator.functional.kernels import executor
from aipusim.simulator.functional.order import TASK, build_schedule

MODES = ("cooperative", "pipeline")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Program, dict]]:
    root = tmp_path_factory.mktemp("tiny")
    onnx_path = root / "tiny.onnx"
    assert main(["zoo", "export", "tiny_cnn", "-o", str(onnx_path)]) == 0
    out = {}
    for mode in MODES:
        folder = root / mode
        flags = ["--aipu-cores", "4", "--set", f"multicore_mode={mode}"]
        assert main(["compile", "-i", str(onnx_path), "-o", str(folder), *flags]) == 0
        out[mode] = load_program(Path(folder) / "compiled_model")
    return out


def schedule(program: Program, tasks: dict[int, list[Task]], frames: int = 4):
    sim = Simulation(program, tasks, load_arch(), frames=frames)
    sim.run()
    return build_schedule(sim.record())


@pytest.mark.parametrize("mode", MODES)
def test_the_run_order_is_topological_and_follows_time(compiled, mode: str) -> None:
    sched = schedule(*compiled[mode])
    seen: set[int] = set()
    for node in sched.order:
        assert all(d in seen for d in sched.deps[node])
        seen.add(node)
    assert len(seen) == len(sched)
    # data tasks run in start order (a barrier is logged from its arrival, its members
    # leave together: that one may come later)
    data = [n for n in sched.order if sched.kind[n] == TASK and executor(type(sched.task[n]))]
    starts = [sched.start[n] for n in data]
    assert starts == sorted(starts)
    check_tokens(sched)  # the compiler's tokens balance (pipeline credits included)


@pytest.mark.parametrize("mode", MODES)
def test_queue_order_and_token_pairs_happen_before(compiled, mode: str) -> None:
    sched = schedule(*compiled[mode])
    hb = HappensBefore(sched)
    for node in range(len(sched)):
        for d in sched.deps[node]:
            if sched.thread[d] >= 0:
                assert hb(d, node)
                assert not hb(node, d)


def frame_waits(tasks: dict[int, list[Task]]) -> list[tuple[int, int]]:
    return [
        (core, i)
        for core, lst in tasks.items()
        for i, t in enumerate(lst)
        if t.phase == Phase.FRAME and t.waits
    ]


@pytest.mark.parametrize("mode", MODES)
@settings(
    max_examples=examples(12),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_any_removed_frame_wait_is_found(compiled, mode: str, data: st.DataObject) -> None:
    program, tasks = compiled[mode]
    core, i = data.draw(st.sampled_from(frame_waits(tasks)))
    t = tasks[core][i]
    keep = data.draw(st.integers(0, len(t.waits) - 1))
    edited = dict(tasks)
    edited[core] = list(tasks[core])
    edited[core][i] = replace(t, waits=t.waits[:keep] + t.waits[keep + 1 :])
    sched = schedule(program, edited, frames=3)
    with pytest.raises(HazardError, match=r"token .* still holds \d+ unit\(s\) the frames "):
        check_tokens(sched)
