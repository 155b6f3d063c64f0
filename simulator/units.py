"""Tasks as the unit processes run them: `Op`s costed by the one cost model.

What a task does becomes a compact `Op` once, before the run, so the unit processes do no
per-task arithmetic on dataclasses: its duration alone (compute kinds, barriers), the L1
bytes it reads and writes (compute kinds: what it books on its core's L1 ports), the
`Transfer` it books on shared links (DMA kinds) and its dynamic energy per component in pJ
at the nominal voltage (the power model scales it to the run's voltage). Every figure comes from
`aipusim.isa.cost.CostModel`, the same model the compiler plans with; the simulator adds
only contention, tokens, barriers and dispatch. An op says nothing of where its task comes
from (layer, tile) or which addresses it touches, so the tiles of a layer share one (see
`prepare`).
"""

from __future__ import annotations

from dataclasses import dataclass

from aipusim.arch.model import Arch
from aipusim.base.errors import TasklistError
from aipusim.isa.cost import CostModel, Transfer
from aipusim.isa.tasks import Barrier, DmaCopy, HostTransfer, Task, TokenScope
from aipusim.isa.units import UnitRole, spec

#: Record kinds (what the unit process does with a record).
K_COMPUTE = 0  # fixed duration on the unit
K_DMA = 1  # a transfer over links
K_BARRIER = 2  # control core waits for the other cores
K_HOST = 3  # control core host handshake


@dataclass(slots=True, eq=False)
class Op:
    """What a task does on its unit, shared by every task that differs only in origin and
    addresses. ``waits``/``signals`` are ``(global?, index, count)``."""

    unit: str
    kind: int
    dur: int  # cycles alone (compute kinds; a barrier: after the last arrival)
    waits: tuple[tuple[bool, int, int], ...]
    signals: tuple[tuple[bool, int, int], ...]
    xfer: Transfer | None
    barrier: tuple[int, int] | None  # (barrier_id, core_mask)
    macs: int
    energy: tuple[float, ...]  # pJ per component at nominal voltage, in COMPONENTS order
    is_ctrl: bool
    index: int = -1  # row of this op in the run's op table
    l1_read: int = 0  # L1 bytes a compute task reads (its core's read ports)
    l1_write: int = 0  # and writes
    #: those bytes by the address field each stream starts at, ``((field, bytes), ...)``
    #: per direction (`CostModel.l1_streams`; the detailed mode's banked L1 walks them)
    l1_streams: tuple[tuple[tuple[str, int], ...], ...] = ((), ())


def _tokens(refs: tuple, arch: Arch, where: str) -> tuple[tuple[bool, int, int], ...]:
    """``(global?, index, count)`` operands, range-checked against the arch's token counts."""
    out = []
    for ref in refs:
        is_global = ref.scope == TokenScope.GLOBAL
        limit = arch.tokens.global_count if is_global else arch.tokens.local_per_core
        if not 0 <= ref.index < limit:
            raise TasklistError(
                f"{where}: {ref.scope} token index must be 0-{limit - 1}, not {ref.index}"
            )
        if ref.count < 1:
            raise TasklistError(f"{where}: token count must be >= 1, not {ref.count}")
        out.append((is_global, ref.index, ref.count))
    return tuple(out)


def _where(label: str, seq: int, task: Task) -> str:
    """Names a task in an error message."""
    return f"{label} task {seq} ({type(task).__name__}, layer {task.layer!r})"


class TaskCoster:
    """Turns tasks into `Op`s for one run (one arch, clock and MVM limit).

    >>> from aipusim.arch import load_arch
    >>> from aipusim.isa.tasks import Mvm, Unit
    >>> coster = TaskCoster(load_arch(), 800_000_000, 1.0)
    >>> t = Mvm(unit=Unit.MVM, weight_set=0, in_addr=0, out_addr=0, vectors=100,
    ...         rows_used=512, cols_used=512)
    >>> coster.op(t, "core 0", 0).dur
    816
    """

    def __init__(self, arch: Arch, freq_hz: int, mvm_utilization_limit: float) -> None:
        self.arch = arch
        self.model = CostModel(arch, freq_hz, mvm_utilization_limit)

    def op(self, task: Task, label: str, seq: int) -> Op:
        """The op of ``task``, the ``seq``-th of its phase on core ``label`` (named in
        errors)."""
        where = _where(label, seq, task)
        cost = self.model.task(task, where)
        if isinstance(task, DmaCopy):
            kind = K_DMA
        elif isinstance(task, Barrier):
            kind = K_BARRIER
        elif isinstance(task, HostTransfer):
            kind = K_HOST
        else:
            kind = K_COMPUTE
        barrier = (task.barrier_id, task.core_mask) if isinstance(task, Barrier) else None
        compute = kind == K_COMPUTE
        return Op(
            str(task.unit),
            kind,
            cost.cycles if compute or kind == K_BARRIER else 0,
            _tokens(task.waits, self.arch, where),
            _tokens(task.signals, self.arch, where),
            cost.transfer,
            barrier,
            cost.macs,
            cost.energy_pj,
            spec(task.unit).role is UnitRole.CONTROL,
            l1_read=cost.traffic.l1_read if compute else 0,
            l1_write=cost.traffic.l1_write if compute else 0,
            l1_streams=self.model.l1_streams(task) if compute else ((), ()),
        )


__all__ = ["K_BARRIER", "K_COMPUTE", "K_DMA", "K_HOST", "Op", "TaskCoster"]
