"""The back half of the compiler as a named pass list: lower -> imc -> tile -> estimate ->
multicore -> memplan -> schedule (-> emit, in `aipusim.compiler.backend.emit`).

Each pass is a function from `BackendState` to `BackendState`; `run_backend` runs them in
order and records each one's wall time.

>>> [name for name, _ in BACK_PASSES]
['lower', 'imc', 'tile', 'estimate', 'multicore', 'memplan', 'schedule']
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aipusim.arch import Arch
from aipusim.compiler.backend.attention import is_runtime, map_runtime_layers
from aipusim.compiler.backend.estimate import estimate_layer
from aipusim.compiler.backend.imc import ImcOptions, map_layer
from aipusim.compiler.backend.layout import CoreLayout
from aipusim.compiler.backend.lower import LayerPlan, LayerUnit, lower_graph, unwrap_graph
from aipusim.compiler.backend.memplan import MemPlan, plan_memory
from aipusim.compiler.backend.multicore import (
    core_layout,
    narrow_cooperative_icr,
    weight_fetch_bw,
)
from aipusim.compiler.backend.schedule import Schedule, build_schedule
from aipusim.compiler.backend.tile import FusionGroup, Tiler
from aipusim.compiler.ir import Graph

log = logging.getLogger(__name__)


@dataclass
class BackendState:
    """What the back-end passes hand each other."""

    graph: Graph
    config: Any
    arch: Arch
    source: Any = None  # the graph or quantized graph handed in
    layers: list[LayerPlan] = field(default_factory=list)
    groups: list[FusionGroup] = field(default_factory=list)
    layout: CoreLayout = field(default_factory=CoreLayout)
    plan: MemPlan | None = None
    schedule: Schedule | None = None
    pass_seconds: dict[str, float] = field(default_factory=dict)


def pass_lower(state: BackendState) -> BackendState:
    return dataclasses.replace(state, layers=lower_graph(state.graph))


def pass_imc(state: BackendState) -> BackendState:
    opts = ImcOptions.from_config(state.config)
    # (tiles are not cut yet: an untiled layer's double buffering decides)
    double = bool(state.config.imc_double_buffer_sequential)
    map_runtime_layers(state.layers, state.arch, opts, double_buffered=double)
    mvm_layers = [
        layer for layer in state.layers if layer.unit is LayerUnit.MVM and not is_runtime(layer)
    ]
    for layer in mvm_layers:
        layer.imc = map_layer(layer.geometry, state.arch, opts, first_layer=layer.is_first)
    # Weights that several cores fetch every frame: replication multiplies those bytes, so
    # the ICR factor is chosen again with the fetch counted (the weight sets, and so
    # whether the weights stream at all, do not depend on the factor).
    fetch_bw = weight_fetch_bw(state.config, state.arch, state.layers)
    if fetch_bw:
        for layer in mvm_layers:
            layer.imc = map_layer(
                layer.geometry, state.arch, opts, first_layer=layer.is_first, fetch_bw=fetch_bw
            )
    return state


def pass_tile(state: BackendState) -> BackendState:
    groups = Tiler(state.layers, state.config, state.arch, state.graph).run()
    return dataclasses.replace(state, groups=groups)


def pass_estimate(state: BackendState) -> BackendState:
    cfg = state.config
    for layer in state.layers:
        tiled = layer.tiling is not None and layer.tiling.tiles > 1
        double = cfg.imc_double_buffer_pipeline if tiled else cfg.imc_double_buffer_sequential
        layer.estimate = estimate_layer(layer, state.arch, weights_double_buffered=double)
    return state


def pass_multicore(state: BackendState) -> BackendState:
    layout = core_layout(state.layers, state.groups, state.config, state.arch, state.graph)
    if layout.cooperative and _mixed_split_groups(state.groups, layout):
        # Depth-first fusion keeps a group's intermediate tiles in one core's L1. When the
        # cooperative split partitions the group's layers differently across cores, a core
        # would need a tile that another core produced, so the model is tiled without
        # fusion (tiling_depth 1) and re-estimated; later passes (memplan's retiling
        # included) see the same depth through the state's config.
        log.info("cooperative split mixes partitions inside fusion groups: tiling_depth -> 1")
        config = state.config.copy()
        config.tiling_depth = 1
        groups = Tiler(state.layers, config, state.arch, state.graph).run()
        state = pass_estimate(dataclasses.replace(state, config=config, groups=groups))
        layout = core_layout(state.layers, state.groups, state.config, state.arch, state.graph)
    if narrow_cooperative_icr(state.layers, layout, state.config, state.arch):
        state = pass_estimate(state)
    return dataclasses.replace(state, layout=layout)


def _mixed_split_groups(groups: list[FusionGroup], layout: CoreLayout) -> bool:
    """True if some fusion group has layers the cooperative layout splits differently."""
    return any(
        len({layout.splits.get(i) for i in group.layers}) > 1
        for group in groups
        if len(group.layers) > 1
    )


def pass_memplan(state: BackendState) -> BackendState:
    tiler = Tiler(state.layers, state.config, state.arch, state.graph)
    holder = {"groups": state.groups}

    def retile(layer_names: set[str]) -> list[FusionGroup]:
        # tile the named layers twice as finely (their groups fall apart into single layers)
        for layer in state.layers:
            if layer.name in layer_names and layer.tiling is not None:
                t = layer.tiling
                stage_bound = layer.unit is LayerUnit.MVM and t.block_bytes * 2 > tiler.budget
                if stage_bound or t.h_tiles >= (layer.geometry.out_h if layer.geometry else 1):
                    layer.extra["min_oc_tiles"] = t.oc_tiles * 2  # narrower weight blocks
                    layer.extra["min_h_tiles"] = t.h_tiles
                else:
                    layer.extra["min_h_tiles"] = t.h_tiles * 2
        holder["groups"] = tiler.run()
        return holder["groups"]

    plan = plan_memory(
        state.layers,
        state.groups,
        state.graph,
        state.config,
        state.arch,
        layout=state.layout,
        tasklist_bytes=_tasklist_estimate(state),
        retile=retile,
    )
    return dataclasses.replace(state, plan=plan, groups=holder["groups"])


def _tasklist_estimate(state: BackendState) -> int:
    """Bytes of the tasklist image (for ``elf_in_ddr = false`` without streaming)."""
    from aipusim.isa.encoding import RECORD_BYTES

    tasks = 0
    # per tile: input DMA, compute, output DMA, and per weight set a fetch and a load
    for layer in state.layers:
        tiles = layer.tiling.tiles if layer.tiling else 1
        blocks = layer.imc.weight_sets if layer.imc else 1
        tasks += tiles * (3 + 2 * blocks)
    return tasks * RECORD_BYTES * max(1, state.config.aipu_cores_used)


def pass_schedule(state: BackendState) -> BackendState:
    assert state.plan is not None
    schedule = build_schedule(
        state.layers, state.groups, state.plan, state.graph, state.config, state.arch, state.layout
    )
    return dataclasses.replace(state, schedule=schedule)


#: The back-end passes in order (appended to the front end's named list).
BACK_PASSES: list[tuple[str, Callable[[BackendState], BackendState]]] = [
    ("lower", pass_lower),
    ("imc", pass_imc),
    ("tile", pass_tile),
    ("estimate", pass_estimate),
    ("multicore", pass_multicore),
    ("memplan", pass_memplan),
    ("schedule", pass_schedule),
]


@dataclass
class BackendResult:
    """The compiled program in memory (and the files, when ``out_dir`` was given)."""

    state: BackendState
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def tasks(self) -> dict[int, list[Any]]:
        assert self.state.schedule is not None
        return self.state.schedule.tasks


def run_backend(
    graph_or_qgraph: Any,
    config: Any,
    arch: Arch,
    out_dir: str | Path | None = None,
    *,
    model_name: str | None = None,
) -> BackendResult:
    """Lower, tile, plan and schedule a graph; write ``compiled_model/`` files into
    ``out_dir`` when given (see `aipusim.compiler.backend.emit.emit`)."""
    state = BackendState(unwrap_graph(graph_or_qgraph), config, arch, source=graph_or_qgraph)
    for name, fn in BACK_PASSES:
        t0 = time.perf_counter()
        state = fn(state)
        state.pass_seconds[name] = time.perf_counter() - t0
    result = BackendResult(state)
    if out_dir is not None:
        from aipusim.compiler.backend.emit import emit

        t0 = time.perf_counter()
        result.files = emit(state, Path(out_dir), model_name=model_name)
        state.pass_seconds["emit"] = time.perf_counter() - t0
    return result


__all__ = ["BACK_PASSES", "BackendResult", "BackendState", "run_backend"]
