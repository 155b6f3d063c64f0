"""The memory plan's data (docs/architecture.md §5): the `Buffer`s a program needs, the
state of each pool while they are placed (`PoolState`), the finished `MemPlan`, and
`verify_memplan`, which proves a plan sound. How buffers are collected is `build`, how
they are placed is `plan`.

>>> const_buffer("weights", "conv1"), image_source("weights:conv1")
('weights:conv1', 'image:weights:conv1')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from aipusim.base.errors import MemoryPlanError
from aipusim.compiler.backend.common.layout import CoreLayout
from aipusim.isa.tasks import Pool

_POOL_OF = {"global.ddr": Pool.DDR, "global.l2": Pool.L2, "global.l1": Pool.L1}
#: Slowest first: where a buffer falls back to, and the order promotion climbs.
_LADDER = (Pool.DDR, Pool.L2, Pool.L1)


class BufKind(StrEnum):
    INPUT = "input"
    OUTPUT = "output"
    ACTIVATION = "activation"
    WEIGHT = "weight"
    DPU_CONST = "dpu_const"
    TILE_IN = "tile_in"
    TILE_OUT = "tile_out"
    PSUM = "psum"
    WEIGHT_STAGE = "weight_stage"
    L2_STAGE = "l2_stage"
    DPU_CONST_STAGE = "dpu_const_stage"
    TASKLIST = "tasklist"
    IMAGE_SOURCE = "image_source"  # the DDR copy of a constant kept on chip


#: A layer's L1 working buffers, live for its step only (placed before everything else).
TILE_KINDS = frozenset(
    {
        BufKind.TILE_IN,
        BufKind.TILE_OUT,
        BufKind.PSUM,
        BufKind.WEIGHT_STAGE,
        BufKind.DPU_CONST_STAGE,
    }
)


#: Buffers whose content is the constants image's.
CONSTANT_KINDS = frozenset({BufKind.WEIGHT, BufKind.DPU_CONST})


def const_buffer(prefix: str, layer: str) -> str:
    """Name of a layer's constant blob buffer: ``weights:conv1``, ``params:conv1``."""
    return f"{prefix}:{layer}"


def image_source(name: str) -> str:
    """Name of the DDR source of a constant buffer kept on chip."""
    return f"image:{name}"


@dataclass
class Buffer:
    """A block of memory live from step ``start`` to step ``end`` (inclusive)."""

    name: str
    kind: BufKind
    size_bytes: int
    start: int
    end: int
    home: Pool
    core: int = 0  # owning core (matters for L1)
    layer: str = ""
    accesses: int = 0  # bytes read + written per frame (promotion priority)
    allowed: tuple[Pool, ...] = _LADDER  # pools this buffer may live in
    tensor_bytes: int = 0  # bytes of ONE copy of the tensor held (activations and I/O)
    # the timeline an L2/DDR buffer is reused within (pipeline: its stage, batch: its
    # core); buffers of two timelines never share bytes
    stage: int = -1
    #: L1 tile buffers that only copy this tensor (a reader's input tile, the producer's
    #: output tile, on the core of this copy): needless once the tensor itself is in L1
    serves: tuple[str, ...] = ()
    #: cooperative: the cores holding a copy each, at one L1 address (empty: ``core``'s)
    l1_cores: tuple[int, ...] = ()
    pool: Pool | None = None
    addr: int = -1

    def overlaps_in_time(self, other: Buffer) -> bool:
        if self.stage >= 0 and other.stage >= 0 and self.stage != other.stage:
            return True  # two timelines run (different frames or cores) at the same time
        return self.start <= other.end and other.start <= self.end


@dataclass
class PoolState:
    pool: Pool
    core: int
    capacity: int
    align: int
    #: the placed buffers by `id`, in the order they were placed: removing one is a dict
    #: delete, where a list had to be searched (L1 promotion removes and puts back about
    #: 9.5 k buffers in a one-core ResNet-50 compile)
    by_id: dict[int, Buffer] = field(default_factory=dict)

    @property
    def placed(self) -> list[Buffer]:
        """The placed buffers, in the order they were placed."""
        return list(self.by_id.values())

    def busy(self, buf: Buffer) -> list[tuple[int, int]]:
        """[lo, hi) of the placed buffers live at the same time as ``buf``."""
        align = self.align
        # `Buffer.overlaps_in_time` inlined: this runs for every placed buffer of every try
        stage, start, end = buf.stage, buf.start, buf.end
        return [
            (b.addr, b.addr - (-b.size_bytes // align) * align)
            for b in self.by_id.values()
            if (stage >= 0 and b.stage >= 0 and b.stage != stage)
            or (b.start <= end and start <= b.end)
        ]

    def find(self, buf: Buffer, busy: list[tuple[int, int]] | None = None) -> int | None:
        """The lowest aligned address where ``buf`` fits beside the live buffers (``busy``:
        the ranges to avoid, by default this pool's `busy`)."""
        size = _round_up(buf.size_bytes, self.align)
        addr = 0
        for lo, hi in sorted(self.busy(buf) if busy is None else busy):
            if addr + size <= lo:
                break
            addr = max(addr, hi)
        return addr if addr + size <= self.capacity else None

    def free_bytes(self, buf: Buffer) -> int:
        """Bytes not used by buffers live at the same time as ``buf``."""
        used = sum(b.size_bytes for b in self.by_id.values() if b.overlaps_in_time(buf))
        return self.capacity - used

    def place(self, buf: Buffer, addr: int) -> None:
        assert id(buf) not in self.by_id, f"{buf.name} is placed twice"
        buf.pool, buf.addr = self.pool, addr
        self.by_id[id(buf)] = buf

    def remove(self, buf: Buffer) -> None:
        # By identity: the dataclass `__eq__` compares every field (names are unique, so
        # the buffer equal to ``buf`` is ``buf`` itself)
        del self.by_id[id(buf)]
        buf.pool, buf.addr = None, -1

    @property
    def high_water_bytes(self) -> int:
        """Highest address in use (the footprint the pool needs)."""
        return max((b.addr + b.size_bytes for b in self.by_id.values()), default=0)

    @property
    def peak_live_bytes(self) -> int:
        """Most bytes live at one step."""
        events: dict[int, int] = {}
        for b in self.by_id.values():
            events[b.start] = events.get(b.start, 0) + b.size_bytes
            events[b.end + 1] = events.get(b.end + 1, 0) - b.size_bytes
        peak = live = 0
        for step in sorted(events):
            live += events[step]
            peak = max(peak, live)
        return peak


def io_slots(double_buffer: bool, layout: CoreLayout) -> int:
    """Slots of an I/O buffer: the starts the runtime keeps in flight through it, two with
    ``double_buffer``, times the stages of a pipeline (each stage works on its own frame,
    so the host feeds as many frames ahead; the simulator's host does the same).

    >>> from aipusim.isa.program import MulticoreMode
    >>> io_slots(True, CoreLayout(4, MulticoreMode.PIPELINE))
    8
    >>> io_slots(False, CoreLayout(4, MulticoreMode.BATCH))
    1
    """
    return (2 if double_buffer else 1) * (layout.cores if layout.pipeline else 1)


@dataclass
class MemPlan:
    buffers: dict[str, Buffer]
    pools: dict[tuple[Pool, int], PoolState]
    steps: int
    #: (core, activation tensor) -> buffer name, aliases resolved; core -1 = shared copy
    tensor_buffer: dict[tuple[int, str], str]
    attempts: int = 1
    #: Slots of every I/O buffer (`io_slots`).
    io_slots: int = 1
    #: Cooperative tensors in L1 whose reads and writes got no tile slots (`plan_memory`).
    spared: frozenset[str] = frozenset()

    def source_addr(self, name: str) -> int:
        """DDR address of a constant buffer's bytes in the constants image."""
        buf = self.buffers[name]
        if buf.pool is Pool.DDR:
            return buf.addr
        return self.buffers[image_source(name)].addr

    def image_range(self) -> tuple[int, int]:
        """[lo, hi) of DDR holding every constant's bytes (0, 0: none)."""
        spans = [
            (b.addr, b.addr + b.size_bytes)
            for b in self.buffers.values()
            if b.pool is Pool.DDR and (b.kind in CONSTANT_KINDS or b.kind is BufKind.IMAGE_SOURCE)
        ]
        if not spans:
            return 0, 0
        return min(lo for lo, _ in spans), max(hi for _, hi in spans)

    def buffer_of(self, tensor: str, core: int = 0) -> Buffer | None:
        name = self.tensor_buffer.get((core, tensor)) or self.tensor_buffer.get((-1, tensor))
        return self.buffers.get(name) if name else None

    def high_water(self) -> dict[str, dict[str, int]]:
        """Per pool (L1 per core): capacity, highest address used, peak live bytes."""
        out = {}
        for (pool, core), st in sorted(self.pools.items()):
            key = f"{pool.value}" if pool is not Pool.L1 else f"l1.core{core}"
            out[key] = {
                "capacity_bytes": st.capacity,
                "high_water_bytes": st.high_water_bytes,
                "peak_live_bytes": st.peak_live_bytes,
                "buffers": len(st.by_id),
            }
        return out


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def verify_memplan(plan: MemPlan) -> None:
    """Raise `MemoryPlanError` if two buffers live at the same time overlap in a pool, a
    buffer lies outside its pool, or a pool's footprint exceeds its capacity."""
    for (pool, core), st in plan.pools.items():
        where = f"{pool.value}" + (f" of core {core}" if pool is Pool.L1 else "")
        bufs = sorted(st.placed, key=lambda b: b.addr)
        for b in bufs:
            if b.addr < 0 or b.addr + b.size_bytes > st.capacity:
                raise MemoryPlanError(
                    f"buffer {b.name} must lie within {where} (0..{st.capacity}), "
                    f"not at {b.addr}..{b.addr + b.size_bytes}"
                )
        for i, a in enumerate(bufs):
            a_end = a.addr + a.size_bytes
            for b in bufs[i + 1 :]:
                if b.addr >= a_end:
                    break
                if a.overlaps_in_time(b):
                    raise MemoryPlanError(
                        f"buffers {a.name} and {b.name} must not overlap in {where}: "
                        f"{a.addr}..{a_end} and {b.addr}..{b.addr + b.size_bytes} are both "
                        f"live in steps {max(a.start, b.start)}..{min(a.end, b.end)}"
                    )
    for buf in plan.buffers.values():
        if buf.pool is None:
            raise MemoryPlanError(f"buffer {buf.name} must be placed in a pool, not left out")


__all__ = [
    "CONSTANT_KINDS",
    "TILE_KINDS",
    "BufKind",
    "Buffer",
    "MemPlan",
    "PoolState",
    "const_buffer",
    "image_source",
    "io_slots",
    "verify_memplan",
]
