"""`TaskRun`: one task executing, as its kernel sees it (memory, operands, counters).

A kernel declares each operand with `TaskRun.operand` (its pool and the runs it touches in
program addresses): the operand is relocated and bounds-checked (`Memory.locate`), its
footprint recorded for the hazard check, and the kernel gets the byte array and the delta to
add to program addresses. Parameter blocks are read the same way (`TaskRun.records`).

Every address of a compute task (its operands, ``param_addr``, ``lut_addr``,
``weight_addr``, ``psum_addr``) lies in its own core's L1: the units read nothing else
(the ISA names no pool for them; `aipusim.isa.addresses` checks them against L1 too).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from aipusim.arch.model import Arch
from aipusim.base.errors import SimulationError
from aipusim.isa import params as P
from aipusim.isa.float18 import FloatFormat
from aipusim.isa.tasks import Pool, Task
from aipusim.simulator.functional.footprint import Access, span
from aipusim.simulator.functional.memory import Memory, Where


@dataclass
class Counters:
    """What the kernels count over a run."""

    tasks: int = 0
    saturations: int = 0  # MVM sums clamped to the accumulator width
    mvm_macs: int = 0
    mvm_active: int = 0  # MACs whose input and weight were both nonzero (value-aware only)


class NotYetWritten(SimulationError):
    """A task found data its producer has not written yet (an IMC weight set that no
    WeightLoad filled to the size it reads). The run goes on, so that the missing order
    behind it surfaces as the `HazardError` it is; if none does, this is raised at the end."""


@dataclass
class TaskRun:
    """One execution of ``task`` (see the module docstring)."""

    task: Task
    where: Where
    mem: Memory
    arch: Arch
    fmt: FloatFormat
    counters: Counters
    value_aware: bool = False
    accesses: list[Access] = field(default_factory=list)
    #: Active products of this Mvm (value-aware energy), -1 for other kinds.
    active: int = -1

    def fail(self, message: str) -> SimulationError:
        return SimulationError(f"{self.where.label}: {message}")

    def operand(
        self,
        pool: Pool,
        starts: np.ndarray,
        ends: np.ndarray,
        write: bool,
        lcore: int | None = None,
    ) -> tuple[np.ndarray, int]:
        """(byte array, delta) of an operand touching ``[starts, ends)`` (program
        addresses, sorted, disjoint) in ``pool``; records its footprint."""
        if len(starts) == 0:
            return self.mem.data[0], 0
        lo, hi = int(starts[0]), int(ends[-1])
        space, delta = self.mem.locate(pool, lo, hi - lo, self.where, lcore)
        self.accesses.append(Access(space, starts + delta, ends + delta, write))
        return self.mem.data[space], delta

    def block(self, addr: int, nbytes: int, write: bool = False) -> tuple[np.ndarray, int]:
        """A contiguous L1 operand of ``nbytes`` at ``addr``: (array, physical address)."""
        s, e = span(addr, nbytes)
        data, delta = self.operand(Pool.L1, s, e, write)
        return data, addr + delta

    def records(self, addr: int, dtype: np.dtype, count: int) -> np.ndarray:
        """``count`` parameter records of ``dtype`` at L1 ``addr`` (a copy)."""
        data, at = self.block(addr, dtype.itemsize * count)
        return P.read(data, at, dtype, count).copy()

    def table(self, addr: int) -> np.ndarray:
        """The 256-entry int8 lookup table at L1 ``addr``, as int64."""
        data, at = self.block(addr, P.LUT_BYTES)
        return data[at : at + P.LUT_BYTES].view(np.int8).astype(np.int64)


__all__ = ["Counters", "TaskRun"]
