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
from typing import Any

from aipusim.base.errors import MemoryPlanError
from aipusim.compiler.backend.common.layout import CoreLayout
from aipusim.compiler.backend.common.target import Target
from aipusim.compiler.backend.memplan.buffers import (
    _LADDER,
    CONSTANT_KINDS,
    TILE_KINDS,
    Buffer,
    BufKind,
    MemPlan,
    PoolState,
    image_source,
    io_slots,
    verify_memplan,
)
from aipusim.compiler.backend.memplan.build import PlanInputs, _Builder
from aipusim.compiler.backend.tile.tiler import budget_of_l1
from aipusim.isa.tasks import Pool


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


__all__ = [
    "UnplacedTiles",
    "ddr_pool_bytes",
    "plan_memory",
    "pool_capacities",
]
