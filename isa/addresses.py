"""Addresses of tasks against the pools of the arch: inside the part a program may use.

Addresses are offsets into the part of each pool the compiler places buffers in; the
reserved regions lie above it:

* L1 (per core): ``[0, l1.size_bytes - l1.reserved_bytes)``; the system's reservation above;
* L2: ``[0, l2.size_bytes - l2.reserved_bytes - cores x l2.tasklist_reserved_bytes_per_core)``;
  the system's reservation and the cores' tasklist windows above;
* DDR: ``[0, ddr.size_bytes - ddr.reserved_bytes)``; the compiler's reservation above;
* the host's memory is not checked.

An access that starts or ends outside its range is a `Violation` naming the task. Where a
task says how many bytes it moves (DMA, weight loads, host transfers) the whole extent is
checked; for the compute units, whose extents follow from their layout, the first byte.
The check runs on `TaskTable` columns, so whole tasklists go at numpy speed.

>>> from aipusim.arch import load_arch
>>> from aipusim.isa.table import TaskTable
>>> from aipusim.isa.tasks import DmaCopy, Pool, Unit
>>> bad = DmaCopy(unit=Unit.DMA0, layer="c1", src_pool=Pool.DDR, src_addr=0,
...               dst_pool=Pool.L1, dst_addr=3_670_000, bytes=64)
>>> (found,) = find_violations(TaskTable.from_tasks([bad]), load_arch())
>>> found.field, found.pool, found.end, found.usable
('dst_addr', 'l1', 3670064, 3670016)
>>> str(found).startswith("task 0 (dma0 DmaCopy, layer c1): dst_addr 0x37fff0 + 64 bytes")
True
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from aipusim.arch.model import Arch
from aipusim.isa.table import TaskTable
from aipusim.isa.tasks import (
    ADD_POSTS,
    KINDS,
    DmaCopy,
    DpuOp,
    DpuThen,
    DwpuOp,
    HostTransfer,
    Mvm,
    Pool,
    PostOp,
    Unit,
    WeightLoad,
)

_POOLS = list(Pool)
_L1 = _POOLS.index(Pool.L1)
_POSTS = list(PostOp)
_UNITS = list(Unit)


@dataclass(frozen=True)
class Violation:
    """One access of task ``index`` outside the usable part of its pool."""

    index: int
    kind: str
    unit: str
    layer: str
    field: str
    pool: str
    addr: int
    end: int
    usable: int
    reserved: int

    def __str__(self) -> str:
        where = f"task {self.index} ({self.unit} {self.kind}, layer {self.layer or '-'})"
        size = self.end - self.addr
        span = f"{self.field} {self.addr:#x}" + (f" + {size} bytes" if size > 1 else "")
        return (
            f"{where}: {span} ends at byte {self.end} of {self.pool}, beyond its "
            f"{self.usable} usable bytes (the {self.reserved} bytes above are reserved)"
        )


def usable_bytes(arch: Arch) -> dict[str, tuple[int, int]]:
    """(usable bytes, reserved bytes above them) of each checked pool."""
    windows = arch.chip.cores * arch.l2.tasklist_reserved_bytes_per_core
    return {
        Pool.L1.value: (arch.l1.budget_bytes, arch.l1.reserved_bytes),
        Pool.L2.value: (arch.l2_budget_bytes, arch.l2.reserved_bytes + windows),
        Pool.DDR.value: (arch.ddr.size_bytes - arch.ddr.reserved_bytes, arch.ddr.reserved_bytes),
    }


def _extent(table: TaskTable, side: str) -> np.ndarray:
    """Bytes one side of a DMA spans: ``planes`` x ``rows`` runs at its strides (a stride
    of 0 reads or writes the same run again)."""
    nbytes = table["bytes"].astype(np.int64)
    rows = np.maximum(table["rows"].astype(np.int64), 1)
    planes = np.maximum(table["planes"].astype(np.int64), 1)
    run = -(-nbytes // (rows * planes))
    row_step = table[f"{side}_stride"].astype(np.int64)
    plane_step = table[f"{side}_plane_stride"].astype(np.int64)
    return (planes - 1) * plane_step + (rows - 1) * row_step + run


def _accesses(table: TaskTable) -> Iterator[tuple[type, str, np.ndarray, np.ndarray]]:
    """(kind, address field, pool index per row, bytes per row) of every address field."""
    n = len(table)
    l1 = np.full(n, _L1)
    one = np.ones(n, np.int64)
    yield DmaCopy, "src_addr", table["src_pool"], _extent(table, "src")
    yield DmaCopy, "dst_addr", table["dst_pool"], _extent(table, "dst")
    yield WeightLoad, "src_addr", l1, table["bytes"].astype(np.int64)
    yield HostTransfer, "addr", table["pool"], table["bytes"].astype(np.int64)
    mvm_fields = ("in_addr", "out_addr", "add_addr")
    for kind, fields in ((Mvm, mvm_fields), (DwpuOp, ("in_addr", "out_addr"))):
        for field in fields:
            yield kind, field, l1, one
    for field in ("in_addr0", "in_addr1", "in_addr2", "out_addr"):
        yield DpuOp, field, l1, one


def _layer(table: TaskTable, i: int) -> str:
    index = int(table["layer"][i])
    return table.strings[index] if index < len(table.strings) else ""


def find_violations(table: TaskTable, arch: Arch) -> list[Violation]:
    """Every access of ``table``'s tasks outside the usable part of its pool, in task order."""
    limits = usable_bytes(arch)
    opcode = table["opcode"]
    found: list[Violation] = []
    for kind, field, pools, sizes in _accesses(table):
        rows = opcode == kind.OPCODE
        if kind is DpuOp and field == "in_addr1":
            rows &= table["operands"] >= 2  # the second operand, when there is one
        if kind is DpuOp and field == "in_addr2":  # a second step's operand, when there is one
            rows &= table["then"] != list(DpuThen).index(DpuThen.NONE)
        if kind is Mvm and field == "add_addr":  # the residual operand, when there is one
            rows &= np.isin(table["post"], [_POSTS.index(p) for p in ADD_POSTS])
        if not rows.any():
            continue
        addr = table[field].astype(np.uint64)
        for pool_value, (usable, reserved) in limits.items():
            mask = rows & (pools == _POOLS.index(Pool(pool_value)))
            if not mask.any():
                continue
            # compared as unsigned: an address near 2^64 is out of range, not negative
            end = addr + np.maximum(sizes, 1).astype(np.uint64)
            bad = mask & ((addr >= usable) | (end > usable) | (end < addr))
            for i in np.flatnonzero(bad):
                found.append(
                    Violation(
                        index=int(i),
                        kind=KINDS[int(opcode[i])].__name__,
                        unit=_UNITS[int(table["unit"][i])].value,
                        layer=_layer(table, int(i)),
                        field=field,
                        pool=pool_value,
                        addr=int(addr[i]),
                        end=int(addr[i]) + int(max(sizes[i], 1)),
                        usable=usable,
                        reserved=reserved,
                    )
                )
    return sorted(found, key=lambda v: (v.index, v.field))


__all__ = ["Violation", "find_violations", "usable_bytes"]
