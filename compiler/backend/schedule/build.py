"""Pass 9, schedule: per-core task order and hardware tokens (docs/architecture.md §4, §5).

The frame walk (`frame`) goes through the fusion groups in order and, for every core that
works on a group, every tile and every layer of the group, creates steps: DMA of the input
tile (unless the tensor is L1-resident or a fused intermediate), DMA of streamed weights
into L1 staging (through L2 by the system DMA when ``use_sysdma``), IMC weight-set loads,
the compute task, DMA of the output tile. Each step records the steps it depends on:
producers of its data, the last user of a buffer slot or weight set it overwrites
(write-after-read), and the knob-driven fences below. Tokens are derived from these
dependencies last.

Knobs:
- ``pipeline_spatial_tiles`` / ``pipeline_channel_tiles``: two buffer slots per tile stream,
  so the DMA of tile i+1 runs while tile i computes; off: one slot, strictly in turn.
- ``inter_operator_async``: off puts a fence before each group (its tasks wait for every
  task of the previous group).
- ``unroll_prologue_epilogue``: off keeps each group's prologue (first input DMA and weight
  fetch) behind the previous group's epilogue (its last compute and output DMA).
- ``imc_double_buffer_pipeline`` / ``_sequential``: a weight set may load while another
  computes (tiled / untiled layers); off, a load waits for the array to go idle.
- ``group_ifdw_tasks``: weight-set loads are hoisted: they wait only for a free set, not
  for the layer's input, so they run during the previous layer.
- ``use_list_scheduler``: the stream is ordered by critical path (longest remaining
  estimated cycles first) instead of program order, subject to the dependencies.
- ``dma_dual_channel``: activations on ``dma0``, weights and constants on ``dma1``; off,
  everything on ``dma0``.
- ``use_sysdma``: DDR -> L2 weight transfers on ``sysdma``, L2 -> L1 on the core DMA.

The parts, each a function of what the one before hands it:

1. `weight_plan.plan_weights`: which weight sets stay in the IMC, whether a batch's cores
   share the weight fetches (once per schedule);
2. `frame.emit_steps`: every step with its data dependencies (`weights`, `tiles`,
   `runtime_mvm`), the barriers after the groups chosen -> `steps.FrameSteps`;
3. `memdeps`: write-after-read on reused bytes (reused from the probe by a cooperative
   rebuild), the frame anchor;
4. `tokens`: each core's stream order and its hardware tokens -> `steps.Schedule`.

Cooperative: a probe build without barriers between groups shows which dependencies
cross cores (`barriers.cross_core_spans`); the schedule is built again with the fewest
barriers that leave the other cross-core pairs to the instance's global tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aipusim.base.errors import TasklistError
from aipusim.compiler.backend.common.layout import CoreLayout
from aipusim.compiler.backend.common.target import Target
from aipusim.compiler.backend.imc.plan import LayerMapping
from aipusim.compiler.backend.lower.layer import LayerPlan
from aipusim.compiler.backend.memplan.buffers import MemPlan
from aipusim.compiler.backend.pack.blobs import LayerConstants
from aipusim.compiler.backend.schedule.barriers import (
    choose_barriers,
    cross_core_spans,
    rank_pairs,
)
from aipusim.compiler.backend.schedule.frame import emit_steps
from aipusim.compiler.backend.schedule.inputs import ScheduleInputs
from aipusim.compiler.backend.schedule.memdeps import WarPlan, add_memory_war, anchor_frames
from aipusim.compiler.backend.schedule.steps import FrameSteps, Residency, Schedule
from aipusim.compiler.backend.schedule.tokens import assign_tokens, cross_frame_pairs, order_steps
from aipusim.compiler.backend.schedule.weight_plan import WeightPlan, plan_weights
from aipusim.compiler.backend.tile.tiler import FusionGroup, Tiling

#: Cooperative: the tries at keeping more token pairs than every cross-core dependency
#: leaves room for (`build_schedule`); each builds the schedule once more.
COOPERATIVE_TOKEN_STEPS = 4


def build_steps(
    inp: ScheduleInputs,
    wplan: WeightPlan,
    barrier_after: frozenset[int] = frozenset(),
    war: WarPlan | None = None,
) -> tuple[FrameSteps, WarPlan]:
    """Every step of one build with all its dependencies (no order, no tokens yet), and
    the write-after-read analysis used (``war``: a probe's, reused; `memdeps.add_memory_war`)."""
    built = emit_steps(inp, wplan, barrier_after)
    cooperative = inp.layout.cooperative and inp.layout.cores > 1
    war = add_memory_war(built, inp.plan, cooperative, war)
    anchor_frames(built.steps)
    return built, war


def schedule_of(inp: ScheduleInputs, wplan: WeightPlan, built: FrameSteps) -> Schedule:
    """Order the steps of a build and assign its tokens."""
    order = order_steps(built.steps, inp.cfg.use_list_scheduler)
    pairs = cross_frame_pairs(built, inp.layout, inp.plan)
    tokens = assign_tokens(built.steps, order, inp.arch.tokens, pairs)
    residency = wplan.residency
    return Schedule(
        tokens.tasks,
        built.steps,
        all(r.residency is Residency.RESIDENT for r in residency.values()),
        tokens.local_tokens_used,
        tokens.global_tokens_used,
        incomplete=dict(built.incomplete),
        weight_residency=residency,
    )


def build_schedule(
    layers: Sequence[LayerPlan],
    tilings: Sequence[Tiling],
    groups: Sequence[FusionGroup],
    mappings: Sequence[LayerMapping | None],
    constants: Sequence[LayerConstants],
    plan: MemPlan,
    graph: Any,
    target: Target,
    layout: CoreLayout | None = None,
    program: Any = None,
) -> Schedule:
    """Per-core tasks with tokens for a tiled, mapped, packed, memory-planned layer list
    (``program``: the integer program, for zero points)."""
    layout = layout or CoreLayout()
    inp = ScheduleInputs(
        layers, tilings, groups, mappings, constants, plan, graph, target, layout, program
    )
    wplan = plan_weights(inp)
    if not (layout.cooperative and layout.cores > 1):
        return schedule_of(inp, wplan, build_steps(inp, wplan)[0])
    # the dependencies between cores with no barrier between groups decide where barriers
    # stay (`barriers.choose_barriers`); the schedule is then built again with them, each
    # time with the probe's write-after-read analysis (most of a build's time)
    probe, war = build_steps(inp, wplan)
    spans = cross_core_spans(probe.steps)
    count = target.arch.tokens.global_count
    ranked = rank_pairs(spans)  # (the same at every budget below)
    barriers = choose_barriers(spans, count, ranked)
    # the token pass drops the waits other tokens imply, so more pairs usually fit: keep
    # more as tokens, half the instance's tokens a step, while the tokens fit; the
    # schedule with every pair counted (whose tokens fit) is built only if no try fits
    best: Schedule | None = None
    budget = count
    for _ in range(COOPERATIVE_TOKEN_STEPS):
        if not barriers or budget >= len(spans):
            break
        budget += max(1, count // 2)
        more = choose_barriers(spans, budget, ranked)
        if len(more) >= len(barriers):
            continue
        try:
            best = schedule_of(inp, wplan, build_steps(inp, wplan, more, war)[0])
        except TasklistError:
            break  # more token pairs than the instance has
        barriers = more
    return best or schedule_of(inp, wplan, build_steps(inp, wplan, barriers, war)[0])


__all__ = ["COOPERATIVE_TOKEN_STEPS", "build_schedule", "build_steps", "schedule_of"]
