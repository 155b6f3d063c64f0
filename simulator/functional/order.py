"""The run as a partial order: every executed task and host transfer, and what orders them.

Built from what the timing run recorded (`result.RunRecord`: its task segments, the
replicas' host and frame cycles), never from a second simulation. A *node* is a task
execution (its thread: the physical core's unit queue), a host transfer of one start
(threads: each replica's H2D and D2H), or a virtual join (no thread). Each node lists the
nodes that happen before it:

- **queue order**: the previous node of its thread;
- **dispatch**: a ``ctrl`` task (barrier, host handshake, a wait on the control core) holds
  the dispatch of every later task of its core's phase until it ends;
- **phases**: start ``s`` of a core begins after its start ``s - 1`` ended on every unit (the
  first start: after INIT on every core of the replica), after the host's input of ``s``
  landed (H2D) and, for ``s >= slots``, after the result of ``s - slots`` went back (D2H);
- **host**: H2D of ``s`` after start ``s - slots`` finished on every core (its buffers are
  free); D2H of ``s`` after start ``s`` finished on every core;
- **tokens**: the k-th unit waited for on a token takes the k-th unit signalled, signals in
  order of visibility (end + token latency; ties by core, unit, position), waits in order of
  their start: exact for the single-producer tokens the compiler emits. Units left on a
  token at the end beyond what INIT left there (credits, e.g. a pipeline stage's free
  buffer) are a `Leftover`: frames signal more than they take, a wait is missing;
- **barriers**: the k-th arrival of every core at a barrier id: each leaves after all came.

`Schedule.order` is a topological order that follows the timing run (start cycle; ties by
core, unit, position): the order functional execution runs the nodes in.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from aipusim.base.errors import SimulationError
from aipusim.isa.table import TaskTable
from aipusim.isa.tasks import Barrier, Phase, Task, TokenScope, Unit

if TYPE_CHECKING:
    from aipusim.simulator.result import RunRecord

TASK, H2D, D2H, VIRTUAL = 0, 1, 2, 3
_UNITS = list(Unit)
_CTRL = _UNITS.index(Unit.CTRL)
#: Unit index of the host's transfers in tie-breaks (after every unit of a core).
_HOST_UNIT = {H2D: len(_UNITS), D2H: len(_UNITS) + 1}


@dataclass
class Leftover:
    """Units of a token the frames signalled and nobody waited for by the end of the run
    (beyond the credits INIT left on it)."""

    token: str
    units: int
    last_signal: int  # node of the last signal


@dataclass
class Schedule:
    """Nodes (parallel lists, by node id), their dependencies and the run order."""

    threads: list[str]
    kind: list[int] = field(default_factory=list)
    thread: list[int] = field(default_factory=list)
    pos: list[int] = field(default_factory=list)
    start: list[int] = field(default_factory=list)
    end: list[int] = field(default_factory=list)
    pcore: list[int] = field(default_factory=list)
    lcore: list[int] = field(default_factory=list)
    replica: list[int] = field(default_factory=list)
    phase: list[int] = field(default_factory=list)
    seq: list[int] = field(default_factory=list)
    unit: list[int] = field(default_factory=list)
    task: list[Task | None] = field(default_factory=list)
    deps: list[list[int]] = field(default_factory=list)
    order: list[int] = field(default_factory=list)
    leftovers: list[Leftover] = field(default_factory=list)
    frames_per_start: int = 1

    def __len__(self) -> int:
        return len(self.kind)

    def add(
        self, kind: int, thread: int, start: int, end: int, pcore: int, lcore: int,
        replica: int, phase: int, seq: int = -1, unit: int = -1, task: Task | None = None,
    ) -> int:  # fmt: skip
        self.kind.append(kind)
        self.thread.append(thread)
        self.pos.append(0)
        self.start.append(start)
        self.end.append(end)
        self.pcore.append(pcore)
        self.lcore.append(lcore)
        self.replica.append(replica)
        self.phase.append(phase)
        self.seq.append(seq)
        self.unit.append(unit)
        self.task.append(task)
        self.deps.append([])
        return len(self.kind) - 1

    def frame(self, node: int) -> int:
        """The frame a node works on (-1: INIT); batch mode: start x cores + core."""
        ph = self.phase[node]
        if ph < 0:
            return -1
        return ph * self.frames_per_start + (self.lcore[node] if self.frames_per_start > 1 else 0)

    def label(self, node: int) -> str:
        """A node as errors name it: core, unit, task index, kind, layer, frame."""
        kind = self.kind[node]
        if kind == TASK:
            t = self.task[node]
            assert t is not None
            ph = self.phase[node]
            when = "init" if ph < 0 else f"frame {self.frame(node)}"
            return (
                f"core {self.pcore[node]} {t.unit.value} task {self.seq[node]} "
                f"({type(t).__name__}, layer {t.layer!r}, {when})"
            )
        if kind in (H2D, D2H):
            what = "input (h2d)" if kind == H2D else "output (d2h)"
            return f"the host's {what} of start {self.phase[node]} (replica {self.replica[node]})"
        return f"join {node}"


def _tasks_of(tasklist: Sequence[Task] | TaskTable) -> tuple[list[Task], np.ndarray]:
    """(tasks, row of each by phase-position: INIT rows then FRAME rows)."""
    tasks = tasklist.to_tasks() if isinstance(tasklist, TaskTable) else list(tasklist)
    init = [i for i, t in enumerate(tasks) if t.phase == Phase.INIT]
    frame = [i for i, t in enumerate(tasks) if t.phase != Phase.INIT]
    return tasks, np.array(init + frame, np.int64)


class _Builder:
    """Threads and queue order while nodes are added."""

    def __init__(self, sched: Schedule) -> None:
        self.sched = sched
        self.threads: dict[tuple, int] = {}
        self.last: dict[int, int] = {}  # thread -> its last node so far

    def thread(self, key: tuple, name: str) -> int:
        if key not in self.threads:
            self.threads[key] = len(self.threads)
            self.sched.threads.append(name)
        return self.threads[key]

    def chain(self, node: int, tid: int) -> None:
        """Append ``node`` to thread ``tid`` (after its last node)."""
        sched = self.sched
        prev = self.last.get(tid)
        sched.pos[node] = 1 if prev is None else sched.pos[prev] + 1
        if prev is not None:
            sched.deps[node].append(prev)
        self.last[tid] = node


def build_schedule(rec: RunRecord) -> Schedule:
    """The nodes and happens-before edges of a finished timing run, from its record
    (module docstring)."""
    program = rec.program
    per = program.aipu_cores_used
    codes = rec.codes
    rid_base: dict[int, int] = {}
    base = 0
    for c in program.instance.cores:
        rid_base[c] = base
        base += codes[c].n_records
    lists = {c: _tasks_of(rec.tasklists[c]) for c in program.instance.cores}
    sched = Schedule([], frames_per_start=rec.config.frames_per_start)
    build = _Builder(sched)
    # -- task executions, one segment per (core, unit, phase) ----------------------------
    segments: list[tuple[int, int, int, int]] = []  # pcore, phase, first node, last node
    ctrl: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
    for pcore, phase, rids, starts, ends in rec.segments:
        n = len(starts)
        if not n:
            continue
        r, c = divmod(pcore, per)
        tasks, rows = lists[c]
        local = np.asarray(rids[:n], np.int64) - rid_base[c]
        n_init = len(codes[c].init)
        first = len(sched)
        for k in range(n):
            lo = int(local[k])
            t = tasks[int(rows[lo])]
            u = _UNITS.index(t.unit)
            tid = build.thread(("core", pcore, u), f"core{pcore}.{t.unit.value}")
            seq = lo if phase < 0 else lo - n_init
            node = sched.add(TASK, tid, starts[k], ends[k], pcore, c, r, phase, seq, u, t)
            build.chain(node, tid)
            if u == _CTRL:
                seqs, nodes = ctrl.setdefault((pcore, phase), ([], []))
                seqs.append(seq)
                nodes.append(node)
        segments.append((pcore, phase, first, len(sched) - 1))
    _dispatch(sched, ctrl)
    _tokens(rec.config.token_latency_cycles, sched)
    _phases_and_host(rec, sched, segments, build)
    _barriers(sched)
    sched.order = _topological(sched)
    return sched


def _dispatch(sched: Schedule, ctrl: dict[tuple[int, int], tuple[list[int], list[int]]]) -> None:
    """Each task after the last ctrl task dispatched before it in its core's phase."""
    for seqs, nodes in ctrl.values():
        order = sorted(range(len(seqs)), key=seqs.__getitem__)
        seqs[:] = [seqs[i] for i in order]
        nodes[:] = [nodes[i] for i in order]
    for node in range(len(sched)):
        if sched.unit[node] == _CTRL:
            continue
        held = ctrl.get((sched.pcore[node], sched.phase[node]))
        if held:
            i = bisect.bisect_left(held[0], sched.seq[node]) - 1
            if i >= 0:
                sched.deps[node].append(held[1][i])


def _tokens(latency: int, sched: Schedule) -> None:
    """Pair wait units with signal units, token by token (module docstring); a signal is
    visible ``latency`` cycles after its task ended."""
    signals: dict[tuple, list[tuple]] = {}
    waits: dict[tuple, list[tuple]] = {}
    for node, t in enumerate(sched.task):
        if t is None or not (t.waits or t.signals):
            continue
        p, r = sched.pcore[node], sched.replica[node]
        tie = (p, sched.unit[node], sched.pos[node])
        for refs, table, at in ((t.signals, signals, sched.end[node] + latency),
                                (t.waits, waits, sched.start[node])):  # fmt: skip
            for ref in refs:
                key = (ref.scope, p if ref.scope == TokenScope.LOCAL else r, ref.index)
                table.setdefault(key, []).append((at, *tie, node, ref.count))
    for key in sorted(set(signals) | set(waits), key=str):
        given = [n for *_, n, count in sorted(signals.get(key, [])) for _ in range(count)]
        taken = [n for *_, n, count in sorted(waits.get(key, [])) for _ in range(count)]
        if len(taken) > len(given):
            raise SimulationError(
                f"token {_token_name(key)}: {len(taken)} units waited for but only "
                f"{len(given)} signalled in a finished run"
            )
        for waiter, signaller in zip(taken, given, strict=False):
            sched.deps[waiter].append(signaller)
        # INIT may leave units on a token on purpose (credits: a buffer free before frame
        # 0); a FRAME that signals more than the frames take means a missing wait
        credit = sum(c for *_, n, c in signals.get(key, []) if sched.phase[n] < 0) - sum(
            c for *_, n, c in waits.get(key, []) if sched.phase[n] < 0
        )
        extra = len(given) - len(taken) - max(credit, 0)
        if extra > 0:
            sched.leftovers.append(Leftover(_token_name(key), extra, given[-1]))


def _token_name(key: tuple) -> str:
    scope, where, index = key
    owner = f"core{where}" if scope == TokenScope.LOCAL else f"replica{where}"
    return f"{owner}.{scope.value}{index}"


def _barriers(sched: Schedule) -> None:
    """Each round of a barrier: a join of every member's predecessors, before each member."""
    rounds: dict[tuple[int, int, int], list[int]] = {}
    seen: dict[tuple[int, int, int], int] = {}
    nodes = [n for n, t in enumerate(sched.task) if isinstance(t, Barrier)]
    for node in sorted(nodes, key=lambda n: (sched.thread[n], sched.pos[n])):
        t = sched.task[node]
        assert isinstance(t, Barrier)
        who = (sched.replica[node], t.barrier_id, sched.lcore[node])
        gen = seen.get(who, 0)
        seen[who] = gen + 1
        rounds.setdefault((sched.replica[node], t.barrier_id, gen), []).append(node)
    for members in rounds.values():
        first = members[0]
        join = sched.add(VIRTUAL, -1, 0, 0, -1, -1, sched.replica[first], sched.phase[first])
        for m in members:
            sched.deps[join].extend(sched.deps[m])
            sched.deps[m] = [join]


def _phases_and_host(
    rec: RunRecord, sched: Schedule, segments: list[tuple[int, int, int, int]], build: _Builder
) -> None:
    """Phase starts and ends, INIT, frame completions and the host's transfers."""
    per = rec.program.aipu_cores_used
    slots = rec.config.io_slots
    ends: dict[tuple[int, int], list[int]] = {}
    firsts: dict[tuple[int, int], list[int]] = {}
    for pcore, phase, first, last_node in segments:
        ends.setdefault((pcore, phase), []).append(last_node)
        firsts.setdefault((pcore, phase), []).append(first)
    for rep in rec.replicas:
        r = rep.index
        cores = [c.physical for c in rep.cores]

        def virtual(deps: list[int], phase: int, r: int = r) -> int:
            node = sched.add(VIRTUAL, -1, 0, 0, -1, -1, r, phase)
            sched.deps[node].extend(deps)
            return node

        phase_end = {p: virtual(ends.get((p, -1), []), -1) for p in cores}
        init_end = virtual(list(phase_end.values()), -1)
        h2d_t = build.thread(("host", r, H2D), f"host{r}.h2d")
        d2h_t = build.thread(("host", r, D2H), f"host{r}.d2h")
        done: dict[int, int] = {}
        h2d: dict[int, int] = {}
        d2h: dict[int, int] = {}
        for s in range(rec.config.starts):
            begin, _landed = rep.h2d[s]
            h = sched.add(H2D, h2d_t, begin, rep.h2d[s][1], cores[0], 0, r, s, unit=_HOST_UNIT[H2D])
            build.chain(h, h2d_t)
            if s >= slots:
                sched.deps[h].append(done[s - slots])
            h2d[s] = h
            starts = {}
            for p in cores:
                deps = [phase_end[p] if s > 0 else init_end, h]
                if s >= slots:
                    deps.append(d2h[s - slots])
                starts[p] = start = virtual(deps, s)
                for first in firsts.get((p, s), []):
                    sched.deps[first].append(start)
                phase_end[p] = virtual([start, *ends.get((p, s), [])], s)
            done[s] = virtual([phase_end[p] for p in cores], s)
            d = sched.add(D2H, d2h_t, rep.done[s], rep.d2h[s], cores[0], 0, r, s,
                          unit=_HOST_UNIT[D2H])  # fmt: skip
            build.chain(d, d2h_t)
            sched.deps[d].append(done[s])
            d2h[s] = d
        assert per == len(cores)


def _topological(sched: Schedule) -> list[int]:
    """Kahn's algorithm, taking the ready node that started first (ties: core, unit,
    position); a virtual node starts when its last dependency ended."""
    n = len(sched)
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for node in range(n):
        deps = sorted(set(sched.deps[node]))
        sched.deps[node] = deps
        indeg[node] = len(deps)
        for d in deps:
            succ[d].append(node)

    def key(node: int) -> tuple[int, int, int, int, int]:
        if sched.kind[node] == VIRTUAL:
            t = max((sched.end[d] for d in sched.deps[node]), default=0)
            sched.start[node] = sched.end[node] = t
            return (t, -1, -1, 0, node)
        return (sched.start[node], sched.pcore[node], sched.unit[node], sched.pos[node], node)

    heap = [key(i) for i in range(n) if indeg[i] == 0]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        node = heapq.heappop(heap)[-1]
        order.append(node)
        for s in succ[node]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(heap, key(s))
    if len(order) != n:
        raise SimulationError(
            f"the run's happens-before relation has a cycle ({n - len(order)} nodes never "
            "became ready): the timing logs contradict each other"
        )
    return order


__all__ = ["D2H", "H2D", "TASK", "VIRTUAL", "Leftover", "Schedule", "build_schedule"]
