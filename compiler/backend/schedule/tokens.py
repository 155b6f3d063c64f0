"""Token assignment: per-core stream order and hardware tokens from step dependencies.

Every cross-unit dependency B-after-A becomes a wait on the counting semaphore of the pair
(A's unit -> B's unit): A signals it once, B waits once. Queues are in order, so the k-th
wait on a pair matches the k-th signal. Waits already implied by the queue's own order or
by another wait are dropped (vector clocks over (core, unit) queue positions). Pairs on one
core use local tokens (``arch.tokens.local_per_core``), pairs across cores global ones
(``global_count``). More than `MAX_TOKEN_REFS` waits or signals spill into
TokenWait/TokenSignal tasks on the same queue. INIT steps finish before the first FRAME
step, so no token crosses the phases except the pipeline credits INIT grants.

``use_list_scheduler`` orders each core's stream by critical path (longest remaining
estimated cycles first) instead of program order, subject to the dependencies and to each
queue's order within a layer.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from typing import Any, NamedTuple

from aipusim.base.errors import TasklistError
from aipusim.compiler.backend.common.layout import CoreLayout
from aipusim.compiler.backend.memplan.buffers import MemPlan
from aipusim.compiler.backend.schedule.steps import FrameSteps, Step
from aipusim.isa.tasks import (
    MAX_TOKEN_REFS,
    DmaCopy,
    Phase,
    Task,
    TokenRef,
    TokenScope,
    TokenSignal,
    TokenWait,
    Unit,
)

#: (accessing core, writing core) -> (the accessing core's steps, the writing core's
#: writes) of memory shared across frames (`cross_frame_pairs`).
FramePairs = dict[tuple[int, int], tuple[set[int], set[int]]]


class Tokens(NamedTuple):
    """The token pass's result: every core's tasks, and the tokens they use."""

    tasks: dict[int, list[Task]]
    local_tokens_used: dict[int, int]
    global_tokens_used: int


def order_steps(steps: list[Step], use_list_scheduler: bool) -> dict[int, list[int]]:
    """Per-core streams: program order, or critical-path list scheduling."""
    per_core: dict[int, list[int]] = defaultdict(list)
    for s in steps:
        per_core[s.core].append(s.id)
    if not use_list_scheduler:
        return per_core
    users: dict[int, list[int]] = defaultdict(list)
    for s in steps:
        for d in s.deps:
            users[d].append(s.id)
    rank = [0] * len(steps)
    for s in reversed(steps):
        rank[s.id] = s.cycles + max((rank[u] for u in users[s.id]), default=0)
    out: dict[int, list[int]] = {}
    for core, ids in per_core.items():
        idset = set(ids)
        prev_same: dict[Unit, int] = {}
        indeg: dict[int, int] = {}
        extra: dict[int, set[int]] = {}
        for sid in ids:
            s = steps[sid]
            # keep a queue's order within a layer (row blocks accumulate in order)
            p = prev_same.get(s.unit)
            local = {d for d in s.deps if d in idset}
            if p is not None and steps[p].layer == s.layer:
                local.add(p)
            extra[sid] = local
            indeg[sid] = len(local)
            prev_same[s.unit] = sid
        succ: dict[int, list[int]] = defaultdict(list)
        for sid, ds in extra.items():
            for d in ds:
                succ[d].append(sid)
        ready = [(steps[i].phase is Phase.FRAME, -rank[i], i) for i in ids if indeg[i] == 0]
        heapq.heapify(ready)
        seq = []
        while ready:
            _, _, sid = heapq.heappop(ready)
            seq.append(sid)
            for u in succ[sid]:
                indeg[u] -= 1
                if indeg[u] == 0:
                    heapq.heappush(ready, (steps[u].phase is Phase.FRAME, -rank[u], u))
        assert len(seq) == len(ids), "dependency cycle in the schedule"
        out[core] = seq
    return out


def assign_tokens(
    steps: list[Step], order: dict[int, list[int]], tokens: Any, pairs: FramePairs
) -> Tokens:
    """Every core's tasks with their token waits and signals, for ``steps`` in ``order``
    (``tokens``: the arch's token counts; ``pairs``: `cross_frame_pairs`)."""
    # per step id, read in the hot loop below: its queue position, phase, core, epoch
    # and queue (core, unit)
    pos = [0] * len(steps)
    for ids in order.values():
        counters: dict[Unit, int] = defaultdict(int)
        for sid in ids:
            u = steps[sid].unit
            pos[sid] = counters[u]
            counters[u] += 1
    phase = [s.phase for s in steps]
    core_of = [s.core for s in steps]
    epoch = [s.epoch for s in steps]
    queue = [(s.core, s.unit) for s in steps]
    local_idx: dict[int, dict[tuple[Unit, Unit], int]] = defaultdict(dict)
    global_idx: dict[tuple[int, Unit, int, Unit], int] = {}
    waits: dict[int, list[TokenRef]] = defaultdict(list)
    signals: dict[int, list[TokenRef]] = defaultdict(list)
    # Vector clocks: known[s] maps (core, unit) to the newest queue position known to
    # have finished when step s has finished. A dependency already implied (through the
    # queue's own order or another dependency) needs no token.
    known: dict[int, dict[tuple[int, Unit], int]] = {}
    queue_prev: dict[int, int] = {}
    for ids in order.values():
        last: dict[Unit, int] = {}
        for sid in ids:
            u = steps[sid].unit
            if u in last:
                queue_prev[sid] = last[u]
            last[u] = sid
    for sid in _global_order(steps, order, queue_prev):
        step = steps[sid]
        core, ph, ep = core_of[sid], phase[sid], epoch[sid]
        prev = queue_prev.get(sid)
        clock = dict(known[prev]) if prev is not None else {}
        get = clock.get
        cands = []
        for d in step.deps:
            if phase[d] is not ph:
                continue  # INIT completes before the first frame
            if core_of[d] != core and epoch[d] != ep:
                continue  # a barrier of every core separates them
            if get(queue[d], -1) >= pos[d]:
                continue
            cands.append(d)
        # newest first: a later producer often implies the earlier ones
        cands.sort(key=lambda d: -pos[d])
        chosen: list[int] = []
        for d in cands:
            if get(queue[d], -1) >= pos[d]:
                continue
            chosen.append(d)
            for k, v in known[d].items():
                if v > get(k, -1):
                    clock[k] = v
        for producer in sorted(chosen):
            ref = _token_for(tokens, steps[producer], step, local_idx, global_idx)
            waits[sid].append(ref)
            signals[producer].append(ref)
        clock[queue[sid]] = pos[sid]
        known[sid] = clock
    credits = frame_credits(steps, tokens, pairs, pos, known, global_idx, waits, signals)
    tasks: dict[int, list[Task]] = {}
    for core, ids in order.items():
        out: list[Task] = list(credits.get(core, []))
        for sid in ids:
            out.extend(_materialize(steps[sid], waits[sid], signals[sid]))
        tasks[core] = out
    return Tokens(tasks, {c: len(t) for c, t in local_idx.items()}, len(global_idx))


def _global_order(
    steps: list[Step], order: dict[int, list[int]], queue_prev: dict[int, int]
) -> list[int]:
    """All steps in an order that respects dependencies and every queue's order: of the
    steps ready, the lowest id first."""
    if all(p < sid for sid, p in queue_prev.items()) and all(
        not s.deps or max(s.deps) < s.id for s in steps
    ):
        # every edge goes to a higher id, so the lowest id not yet taken is always ready:
        # the order is the ids' (what the walk below gives, without walking every edge)
        return sorted(sid for ids in order.values() for sid in ids)
    indeg: dict[int, int] = {}
    succ: dict[int, list[int]] = defaultdict(list)
    for ids in order.values():
        for sid in ids:
            deps = steps[sid].deps
            for p in deps:
                succ[p].append(sid)
            n = len(deps)
            qp = queue_prev.get(sid)
            if qp is not None and qp not in deps:
                succ[qp].append(sid)
                n += 1
            indeg[sid] = n
    ready = [sid for sid, n in indeg.items() if n == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        sid = heapq.heappop(ready)
        out.append(sid)
        for u in succ[sid]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(ready, u)
    assert len(out) == len(indeg), "dependency cycle in the schedule"
    return out


def _token_for(
    tokens: Any,
    producer: Step,
    consumer: Step,
    local_idx: dict[int, dict[Any, int]],
    global_idx: dict[Any, int],
) -> TokenRef:
    """The token of the pair (producer's unit -> consumer's unit), allocated on first use."""
    if producer.core == consumer.core:
        table = local_idx[consumer.core]
        pair = (producer.unit, consumer.unit)
        if pair not in table:
            if len(table) >= tokens.local_per_core:
                raise TasklistError(
                    f"core {consumer.core} must use at most "
                    f"{tokens.local_per_core} local tokens, not more "
                    f"(unit pairs: {sorted(table)})"
                )
            table[pair] = len(table)
        return TokenRef(TokenScope.LOCAL, table[pair], 1)
    gkey = (producer.core, producer.unit, consumer.core, consumer.unit)
    return _global_token(tokens, global_idx, gkey)


def _global_token(tokens: Any, global_idx: dict[Any, int], gkey: tuple[Any, ...]) -> TokenRef:
    """The global token of ``gkey``, allocated on first use."""
    if gkey not in global_idx:
        if len(global_idx) >= tokens.global_count:
            raise TasklistError(
                f"the instance must use at most {tokens.global_count} global "
                f"tokens, not more (pairs: {sorted(global_idx)})"
            )
        global_idx[gkey] = len(global_idx)
    return TokenRef(TokenScope.GLOBAL, global_idx[gkey], 1)


def frame_credits(
    steps: list[Step],
    tokens: Any,
    pairs: FramePairs,
    pos: list[int],
    known: dict[int, dict[tuple[int, Unit], int]],
    global_idx: dict[Any, int],
    waits: dict[int, list[TokenRef]],
    signals: dict[int, list[TokenRef]],
) -> dict[int, list[Task]]:
    """Back-pressure across frames: a core writes memory another core accesses for the
    previous frame only after that core is done with it. Frames are ordered within a
    core only (`memdeps.anchor_frames`), so for every pair (accessing core ->
    writing core) the last accesses of a frame signal a credit and the first writes
    of the next frame wait for one; INIT grants the first frame's.

    One credit per (accessing unit, writing unit): the first write on a queue waits,
    the later ones follow it in the queue; the last access on a queue signals, the
    earlier ones precede it. Accesses already implied by another signalling access
    (vector clocks), and writes that follow another waiting write, need no token. A
    credit has a token of its own: sharing a pair's token with the frame's own waits
    (or with another credit) would let a wait take a unit meant for another.
    """
    grants: dict[int, list[Task]] = defaultdict(list)
    for (rcore, wcore), (readers, writers) in sorted(pairs.items()):
        last = _extreme_per_unit(steps, readers, pos, newest=True)
        first = _extreme_per_unit(steps, writers, pos, newest=False)
        # a reader implied by another needs no signal; a writer after another no wait
        signalling = [
            r
            for r in last
            if not any(known[o].get((rcore, steps[r].unit), -1) >= pos[r]
                       for o in last if o != r)
        ]  # fmt: skip
        waiting = [
            w
            for w in first
            if not any(known[w].get((wcore, steps[o].unit), -1) >= pos[o]
                       for o in first if o != w)
        ]  # fmt: skip
        for r in signalling:
            reader = steps[r]
            for w in waiting:
                gkey = (rcore, reader.unit, wcore, steps[w].unit, "credit")
                ref = _global_token(tokens, global_idx, gkey)
                signals[r].append(ref)
                waits[w].append(ref)
                grants[rcore].append(
                    TokenSignal(
                        unit=reader.unit, layer=reader.layer, phase=Phase.INIT, signals=(ref,)
                    )
                )
    return grants


def _extreme_per_unit(
    steps: list[Step], sids: set[int], pos: list[int], *, newest: bool
) -> list[int]:
    """The newest (or oldest) of ``sids`` in each unit's queue."""
    best: dict[Unit, int] = {}
    for s in sids:
        u = steps[s].unit
        if u not in best or (pos[s] > pos[best[u]]) == newest:
            best[u] = s
    return sorted(best.values())


def cross_frame_pairs(built: FrameSteps, layout: CoreLayout, plan: MemPlan) -> FramePairs:
    """(accessing core, writing core) -> (the FRAME steps of the accessing core that use
    memory the writing core's FRAME steps overwrite in the next frame, those writes).

    Pipeline: a tensor crossing stages, written by its stage and read by later ones.
    Batch: a weight fetch multicast into the other cores' L1, where each core's own
    units work during the frame (the whole frame's steps of that core: which of them
    touch the bytes is not recorded for compute tasks, so all are counted).
    """
    pairs: dict[tuple[int, int], tuple[set[int], set[int]]] = defaultdict(lambda: (set(), set()))
    steps = built.steps
    frame = [s for s in steps if s.phase is Phase.FRAME]
    if layout.pipeline:
        for tensor in sorted(layout.shared_tensors):
            buf = plan.buffer_of(tensor, -1)
            if buf is None:
                continue
            writers = [
                s for s in built.produced.get((-1, tensor), ()) if steps[s].phase is Phase.FRAME
            ]
            for w in writers:
                wcore = steps[w].core
                for r in built.buf_access.get(buf.name, ()):
                    step = steps[r]
                    if step.core != wcore and step.phase is Phase.FRAME and r not in writers:
                        pairs[(step.core, wcore)][0].add(r)
                        pairs[(step.core, wcore)][1].add(w)
    if layout.replicate and layout.cores > 1:
        for w in frame:
            mask = int(w.fields.get("dst_core_mask", 0)) if w.kind is DmaCopy else 0
            for c in layout.all_cores:
                if c != w.core and mask >> c & 1:
                    pairs[(c, w.core)][1].add(w.id)
        for (c, _), (readers, _) in pairs.items():
            readers.update(s.id for s in frame if s.core == c)
    return dict(pairs)


def _materialize(step: Step, waits: list[TokenRef], signals: list[TokenRef]) -> list[Task]:
    common = dict(
        unit=step.unit,
        layer=step.layer,
        tile=step.tile,
        frame_slot=step.frame_slot,
        phase=step.phase,
    )
    out: list[Task] = []
    while len(waits) > MAX_TOKEN_REFS:
        out.append(TokenWait(**common, waits=tuple(waits[:MAX_TOKEN_REFS])))
        waits = waits[MAX_TOKEN_REFS:]
    main_signals = tuple(signals[:MAX_TOKEN_REFS])
    out.append(step.kind(**common, waits=tuple(waits), signals=main_signals, **step.fields))
    rest = signals[MAX_TOKEN_REFS:]
    while rest:
        out.append(TokenSignal(**common, signals=tuple(rest[:MAX_TOKEN_REFS])))
        rest = rest[MAX_TOKEN_REFS:]
    return out


__all__ = ["FramePairs", "Tokens", "assign_tokens", "cross_frame_pairs", "order_steps"]
