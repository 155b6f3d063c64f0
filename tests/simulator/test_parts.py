"""The simulator's helpers get the parts of the run they use, never the `Simulation` hub
(`simulator/parts.py`)."""

from __future__ import annotations

import inspect
import re
from dataclasses import fields

import pytest

from aipusim.simulator import api, core, host, result, trace
from aipusim.simulator.engine import Replica
from aipusim.simulator.functional import execute, order

HELPERS = [
    core.CoreRun.__init__,
    core.unit_process,
    host.host_inputs,
    host.host_outputs,
    result.build_result,
    result.link_bytes,
    result.poll_count,
    trace.Tracer.__init__,
    Replica.__init__,
    # the functional mode reads the finished run's record
    execute.run_functional,
    execute._Run.__init__,
    order.build_schedule,
    order._tokens,
    order._phases_and_host,
    api._attach,
]


@pytest.mark.parametrize("func", HELPERS, ids=lambda f: f.__qualname__)
def test_no_helper_takes_the_simulation(func: object) -> None:
    # the modules use postponed annotations: each is the source text of its type
    params = inspect.signature(func).parameters.values()
    takes = [p.name for p in params if re.search(r"\bSimulation\b", str(p.annotation))]
    assert takes == [], f"{func.__qualname__} takes the Simulation as {takes}"


def test_the_record_holds_recorded_facts_not_the_run_objects() -> None:
    # what the result and the functional mode read after the run: no live replica or core
    live = re.compile(r"\b(Simulation|Replica|CoreRun|RunEnvironment)\b")
    records = (result.RunRecord, result.ReplicaRecord, result.CoreRecord)
    held = [
        f"{r.__name__}.{f.name}" for r in records for f in fields(r) if live.search(str(f.type))
    ]
    assert held == []
