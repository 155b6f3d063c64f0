"""Static checks of a set of tasklists (one per core), before any simulation.

* token operands in range (``arch.tokens``), counts of at least 1, core ids valid;
* every token waited on is signalled by some task (global tokens across all cores);
* waits and signals balance per frame (a frame that signals a token more often than it
  waits on it leaks counts, one that waits more starves);
* barriers: every core in ``core_mask`` has a tasklist and reaches the same barrier ids;
* addresses inside the usable part of their pool, not in its reserved regions
  (`aipusim.isa.addresses`);
* deadlock: an abstract execution of the in-order unit queues with token counters and no
  time. Each queue runs its ``init`` tasks once, then its ``frame`` tasks for ``frames``
  frames (2 by default, so per-frame balance is exercised); any queue whose head can start
  (its waits are covered) runs it and adds its signals; a barrier completes when every core
  of its mask sits at it. When tasks remain and none can start, the blocked queue heads are
  reported with their task index, layer, unit and tokens, and the cycle of waits among them.

The abstract execution assumes unbounded queue depth (the control core never stalls on a
full unit queue) and one fixed order of the queues; with two queues waiting on one token
the outcome can depend on timing, which is flagged as a warning.

>>> from aipusim.isa.tasks import TokenSignal, TokenWait, TokenRef, TokenScope, Unit
>>> from aipusim.isa.tasklist import Tasklist
>>> t0 = TokenRef(TokenScope.LOCAL, 0)
>>> t1 = TokenRef(TokenScope.LOCAL, 1)
>>> deadlocked = Tasklist(0, [TokenWait(unit=Unit.DMA0, waits=(t0,), layer="a"),
...                           TokenSignal(unit=Unit.DMA0, signals=(t1,), layer="a"),
...                           TokenWait(unit=Unit.DPU, waits=(t1,), layer="b"),
...                           TokenSignal(unit=Unit.DPU, signals=(t0,), layer="b")])
>>> report = check_tasklists([deadlocked])
>>> report.ok, [p.kind.value for p in report.errors]
(False, ['deadlock'])
"""

from __future__ import annotations

import enum
import os
from collections import Counter, defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aipusim.base.errors import TasklistError
from aipusim.isa.tasklist import Tasklist, find_tasklists, read_tasklist
from aipusim.isa.tasks import Barrier, Phase, Task, TokenRef, TokenScope, Unit

if TYPE_CHECKING:
    from aipusim.arch import Arch

#: Frames the abstract execution runs after the init phase.
DEFAULT_FRAMES = 2


class Severity(enum.StrEnum):
    ERROR = "error"
    WARNING = "warning"


class ProblemKind(enum.StrEnum):
    CORE_ID = "core_id"  # duplicate or out-of-range core id
    TOKEN_RANGE = "token_range"  # token index beyond arch.tokens, or a count of 0
    NEVER_SIGNALLED = "never_signalled"  # waited on, but no task signals it
    NEVER_WAITED = "never_waited"  # signalled, but no task waits on it
    UNBALANCED = "unbalanced"  # frame tasks signal and wait a different number of times
    SHARED_WAITERS = "shared_waiters"  # several queues wait on one token (timing-dependent)
    BARRIER = "barrier"  # barrier masks or ids do not match across cores
    DEADLOCK = "deadlock"  # the abstract execution stops with tasks left
    ADDRESS = "address"  # an access outside the usable part of its pool (`isa.addresses`)


@dataclass(frozen=True)
class TaskSite:
    """Where a task sits: core, index in its tasklist, and what the profiler knows of it."""

    core: int
    index: int
    unit: Unit
    kind: str
    layer: str
    phase: Phase
    frame: int | None = None  # frame of the abstract execution (None: init, or no execution)

    def __str__(self) -> str:
        when = self.phase.value if self.frame is None else f"frame {self.frame}"
        return (
            f"core {self.core} task {self.index} ({self.unit.value} {self.kind}, "
            f"layer {self.layer or '-'}, {when})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "core": self.core,
            "index": self.index,
            "unit": self.unit.value,
            "kind": self.kind,
            "layer": self.layer,
            "phase": self.phase.value,
            "frame": self.frame,
        }


@dataclass(frozen=True)
class Problem:
    kind: ProblemKind
    severity: Severity
    message: str
    tasks: tuple[TaskSite, ...] = ()
    tokens: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "severity": self.severity.value,
            "message": self.message,
            "tasks": [t.to_dict() for t in self.tasks],
            "tokens": list(self.tokens),
        }


@dataclass
class CheckReport:
    """What `check_tasklists` found."""

    cores: tuple[int, ...]
    task_count: int
    frames: int
    problems: list[Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity is Severity.WARNING]

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "cores": list(self.cores),
            "tasks": self.task_count,
            "frames": self.frames,
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "problems": [p.to_dict() for p in self.problems],
        }

    def format(self) -> str:
        """Human-readable lines: a summary, then one block per problem."""
        cores = ", ".join(map(str, self.cores))
        lines = [
            f"checked {self.task_count} tasks on cores {cores} (init + {self.frames} frames): "
            f"{len(self.errors)} errors, {len(self.warnings)} warnings"
        ]
        for p in self.problems:
            lines.append(f"{p.severity.value}: [{p.kind.value}] {p.message}")
            lines += [f"    {site}" for site in p.tasks]
        return "\n".join(lines)


# -- token bookkeeping -----------------------------------------------------------------------

TokenKey = tuple[int, int]  # (owning core, or -1 for a global token; index)
_LOCAL = TokenScope.LOCAL


def token_key(core: int, ref: TokenRef) -> TokenKey:
    """Identity of a token: local tokens belong to their core, global ones to the chip."""
    return (core, ref.index) if ref.scope is _LOCAL else (-1, ref.index)


def token_name(key: TokenKey) -> str:
    """``core0:L3`` for a local token, ``G3`` for a global one."""
    core, index = key
    return f"core{core}:L{index}" if core >= 0 else f"G{index}"


def _site(core: int, index: int, task: Task, frame: int | None = None) -> TaskSite:
    return TaskSite(core, index, task.unit, type(task).__name__, task.layer, task.phase, frame)


def _need(core: int, refs: Iterable[TokenRef]) -> dict[TokenKey, int]:
    """Token counts a list of operands adds up to (one task may name a token twice)."""
    need: dict[TokenKey, int] = defaultdict(int)
    for ref in refs:
        need[token_key(core, ref)] += ref.count
    return dict(need)


def _mask_cores(mask: int) -> list[int]:
    return [c for c in range(mask.bit_length()) if mask >> c & 1]


# -- static checks -------------------------------------------------------------------------


class _Checker:
    def __init__(self, tasklists: Sequence[Tasklist], arch: Arch, frames: int) -> None:
        self.arch = arch
        self.frames = frames
        self.by_core: dict[int, Tasklist] = {}
        self.problems: list[Problem] = []
        for tl in tasklists:
            if tl.core_id in self.by_core:
                self._add(ProblemKind.CORE_ID, f"core id {tl.core_id} must be unique, not repeated")
            elif not 0 <= tl.core_id < arch.chip.cores:
                self._add(
                    ProblemKind.CORE_ID,
                    f"core id must be 0-{arch.chip.cores - 1} (arch.chip.cores), not {tl.core_id}",
                )
            else:
                self.by_core[tl.core_id] = tl

    def _add(
        self,
        kind: ProblemKind,
        message: str,
        tasks: Iterable[TaskSite] = (),
        tokens: Iterable[str] = (),
        severity: Severity = Severity.ERROR,
    ) -> None:
        self.problems.append(Problem(kind, severity, message, tuple(tasks), tuple(tokens)))

    def run(self) -> list[Problem]:
        self.check_tokens()
        self.check_barriers()
        _Execution(self).run()
        return self.problems

    def check_tokens(self) -> None:
        limits = {
            TokenScope.LOCAL: (self.arch.tokens.local_per_core, "arch.tokens.local_per_core"),
            TokenScope.GLOBAL: (self.arch.tokens.global_count, "arch.tokens.global_count"),
        }
        # (core, task index) of every wait and signal; sites are built only for reports
        waiters: dict[TokenKey, list[tuple[int, int]]] = defaultdict(list)
        signallers: dict[TokenKey, list[tuple[int, int]]] = defaultdict(list)
        per_frame: dict[TokenKey, Counter[str]] = defaultdict(Counter)
        wait_queues: dict[TokenKey, set[tuple[int, Unit]]] = defaultdict(set)
        for core, tl in sorted(self.by_core.items()):
            for i, task in enumerate(tl.tasks):
                for side, refs in (("waits", task.waits), ("signals", task.signals)):
                    for ref in refs:
                        top, where = limits[ref.scope]
                        if ref.index >= top:
                            self._add(
                                ProblemKind.TOKEN_RANGE,
                                f"{ref.scope.value} token index must be 0-{top - 1} ({where}), "
                                f"not {ref.index}",
                                [_site(core, i, task)],
                            )
                        if ref.count < 1:
                            self._add(
                                ProblemKind.TOKEN_RANGE,
                                f"token count in {side} must be at least 1, not {ref.count}",
                                [_site(core, i, task)],
                            )
                        key = token_key(core, ref)
                        (waiters if side == "waits" else signallers)[key].append((core, i))
                        if task.phase is Phase.FRAME:
                            per_frame[key][side] += ref.count
                        if side == "waits":
                            wait_queues[key].add((core, task.unit))
        for key in sorted(waiters.keys() | signallers.keys()):
            name = token_name(key)
            if key not in signallers:
                self._add(
                    ProblemKind.NEVER_SIGNALLED,
                    f"token {name} is waited on but no task signals it",
                    self.sites(waiters[key][:5]),
                    [name],
                )
                continue
            if key not in waiters:
                self._add(
                    ProblemKind.NEVER_WAITED,
                    f"token {name} is signalled but no task waits on it",
                    self.sites(signallers[key][:5]),
                    [name],
                    Severity.WARNING,
                )
                continue
            counts = per_frame[key]
            if counts["waits"] != counts["signals"]:
                sites = [
                    s for s in self.sites(waiters[key] + signallers[key]) if s.phase is Phase.FRAME
                ]
                self._add(
                    ProblemKind.UNBALANCED,
                    f"token {name} must be signalled as often as it is waited on per frame: "
                    f"frame tasks signal it {counts['signals']} and wait for "
                    f"{counts['waits']}",
                    sites[:8],
                    [name],
                )
            if len(wait_queues[key]) > 1:
                queues = ", ".join(f"core {c} {u.value}" for c, u in sorted(wait_queues[key]))
                self._add(
                    ProblemKind.SHARED_WAITERS,
                    f"token {name} is waited on from several queues ({queues}): which one "
                    "takes a signal depends on timing",
                    self.sites(waiters[key][:8]),
                    [name],
                    Severity.WARNING,
                )

    def sites(self, refs: Iterable[tuple[int, int]]) -> list[TaskSite]:
        return [_site(c, i, self.by_core[c].tasks[i]) for c, i in refs]

    def check_barriers(self) -> None:
        # barrier id -> core -> (phase, mask) of each occurrence, in order
        seen: dict[int, dict[int, list[tuple[Phase, int, TaskSite]]]] = defaultdict(dict)
        for core, tl in sorted(self.by_core.items()):
            for i, task in enumerate(tl.tasks):
                if isinstance(task, Barrier):
                    seen[task.barrier_id].setdefault(core, []).append(
                        (task.phase, task.core_mask, _site(core, i, task))
                    )
        compared: set[tuple[int, int, int]] = set()
        for bid, per_core in sorted(seen.items()):
            for core, occurrences in sorted(per_core.items()):
                mine = [(p, m) for p, m, _ in occurrences]
                for _, mask, site in occurrences:
                    if not mask >> core & 1:
                        self._add(
                            ProblemKind.BARRIER,
                            f"barrier {bid} core_mask must include the core that runs it "
                            f"(core {core}), not {bin(mask)}",
                            [site],
                        )
                        break
                members = sorted({c for _, m in mine for c in _mask_cores(m)} - {core})
                for other in members:
                    pair = (bid, min(core, other), max(core, other))
                    if pair not in compared:
                        compared.add(pair)
                        self._compare_barriers(bid, core, other, per_core)

    def _compare_barriers(
        self,
        bid: int,
        core: int,
        other: int,
        per_core: dict[int, list[tuple[Phase, int, TaskSite]]],
    ) -> None:
        """Core ``core`` names ``other`` in a barrier mask: ``other`` must match it."""
        site = per_core[core][0][2]
        if other not in self.by_core:
            self._add(
                ProblemKind.BARRIER,
                f"barrier {bid} waits for core {other}, which has no tasklist",
                [site],
            )
        elif other not in per_core:
            self._add(
                ProblemKind.BARRIER,
                f"barrier {bid} waits for core {other}, which never reaches barrier {bid}",
                [site],
            )
        else:
            mine = [(p, m) for p, m, _ in per_core[core]]
            theirs = [(p, m) for p, m, _ in per_core[other]]
            if mine != theirs:
                self._add(
                    ProblemKind.BARRIER,
                    f"barrier {bid} must occur with the same phases and core masks on cores "
                    f"{core} and {other}, not {_describe(mine)} and {_describe(theirs)}",
                    [site, per_core[other][0][2]],
                )


def _describe(occurrences: list[tuple[Phase, int]]) -> str:
    return "[" + ", ".join(f"{p.value} {bin(m)}" for p, m in occurrences) + "]"


# -- abstract execution ----------------------------------------------------------------------

QueueId = tuple[int, Unit]


class _Execution:
    """Runs the queues without time; see the module docstring."""

    def __init__(self, checker: _Checker) -> None:
        self.checker = checker
        self.frames = checker.frames
        self.tasks: dict[int, tuple[Task, ...]] = {c: tl.tasks for c, tl in checker.by_core.items()}
        self.init: dict[QueueId, list[int]] = defaultdict(list)
        self.frame: dict[QueueId, list[int]] = defaultdict(list)
        for core, tasks in sorted(self.tasks.items()):
            for i, task in enumerate(tasks):
                target = self.init if task.phase is Phase.INIT else self.frame
                target[(core, task.unit)].append(i)
        self.queues: list[QueueId] = sorted(
            self.init.keys() | self.frame.keys(), key=lambda q: (q[0], list(Unit).index(q[1]))
        )
        self.pos: dict[QueueId, int] = dict.fromkeys(self.queues, 0)
        #: task indices each queue runs, in order: init once, then the frames
        self.seq = {q: self.init[q] + self.frame[q] * self.frames for q in self.queues}
        self.length = {q: len(self.seq[q]) for q in self.queues}
        # Token operands resolved once per task: ((token, count), ...) to take and to add.
        self.needs: dict[int, list[tuple[tuple[TokenKey, int], ...]]] = {}
        self.adds: dict[int, list[tuple[tuple[TokenKey, int], ...]]] = {}
        for core, tasks in self.tasks.items():
            self.needs[core] = [tuple(_need(core, t.waits).items()) for t in tasks]
            self.adds[core] = [
                tuple((token_key(core, r), r.count) for r in t.signals) for t in tasks
            ]
        self.tokens: dict[TokenKey, int] = defaultdict(int)
        self.waiters: dict[TokenKey, set[QueueId]] = defaultdict(set)
        self.arrived: set[QueueId] = set()  # ctrl queues whose head barrier took its waits
        self.barrier_done: Counter[tuple[int, int]] = Counter()  # (core, id) -> completed
        self.at_barrier: dict[tuple[int, int], set[int]] = defaultdict(set)  # (id, occ) -> cores
        self.ready: deque[QueueId] = deque(self.queues)
        self.queued: set[QueueId] = set(self.queues)
        self._later: dict[QueueId, set[TokenKey]] = {}  # filled for the deadlock report

    def entry(self, q: QueueId, pos: int | None = None) -> tuple[int, int | None]:
        """(task index, frame) at queue position ``pos`` (default: the head)."""
        pos = self.pos[q] if pos is None else pos
        n_init = len(self.init[q])
        if pos < n_init:
            return self.init[q][pos], None
        frame, k = divmod(pos - n_init, len(self.frame[q]))
        return self.frame[q][k], frame

    def head(self, q: QueueId) -> Task:
        return self.tasks[q[0]][self.seq[q][self.pos[q]]]

    def wake(self, q: QueueId) -> None:
        if q not in self.queued:
            self.queued.add(q)
            self.ready.append(q)

    def signal(self, core: int, index: int) -> None:
        for key, count in self.adds[core][index]:
            self.tokens[key] += count
            for q in self.waiters.pop(key, ()):
                self.wake(q)

    def advance(self, q: QueueId) -> None:
        self.pos[q] += 1
        self.arrived.discard(q)

    def run(self) -> None:
        while self.ready:
            q = self.ready.popleft()
            self.queued.discard(q)
            self.drain(q)
        self.report()

    def drain(self, q: QueueId) -> None:
        core = q[0]
        seq, tasks, needs, tokens = self.seq[q], self.tasks[core], self.needs[core], self.tokens
        while self.pos[q] < self.length[q]:
            index = seq[self.pos[q]]
            if q not in self.arrived:
                need = needs[index]
                short = next((k for k, n in need if tokens[k] < n), None)
                if short is not None:
                    self.waiters[short].add(q)
                    return
                for k, n in need:
                    tokens[k] -= n
                self.arrived.add(q)
            task = tasks[index]
            if isinstance(task, Barrier) and not self.try_barrier(core, task):
                return
            if q in self.arrived:  # a completed barrier has already advanced its queue
                self.signal(core, index)
                self.advance(q)

    def barrier_slot(self, core: int, barrier_id: int) -> tuple[int, int]:
        return barrier_id, self.barrier_done[(core, barrier_id)]

    def try_barrier(self, core: int, task: Barrier) -> bool:
        """Register ``core`` at its head barrier; complete it when all members are there."""
        slot = self.barrier_slot(core, task.barrier_id)
        self.at_barrier[slot].add(core)
        members = set(_mask_cores(task.core_mask)) | {core}
        if not members <= self.at_barrier[slot]:
            return False
        for member in sorted(members):
            mq = (member, Unit.CTRL)
            self.barrier_done[(member, task.barrier_id)] += 1
            self.signal(member, self.seq[mq][self.pos[mq]])
            self.advance(mq)
            if member != core:
                self.wake(mq)
        del self.at_barrier[slot]
        return True

    # -- deadlock report -------------------------------------------------------------------

    def blocked(self) -> list[QueueId]:
        return [q for q in self.queues if self.pos[q] < self.length[q]]

    def head_site(self, q: QueueId) -> TaskSite:
        index, frame = self.entry(q)
        return _site(q[0], index, self.tasks[q[0]][index], frame)

    def what_blocks(self, q: QueueId) -> tuple[str, list[QueueId], list[str]]:
        """(description, queues that could unblock it, token names) for a blocked head."""
        core = q[0]
        task = self.head(q)
        if q in self.arrived and isinstance(task, Barrier):
            slot = self.barrier_slot(core, task.barrier_id)
            missing = sorted(set(_mask_cores(task.core_mask)) - self.at_barrier[slot])
            who = [(m, Unit.CTRL) for m in missing if (m, Unit.CTRL) in self.pos]
            return (
                f"barrier {task.barrier_id} waits for cores {', '.join(map(str, missing))}",
                who,
                [],
            )
        need = _need(core, task.waits)
        short = [k for k, n in need.items() if self.tokens[k] < n]
        parts, producers = [], []
        for k in short:
            by = [p for p in self.queues if self.signals_later(p, k)]
            producers += [p for p in by if p not in producers]
            later = (
                "signalled later by " + ", ".join(f"core {c} {u.value}" for c, u in by)
                if by
                else "no task left signals it"
            )
            parts.append(f"{token_name(k)} (has {self.tokens[k]}, needs {need[k]}; {later})")
        return "waits for " + ", ".join(parts), producers, [token_name(k) for k in short]

    def signals_later(self, q: QueueId, key: TokenKey) -> bool:
        """Whether a task at or after the head of ``q`` signals ``key``."""
        if q not in self._later:
            core = q[0]
            # The frame tasks repeat, so one pass over each distinct remaining task is enough.
            stop = min(self.length[q], self.pos[q] + len(self.init[q]) + len(self.frame[q]))
            self._later[q] = {
                token_key(core, r)
                for pos in range(self.pos[q], stop)
                for r in self.tasks[core][self.entry(q, pos)[0]].signals
            }
        return key in self._later[q]

    def report(self) -> None:
        stuck = self.blocked()
        if not stuck:
            return
        graph: dict[QueueId, list[QueueId]] = {}
        lines, tokens = [], []
        for q in stuck:
            why, producers, names = self.what_blocks(q)
            graph[q] = [p for p in producers if p in stuck]
            tokens += names
            lines.append(f"{self.head_site(q)} {why}")
        cycle = _find_cycle(graph)
        if cycle:
            chain = " -> ".join(
                f"core {c} {u.value} task {self.entry((c, u))[0]}" for c, u in cycle
            )
            summary = f"cycle of waits: {chain} -> (back to the first)"
        else:
            summary = "no cycle: the waits end at tokens no remaining task signals"
        done = sum(self.pos.values())
        total = sum(self.length.values())
        self.checker._add(
            ProblemKind.DEADLOCK,
            f"deadlock after {done} of {total} task runs (init + {self.frames} frames); "
            f"{summary}; blocked: " + "; ".join(lines),
            [self.head_site(q) for q in (cycle or stuck)],
            sorted(set(tokens)),
        )


def _find_cycle(graph: dict[QueueId, list[QueueId]]) -> list[QueueId]:
    """One cycle of the wait-for graph, in order (empty if none)."""
    state: dict[QueueId, int] = {}  # 1: on the stack, 2: done
    stack: list[QueueId] = []

    def visit(node: QueueId) -> list[QueueId]:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return []

    for start in graph:
        if start not in state:
            found = visit(start)
            if found:
                return found
    return []


# -- entry points --------------------------------------------------------------------------


def check_tasklists(
    tasklists: Sequence[Tasklist], arch: Arch | None = None, frames: int = DEFAULT_FRAMES
) -> CheckReport:
    """Check tasklists that run together (one per core); never raises on findings."""
    if arch is None:
        from aipusim.arch import load_arch

        arch = load_arch()
    if frames < 1:
        raise TasklistError(f"frames must be at least 1, not {frames}")
    checker = _Checker(tasklists, arch, frames)
    problems = _address_problems(tasklists, arch) + checker.run()
    return CheckReport(
        cores=tuple(sorted(checker.by_core)),
        task_count=sum(len(tl.tasks) for tl in tasklists),
        frames=frames,
        problems=problems,
    )


def _address_problems(tasklists: Sequence[Tasklist], arch: Arch) -> list[Problem]:
    """Accesses outside the usable part of their pool (`aipusim.isa.addresses`)."""
    from aipusim.isa.addresses import find_violations
    from aipusim.isa.table import TaskTable

    out = []
    for tl in tasklists:
        for v in find_violations(TaskTable.from_tasks(tl.tasks), arch):
            site = _site(tl.core_id, v.index, tl.tasks[v.index])
            out.append(
                Problem(ProblemKind.ADDRESS, Severity.ERROR, f"core {tl.core_id} {v}", (site,))
            )
    return out


def load_tasklists(paths: Iterable[str | os.PathLike[str]]) -> list[Tasklist]:
    """Read tasklist files; a directory stands for its ``core<N>.tasklist`` files."""
    out = []
    for path in map(Path, paths):
        if path.is_dir():
            files = find_tasklists(path)
            if not files:
                raise TasklistError(f"directory {str(path)!r} must hold core<N>.tasklist files")
            out += [read_tasklist(f) for f in files]
        else:
            out.append(read_tasklist(path))
    return out


def check_paths(
    paths: Iterable[str | os.PathLike[str]], arch: Arch | None = None, frames: int = DEFAULT_FRAMES
) -> CheckReport:
    """`check_tasklists` over files and compiled-model directories."""
    return check_tasklists(load_tasklists(paths), arch, frames)


__all__ = [
    "DEFAULT_FRAMES",
    "CheckReport",
    "Problem",
    "ProblemKind",
    "Severity",
    "TaskSite",
    "check_paths",
    "check_tasklists",
    "load_tasklists",
    "token_name",
]
