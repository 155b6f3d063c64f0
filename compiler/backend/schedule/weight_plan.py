"""Which MVM layers keep their weight sets in the IMC across frames, and whether a batch's
cores share the weight multicasts: decided once per schedule from its inputs alone.

Every layer stays when all its weight sets fit the array; else, on one core or in batch,
the sets left beside the `STREAM_SETS` kept for streaming hold the layers that save the
most bytes per set (`choose_resident`). A batch's cores issue the weight multicasts in
turn only when one core's weight channel would be the bottleneck (`fetch_bound`).
"""

from __future__ import annotations

from typing import NamedTuple

from aipusim.compiler.backend.estimate.costs import plan_cost
from aipusim.compiler.backend.lower.layer import LayerUnit, is_runtime
from aipusim.compiler.backend.memplan.buffers import const_buffer
from aipusim.compiler.backend.schedule.inputs import ScheduleInputs
from aipusim.compiler.backend.schedule.steps import Residency, WeightResidency, residency_of
from aipusim.isa.tasks import Pool

#: Weight sets kept for the weights that stream every frame: the one computing and the one
#: loading beside it.
STREAM_SETS = 2

#: L1 write ports a batch needs before its cores share the weight multicasts
#: (`fetch_bound`): one for the MVM's results, one for the multicast that streams the
#: weights, one for a second multicast beside it. With fewer, the concurrent multicasts
#: hold the write ports the MVMs need.
SHARED_FETCH_WRITE_PORTS = 3

#: A weight set's key: (layer, output-channel tile, block).
WeightKey = tuple[str, int, int]


class WeightPlan(NamedTuple):
    """The weight decisions of a schedule, the same for every build of it."""

    #: MVM layer with constant weights -> resident or streamed, and why
    residency: dict[str, WeightResidency]
    #: MVM layer with constant weights -> the weight-set keys any core loads
    keys: dict[str, list[WeightKey]]
    #: batch: the cores take turns issuing the weight multicasts (`fetch_bound`)
    spread_fetches: bool


def choose_resident(layers: dict[str, tuple[int, int]], free_sets: int) -> list[str]:
    """The layers (name -> (weight sets, bytes loaded per frame)) whose weights stay in
    ``free_sets`` IMC sets across frames: the most bytes saved per set first, each layer
    whole or not at all, in model order.

    >>> choose_resident({"a": (2, 1000), "b": (1, 600), "c": (1, 300)}, 2)
    ['b', 'c']
    """
    by_gain = sorted(layers, key=lambda n: -layers[n][1] / max(1, layers[n][0]))
    chosen: set[str] = set()
    for name in by_gain:
        sets = layers[name][0]
        if sets <= free_sets:
            chosen.add(name)
            free_sets -= sets
    return [name for name in layers if name in chosen]


def resident_keys(inp: ScheduleInputs) -> dict[str, list[WeightKey]]:
    """Per MVM layer with constant weights, the weight-set keys ``(layer, channel tile,
    block)`` any core loads (cores of a channel split may have fewer)."""
    keys: dict[str, list[WeightKey]] = {}
    for li, layer in enumerate(inp.layers):
        if layer.unit is not LayerUnit.MVM or is_runtime(layer):
            continue
        mine: set[WeightKey] = set()
        for core in inp.layout.all_cores:
            for tile_map, oi in inp.tile_maps(layer, inp.part_of(li, core)[0]):
                mine.update((layer.name, oi, b) for b in range(len(tile_map.blocks)))
        keys[layer.name] = sorted(mine)
    return keys


def frame_weight_bytes(inp: ScheduleInputs, name: str, keys: list[WeightKey]) -> int:
    """The bytes core 0 loads into the IMC per frame for ``keys`` of layer ``name``."""
    li = inp.index[name]
    part = inp.part_of(li, inp.layout.all_cores[0])[0]
    blocks = {(tm.oc_tile, b): blk for tm in inp.mapping_of(inp.layers[li]).of_part(part)
              for b, blk in enumerate(tm.mapping.blocks)}  # fmt: skip
    return sum(blocks[(oi, b)].weight_bytes for _, oi, b in keys if (oi, b) in blocks)


def plan_residency(
    inp: ScheduleInputs, keys: dict[str, list[WeightKey]]
) -> dict[str, WeightResidency]:
    """Per MVM layer with constant weights, whether its weight sets stay in the IMC
    across frames (loaded once in INIT) or stream every frame, and why: every layer
    stays when all sets fit; else, on one core or in batch (where core 0 issues every
    INIT transfer), the sets left beside `STREAM_SETS` hold the layers that save the
    most bytes per set (`choose_resident`)."""
    need = sum(len(k) for k in keys.values())
    have = inp.arch.mvm.weight_sets
    sizes = f"weight sets: {need} needed, {have} in the array"
    # run-time weights (attention) need sets of their own every frame, as many as
    # streamed weights do
    runtime = any(is_runtime(layer) for layer in inp.layers)
    if need + (STREAM_SETS if runtime else 0) <= have:
        return {name: WeightResidency(Residency.RESIDENT, sizes) for name in keys}
    if inp.layout.cores > 1 and not inp.layout.replicate:
        # all or nothing on several cores: a partial residency, whose INIT fetches and
        # frame streams would share the cores' weight DMA, is not planned (a cooperative
        # core's INIT fetch waits for core 0's copy into L2 by a token; docs/decisions.md)
        return {name: WeightResidency(Residency.STREAMED, sizes) for name in keys}
    free = max(0, have - STREAM_SETS)
    sets_bytes = {name: (len(k), frame_weight_bytes(inp, name, k)) for name, k in keys.items()}
    chosen = choose_resident(sets_bytes, free)
    left = f"{sizes}, {STREAM_SETS} kept for streaming"
    kept = f"the most bytes per set of the {free} sets left ({left})"
    return {
        name: WeightResidency(Residency.RESIDENT, kept)
        if name in chosen
        else WeightResidency(Residency.STREAMED, left)
        for name in keys
    }


def fetch_bound(inp: ScheduleInputs, residency: dict[str, WeightResidency]) -> bool:
    """Batch: whether the cores share the weight multicasts
    (`weights.WeightStreamer.fetch_core_for`): when one core's weight channel would take
    longer to fetch a frame's streamed weights than a core takes to compute the frame (both
    by the cost model), and a second multicast finds a write port of every core's L1 beside
    the MVM's results and the first one. Otherwise one queue keeps them in the order the
    layers need them, each with the whole bandwidth of its path (ResNet-50 on Metis, two
    write ports: sharing them was 8 % slower, the concurrent multicasts holding the write
    ports the MVMs need)."""
    if inp.arch.l1.write_ports < SHARED_FETCH_WRITE_PORTS:
        return False
    cost = inp.target.cost
    fetch = compute = 0
    for layer, tiling, mapping in zip(inp.layers, inp.tilings, inp.mappings, strict=True):
        if mapping is None or tiling is None:
            continue
        plan = plan_cost(layer, mapping.whole, tiling, inp.cfg, cost,
                         weights_double_buffered=False)  # fmt: skip
        compute += plan.compute_cycles
        wbuf = inp.plan.buffers.get(const_buffer("weights", layer.name))
        streamed = residency_of(residency, layer.name) is Residency.STREAMED
        if streamed and wbuf is not None:
            fetch += max(1, tiling.h_tiles) * sum(
                cost.dma_cycles(inp.wt_dma, wbuf.pool, Pool.L1, b.weight_bytes)
                for b in mapping.whole.blocks
            )
    return fetch > compute


def plan_weights(inp: ScheduleInputs) -> WeightPlan:
    """The `WeightPlan` of a schedule."""
    keys = resident_keys(inp)
    residency = plan_residency(inp, keys)
    layout = inp.layout
    spread = layout.replicate and layout.cores > 1 and inp.cfg.dma_dual_channel
    return WeightPlan(residency, keys, spread and fetch_bound(inp, residency))


__all__ = [
    "SHARED_FETCH_WRITE_PORTS",
    "STREAM_SETS",
    "WeightKey",
    "WeightPlan",
    "choose_resident",
    "fetch_bound",
    "plan_weights",
]
