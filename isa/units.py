"""The unit registry: every unit queue of a core, described once.

A unit queue is where a core runs tasks in order (`aipusim.isa.tasks.Unit`). What the rest
of the toolkit needs to know about a unit lives here, in one entry: whether it computes,
moves data or is the control core (the trace writes ``[K]`` lines for compute units and
``[M]`` lines for transfers), the class the profiler groups it in, how it ranks as a
layer's main work, the energy component its own work is charged to and the colour plots
give it. Entries are in display order (timelines, Chrome tracks). A new fixed-latency unit is a new
`Unit` member, an entry here, and its cost in `aipusim.isa.cost`.

>>> spec(Unit.WLOAD).role, spec(Unit.DMA1).unit_class, [u.value for u in compute_units()]
(<UnitRole.COMPUTE: 'compute'>, 'dma', ['mvm', 'wload', 'dpu', 'dwpu'])
>>> UNIT_CLASSES
('mvm', 'dwpu', 'dpu', 'wload', 'dma', 'other')
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from aipusim.isa.tasks import Unit
from aipusim.isa.trace_schema import Component


class UnitRole(enum.StrEnum):
    """What a unit does with its tasks."""

    COMPUTE = "compute"  # a fixed duration on the unit (trace tag [K])
    TRANSFER = "transfer"  # data over links (trace tag [M])
    CONTROL = "control"  # the control core: barriers and host handshakes


@dataclass(frozen=True)
class UnitSpec:
    """One unit queue: its role, profiler class, energy component and plot colour."""

    unit: Unit
    role: UnitRole
    #: Profiler grouping: units of one class are summed together (both DMA channels and
    #: the system DMA are ``dma``).
    unit_class: str
    #: Which unit stands for a layer when several work on it: the lowest rank (the
    #: arrays before the vector units, compute before weight loads and transfers).
    rank: int
    #: Where the energy of the unit's own work goes (memories are charged separately).
    component: Component
    #: Matplotlib colour of the unit in plots.
    color: str


#: Every unit, in display order.
UNITS: tuple[UnitSpec, ...] = (
    UnitSpec(Unit.CTRL, UnitRole.CONTROL, "other", 7, Component.CONTROL, "#7f7f7f"),
    UnitSpec(Unit.MVM, UnitRole.COMPUTE, "mvm", 0, Component.MVM, "#1f77b4"),
    UnitSpec(Unit.WLOAD, UnitRole.COMPUTE, "wload", 3, Component.WLOAD, "#17becf"),
    UnitSpec(Unit.DPU, UnitRole.COMPUTE, "dpu", 2, Component.DPU, "#2ca02c"),
    UnitSpec(Unit.DWPU, UnitRole.COMPUTE, "dwpu", 1, Component.DWPU, "#9467bd"),
    UnitSpec(Unit.DMA0, UnitRole.TRANSFER, "dma", 4, Component.DMA, "#ff7f0e"),
    UnitSpec(Unit.DMA1, UnitRole.TRANSFER, "dma", 5, Component.DMA, "#d62728"),
    UnitSpec(Unit.SYSDMA, UnitRole.TRANSFER, "dma", 6, Component.DMA, "#8c564b"),
)
_BY_NAME: dict[str, UnitSpec] = {s.unit.value: s for s in UNITS}
assert set(_BY_NAME) == {u.value for u in Unit}, "every Unit needs a registry entry"
#: Units by rank (a layer's main work first).
BY_RANK: tuple[UnitSpec, ...] = tuple(sorted(UNITS, key=lambda s: s.rank))
#: Profiler classes by rank, each once (``other``: the control core, the host link and
#: units a trace names that the registry does not know).
UNIT_CLASSES: tuple[str, ...] = tuple(dict.fromkeys(s.unit_class for s in BY_RANK))


def spec(unit: Unit | str) -> UnitSpec:
    """The registry entry of ``unit`` (a `Unit` or its name); KeyError for an unknown name."""
    return _BY_NAME[str(unit)]


def units_by_role(role: UnitRole) -> tuple[Unit, ...]:
    """The units of one role, in registry order."""
    return tuple(s.unit for s in UNITS if s.role is role)


def compute_units() -> tuple[Unit, ...]:
    """Units whose tasks have a fixed duration (trace ``[K]`` lines)."""
    return units_by_role(UnitRole.COMPUTE)


def unit_class(unit: str) -> str:
    """The profiler class of a unit name (``other`` for a name the registry does not know,
    e.g. a trace written by a newer version)."""
    entry = _BY_NAME.get(unit)
    return entry.unit_class if entry is not None else "other"


__all__ = [
    "BY_RANK",
    "UNITS",
    "UNIT_CLASSES",
    "UnitRole",
    "UnitSpec",
    "compute_units",
    "spec",
    "unit_class",
    "units_by_role",
]
