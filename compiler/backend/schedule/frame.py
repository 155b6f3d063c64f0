"""The frame walk of a build: which steps each core runs for each layer group, in order.

`emit_steps` makes every step of one build with its data dependencies: INIT (constants
and resident weights on chip, `weights.WeightStreamer.emit_init`), then the frame's input
transfers, every fusion group on each core that works on it (every row tile of every
layer, `tiles.TileEmitter`; a layout layer's copies), the barriers after the groups the
cooperative driver chose (`barriers.choose_barriers`), and the output transfers. The
memory and token parts come after (`memdeps`, `tokens`).

Knobs: ``inter_operator_async`` (off: a fence before each group), and
``unroll_prologue_epilogue`` (off: each group's prologue waits for the previous group's
epilogue).
"""

from __future__ import annotations

from aipusim.compiler.backend.common.layout import Split
from aipusim.compiler.backend.lower.layer import LayerUnit, activation_bytes
from aipusim.compiler.backend.schedule.compute import emit_layer_tile
from aipusim.compiler.backend.schedule.inputs import ScheduleInputs
from aipusim.compiler.backend.schedule.steps import FrameSteps, StepLog
from aipusim.compiler.backend.schedule.tiles import TileEmitter
from aipusim.compiler.backend.schedule.weight_plan import WeightPlan
from aipusim.compiler.backend.schedule.weights import WeightStreamer
from aipusim.compiler.backend.tile.regions import group_rows
from aipusim.compiler.backend.tile.tiler import FusionGroup
from aipusim.isa.tasks import Barrier, HostTransfer, Unit
from aipusim.isa.tasks import Direction as Dir


class FrameWalk:
    """The steps of one build, made in program order (see the module docstring)."""

    def __init__(
        self, inp: ScheduleInputs, wplan: WeightPlan, barrier_after: frozenset[int]
    ) -> None:
        self.inp = inp
        # cooperative: the groups after which every core meets at a barrier
        # (`barriers.choose_barriers`); the input transfer is always followed by one
        self.barrier_after = barrier_after
        self.log = StepLog(inp.target, inp.layout.replicate)
        self.weights = WeightStreamer(inp, self.log, wplan)
        self.tiles = TileEmitter(inp, self.log, self.weights)
        self.barrier_id = 0
        self.group_barriers: set[int] = set()  # the Barrier steps after a group

    # -- the frame -------------------------------------------------------------------------
    def emit_frame(self) -> None:
        """The frame: the input transfers, every group on its cores (with the barriers
        after the groups in ``barrier_after``), the output transfers."""
        cores = self.inp.layout.all_cores
        self.log.group = -1  # the input transfers come before every group
        for core in cores if self.inp.layout.replicate else [0]:
            for name in self.inp.graph.inputs:
                sid = self.host_transfer(core, name, Dir.H2D, set())
                self.tiles.produced[(self.inp.copy_key(core), name)].append(sid)
        if self.inp.layout.cooperative and len(cores) > 1:
            self.emit_barriers(None)
        prev_by_core: dict[int, list[int]] = {}
        for g in self.inp.groups:
            self.log.group = g.index
            for core in self.inp.layout.group_cores(g.index):
                self.emit_group(g, core, prev_by_core)
            if self.inp.layout.cooperative and len(cores) > 1 and g.index in self.barrier_after:
                self.emit_barriers(g)
        self.log.group = len(self.inp.groups)  # the output transfers, after every group
        for core in cores:
            if self.inp.layout.pipeline and core != self.inp.layout.core_of_group.get(
                self.inp.groups[-1].index, 0
            ):
                continue
            if self.inp.layout.cooperative and core != 0:
                continue
            for name in self.inp.graph.outputs:
                deps = set(self.tiles.produced.get((self.inp.copy_key(core), name), ()))
                self.host_transfer(core, name, Dir.D2H, deps)

    def host_transfer(self, core: int, tensor: str, direction: Dir, deps: set[int]) -> int:
        """The host's transfer of a graph input (H2D) or output (D2H) into or out of
        ``core``'s buffer of it."""
        buf = self.inp.buffer(tensor, core)
        fields = dict(
            direction=direction,
            pool=buf.pool,
            addr=buf.addr,
            bytes=activation_bytes(self.inp.graph, tensor),
        )
        layer = "input" if direction is Dir.H2D else "output"
        return self.log.add(
            core, Unit.CTRL, HostTransfer, fields, layer=layer, deps=deps, touches=(buf.name,)
        )

    def emit_group(self, g: FusionGroup, core: int, prev_by_core: dict[int, list[int]]) -> None:
        """Group ``g``'s steps on ``core``: a layout layer's copies, or every row tile of
        every layer of the group (``prev_by_core``: each core's previous group's steps,
        for the fences of ``inter_operator_async`` and ``unroll_prologue_epilogue``)."""
        prev = prev_by_core.get(core, [])
        prologue: set[int] = set()
        if not self.inp.cfg.inter_operator_async and prev:
            self.log.fence[core] = set(prev)
        elif not self.inp.cfg.unroll_prologue_epilogue and prev:
            prologue = set(prev[-2:])  # the previous group's epilogue
        emitted: list[int] = []
        first_layer = self.inp.layers[g.layers[0]]
        if first_layer.unit in (LayerUnit.DMA, LayerUnit.ALIAS):
            if first_layer.unit is LayerUnit.DMA and (
                core == 0
                or self.inp.layout.replicate
                or self.inp.layout.pipeline
                or self.inp.layout.shared_copies
            ):
                emitted = self.tiles.emit_dma_layer(core, first_layer, prologue)
        else:
            part, parts, split = self.inp.part_of(g.layers[-1], core)
            if self.inp.layout.cooperative and split is Split.NONE and core != 0:
                parts = 0  # too small to split: core 0 runs it alone
            elif split is not Split.ROWS:
                part, parts = 0, 1  # channels are split inside the layer
            layers = [self.inp.layers[li] for li in g.layers]
            for hi in range(g.h_tiles if parts else 0):
                rows = group_rows(layers, hi, g.h_tiles, part, parts)
                for li, layer, span in zip(g.layers, layers, rows, strict=True):
                    emitted += emit_layer_tile(self.tiles, li, layer, core, hi, span, prologue)
                prologue = set()
            self.tiles.flush_stores(core)
            emitted += self.tiles.flushed.pop(core, [])
        if emitted:
            prev_by_core[core] = emitted
        self.log.fence[core] = set()

    def emit_barriers(self, g: FusionGroup | None) -> None:
        """Cooperative: every core reaches the barrier after its steps since its last one,
        up to its part of group ``g`` (None: the input transfer); the later tasks wait for
        it."""
        self.barrier_id += 1
        mask = (1 << self.inp.layout.cores) - 1
        name = self.inp.layers[g.layers[-1]].name if g is not None else "input"
        for core in self.inp.layout.all_cores:
            mine = self.log.epoch_steps.get((core, self.log.epoch), [])
            sid = self.log.add(
                core,
                Unit.CTRL,
                Barrier,
                dict(barrier_id=self.barrier_id, core_mask=mask),
                layer=name,
                deps=set(mine),
            )
            if g is not None:
                self.group_barriers.add(sid)
            self.log.fence[core] = {sid}
        self.log.epoch += 1


def emit_steps(
    inp: ScheduleInputs, wplan: WeightPlan, barrier_after: frozenset[int] = frozenset()
) -> FrameSteps:
    """Every step of one build with its data dependencies (no memory reuse, no order, no
    tokens yet)."""
    walk = FrameWalk(inp, wplan, barrier_after)
    walk.weights.emit_init()
    walk.emit_frame()
    return FrameSteps(
        steps=walk.log.steps,
        buf_access=walk.log.buf_access,
        produced=walk.tiles.produced,
        group_barriers=frozenset(walk.group_barriers),
        gates=walk.weights.gates,
        fetch_loads=walk.weights.fetch_loads,
        resident=walk.weights.resident,
        incomplete=walk.tiles.incomplete,
    )


__all__ = ["FrameWalk", "emit_steps"]
