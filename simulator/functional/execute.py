"""Functional execution of a finished timing run: every task on real data, in the order the
timing model ran it.

After a timing run, from what it recorded (`result.RunRecord`; the timing is untouched: no
cycle and no energy changes), the run's nodes (`order.build_schedule`: every executed task
and host transfer) execute in run order: the constants image lies in DDR (per replica)
before anything starts; INIT runs once per replica, then every frame; the host writes each
start's inputs into their I/O buffer slots at its H2D transfer and reads the outputs back
at its D2H transfer. The tasks of a layer ``model.json`` lists in ``functional_gaps``
(what the compiler could not express on data yet) are skipped and counted. Each task's
accesses go through the hazard check (`hazards`) as it runs; the backward sweep and the
token check follow.

What comes back (`FunctionalRun`): the outputs of the last frame (int8, logical shape), the
summary, the tensors of the memory map with the last writer of every element (replica 0,
the last start: as the last task of the tensor's layer left them, since the memory plan
hands a buffer to later layers once it is consumed; a tensor whose layer ran no task
there is read at the end of the run), the table of tasks those writers index, and each
Mvm's activity for value-aware energy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from aipusim.base.errors import SimulationError
from aipusim.isa.float18 import FloatFormat
from aipusim.isa.image import CONSTANTS_FILE, MemoryMap
from aipusim.isa.tasks import Mvm, Pool
from aipusim.simulator.functional.context import Counters, NotYetWritten, TaskRun
from aipusim.simulator.functional.footprint import Access, span
from aipusim.simulator.functional.hazards import HappensBefore, HazardCheck, check_tokens
from aipusim.simulator.functional.io import (
    NOT_COMPLETE,
    by_element,
    check_inputs,
    from_bytes,
    to_bytes,
)
from aipusim.simulator.functional.kernels import executor
from aipusim.simulator.functional.memory import Memory, Where, extents
from aipusim.simulator.functional.order import D2H, H2D, TASK, Schedule, build_schedule

if TYPE_CHECKING:
    from aipusim.simulator.result import RunRecord


@dataclass
class FunctionalRun:
    """What functional execution produced (see the module docstring)."""

    outputs: dict[str, np.ndarray]
    summary: dict[str, Any]
    tensors: dict[str, np.ndarray]
    tensor_writers: dict[str, np.ndarray]
    tasks: pd.DataFrame
    #: ``(phase, macs, active products, the cycle model's MAC pJ)`` of every executed Mvm
    #: (value-aware energy).
    mvm_activity: list[tuple[int, int, int, float]] = field(default_factory=list)


def constants_image(memory: MemoryMap, source: str | Path | bytes | None) -> np.ndarray:
    """The constants image: ``source`` bytes, or the file in a compiled directory."""
    if isinstance(source, bytes | bytearray | memoryview):
        return np.frombuffer(bytes(source), np.uint8)
    if memory.constants.bytes == 0:
        return np.zeros(0, np.uint8)
    if source is None:
        raise SimulationError(
            f"the constants image ({memory.constants.bytes} bytes) must be given with an "
            "in-memory program, not left out"
        )
    path = Path(source)
    if path.is_dir():
        path = path / (memory.constants.file or CONSTANTS_FILE)
    if not path.is_file():
        raise SimulationError(f"constants image must exist, not be missing: {path}")
    return np.fromfile(path, np.uint8)


class _Run:
    """One functional execution (the state the node handlers share)."""

    def __init__(self, rec: RunRecord, inputs: dict[str, np.ndarray], value_aware: bool) -> None:
        program = rec.program
        assert program.memory is not None
        self.arch, self.config, self.cost = rec.arch, rec.config, rec.cost
        self.map, self.inputs = program.memory, inputs
        self.value_aware = value_aware
        #: The first task that ran before its data was written (raised after the run).
        self.not_yet_written: NotYetWritten | None = None
        self.per = program.aipu_cores_used
        self.mem = Memory(rec.arch, self.map, program.replicas, self.per, rec.config.io_slots)
        self.mem.check_slots()
        self.sched: Schedule = build_schedule(rec)
        self.hb = HappensBefore(self.sched)
        self.check = HazardCheck(self.sched, self.hb, self.mem, self.per)
        for pool, end in extents(self.map, self.sched.task).items():
            self.mem.reserve(pool, end)
        self.fmt = FloatFormat.of(rec.arch)
        self.counters = Counters()
        self.gaps = dict(program.extra.get("functional_gaps") or {})
        self.skipped = 0
        self.outputs: dict[tuple[int, int, str, int], np.ndarray] = {}
        self.activity: list[tuple[int, int, int, float]] = []
        #: The placed tensors by the layer that makes them, and their values (with their
        #: writers) as that layer's last task in the last start of replica 0 left them.
        self.by_layer: dict[str, list[Any]] = {}
        for place in self.map.tensors:
            self.by_layer.setdefault(place.layer, []).append(place)
        self.snapshots: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        last_start = rec.config.starts - 1
        self.snap_at: dict[int, list[Any]] = {}  # node -> tensors to read after it
        last: dict[str, int] = {}
        sched = self.sched
        for node in sched.order:
            t = sched.task[node]
            data = t is not None and executor(type(t)) is not None
            if data and sched.replica[node] == 0 and sched.phase[node] == last_start:
                last[t.layer] = node  # type: ignore[union-attr]
        for layer, node in last.items():
            if layer in self.by_layer:
                self.snap_at[node] = self.by_layer[layer]

    def node(self, node: int) -> None:
        sched = self.sched
        kind = sched.kind[node]
        if kind == TASK:
            t = sched.task[node]
            assert t is not None
            fn = executor(type(t))
            if fn is None:
                return
            if t.layer in self.gaps:
                # a layer the compiler could not express on data: timed, not executed
                self.skipped += 1
                return
            where = Where(sched.replica[node], sched.pcore[node], sched.lcore[node],
                          sched.phase[node], sched.label(node))  # fmt: skip
            run = TaskRun(t, where, self.mem, self.arch, self.fmt, self.counters,
                          self.value_aware)  # fmt: skip
            self.counters.tasks += 1
            try:
                fn(run)
            except NotYetWritten as exc:
                # the task ran before its producer: go on, so that the missing order behind
                # it is found and named (HazardError); else this is raised at the end
                self.check.forward(node, run.accesses)
                self.not_yet_written = self.not_yet_written or exc
                return
            if isinstance(t, Mvm):
                charged = self.cost.mvm_mac_energy_pj(t)
                self.activity.append((sched.phase[node], t.macs, run.active, charged))
            self.check.forward(node, run.accesses)
            for place in self.snap_at.get(node, ()):
                self.snapshots[place.name] = self.tensor(place)
        elif kind in (H2D, D2H):
            self.check.forward(node, self.host(node, kind))

    def host(self, node: int, kind: int) -> list[Access]:
        """The host's transfer of one start: write every input slot / read every output."""
        r, s = self.sched.replica[node], self.sched.phase[node]
        bufs = self.map.inputs() if kind == H2D else self.map.outputs()
        accesses = []
        for buf in bufs:
            space, at = self.mem.io_slot(buf, r, s)
            data = self.mem.data[space]
            if kind == H2D:
                data[at : at + buf.bytes] = to_bytes(buf, self.inputs[buf.name])
            else:
                per_start = self.config.frames_per_start
                frame = s * per_start + (max(buf.core, 0) if per_start > 1 else 0)
                self.outputs[(r, frame, buf.name, max(buf.core, 0))] = from_bytes(
                    buf, data[at : at + buf.bytes]
                )
            accesses.append(Access(space, *span(at, buf.bytes), kind == H2D))
        return accesses

    # -- results -------------------------------------------------------------------------
    def tensor(self, place: Any) -> tuple[np.ndarray, np.ndarray]:
        """(values, last writer per element) of a placed tensor, replica 0, last frame."""
        core = max(place.core, 0)
        phase = self.config.starts - 1
        where = Where(0, core, core, phase, f"tensor {place.name}")
        space, delta = self.mem.locate(Pool(place.pool), place.addr, place.bytes, where, core)
        lo = place.addr + delta
        raw = self.mem.data[space][lo : lo + place.bytes]
        writers = self.check.writer_of(space, lo, lo + place.bytes)
        return from_bytes(place, raw), by_element(place, writers)

    def task_table(self) -> pd.DataFrame:
        sched = self.sched
        rows = []
        for node in range(len(sched)):
            kind = sched.kind[node]
            if kind == TASK:
                t = sched.task[node]
                assert t is not None
                rows.append((node, sched.pcore[node], t.unit.value, sched.seq[node], t.layer,
                             sched.frame(node), type(t).__name__, sched.start[node],
                             sched.end[node]))  # fmt: skip
            elif kind in (H2D, D2H):
                rows.append((node, sched.pcore[node], "host", -1, "", sched.phase[node],
                             "h2d" if kind == H2D else "d2h", sched.start[node],
                             sched.end[node]))  # fmt: skip
        cols = ["node", "core", "unit", "task", "layer", "frame", "kind", "start", "end"]
        return pd.DataFrame(rows, columns=cols).set_index("node")


def run_functional(
    rec: RunRecord,
    *,
    inputs: dict[str, Any] | None = None,
    constants: str | Path | bytes | None = None,
    value_aware: bool = False,
) -> FunctionalRun:
    """Execute a finished timing run, from its record ``rec``, on data (module docstring).
    ``constants``: the image bytes, or the compiled directory (or file) holding
    ``constants.bin``."""
    program = rec.program
    if program.memory is None:
        raise SimulationError(NOT_COMPLETE)
    given, how = check_inputs(program.memory, inputs)
    run = _Run(rec, given, value_aware)
    run.mem.load_constants(constants_image(program.memory, constants))
    # Each Mvm is one modest float32 product (exact: |sums| < 2**24); a BLAS thread pool
    # only adds hand-offs, and on a loaded machine its spinning threads made a ResNet-50
    # frame 5x slower (18.6 s against 3.2 s on one thread, measured on the 2-core box).
    with threadpool_limits(limits=1, user_api="blas"):
        for node in run.sched.order:
            run.node(node)
    run.check.backward()
    # after the data: a missing wait that lets two tasks race names both of them
    check_tokens(run.sched)
    if run.not_yet_written is not None:
        raise run.not_yet_written
    outputs, agree = _last_outputs(run.outputs)
    tensors, writers = {}, {}
    for place in program.memory.tensors:
        snap = run.snapshots.get(place.name) or run.tensor(place)
        tensors[place.name], writers[place.name] = snap
    summary = {
        "tasks_executed": run.counters.tasks,
        "frames": rec.frames * len(rec.replicas),
        "input": how,
        "outputs": {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in outputs.items()},
        "outputs_agree_across_frames": agree,
        "mvm_macs": run.counters.mvm_macs,
        "saturations": run.counters.saturations,
        "hazard_checked_bytes": run.check.checked_bytes,
        "hazard_checked_tasks": len(run.check.accesses),
        # layers the compiler could not express on data (model.json): timed, not executed
        "functional_gaps": run.gaps,
        "tasks_skipped": run.skipped,
    }
    return FunctionalRun(outputs, summary, tensors, writers, run.task_table(), run.activity)


def _last_outputs(
    found: dict[tuple[int, int, str, int], np.ndarray],
) -> tuple[dict[str, np.ndarray], bool]:
    """The outputs of the last frame (replica 0), and whether every frame of every replica
    gave the same (they all ran the same input)."""
    outputs: dict[str, np.ndarray] = {}
    agree = True
    for (r, _frame, name, _core), arr in sorted(found.items(), key=lambda kv: kv[0][:2]):
        if name in outputs and not np.array_equal(outputs[name], arr):
            agree = False
        if r == 0 or name not in outputs:
            outputs[name] = arr
    return outputs, agree


__all__ = ["NOT_COMPLETE", "FunctionalRun", "constants_image", "run_functional"]
