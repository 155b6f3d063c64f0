"""The unit registry: one entry per unit queue, and what reads it."""

from __future__ import annotations

from aipusim.isa.tasks import KINDS, Unit
from aipusim.isa.units import UNIT_CLASSES, UNITS, UnitRole, compute_units, spec, unit_class


def test_every_unit_has_one_entry_and_every_kind_runs_on_registered_units() -> None:
    assert len(UNITS) == len({s.unit for s in UNITS})  # one entry each
    assert {s.unit for s in UNITS} == set(Unit)
    for kind in KINDS.values():
        assert all(u in {s.unit for s in UNITS} for u in kind.UNITS)


def test_roles_classes_and_ranks() -> None:
    assert compute_units() == (Unit.MVM, Unit.WLOAD, Unit.DPU, Unit.DWPU)
    assert {spec(u).role for u in (Unit.DMA0, Unit.DMA1, Unit.SYSDMA)} == {UnitRole.TRANSFER}
    assert spec(Unit.CTRL).role is UnitRole.CONTROL
    assert UNIT_CLASSES == ("mvm", "dwpu", "dpu", "wload", "dma", "other")
    assert sorted(s.rank for s in UNITS) == list(range(len(UNITS)))
    assert unit_class("sysdma") == "dma" and unit_class("pcie_h2d") == "other"


def test_the_profiler_and_simulator_read_the_registry() -> None:
    from aipusim.profiler.chrome import UNIT_TIDS
    from aipusim.simulator.trace import _COMPUTE_UNITS

    assert list(UNIT_TIDS) == [s.unit.value for s in UNITS]
    assert {u.value for u in compute_units()} == _COMPUTE_UNITS
