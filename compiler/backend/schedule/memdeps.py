"""Memory dependencies between the steps of a build: write-after-read on reused bytes, and
the anchor that keeps frames apart.

The memory plan lets a buffer reuse the address range of a buffer that is dead by then;
every access of the later buffer must follow the earlier one's last accesses. The analysis
(`war_events`) reads only the steps and which buffers they touch, so a cooperative rebuild
whose steps differ only by barriers reuses the probe's (`add_memory_war`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from aipusim.compiler.backend.memplan.buffers import MemPlan
from aipusim.compiler.backend.schedule.steps import FrameSteps, Step, lands_on
from aipusim.isa.tasks import Phase, Pool, Unit

#: One access's write-after-read dependencies (`war_events`): its step, the last earlier
#: access of the overwritten bytes on each queue, and the core whose L1 it is when a
#: multicast's gate may stand in (None: a shared pool, or one core's own copies).
WarEvent = tuple[int, tuple[int, ...], int | None]


@dataclass(frozen=True)
class WarPlan:
    """The write-after-read analysis of a build and how many steps that build had."""

    events: list[WarEvent]
    steps: int

    @cached_property
    def by_step(self) -> tuple[list[tuple[int, ...]], list[tuple[int, list[int]]]]:
        """The events grouped by their step, for a build without multicast gates
        (`apply_war`): the distinct sets of earlier accesses, and for each step (in the
        order the steps first appear) the indices of its sets, each once, in event order.
        An event whose set its step already had adds only edges the step has."""
        index: dict[tuple[int, ...], int] = {}
        per_step: dict[int, dict[int, None]] = {}
        for sid, found, _ in self.events:
            fi = index.setdefault(found, len(index))
            per_step.setdefault(sid, {})[fi] = None
        return list(index), [(sid, list(fis)) for sid, fis in per_step.items()]


def add_memory_war(
    built: FrameSteps, plan: MemPlan, cooperative: bool, war: WarPlan | None = None
) -> WarPlan:
    """A buffer that reuses the address range of an earlier, dead buffer is accessed only
    after the earlier one's last accesses (`war_events`): adds those dependencies to
    ``built``'s steps. ``war``: the analysis of a build of the same layers with no barrier
    after any group, whose steps are this build's but for its barriers (where the barriers
    go changes no access, so the analysis is the same, its step ids shifted past the
    barriers); returns the analysis used."""
    steps = built.steps
    if war is None:
        war = WarPlan(war_events(steps, built.buf_access, plan, cooperative), len(steps))
        apply_war(built, war, None)
        return war
    ids = [s for s in range(len(steps)) if s not in built.group_barriers]
    assert len(ids) == war.steps, "the probe's steps are not this build's"
    apply_war(built, war, ids)
    return war


def war_events(
    steps: Sequence[Step], buf_access: dict[str, list[int]], plan: MemPlan, cooperative: bool
) -> list[WarEvent]:
    """Which earlier accesses each access of a reused address range follows: by the
    same core in L2/DDR (each core's copies follow its own frame), by any core in one
    core's L1 (a batch's weight fetch multicasts into every core's L1; the core's own
    units learn that the multicast is done from their core's load of it, `_seen_by`).
    Cooperative cores (``cooperative``: on more than one core) share one frame and meet at
    no barrier between layer groups, so there every core's accesses count, each queue's
    last one (`_per_unit`), and in one core's L1 only the accesses of that L1
    (`_in_pool`). Reads no dependency, so that `apply_war` may add the edges to another
    build's steps."""
    coop = cooperative
    events: list[WarEvent] = []
    frame = Phase.FRAME
    for st in plan.pools.values():
        any_core = st.pool is Pool.L1 or coop
        l1 = st.core if any_core else None
        bufs = sorted(st.placed, key=lambda b: b.addr)
        # each buffer's FRAME accesses of this pool, filtered once: every buffer that
        # overlaps it reads them
        acc = {
            b.name: [
                s
                for s in buf_access.get(b.name, ())
                if steps[s].phase is frame and (not coop or _in_pool(steps, s, st))
            ]
            for b in bufs
        }
        for i, a in enumerate(bufs):
            a_acc = acc[a.name]
            if not a_acc:
                continue
            by_unit: dict[int | None, dict[Unit, list[int]]] = {}
            # a later step's dependencies on all of a's accesses, by (key, its core)
            after_all: dict[tuple[int | None, int], tuple[int, ...]] = {}
            a_last = a_acc[-1]
            a_lo, a_end, a_dead = a.addr, a.addr + a.size_bytes, a.end
            for b in bufs[i + 1 :] + bufs[:i]:
                if b.addr >= a_end or b.addr + b.size_bytes <= a_lo or b.start <= a_dead:
                    continue
                for sid in acc[b.name]:
                    core = steps[sid].core
                    key = None if any_core else core
                    if sid > a_last and (key, core) in after_all:
                        last = after_all[(key, core)]
                    else:
                        if key not in by_unit:
                            by_unit[key] = _per_unit(steps, a_acc, key, by_core=coop)
                        last = _last_before(by_unit[key], sid)
                        if sid > a_last:
                            after_all[(key, core)] = last
                    if last:
                        events.append((sid, last, l1))
    return events


def apply_war(built: FrameSteps, war: WarPlan, ids: Sequence[int] | None) -> None:
    """Add the edges of `war_events` (``ids``: this build's id of each step id in
    them; None: the same ids). Each event's steps are a set built as their first
    build built it, so that the edges are added in the order that build added them
    and every dependency set iterates as it did."""
    steps, gates = built.steps, built.gates
    cores = [s.core for s in steps]
    if not gates:
        # no event waits through a gate: each step's edges in one update, its sets in
        # event order (a set repeated adds nothing), each set's targets made once per core
        founds, per_step = war.by_step
        made: dict[tuple[int, int], tuple[int, ...]] = {}
        for sid, fis in per_step:
            if ids is not None:
                sid = ids[sid]
            core = cores[sid]
            targets = []
            for fi in fis:
                t = made.get((fi, core))
                if t is None:
                    xs = _war_set(founds[fi], ids)
                    t = made[(fi, core)] = tuple(_seen_by(built, x, core) for x in xs)
                targets.append(t)
            steps[sid].deps.update(*targets)  # adds them in this order
        return
    # with gates (a batch's multicasts), event by event; an event's targets by (its
    # steps, the accessing core): most events share their steps (every later access of
    # a buffer follows the same last accesses)
    memo: dict[tuple[int, int], tuple[int, ...]] = {}
    for sid, found, l1 in war.events:
        if ids is not None:
            sid = ids[sid]
        core = cores[sid]
        gate = gates.get((sid, l1)) if gates and l1 is not None else None
        if gate is None:
            key = (id(found), core)
            targets = memo.get(key)
            if targets is None:
                xs = _war_set(found, ids)
                targets = memo[key] = tuple(_seen_by(built, x, core) for x in xs)
            steps[sid].deps.update(targets)  # adds them in this order
            continue
        for x in _war_set(found, ids):
            if cores[x] != core:
                _war_edge(built, sid, x, l1)
            else:
                steps[sid].deps.add(x)


def _war_set(found: tuple[int, ...], ids: Sequence[int] | None) -> set[int]:
    """The set of an event's steps (in this build's ids), built as it always was: its
    order of iteration is the order the edges are added in."""
    xs = found if ids is None else [ids[x] for x in found]
    return {max(xs)} | set(xs)


def _war_edge(built: FrameSteps, sid: int, x: int, l1_core: int | None) -> None:
    """Step ``sid`` follows step ``x`` (an earlier access of bytes it overwrites, in
    ``l1_core``'s L1 or, None, in a shared pool): a multicast into another core's L1
    waits through that core's gate (`weights.WeightStreamer.fetch_gates`)."""
    steps = built.steps
    step = steps[sid]
    gate = built.gates.get((sid, l1_core)) if l1_core is not None else None
    if gate is None or steps[x].core == step.core:
        step.deps.add(_seen_by(built, x, step.core))
        return
    seen = _seen_by(built, x, steps[gate].core)
    # a load the core's queue runs after the gate (of another multicast in this group):
    # the fetch waits on it itself, over the same pair (weight load -> weight DMA)
    steps[sid if seen > gate else gate].deps.add(seen)


def _per_unit(
    steps: Sequence[Step], sids: list[int], core: int | None, *, by_core: bool = False
) -> dict[Any, list[int]]:
    """``sids`` (ascending) of ``core`` (None: of any core) by unit (``by_core``: by
    core and unit, each queue apart), the units in the order of their first step."""
    out: dict[Any, list[int]] = {}
    for s in sids:
        step = steps[s]
        if core is None or step.core == core:
            out.setdefault((step.core, step.unit) if by_core else step.unit, []).append(s)
    return out


def _in_pool(steps: Sequence[Step], sid: int, st: Any) -> bool:
    """Whether step ``sid`` accesses pool ``st``: L2/DDR any step, one core's L1 that
    core's steps and the multicasts into it (`steps.lands_on`)."""
    return st.pool is not Pool.L1 or lands_on(steps, sid, st.core)


def _last_before(per_unit: dict[Any, list[int]], sid: int) -> tuple[int, ...]:
    """Every unit's last step before ``sid``, in the unit order (`apply_war` makes the
    set of them)."""
    return tuple(steps[k - 1] for steps in per_unit.values() if (k := bisect_left(steps, sid)))


def _seen_by(built: FrameSteps, sid: int, core: int) -> int:
    """The step ``core`` waits on to know step ``sid`` is done: for another core's
    multicast into this core's L1, this core's first weight load of it (which waited
    for the multicast), so that the core's units follow it through local tokens; one
    global token per (unit, core) pair would exceed the instance's global tokens."""
    loads = built.fetch_loads.get(sid, {})
    if built.steps[sid].core != core and core in loads:
        return loads[core]
    return sid


def anchor_frames(steps: Sequence[Step]) -> None:
    """Tie every FRAME step that depends on nothing to its core's first FRAME step (the
    input transfer on the core that receives it). The ctrl queue runs frame f's output
    transfer before frame f+1's input, so frame f+1 cannot overwrite buffers, slots or
    weight sets that frame f still uses."""
    anchors: dict[int, int] = {}
    for step in steps:
        if step.phase is not Phase.FRAME:
            continue
        anchor = anchors.setdefault(step.core, step.id)
        if not step.deps and step.id != anchor:
            step.deps.add(anchor)


__all__ = ["WarEvent", "WarPlan", "add_memory_war", "anchor_frames", "apply_war", "war_events"]
