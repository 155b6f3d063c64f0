"""The functional kernel of every task kind, by kind.

Data kinds run their unit's kernel (`dma`, `mvm`, `dwpu`, `dpu`); token waits and signals,
barriers and host handshakes move no data (the host's own transfers are nodes of their own,
see `order`), so they only order the others.

>>> from aipusim.isa.tasks import Barrier, Mvm
>>> executor(Mvm).__name__, executor(Barrier)
('execute_mvm', None)
"""

from __future__ import annotations

from collections.abc import Callable

from aipusim.isa.tasks import DmaCopy, DpuOp, DwpuOp, Mvm, Task, WeightLoad
from aipusim.simulator.functional.context import TaskRun
from aipusim.simulator.functional.dma import execute_dma
from aipusim.simulator.functional.dpu import execute_dpu
from aipusim.simulator.functional.dwpu import execute_dwpu
from aipusim.simulator.functional.mvm import execute_mvm, execute_weight_load

EXECUTORS: dict[type[Task], Callable[[TaskRun], None]] = {
    DmaCopy: execute_dma,
    WeightLoad: execute_weight_load,
    Mvm: execute_mvm,
    DpuOp: execute_dpu,
    DwpuOp: execute_dwpu,
}


def executor(kind: type[Task]) -> Callable[[TaskRun], None] | None:
    """The kernel of a task kind (None: the kind moves no data)."""
    return EXECUTORS.get(kind)


__all__ = ["EXECUTORS", "executor"]
