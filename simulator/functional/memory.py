"""The memory of a functional run: byte arrays for every pool, and where a task's access
lands in them.

Address spaces (`Spaces`): the L1 of each physical core; L2 and DDR, one space per replica
where ``partition`` gives the pool a size (replica ``r`` owns ``[r * partition, (r + 1) *
partition)`` of the chip's pool), else one space the replicas share; the IMC weight sets of
each core (addressed by set index, a resource the hazard check tracks like bytes). An
address in a space is the program's address (plus the I/O slot offset): replica ``r``'s
byte ``a`` is the chip's byte ``a + r * partition``. L1 arrays are the usable part of the
pool (`aipusim.isa.addresses.usable_bytes`); L2 and DDR arrays the extent the run uses
(`Memory.reserve`, else grown on first touch), zero-filled (the system maps only the pages
a run touches).

Where an access lands (`Memory.locate`): tasks address their pools as one instance on slot
0 of its I/O buffers; the runtime relocates a FRAME task's access that lies wholly inside
an I/O buffer's slot-0 range by that buffer's slot for the frame: start ``s`` uses slot
``s % n``, the ``s``-th frame through that buffer (in batch mode every core's buffer
carries one frame per start), ``n`` the slots the runtime alternates among (as many as it
keeps starts in flight, at most the buffer's: without double buffering every frame uses
slot 0, `Memory.slots`). The slots in use must be the buffer's alone
(`Memory.check_slots`); an access across slot 0's edge belongs to another buffer the plan
placed there at another time, and is not moved. The access
must lie inside its replica's partition and inside the usable part of the chip's pool,
else a one-line `SimulationError` names the task, the pool and the range.

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

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from aipusim.arch.model import Arch
from aipusim.base.errors import SimulationError
from aipusim.isa.addresses import usable_bytes
from aipusim.isa.image import IoBuffer, MemoryMap
from aipusim.isa.tasks import DmaCopy, HostTransfer, Pool, Task


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
    """Numbering of the address spaces: L1 per core, L2 and DDR per replica (or shared),
    IMC per core."""

    def __init__(self, cores: int, replicas: int, partitioned: frozenset[str]) -> None:
        self.cores = cores
        self._shared: dict[str, list[int]] = {}
        self._names: list[tuple[str, int, int]] = [("l1", c, -1) for c in range(cores)]
        for pool in (Pool.L2.value, Pool.DDR.value):
            own = pool in partitioned and replicas > 1
            ids = []
            for r in range(replicas if own else 1):
                ids.append(len(self._names))
                self._names.append((pool, -1, r if own else -1))
            self._shared[pool] = ids
        self._imc0 = len(self._names)
        self._names += [("imc", c, -1) for c in range(cores)]
        self.count = len(self._names)

    def l1(self, pcore: int) -> int:
        return pcore

    def shared(self, pool: str, replica: int) -> int:
        """The L2 or DDR space replica ``replica`` sees."""
        ids = self._shared[pool]
        return ids[replica] if len(ids) > 1 else ids[0]

    def of_pool(self, pool: str) -> list[int]:
        """Every space of a pool."""
        if pool == Pool.L1.value:
            return list(range(self.cores))
        if pool == "imc":
            return [self._imc0 + c for c in range(self.cores)]
        return list(self._shared[pool])

    def imc(self, pcore: int) -> int:
        return self._imc0 + pcore

    def pool(self, space: int) -> str:
        return self._names[space][0]

    def core(self, space: int) -> int:
        """The physical core of a per-core space (-1: shared)."""
        return self._names[space][1]

    def name(self, space: int) -> str:
        pool, core, replica = self._names[space]
        if core >= 0:
            return f"{pool} of core {core}"
        return f"{pool} of replica {replica}" if replica >= 0 else pool


class Memory:
    """Byte arrays of every pool and the IMC weight sets of every core."""

    def __init__(
        self,
        arch: Arch,
        memory_map: MemoryMap,
        replicas: int,
        cores_per_replica: int,
        io_slots: int = 1,
    ) -> None:
        self.arch = arch
        #: Starts the runtime keeps in flight per I/O buffer (double buffering, pipeline
        #: stages): a buffer of more slots uses only that many.
        self.io_slots = io_slots
        self.map = memory_map
        self.cores_per_replica = cores_per_replica
        usable = usable_bytes(arch)
        self.limit = {Pool(k): v[0] for k, v in usable.items()}
        self.partition = {
            Pool(k): int(v)
            for k, v in (memory_map.partition or {}).items()
            if k in ("l2", "ddr") and int(v) > 0
        }
        parted = frozenset(p.value for p in self.partition)
        self.spaces = Spaces(arch.chip.cores, replicas, parted)
        self.data: list[np.ndarray] = [np.zeros(0, np.uint8) for _ in range(self.spaces.count)]
        for space in self.spaces.of_pool(Pool.L1.value):
            self.data[space] = np.zeros(self.limit[Pool.L1], np.uint8)
        mvm = arch.mvm
        #: Per physical core: every weight set as float32 (the product runs as a BLAS GEMM).
        self.weights = [
            np.zeros((mvm.weight_sets, mvm.rows, mvm.cols), np.float32)
            for _ in range(arch.chip.cores)
        ]
        #: Per physical core and set: (rows, cols) the last `WeightLoad` wrote (0, 0: none).
        self.loaded = [[(0, 0)] * mvm.weight_sets for _ in range(arch.chip.cores)]
        #: Per physical core and set: the column sums a `WeightLoad` with ``col_sums`` kept
        #: (None: its last load kept none).
        self.col_sums: list[list[np.ndarray | None]] = [
            [None] * mvm.weight_sets for _ in range(arch.chip.cores)
        ]
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

    def reserve(self, pool: Pool, end: int) -> None:
        """Size every space of ``pool`` for the run's extent ``end`` at once (no growing)."""
        for space in self.spaces.of_pool(pool.value):
            self.array(space, end)

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
        lo, hi = addr + delta, addr + delta + nbytes
        if pool is Pool.L1:
            space = self.spaces.l1(self.physical_core(where.replica, core))
        else:
            space = self.spaces.shared(pool.value, where.replica)
        part = self.partition.get(pool, 0)
        if part and hi > part:
            raise SimulationError(
                f"{where.label}: {pool.value} access {lo:#x}..{hi:#x} lies outside the "
                f"{part} bytes of {pool.value} one replica owns (model.json partition)"
            )
        limit = self.limit[pool]
        offset = where.replica * part
        if lo < 0 or hi + offset > limit:
            raise SimulationError(
                f"{where.label}: {pool.value} access {lo + offset:#x}..{hi + offset:#x} lies "
                f"outside the {limit} usable bytes of {pool.value}"
            )
        self.array(space, hi)
        return space, delta

    def _slot_delta(self, pool: Pool, addr: int, nbytes: int, where: Where, core: int) -> int:
        """The I/O slot offset of an access (0 outside every I/O buffer and in INIT)."""
        if where.phase < 0:
            return 0
        for buf in self._io.get(pool, ()):
            if pool is Pool.L1 and buf.core != core:
                continue
            # only an access inside slot 0 is the buffer's: the memory plan may give its
            # bytes to other buffers at other times (an access across the edge is theirs)
            if buf.addr <= addr and addr + nbytes <= buf.addr + buf.bytes:
                return (where.phase % self.slots(buf)) * buf.bytes
        return 0

    def slots(self, buf: IoBuffer) -> int:
        """The slots of ``buf`` the run uses: the runtime alternates among as many as it
        keeps starts in flight (one without double buffering), at most the buffer's."""
        return max(1, min(buf.slots, self.io_slots))

    def check_slots(self) -> None:
        """Slots in use must be their buffer's alone: accesses into slot 0 move to the
        frame's slot, so another buffer of the memory plan there would move too."""
        for buf in self.map.io:
            n = self.slots(buf)
            if n < 2:
                continue
            lo, hi = buf.addr, buf.addr + n * buf.bytes
            for other in self.map.buffers:
                if other.pool != buf.pool or (buf.pool == Pool.L1.value and other.core != buf.core):
                    continue
                if other.addr == lo and other.addr + other.bytes <= hi:
                    continue  # the I/O buffer's own entry
                if other.addr < hi and lo < other.addr + other.bytes:
                    raise SimulationError(
                        f"I/O buffer {buf.name} uses {n} slots ({buf.pool} {lo:#x}..{hi:#x}), "
                        f"but the memory plan also places {other.name} at "
                        f"{other.addr:#x}..{other.addr + other.bytes:#x}: a frame's accesses "
                        "into slot 0 move to its slot, so the slots must be the buffer's alone "
                        "(run with double_buffer=false, or compile with the slots reserved)"
                    )

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


def extents(memory_map: MemoryMap, tasks: Iterable[Task | None]) -> dict[Pool, int]:
    """The end of what a run can touch in L2 and DDR (program addresses): the constants
    image, every slot of the I/O buffers, the tensors, every DMA and host-transfer extent."""
    end = {Pool.L2: 0, Pool.DDR: 0}

    def grow(pool: str | Pool, hi: int) -> None:
        if pool in end:
            end[Pool(pool)] = max(end[Pool(pool)], hi)

    const = memory_map.constants
    grow(Pool.DDR, const.addr + const.bytes)
    for buf in memory_map.io:
        grow(buf.pool, buf.addr + buf.slots * buf.bytes)
    for place in memory_map.tensors:
        grow(place.pool, place.addr + place.bytes)
    for t in tasks:
        if isinstance(t, DmaCopy):
            planes, rows = max(t.planes, 1), max(t.rows, 1)
            run = t.bytes // (planes * rows)
            src = t.src_addr + (planes - 1) * t.src_plane_stride + (rows - 1) * t.src_stride
            dst = t.dst_addr + (planes - 1) * t.dst_plane_stride + (rows - 1) * t.dst_stride
            grow(t.src_pool, src + run)
            grow(t.dst_pool, dst + run)
        elif isinstance(t, HostTransfer):
            grow(t.pool, t.addr + t.bytes)
    return end


__all__ = ["Memory", "Spaces", "Where", "extents"]
