"""Pass 8, memplan: give every buffer a pool and an address by liveness (docs/architecture.md §5).

Buffers: graph inputs/outputs (home ``io_memory_pool``; a decoder's KV cache, its
``past_key_values`` inputs and the present outputs appended to them
(`aipusim.compiler.decoder.cache_state`), in DDR and nowhere else), activations (home
``workspace_memory_pool``), weights (home ``constant_memory_pool``), DPU constants (home
``dpu_constants_home``), per-layer L1 tile buffers (input/output tiles, int32 partial sums,
weight staging), L2 staging of weights when ``use_sysdma`` brings them DDR -> L2 -> L1,
and the tasklist image when it lives in L2 (``elf_in_ddr = false``: the whole image, or
only the streaming window that is already reserved when ``stream_tasklist``).

Liveness is counted in steps = fusion groups in execution order; constants live for the
whole program; a pipeline stage's or (batch) a core's L2/DDR buffers reuse bytes only
among themselves, as other stages or cores run at the same time. Placement is first-fit
by address among the buffers live at the same time, per pool (L1 per core). Tile buffers
go first (they are what makes a layer run), then each buffer in its home pool (falling
back to a slower pool when the home is full), then, with ``enable_buffer_promotion``,
buffers move up DDR -> L2 -> L1 while they fit, most accessed bytes per byte of space
first (``split_buffer_promotion``: an L1 pass over all buffers, then an L2 pass). The
schedule works on an L1 tensor in place, so a tensor in L1 drops the tile buffers that
only copy it (`Buffer.serves`: its readers' input tiles, its producer's output tile): its
space in L1 is counted net of them, and the step's other tile buffers are placed again
around it when the bytes they free lie apart (`Planner.place_in_l1`).
``page_memory`` allocates L2/DDR in pages of ``arch.dma.burst_bytes``.
Capacities: L1 = ``l1_size_used - l1_size_reserved`` (capped by ``l1_constraint``);
L2 and DDR = ``resources_used`` x (size used - reservations), capped by the constraints.

When only L1 tile buffers fail, `UnplacedTiles` names their layers: the memplan pass tiles
them finer and tries again, up to ``max_memplan_attempts`` times; then (or when anything else
fails) `MemoryPlanError` names the buffer, its size and the free space.
`verify_memplan` proves that no two buffers live at the same time overlap and that every
pool stays within its capacity.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from aipusim.base.errors import MemoryPlanError
from aipusim.compiler.backend.common.layout import CoreLayout
from aipusim.compiler.backend.common.target import Target
from aipusim.compiler.backend.imc.plan import LayerMapping
from aipusim.compiler.backend.lower.units import LayerPlan, LayerUnit, activation_bytes, is_runtime
from aipusim.compiler.backend.multicore.exchange import host_read_tensors
from aipusim.compiler.backend.pack.constants import LayerConstants
from aipusim.compiler.backend.tile.tiler import FusionGroup, Tiling, budget_of_l1, psum_bytes
from aipusim.compiler.decoder import cache_state
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


def pool_capacities(target: Target) -> dict[Pool, int]:
    """Bytes of each pool one instance may use (L1: per core)."""
    config, arch = target.knobs, target.arch
    share = config.resources_used
    l2_free = (
        config.l2_size_used
        - config.l2_size_reserved
        - arch.chip.cores * config.l2_size_reserved_tasklist
    )
    l2 = math.floor(share * min(l2_free, arch.l2_budget_bytes))
    if config.l2_constraint is not None:
        l2 = min(l2, config.l2_constraint)
    return {Pool.L1: budget_of_l1(target), Pool.L2: l2, Pool.DDR: ddr_pool_bytes(config)}


def ddr_pool_bytes(config: Any) -> int:
    """Bytes of DDR one instance may use: ``resources_used`` x (``ddr_size_used`` -
    ``ddr_size_reserved``), capped by ``ddr_constraint``."""
    ddr = math.floor(config.resources_used * (config.ddr_size_used - config.ddr_size_reserved))
    if config.ddr_constraint is not None:
        ddr = min(ddr, config.ddr_constraint)
    return ddr


class _Builder:
    """Collects the buffers of one instance from the layers, tilings and core layout."""

    def __init__(self, inputs: PlanInputs, spared: frozenset[str] = frozenset()) -> None:
        self.layers, self.groups = inputs.layers, inputs.groups
        self.g, self.cfg = inputs.graph, inputs.target.knobs
        self.spared = spared
        self.tilings, self.mappings = inputs.tilings, inputs.mappings
        self.constants = inputs.constants
        self.layout = inputs.layout
        self.tasklist_bytes = inputs.tasklist_bytes
        self.buffers: dict[str, Buffer] = {}
        self.tensor_buffer: dict[tuple[int, str], str] = {}
        self.step_of_layer = {li: g.index for g in inputs.groups for li in g.layers}
        self.last = max(len(inputs.groups) - 1, 0)

    def add(self, buf: Buffer) -> Buffer:
        assert buf.name not in self.buffers, f"duplicate buffer {buf.name}"
        if self.layout.pipeline and buf.allowed != (Pool.L1,) and buf.kind not in TILE_KINDS:
            local = (buf.kind is BufKind.ACTIVATION and buf.allowed == _LADDER) or (
                buf.kind is BufKind.L2_STAGE
            )
            if local:
                # reused only within its stage: other stages run other frames meanwhile
                buf.stage = buf.core
            else:
                # read by two stages (or all): held for the whole frame
                buf.start, buf.end = 0, self.last
        elif self.layout.replicate and self.layout.cores > 1 and buf.allowed != (Pool.L1,):
            # batch: every core runs its own frame at its own pace and nothing orders one
            # core's buffers after another's, so L2/DDR bytes are reused within a core only
            buf.stage = buf.core
        self.buffers[buf.name] = buf
        return buf

    def frame_cores(self) -> list[int]:
        """Cores owning separate copies of frame data (-1: one shared copy)."""
        return self.layout.all_cores if self.layout.replicate else [-1]

    def build(self) -> tuple[dict[str, Buffer], dict[tuple[int, str], str]]:
        cfg = self.cfg
        io_home = _POOL_OF[cfg.io_memory_pool]
        ws_home = _POOL_OF[cfg.workspace_memory_pool]
        slots = io_slots(cfg.double_buffer, self.layout)
        fused = {t for g in self.groups for t in g.intermediates}
        host_side = (Pool.DDR, Pool.L2)  # the host writes/reads them over PCIe
        # a tensor whose buffer a graph output aliases (a final Reshape) is read by the host
        host_read = host_read_tensors(self.layers, self.g.outputs)
        # a decoder's KV cache (past inputs, present outputs) lives in DDR between steps
        cache = cache_state(self.g)
        kv = set(cache) | set(cache.values())
        for c in self.frame_cores():
            for name in self.g.inputs:
                size = activation_bytes(self.g, name)
                home = Pool.DDR if name in kv else io_home if io_home in host_side else Pool.L2
                b = self.add(
                    Buffer(
                        f"in:{name}{_sfx(c)}",
                        BufKind.INPUT,
                        size * slots,
                        # the host writes the next frame's slot while this frame runs:
                        # I/O buffers are never reused within a frame
                        0,
                        self.last,
                        home,
                        max(c, 0),
                        accesses=size,
                        allowed=(Pool.DDR,) if name in kv else host_side,
                        tensor_bytes=size,
                    )
                )
                self.tensor_buffer[(c, name)] = b.name
        for li, layer in enumerate(self.layers):
            step = self.step_of_layer[li]
            owner = self.layout.core_of_group.get(step, 0)
            for c in self.frame_cores():
                for t in layer.inputs:
                    bname = self.tensor_buffer.get((c, t))
                    if bname:
                        buf = self.buffers[bname]
                        buf.end = max(buf.end, step)
                        buf.accesses += self.g.tensor(t).size
                if layer.unit is LayerUnit.ALIAS and (c, layer.inputs[0]) in self.tensor_buffer:
                    for o in layer.outputs:
                        self.tensor_buffer[(c, o)] = self.tensor_buffer[(c, layer.inputs[0])]
                    continue
                for o in layer.outputs:
                    if o in fused:
                        continue
                    size = activation_bytes(self.g, o)
                    is_out = o in host_read
                    shared = o in self.layout.shared_tensors or self.layout.cooperative
                    allowed = host_side if (is_out or shared) else _LADDER
                    home = io_home if is_out else ws_home
                    if home not in allowed:
                        home = Pool.L2
                    if is_out and o in kv:
                        allowed, home = (Pool.DDR,), Pool.DDR
                    copies: tuple[int, ...] = ()
                    if o in self.layout.l1_exchange:
                        # a copy in every core's L1, else the shared pools (`exchange`)
                        allowed, home, copies = _LADDER, Pool.L1, tuple(self.layout.all_cores)
                    b = self.add(
                        Buffer(
                            f"act:{o}{_sfx(c)}",
                            BufKind.OUTPUT if is_out else BufKind.ACTIVATION,
                            size * (slots if is_out else 1),
                            0 if is_out else step,
                            self.last if is_out else step,
                            home,
                            max(c, 0) if c >= 0 else owner,
                            layer.name,
                            accesses=size,
                            allowed=allowed,
                            tensor_bytes=size,
                            l1_cores=copies,
                        )
                    )
                    self.tensor_buffer[(c, o)] = b.name
            self.add_constants(li, owner)
            for c in self.layout.group_cores(step):
                self.add_tiles(li, step, c)
        if not cfg.elf_in_ddr and not cfg.stream_tasklist:
            self.add(
                Buffer(
                    "tasklist",
                    BufKind.TASKLIST,
                    self.tasklist_bytes,
                    0,
                    self.last,
                    Pool.L2,
                    allowed=(Pool.L2,),
                )
            )
        return self.buffers, self.tensor_buffer

    def add_constants(self, li: int, core: int) -> None:
        """The layer's constant blobs (`constants.LayerConstants`): the weight image in the
        constant pool, parameters and constant operands in the DPU constants' home."""
        cfg = self.cfg
        layer, consts = self.layers[li], self.constants[li]
        # several cores read them: keep them where every core can (L2/DDR)
        shared = self.layout.cores > 1 and not self.layout.pipeline
        allowed = (Pool.DDR, Pool.L2) if shared else _LADDER
        for prefix, size, kind, knob in (
            ("weights", len(consts.weights), BufKind.WEIGHT, cfg.constant_memory_pool),
            ("params", len(consts.params), BufKind.DPU_CONST, cfg.dpu_constants_home),
            ("operand", len(consts.operand), BufKind.DPU_CONST, cfg.dpu_constants_home),
        ):
            if not size:
                continue
            home = _POOL_OF[knob]
            if home not in allowed:
                home = Pool.L2
            self.add(
                Buffer(
                    const_buffer(prefix, layer.name),
                    kind,
                    size,
                    0,
                    self.last,
                    home,
                    core,
                    layer.name,
                    accesses=size,
                    allowed=allowed,
                )
            )

    def add_tiles(self, li: int, step: int, core: int) -> None:
        layer, t, mapping = self.layers[li], self.tilings[li], self.mappings[li]
        consts = self.constants[li]
        l1 = (Pool.L1,)
        sfx = f"@{core}"

        def tile(name: str, kind: BufKind, size: int) -> None:
            self.add(
                Buffer(name + sfx, kind, size, step, step, Pool.L1, core, layer.name, allowed=l1)
            )

        for k, size in enumerate(t.in_tile_bytes):
            # (an input in every core's L1 is read in place: `plan_memory`)
            spared = layer.inputs[k] in self.spared and not (k == 0 and t.fused_input)
            if size and not spared:
                tile(f"tile_in{k}:{layer.name}", BufKind.TILE_IN, size * t.slots)
                self.serve(layer.inputs[k], core, f"tile_in{k}:{layer.name}{sfx}")
        if t.out_tile_bytes and (t.fused_output or layer.outputs[0] not in self.spared):
            tile(f"tile_out:{layer.name}", BufKind.TILE_OUT, t.out_tile_bytes * t.slots)
            if not t.fused_output:  # (a fused output tile is what the next layer reads)
                self.serve(layer.outputs[0], core, f"tile_out:{layer.name}{sfx}")
        if t.psum_bytes:
            size = t.psum_bytes
            if mapping is not None and layer.geometry is not None and t.out_rows:
                # the mappings the schedule uses (their ICR may differ from the tiler's)
                size = max(
                    [psum_bytes(t.out_rows, layer.geometry.out_w, tm.mapping)
                     for tm in mapping.tiles if tm.mapping.row_blocks > 1] or [size]
                )  # fmt: skip
            tile(f"psum:{layer.name}", BufKind.PSUM, size)
        if layer.unit is LayerUnit.MVM and not is_runtime(layer):
            assert mapping is not None, layer.name
            biggest = t.block_bytes or max(b.weight_bytes for b in mapping.whole.blocks)
            depth = (
                2
                if (self.cfg.imc_double_buffer_pipeline or self.cfg.imc_double_buffer_sequential)
                else 1
            )
            tile(
                f"wstage:{layer.name}",
                BufKind.WEIGHT_STAGE,
                max(t.weight_stage_bytes, depth * biggest),
            )
            if self.cfg.use_sysdma and core == self.layout.group_cores(step)[0]:
                self.add(
                    Buffer(
                        f"l2stage:{layer.name}",
                        BufKind.L2_STAGE,
                        len(consts.weights),
                        step,
                        step,
                        Pool.L2,
                        core,
                        layer.name,
                        allowed=(Pool.L2,),
                    )
                )
        if layer.unit is LayerUnit.DWPU and len(consts.weights):
            tile(f"wstage:{layer.name}", BufKind.WEIGHT_STAGE, len(consts.weights))
        staged = len(consts.params) + len(consts.operand)
        if staged:
            tile(f"dconst:{layer.name}", BufKind.DPU_CONST_STAGE, staged)

    def serve(self, tensor: str, core: int, tile_name: str) -> None:
        """Note that L1 tile buffer ``tile_name`` of ``core`` only copies ``tensor``: the
        schedule reads and writes a tensor in L1 in place (`tiles.TileEmitter`), so the
        tile is needless when this core's copy of the tensor lies in this core's L1."""
        name = self.tensor_buffer.get((core if self.layout.replicate else -1, tensor))
        buf = self.buffers.get(name) if name else None
        if buf is not None and buf.core == core and Pool.L1 in buf.allowed:
            buf.serves += (tile_name,)


def _sfx(core: int) -> str:
    return f"@{core}" if core >= 0 else ""


class Planner:
    def __init__(
        self, buffers: dict[str, Buffer], target: Target, cores: list[int], steps: int
    ) -> None:
        self.buffers = buffers
        config = self.cfg = target.knobs
        arch = self.arch = target.arch
        self.steps = steps
        caps = pool_capacities(target)
        page = arch.dma.burst_bytes if config.page_memory else arch.l1.port_bytes_per_cycle
        align = arch.l1.port_bytes_per_cycle
        self.pools: dict[tuple[Pool, int], PoolState] = {
            (Pool.L2, 0): PoolState(Pool.L2, 0, caps[Pool.L2], page),
            (Pool.DDR, 0): PoolState(Pool.DDR, 0, caps[Pool.DDR], page),
        }
        for c in cores:
            self.pools[(Pool.L1, c)] = PoolState(Pool.L1, c, caps[Pool.L1], align)

    def state(self, pool: Pool, buf: Buffer) -> PoolState:
        return self.pools[(pool, buf.core if pool is Pool.L1 else 0)]

    def try_place(self, buf: Buffer, pool: Pool) -> bool:
        if pool not in buf.allowed:
            return False
        if pool is Pool.L1 and buf.l1_cores:
            return self.place_copies(buf)
        st = self.state(pool, buf)
        addr = st.find(buf)
        if addr is None:
            return False
        st.place(buf, addr)
        return True

    def place_copies(self, buf: Buffer) -> bool:
        """A cooperative activation in L1: one copy per core of ``buf.l1_cores``, all at the
        same address (a producer's multicast writes every copy at its own offset)."""
        states = [self.pools[(Pool.L1, c)] for c in buf.l1_cores]
        addr = states[0].find(buf, [r for st in states for r in st.busy(buf)])
        if addr is None:
            return False
        for st in states:
            st.place(buf, addr)
        return True

    def place_mandatory(self) -> list[Buffer]:
        """Place tile buffers, then every buffer at home (or slower); the failures."""
        order = sorted(
            self.buffers.values(),
            key=lambda b: (b.allowed != (Pool.L1,), b.start, -b.size_bytes),
        )
        failed = []
        for buf in order:
            home_rank = _LADDER.index(buf.home)
            for pool in reversed(_LADDER[: home_rank + 1]):
                if self.try_place(buf, pool):
                    break
            else:
                failed.append(buf)
        return failed

    def l1_space_bytes(self, buf: Buffer) -> int:
        """Bytes of L1 ``buf`` takes when promoted there: its size less the tile buffers it
        makes needless (`Buffer.serves`); at least 1."""
        freed = sum(self.buffers[n].size_bytes for n in buf.serves if n in self.buffers)
        return max(1, buf.size_bytes - freed)

    def promote(self) -> None:
        """Move buffers up the ladder while they fit, most accessed bytes per byte of space
        first. A tensor's space in L1 is net of the tile buffers that only copy it
        (`l1_space_bytes`): an untiled layer's output tile and its reader's input tile are
        each as big as the tensor, so keeping the tensor in L1 frees more than it takes."""
        movable = [b for b in self.buffers.values() if len(b.allowed) > 1]
        movable.sort(key=lambda b: (-b.accesses / self.l1_space_bytes(b), b.size_bytes, b.name))
        passes = (
            [(Pool.L1,), (Pool.L2,)] if self.cfg.split_buffer_promotion else [(Pool.L1, Pool.L2)]
        )
        for targets in passes:
            for buf in movable:
                for target in targets:
                    current = _LADDER.index(buf.pool)
                    if _LADDER.index(target) <= current or target not in buf.allowed:
                        continue  # (the host reaches DDR and L2 only)
                    old = buf.pool
                    old_state = self.state(old, buf)
                    old_state.remove(buf)
                    placed = (
                        self.place_in_l1(buf) if target is Pool.L1 else self.try_place(buf, target)
                    )
                    if placed:
                        break
                    old_state.place(buf, old_state.find(buf))

    def place_in_l1(self, buf: Buffer) -> bool:
        """Place ``buf`` in its core's L1, dropping the tile buffers it makes needless
        (`lift_tiles`). When the bytes they free lie apart, the other tile buffers live
        meanwhile (each lives for one step) are placed again around ``buf``; if one no
        longer fits, everything goes back where it was."""
        if buf.pool is not None or Pool.L1 not in buf.allowed:
            return False
        lifted = self.lift_tiles(buf)
        if self.try_place(buf, Pool.L1):
            for tile, _ in lifted:
                del self.buffers[tile.name]
            return True
        st = self.state(Pool.L1, buf)
        moved = [
            (t, t.addr)
            for t in st.by_id.values()
            if t.kind in TILE_KINDS and t.start <= buf.end and buf.start <= t.end
        ]
        for t, _ in moved:
            st.remove(t)
        if moved and self.try_place(buf, Pool.L1):
            again = []
            for t, _ in sorted(moved, key=lambda m: (-m[0].size_bytes, m[0].name)):
                if not self.try_place(t, Pool.L1):
                    break
                again.append(t)
            if len(again) == len(moved):
                for tile, _ in lifted:
                    del self.buffers[tile.name]
                return True
            for t in [*again, buf]:
                st.remove(t)
        for t, addr in [*moved, *lifted]:  # their bytes are still free: put them back
            st.place(t, addr)
        return False

    def lift_tiles(self, buf: Buffer) -> list[tuple[Buffer, int]]:
        """Take the tile buffers ``buf`` makes needless in L1 out of their pool: (buffer,
        address) of each, to drop them when ``buf`` fits there or put them back."""
        lifted = []
        for name in buf.serves:
            tile = self.buffers.get(name)
            if tile is not None and tile.pool is Pool.L1:
                addr = tile.addr
                self.state(Pool.L1, tile).remove(tile)
                lifted.append((tile, addr))
        return lifted

    def drop_idle_tiles(self) -> None:
        """Drop the tile buffers whose tensor lies in their core's L1 anyway (placed there
        at home, not by promotion): the schedule reads and writes it in place."""
        for buf in list(self.buffers.values()):
            if buf.pool is Pool.L1:
                for tile, _ in self.lift_tiles(buf):
                    del self.buffers[tile.name]

    def place_image_sources(self, last_step: int) -> None:
        """Every constant kept on chip also lies in the constants image in DDR, which INIT
        copies it from: give each such constant its DDR source (`image_source`)."""
        for buf in list(self.buffers.values()):
            if buf.kind not in CONSTANT_KINDS or buf.pool is Pool.DDR:
                continue
            src = Buffer(
                image_source(buf.name),
                BufKind.IMAGE_SOURCE,
                buf.size_bytes,
                0,
                last_step,
                Pool.DDR,
                buf.core,
                buf.layer,
                allowed=(Pool.DDR,),
            )
            self.buffers[src.name] = src
            if not self.try_place(src, Pool.DDR):
                raise self.error(src)

    def error(self, buf: Buffer) -> MemoryPlanError:
        pools = [p for p in buf.allowed if _LADDER.index(p) <= _LADDER.index(buf.home)]
        free = ", ".join(f"{p.value} {self.state(p, buf).free_bytes(buf)}" for p in pools)
        return MemoryPlanError(
            f"buffer {buf.name} ({buf.kind.value}, {buf.size_bytes} bytes) must fit a memory "
            f"pool, but the free space while it is live is: {free} bytes "
            f"(raise resources_used or the *_size_used/*_constraint limits)"
        )


class UnplacedTiles(MemoryPlanError):
    """Only L1 tile buffers failed to fit: tiling the named layers finer may help."""

    def __init__(self, message: str, layers: frozenset[str]) -> None:
        super().__init__(message)
        self.layers = layers


@dataclass(frozen=True)
class PlanInputs:
    """What one memory plan is made from: the packed IR's layers, tilings, fusion groups,
    IMC mappings and constants, the graph, the target and the core layout, the tasklist
    image's estimated size and which try this is (`plan_memory`).

    >>> PlanInputs([], [], [], [], [], None, None).attempt
    1
    """

    layers: Sequence[LayerPlan]
    tilings: Sequence[Tiling]
    groups: Sequence[FusionGroup]
    mappings: Sequence[LayerMapping | None]
    constants: Sequence[LayerConstants]
    graph: Any
    target: Target
    layout: CoreLayout = field(default_factory=CoreLayout)
    tasklist_bytes: int = 0
    attempt: int = 1


def plan_memory(inputs: PlanInputs) -> MemPlan:
    """Place every buffer (see the module docstring). Raises `UnplacedTiles` when only tile
    buffers did not fit (the caller may re-tile and try again: ``inputs.attempt`` counts the
    tries), `MemoryPlanError` when anything else did not."""
    plan = _place(inputs, frozenset())
    # Cooperative: a tensor in every core's L1 is read and written in place, so the tile
    # slots the tiler gave its reads and writes hold nothing: plan again without them,
    # which may make room for activations that fell back to L2 (`_in_l1`). A plan is kept
    # only while every tensor whose slots it left out still lands in L1.
    for _ in range(_SPARE_ROUNDS):
        spared = _in_l1(plan, inputs.layout)
        if spared == plan.spared:
            break
        try:
            again = _place(inputs, spared)
        except MemoryPlanError:
            break
        if not spared <= _in_l1(again, inputs.layout):
            break
        plan = again
    return plan


#: Plans tried without the tile slots of the tensors that lie in L1 (`plan_memory`).
_SPARE_ROUNDS = 3


def _in_l1(plan: MemPlan, layout: CoreLayout) -> frozenset[str]:
    """The cooperative tensors the plan puts in every core's L1."""
    return frozenset(
        t for t in layout.l1_exchange if (b := plan.buffer_of(t, -1)) and b.pool is Pool.L1
    )


def _place(inputs: PlanInputs, spared: frozenset[str]) -> MemPlan:
    """One placement of every buffer, without the tile slots of the tensors in ``spared``
    (`plan_memory`)."""
    config, layout, n_groups = inputs.target.knobs, inputs.layout, len(inputs.groups)
    buffers, tensor_buffer = _Builder(inputs, spared).build()
    planner = Planner(buffers, inputs.target, layout.all_cores, n_groups)
    failures = planner.place_mandatory()
    if failures:
        error = planner.error(failures[0])
        if all(b.allowed == (Pool.L1,) for b in failures):
            raise UnplacedTiles(str(error), frozenset(b.layer for b in failures))
        raise error
    if config.enable_buffer_promotion:
        planner.promote()
    planner.drop_idle_tiles()
    planner.place_image_sources(max(n_groups - 1, 0))
    plan = MemPlan(
        buffers, planner.pools, n_groups, tensor_buffer, inputs.attempt,
        io_slots(config.double_buffer, layout), spared,
    )  # fmt: skip
    verify_memplan(plan)
    return plan


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
    "PlanInputs",
    "PoolState",
    "UnplacedTiles",
    "const_buffer",
    "ddr_pool_bytes",
    "image_source",
    "plan_memory",
    "pool_capacities",
    "verify_memplan",
]
