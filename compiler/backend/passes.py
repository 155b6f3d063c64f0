"""The back-end passes, each a function from one IR stage to the next (`ir`).

`aipusim.compiler.pipeline` lists them by name after the front end; each reads its input
stage and the `PassContext` (the configuration for ``lower``, the pass records for
``emit``) and returns the next stage. Nothing is handed over anywhere else.

- ``lower``: nodes -> layers on units; an activation x activation MatMul goes to the MVM
  (run-time weights) or the DPU, whichever the cost model finds faster;
- ``fuse_residual``: a residual Add (and its activation) onto the output stream of the MVM
  layer writing one of its operands (`residual`);
- ``fuse_dpu_chains``: an element-wise DPU op and the activation after it in one DPU task
  (`dpu_chain`);
- ``tile``: L1 tilings and depth-first fusion groups;
- ``multicore``: the core layout (cooperative splits, pipeline stages, the shared weight
  fetch); re-tiles with ``tiling_depth`` 1 when a cooperative split would cut a fusion group;
- ``imc``: every MVM layer's IMC mappings (`imc_plan`);
- ``pack``: every layer's constant bytes as its tasks read them (`constants`);
- ``memplan``: every buffer placed; layers whose L1 tiles do not fit are tiled finer and
  mapped again, up to ``max_memplan_attempts`` tries;
- ``schedule``: every core's tasks and hardware tokens;
- ``estimate``: what every layer's tasks cost, from the one cost model;
- ``emit``: the ``compiled_model/`` files (written into the driver's aside folder as they are
  made, ``ctx.write_dir``; else left in ``ctx.files``).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from aipusim.base.errors import MemoryPlanError
from aipusim.compiler.backend.common.ir import (
    Distributed,
    Emitted,
    Estimated,
    Fused,
    Lowered,
    Mapped,
    Packed,
    Placed,
    Scheduled,
    Tiled,
)
from aipusim.compiler.backend.common.layout import CoreLayout, Split
from aipusim.compiler.backend.common.target import Target
from aipusim.compiler.backend.emit.files import emit_files
from aipusim.compiler.backend.estimate.costs import (
    PlanCost,
    estimate_layers,
    init_estimate,
    plan_cost,
)
from aipusim.compiler.backend.imc.mapper import ImcOptions, map_layer
from aipusim.compiler.backend.imc.plan import plan_mappings
from aipusim.compiler.backend.lower.attention import assign_units, head_mapping
from aipusim.compiler.backend.lower.dpu_chain import fuse_dpu_chains as fold_dpu_chains
from aipusim.compiler.backend.lower.layer import LayerUnit
from aipusim.compiler.backend.lower.residual import fuse_residual_adds
from aipusim.compiler.backend.lower.units import lower_graph, unwrap_graph
from aipusim.compiler.backend.memplan.build import PlanInputs
from aipusim.compiler.backend.memplan.placement import placement_summary
from aipusim.compiler.backend.memplan.plan import UnplacedTiles, plan_memory
from aipusim.compiler.backend.multicore.split import core_layout
from aipusim.compiler.backend.pack.constants import pack_constants
from aipusim.compiler.backend.schedule.build import build_schedule
from aipusim.compiler.backend.schedule.steps import Residency, residency_of
from aipusim.compiler.backend.tile.tiler import FusionGroup, Tiler
from aipusim.compiler.ir import Graph
from aipusim.compiler.quant.quantize import QuantizedGraph
from aipusim.isa.cost import CostModel

log = logging.getLogger(__name__)


def lower(ir: Graph | QuantizedGraph, ctx: Any) -> Lowered:
    """Put every node of the graph on the unit that runs it."""
    target = Target.of(ctx.config, ctx.get_arch())
    graph = unwrap_graph(ir)
    program = ir if isinstance(ir, QuantizedGraph) else None
    # (tiles are not cut yet: an untiled layer's weight double buffering decides)
    double = bool(target.knobs.imc_double_buffer_sequential)
    opts = ImcOptions.from_config(target.knobs)
    layers = assign_units(tuple(lower_graph(graph)), target.cost, opts, double_buffered=double)
    return Lowered(graph, program, target, layers)


def fuse_residual(ir: Lowered, ctx: Any) -> Fused:
    """Fold residual Adds (and their activations) into MVM layers (`residual`)."""
    del ctx
    layers = fuse_residual_adds(ir.layers, ir.graph, ir.program)
    return Fused(**{**_fields(ir), "layers": layers})


def fuse_dpu_chains(ir: Fused, ctx: Any) -> Fused:
    """Fold an element-wise DPU op's activation into its task (`dpu_chain`)."""
    del ctx
    layers = fold_dpu_chains(ir.layers, ir.graph, ir.program)
    return Fused(**{**_fields(ir), "layers": layers})


def tile(ir: Lowered, ctx: Any) -> Tiled:
    """Tile every layer into the L1 budget and group layers depth-first."""
    del ctx
    plan = Tiler(ir.layers, ir.target, ir.graph).run()
    return Tiled(**_fields(ir), tilings=plan.tilings, groups=plan.groups)


def multicore(ir: Tiled, ctx: Any) -> Distributed:
    """Spread the instance over ``aipu_cores_used`` cores (see `multicore.core_layout`)."""
    del ctx
    layout = core_layout(ir.layers, _tile_plan(ir), ir.target, ir.graph, _work(ir))
    if layout.cooperative and _mixed_split_groups(ir.groups, layout):
        # Depth-first fusion keeps a group's intermediate tiles in one core's L1. When the
        # cooperative split partitions the group's layers otherwise than all by rows, a core
        # would need a tile that another core produced, so the model is tiled without
        # fusion (tiling_depth 1); later passes see the same depth through the IR's target.
        log.info("cooperative split mixes partitions inside fusion groups: tiling_depth -> 1")
        target = ir.target.with_knobs(tiling_depth=1)
        plan = Tiler(ir.layers, target, ir.graph).run()
        ir = dataclasses.replace(ir, target=target, tilings=plan.tilings, groups=plan.groups)
        layout = core_layout(ir.layers, _tile_plan(ir), ir.target, ir.graph, _work(ir))
    return Distributed(**_fields(ir), layout=layout)


def imc(ir: Distributed, ctx: Any) -> Mapped:
    """Decide every MVM layer's IMC mappings (`imc_plan.plan_mappings`)."""
    del ctx
    mappings = plan_mappings(ir.layers, ir.tilings, ir.layout, ir.target)
    return Mapped(**_fields(ir), mappings=mappings)


def pack(ir: Mapped, ctx: Any) -> Packed:
    """Every layer's constant bytes, laid out as its tasks read them (`constants`)."""
    del ctx
    consts = pack_constants(ir.layers, ir.mappings, ir.graph, ir.program, ir.layout, ir.target.arch)
    return Packed(**_fields(ir), constants=consts)


def memplan(ir: Packed, ctx: Any) -> Placed:
    """Place every buffer; layers whose L1 tiles do not fit are tiled finer and mapped again
    (the tiles of a layer twice as many rows, or channels once the rows are exhausted or the
    weight staging is what overflows), at most ``max_memplan_attempts`` tries in all."""
    del ctx
    config = ir.target.knobs
    at_least: dict[int, tuple[int, int]] = {}
    tiler = Tiler(ir.layers, ir.target, ir.graph)
    for attempt in range(1, config.max_memplan_attempts + 1):
        try:
            inputs = PlanInputs(
                ir.layers, ir.tilings, ir.groups, ir.mappings, ir.constants, ir.graph, ir.target,
                ir.layout, _tasklist_estimate(ir), attempt,
            )  # fmt: skip
            plan = plan_memory(inputs)
            log.info("%s", placement_summary(plan, config)["summary"])
            return Placed(**_fields(ir), memory=plan)
        except UnplacedTiles as failed:
            if attempt == config.max_memplan_attempts:
                raise MemoryPlanError(str(failed)) from None
            for i, layer in enumerate(ir.layers):
                if layer.name not in failed.layers:
                    continue
                t = ir.tilings[i]
                stage_bound = layer.unit is LayerUnit.MVM and t.block_bytes * 2 > tiler.budget
                out_h = layer.geometry.out_h if layer.geometry else 1
                _, min_oc = at_least.get(i, (1, 1))
                if stage_bound or t.h_tiles >= out_h:
                    at_least[i] = (t.h_tiles, t.oc_tiles * 2)  # narrower weight blocks
                else:
                    at_least[i] = (t.h_tiles * 2, min_oc)
            tiles = Tiler(ir.layers, ir.target, ir.graph, at_least).run()
            ir = dataclasses.replace(ir, tilings=tiles.tilings, groups=tiles.groups)
            if ir.layout.pipeline:
                # the stage cuts are made of fusion groups, and the finer tiles group the
                # layers anew: cut again (stale cuts put groups they did not know on core 0)
                layout = core_layout(ir.layers, tiles, ir.target, ir.graph, _work(ir))
                ir = dataclasses.replace(ir, layout=layout)
            mappings = plan_mappings(ir.layers, ir.tilings, ir.layout, ir.target)
            consts = pack_constants(
                ir.layers, mappings, ir.graph, ir.program, ir.layout, ir.target.arch
            )
            ir = dataclasses.replace(ir, mappings=mappings, constants=consts)
    raise AssertionError("unreachable: the loop returns or raises")


def schedule(ir: Placed, ctx: Any) -> Scheduled:
    """Order every core's tasks and derive their hardware tokens."""
    del ctx
    sched = build_schedule(
        ir.layers,
        ir.tilings,
        ir.groups,
        ir.mappings,
        ir.constants,
        ir.memory,
        ir.graph,
        ir.target,
        ir.layout,
        ir.program,
    )
    return Scheduled(**_fields(ir), schedule=sched)


def estimate(ir: Scheduled, ctx: Any) -> Estimated:
    """What each layer's scheduled tasks cost, from the one cost model."""
    del ctx
    cost = _cost(ir)
    per_layer, others = estimate_layers(ir.layers, ir.schedule.tasks, cost)
    init = init_estimate(ir.schedule.tasks, cost)
    # a layer whose weights stay in the IMC (loaded once in INIT) loads none per frame
    residency = ir.schedule.weight_residency
    planned = tuple(
        _planned(
            ir, i, m.whole if m is not None else None,
            resident=residency_of(residency, ir.layers[i].name) is Residency.RESIDENT,
        )
        for i, m in enumerate(ir.mappings)
    )  # fmt: skip
    return Estimated(
        **_fields(ir), estimates=per_layer, other_estimates=others, init=init, planned=planned
    )


def emit(ir: Estimated, ctx: Any) -> Emitted:
    """The ``compiled_model/`` files: written into ``ctx.write_dir`` as they are made when
    the driver gives one (its aside folder), else left in ``ctx.files`` for the driver."""
    request = getattr(ctx, "request", None)
    seconds = {r.name: r.seconds for r in getattr(ctx, "records", ()) if r.ran}
    write_dir = getattr(ctx, "write_dir", None)
    files = emit_files(
        ir, model_id=getattr(request, "model_id", None), pass_seconds=seconds, write_dir=write_dir
    )
    if write_dir is None:
        ctx.files.update(files)
    return Emitted(**_fields(ir), files=files)


# -- helpers ---------------------------------------------------------------------------
def _fields(ir: Any) -> dict[str, Any]:
    """The fields of a stage, to build the next one from."""
    return {f.name: getattr(ir, f.name) for f in dataclasses.fields(ir)}


def _tile_plan(ir: Tiled) -> Any:
    from aipusim.compiler.backend.tile.tiler import TilePlan

    return TilePlan(ir.tilings, ir.groups)


def _cost(ir: Lowered) -> CostModel:
    """The cost model at the compiled clock and MVM utilization limit."""
    return ir.target.cost


def _planned(ir: Tiled, i: int, mapping: Any, *, resident: bool = False) -> PlanCost:
    """The planned cost of layer ``i`` on one core (`estimate.plan_cost`; ``resident``:
    its weights stay in the IMC across frames)."""
    cfg, t = ir.target.knobs, ir.tilings[i]
    double = cfg.imc_double_buffer_pipeline if t.tiles > 1 else cfg.imc_double_buffer_sequential
    return plan_cost(
        ir.layers[i], mapping, t, cfg, _cost(ir),
        weights_double_buffered=double, weights_resident=resident,
    )  # fmt: skip


def _work(ir: Tiled) -> Any:
    """Planned cycles of layer ``i`` on one core, for the pipeline's stage cuts, with its
    IMC mapping queried whole (a pipeline fetches no shared weights every frame)."""
    opts = ImcOptions.from_config(ir.target.knobs)

    def work(i: int) -> int:
        layer = ir.layers[i]
        mapping = None
        if layer.unit is LayerUnit.MVM and layer.geometry is not None:
            if layer.runtime is not None:
                mapping = head_mapping(layer.runtime, ir.target.cost, opts)
            else:
                mapping = map_layer(
                    layer.geometry, ir.target.cost, opts, first_layer=layer.is_first,
                    residual=bool(layer.residual),
                )  # fmt: skip
        return _planned(ir, i, mapping).cycles

    return work


def _mixed_split_groups(groups: tuple[FusionGroup, ...], layout: CoreLayout) -> bool:
    """True if some fusion group has layers the cooperative layout does not split all by
    rows or all not at all: a core computes its rows of a group (and their halo) from its
    own tiles, but a channel split would need channels another core computed."""
    ok = ({Split.ROWS}, {Split.NONE})
    return any(
        {layout.splits.get(i, Split.NONE) for i in group.layers} not in ok
        for group in groups
        if len(group.layers) > 1
    )


def _tasklist_estimate(ir: Mapped) -> int:
    """Bytes of the tasklist image (for ``elf_in_ddr = false`` without streaming)."""
    from aipusim.isa.encoding import RECORD_BYTES

    tasks = 0
    # per tile: input DMA, compute, output DMA, and per weight set a fetch and a load
    for t, m in zip(ir.tilings, ir.mappings, strict=True):
        blocks = m.whole.weight_sets if m is not None else 1
        tasks += t.tiles * (3 + 2 * blocks)
    return tasks * RECORD_BYTES * max(1, ir.target.knobs.aipu_cores_used)


__all__ = [
    "emit",
    "estimate",
    "imc",
    "lower",
    "memplan",
    "multicore",
    "pack",
    "schedule",
    "tile",
]
