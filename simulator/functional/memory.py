"""The memory of a functional run: byte arrays for every pool, and where a task's access
lands in them.

Address spaces (`Spaces`): the L1 of each physical core, the shared L2, DDR, and the IMC
weight sets of each core (addressed by set index, a resource the hazard check tracks like
bytes). L1 and L2 are zero-filled arrays of the part of the pool a program may use
(`aipusim.isa.addresses.usable_bytes`; the system only maps the pages a run touches); DDR,
gigabytes, grows on first touch to what the run uses (so take its array after declaring
every DDR operand of a task).

Where an access lands (`Memory.locate`): tasks address their pools as one instance on
slot 0 of its I/O buffers; the runtime relocates

- a FRAME task's access whose first byte lies in an I/O buffer's slot-0 range by that
  buffer's slot for the frame (start ``s`` uses slot ``s % slots``: the ``s``-th frame
  through that buffer; in batch mode every core's buffer carries one frame per start);
  the whole access must then lie in the slot;
- an access of replica ``r`` to L2 or DDR by ``r * partition[pool]`` (a pool without a
  partition is shared by the replicas);

and the relocated access must lie inside the usable part of its pool, else a one-line
`SimulationError` names the task, the pool and the range.

>>> from aipusim.arch import load_arch
>>> from aipusim.isa.image import ConstantImage, MemoryMap
>>> mem = Memory(load_arch(), MemoryMap(ConstantImage("c.bin", 0, 0), (), ()), 1, 1)
>>> space, delta = mem.locate(Pool.L1, 0x100, 64, Where(0, 0, 0, 0, "a task"))
>>> mem.spaces.name(space), delta
('l1 of core 0', 0)
>>> mem.locate(Pool.L1, 3_670_000, 64, Where(0, 0, 0, 0, "core 0 dma0 task 3 (layer 'x')"))
Traceback (most recent call last):
...
aipusim.base.errors.SimulationError: core 0 dma0 task 3 (layer 'x'): l1 access \
0x37fff0..0x380030 lies outside the 3670016 usable bytes of l1
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aipusim.arch.model import Arch
from aipusim.base.errors import SimulationError
from aipusim.isa.addresses import usable_bytes
from aipusim.isa.image import IoBuffer, MemoryMap
from aipusim.isa.tasks import Pool


@dataclass(frozen=True, slots=True)
class Where:
    """Who accesses memory: replica, physical core, logical core, phase (-1: INIT; else
    the start index) and a label naming the task in errors."""

    replica: int
    pcore: int
    lcore: int
    phase: int
    label: str


class Spaces:
    """Numbering of the address spaces of a chip with ``cores`` cores."""

    def __init__(self, cores: int) -> None:
        self.cores = cores
        self.l2 = cores
        self.ddr = cores + 1
        self.count = 2 * cores + 2

    def l1(self, pcore: int) -> int:
        return pcore

    def imc(self, pcore: int) -> int:
        return self.cores + 2 + pcore

    def pool(self, space: int) -> str:
        if space < self.cores:
            return Pool.L1.value
        if space == self.l2:
            return Pool.L2.value
        if space == self.ddr:
            return Pool.DDR.value
        return "imc"

    def core(self, space: int) -> int:
        """The physical core of a per-core space (-1: shared)."""
        if space < self.cores:
            return space
        return space - self.cores - 2 if space > self.ddr else -1

    def name(self, space: int) -> str:
        pool, core = self.pool(space), self.core(space)
        return pool if core < 0 else f"{pool} of core {core}"


class Memory:
    """Byte arrays of every pool and the IMC weight sets of every core."""

    def __init__(
        self, arch: Arch, memory_map: MemoryMap, replicas: int, cores_per_replica: int
    ) -> None:
        self.arch = arch
        self.map = memory_map
        self.spaces = Spaces(arch.chip.cores)
        self.cores_per_replica = cores_per_replica
        usable = usable_bytes(arch)
        self.limit = {Pool(k): v[0] for k, v in usable.items()}
        self.partition = {
            Pool(k): int(v) for k, v in (memory_map.partition or {}).items() if k in ("l2", "ddr")
        }
        self.data: list[np.ndarray] = [np.zeros(0, np.uint8) for _ in range(self.spaces.count)]
        for space in range(self.spaces.count):
            pool = self.spaces.pool(space)
            if pool in (Pool.L1.value, Pool.L2.value):
                self.data[space] = np.zeros(self.limit[Pool(pool)], np.uint8)
        mvm = arch.mvm
        #: Per physical core: every weight set as float32 (the product runs as a BLAS GEMM).
        self.weights = [
            np.zeros((mvm.weight_sets, mvm.rows, mvm.cols), np.float32)
            for _ in range(arch.chip.cores)
        ]
        #: Per physical core and set: (rows, cols) the last `WeightLoad` wrote (0, 0: none).
        self.loaded = [[(0, 0)] * mvm.weight_sets for _ in range(arch.chip.cores)]
        self._io: dict[Pool, list[IoBuffer]] = {}
        for buf in memory_map.io:
            self._io.setdefault(Pool(buf.pool), []).append(buf)
        self.replicas = replicas

    # -- arrays --------------------------------------------------------------------------
    def array(self, space: int, end: int) -> np.ndarray:
        """The byte array of ``space``, grown (zero-filled) to hold byte ``end - 1``."""
        data = self.data[space]
        if end > len(data):
            grown = np.zeros(max(end, 2 * len(data), 1 << 16), np.uint8)
            grown[: len(data)] = data
            self.data[space] = data = grown
        return data

    def pool_limit(self, pool: Pool) -> int:
        return self.limit[pool]

    def physical_core(self, replica: int, lcore: int) -> int:
        return replica * self.cores_per_replica + lcore

    # -- where an access lands -----------------------------------------------------------
    def locate(
        self, pool: Pool, addr: int, nbytes: int, where: Where, lcore: int | None = None
    ) -> tuple[int, int]:
        """(space, delta) of an access of ``nbytes`` from program address ``addr`` in
        ``pool`` (L1: of logical core ``lcore``, default the accessing core): the byte at
        ``a`` lands at ``a + delta`` of the space's array (see the module docstring)."""
        if pool not in self.limit:
            raise SimulationError(
                f"{where.label}: pool must be one of l1, l2, ddr for a functional run, "
                f"not {pool.value}"
            )
        core = where.lcore if lcore is None else lcore
        delta = self._slot_delta(pool, addr, nbytes, where, core)
        if pool is Pool.L1:
            space = self.spaces.l1(self.physical_core(where.replica, core))
        else:
            space = self.spaces.l2 if pool is Pool.L2 else self.spaces.ddr
            delta += where.replica * self.partition.get(pool, 0)
        lo, hi = addr + delta, addr + delta + nbytes
        limit = self.limit[pool]
        if addr < 0 or lo < 0 or hi > limit:
            raise SimulationError(
                f"{where.label}: {pool.value} access {lo:#x}..{hi:#x} lies outside the "
                f"{limit} usable bytes of {pool.value}"
            )
        self.array(space, hi)
        return space, delta

    def _slot_delta(self, pool: Pool, addr: int, nbytes: int, where: Where, core: int) -> int:
        if where.phase < 0:
            return 0
        for buf in self._io.get(pool, ()):
            if pool is Pool.L1 and buf.core != core:
                continue
            lo, hi = buf.addr, buf.addr + buf.bytes
            if addr + nbytes <= lo or addr >= hi:
                continue
            if not (lo <= addr and addr + nbytes <= hi):
                raise SimulationError(
                    f"{where.label}: {pool.value} access {addr:#x}..{addr + nbytes:#x} must lie "
                    f"inside or outside I/O buffer {buf.name} ({lo:#x}..{hi:#x}), not across "
                    "its edge"
                )
            return (where.phase % buf.slots) * buf.bytes
        return 0

    def load_constants(self, image: np.ndarray) -> None:
        """Write the constants image into DDR at its address, once per replica."""
        const = self.map.constants
        if len(image) != const.bytes:
            raise SimulationError(
                f"constants image {const.file} must hold the {const.bytes} bytes model.json "
                f"records, not {len(image)}"
            )
        for r in range(self.replicas):
            where = Where(r, self.physical_core(r, 0), 0, -1, f"constants image {const.file}")
            space, delta = self.locate(Pool.DDR, const.addr, const.bytes, where)
            lo = const.addr + delta
            self.data[space][lo : lo + const.bytes] = image

    def io_slot(self, buf: IoBuffer, replica: int, start: int) -> tuple[int, int]:
        """(space, address) of the slot start ``start`` of ``replica`` uses in ``buf``."""
        pool = Pool(buf.pool)
        core = max(buf.core, 0)
        where = Where(replica, self.physical_core(replica, core), core, start, f"I/O {buf.name}")
        space, delta = self.locate(pool, buf.addr, buf.bytes, where, core)
        return space, buf.addr + delta


__all__ = ["Memory", "Spaces", "Where"]
