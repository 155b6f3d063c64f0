"""The schedule's steps: tasks before tokens, and the log a build appends them to.

A `Step` is a task with its unit, fields and origin and the steps it must follow; the
schedule's parts hand each other steps by id (their index in `StepLog.steps`). The
`Schedule` is what the `schedule` pass hands on: every core's tasks with their tokens.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from aipusim.compiler.backend.common.target import Target
from aipusim.compiler.backend.lower.layer import LayerPlan, LayerUnit
from aipusim.isa.tasks import DmaCopy, Phase, Pool, Task, Unit


@dataclass
class Step:
    """A task before tokens: its unit, fields, origin and the steps it must follow."""

    id: int
    core: int
    unit: Unit
    kind: type[Task]
    fields: dict[str, Any]
    layer: str
    tile: int
    phase: Phase
    frame_slot: int
    deps: set[int] = field(default_factory=set)
    cycles: int = 1
    #: the fusion group it belongs to (-1: before the first)
    group: int = -1
    #: the barriers its core has passed in the frame before it: a cooperative step on
    #: another core with a lower epoch is ordered before it by the barrier between
    epoch: int = 0


class Residency(StrEnum):
    """Where an MVM layer's constant weight sets live across frames."""

    RESIDENT = "resident"  # loaded into the IMC once, in INIT
    STREAMED = "streamed"  # fetched and loaded every frame


@dataclass(frozen=True)
class WeightResidency:
    """A layer's `Residency` and why it was chosen; the report shows ``"<residency>: why"``.

    >>> str(WeightResidency(Residency.STREAMED, "weight sets: 9 needed, 8 in the array"))
    'streamed: weight sets: 9 needed, 8 in the array'
    """

    residency: Residency
    why: str

    def __str__(self) -> str:
        return f"{self.residency}: {self.why}"


def residency_of(residency: Mapping[str, WeightResidency], layer: str) -> Residency | None:
    """The `Residency` of ``layer``'s weights (None: no constant MVM weights).

    >>> residency_of({"c": WeightResidency(Residency.RESIDENT, "fits")}, "c")
    <Residency.RESIDENT: 'resident'>
    """
    entry = residency.get(layer)
    return entry.residency if entry is not None else None


@dataclass
class Schedule:
    """Per-core task streams plus what the report needs."""

    tasks: dict[int, list[Task]]
    steps: list[Step]
    resident_weights: bool
    local_tokens_used: dict[int, int]
    global_tokens_used: int
    #: Layers whose tasks do not describe all their data yet (layer -> why): timed, but
    #: not executed bit-exactly by the functional simulator.
    incomplete: dict[str, str] = field(default_factory=dict)
    #: MVM layer -> whether its weights stay in the IMC across frames or stream, and why.
    weight_residency: dict[str, WeightResidency] = field(default_factory=dict)

    def task_count(self) -> int:
        return sum(len(t) for t in self.tasks.values())


class ProducerMap(defaultdict[tuple[int, str], list[int]]):
    """(copy, tensor) -> the steps that write the tensor; an alias (a Reshape that moves no
    byte, a PWORD pad) is its source tensor, so a reader of the alias waits for the
    source's writers."""

    def __init__(self, layers: Sequence[LayerPlan]) -> None:
        super().__init__(list)
        self.alias: dict[str, str] = {}
        for layer in layers:
            if layer.unit is LayerUnit.ALIAS and layer.inputs:
                root = self.alias.get(layer.inputs[0], layer.inputs[0])
                for out in layer.outputs:
                    self.alias[out] = root

    def _key(self, key: tuple[int, str]) -> tuple[int, str]:
        return key[0], self.alias.get(key[1], key[1])

    def __getitem__(self, key: tuple[int, str]) -> list[int]:
        return super().__getitem__(self._key(key))

    def __setitem__(self, key: tuple[int, str], value: list[int]) -> None:
        super().__setitem__(self._key(key), value)

    def get(self, key: tuple[int, str], default: Any = None) -> Any:  # type: ignore[override]
        return super().get(self._key(key), default)


class StepLog:
    """The steps of one build in the order they are made, and what each touches.

    Every part that makes steps appends them here (`add`, `dma`); the log adds to a FRAME
    step the core's current fence (``fence``: set by the frame walk) and records its
    fusion group (``group``) and barrier epoch (``epoch``)."""

    def __init__(self, target: Target, replicate: bool) -> None:
        self.cost = target.cost
        self.replicate = replicate
        self.steps: list[Step] = []
        #: buffer name -> the steps that access it, in step order
        self.buf_access: dict[str, list[int]] = defaultdict(list)
        #: (core, epoch) -> the core's FRAME steps since its last barrier
        self.epoch_steps: dict[tuple[int, int], list[int]] = defaultdict(list)
        #: core -> the steps every FRAME step of the core waits for (a group fence)
        self.fence: dict[int, set[int]] = defaultdict(set)
        self.group = 0
        self.epoch = 0

    def add(
        self,
        core: int,
        unit: Unit,
        kind: type[Task],
        fields: dict[str, Any],
        *,
        layer: str,
        tile: int = 0,
        deps: set[int] | None = None,
        phase: Phase = Phase.FRAME,
        touches: tuple[str, ...] = (),
    ) -> int:
        """A new step; returns its id."""
        sid = len(self.steps)
        deps = set(deps or ())
        if phase is Phase.FRAME:
            deps |= self.fence[core]
        slot = core if self.replicate else 0
        # what the task will cost, by the model the simulator runs it with (the list
        # scheduler ranks steps by it)
        cycles = self.cost.task_cycles(kind, unit, fields, layer)
        self.steps.append(
            Step(sid, core, unit, kind, fields, layer, tile, phase, slot, deps, max(1, cycles),
                 self.group, self.epoch)
        )  # fmt: skip
        for name in touches:
            self.buf_access[name].append(sid)
        if phase is Phase.FRAME:
            self.epoch_steps[(core, self.epoch)].append(sid)
        return sid

    def dma(
        self,
        core: int,
        unit: Unit,
        src: tuple[Pool, int],
        dst: tuple[Pool, int],
        nbytes: int,
        *,
        layer: str,
        tile: int,
        deps: set[int],
        touches: tuple[str, ...],
        mask: int = 0,
        phase: Phase = Phase.FRAME,
        **layout: int,
    ) -> int:
        """A `DmaCopy` of ``nbytes`` (``layout``: its rows, planes and strides)."""
        fields = dict(
            src_pool=src[0],
            src_addr=src[1],
            dst_pool=dst[0],
            dst_addr=dst[1],
            bytes=max(1, nbytes),
            dst_core_mask=mask,
            **layout,
        )
        return self.add(
            core,
            unit,
            DmaCopy,
            fields,
            layer=layer,
            tile=tile,
            deps=deps,
            phase=phase,
            touches=touches,
        )

    def touch(self, sids: list[int], *names: str) -> None:
        """Record that steps ``sids`` access buffers ``names``."""
        for name in names:
            self.buf_access[name].extend(sids)


def lands_on(steps: Sequence[Step], sid: int, core: int) -> bool:
    """Whether step ``sid`` may access ``core``'s L1: a step of that core or a multicast
    into it."""
    step = steps[sid]
    if step.core == core:
        return True
    mask = int(step.fields.get("dst_core_mask", 0)) if step.kind is DmaCopy else 0
    return bool(mask >> core & 1)


@dataclass(frozen=True)
class FrameSteps:
    """What the step emission of one build hands on (`frame.emit_steps`): its steps with
    their data dependencies, and what the later parts need to know about them."""

    steps: list[Step]
    #: buffer name -> the steps that access it
    buf_access: dict[str, list[int]]
    #: (copy, tensor) -> the steps that write it
    produced: ProducerMap
    #: the `Barrier` steps after a layer group
    group_barriers: frozenset[int]
    #: (multicast, core) -> the core's gate `TokenWait` the multicast waits through
    gates: dict[tuple[int, int], int]
    #: multicast fetch -> core -> the core's first load of it
    fetch_loads: dict[int, dict[int, int]]
    #: weight-set key -> the set it stays in from INIT
    resident: dict[Any, int]
    #: layers whose tasks do not describe all their data (layer -> why)
    incomplete: dict[str, str]


__all__ = [
    "FrameSteps",
    "ProducerMap",
    "Residency",
    "Schedule",
    "Step",
    "StepLog",
    "WeightResidency",
    "lands_on",
    "residency_of",
]
