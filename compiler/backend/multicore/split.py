"""Multicore modes: how one instance spreads over ``aipu_cores_used`` cores.

The modes are described in docs/architecture.md §5.

- ``multiprocess`` / ``multithread``: Batch-1 instances. With one core the runtime places
  ``min(cores // 1, floor(1 / resources_used))`` copies; they differ only on the host. With
  several cores (the reference's Batch-4 example) the instance runs as a ``batch``.
- ``batch``: every core runs the whole model on its own frame, in lockstep per layer; a
  layer's weights are fetched once and multicast to every core's L1.
- ``cooperative``: each layer split over the cores by output channels or by rows, whichever
  costs less per core (estimated MVM and weight-load cycles), activations in every core's
  L1 where they fit, exchanged core to core (`exchange`), a barrier per layer. In a decode
  graph (one token, its KV cache in DDR) the layout copies are shared too: each core moves
  its share of every copy between L2/DDR buffers (`CoreLayout.shared_copies`), and its FFN
  runs as tensor parallelism (`tensor_parallel`): no hidden column crosses a core, the
  down projection's int32 partial sums are reduced once, on the first core; its attention
  products on the DPU, their scale and softmax run split by heads (`head_parallel`).
- ``pipeline``: fusion groups cut into contiguous stages of balanced estimated cycles, one
  per core; tensors crossing stages through L2/DDR with credit tokens.

`check_cascade` checks several models sharing one chip: their ``resources_used`` sum to at
most 1.0 and their cores fit the chip.

>>> from aipusim.compiler import CompilerConfig
>>> check_cascade([CompilerConfig(aipu_cores_used=3, resources_used=0.75),
...                CompilerConfig(aipu_cores_used=1, resources_used=0.25)], chip_cores=4)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from aipusim.arch import Arch
from aipusim.base.errors import ConfigError
from aipusim.compiler.backend.common.layout import CoreLayout, Split
from aipusim.compiler.backend.common.target import Target
from aipusim.compiler.backend.imc.mapper import ImcOptions, frame_cycles, map_layer
from aipusim.compiler.backend.lower.attention import head_mapping
from aipusim.compiler.backend.lower.layer import LayerPlan, LayerUnit, is_runtime
from aipusim.compiler.backend.lower.layout_dma import copy_heads, copy_plan
from aipusim.compiler.backend.multicore.exchange import host_read_tensors, l1_exchange_tensors
from aipusim.compiler.backend.tile.regions import out_rows, part_range, splittable_rows
from aipusim.compiler.backend.tile.tiler import FusionGroup, TilePlan, Tiling
from aipusim.compiler.decoder import cache_state
from aipusim.compiler.ir import Op
from aipusim.isa.cost import CostModel, Link
from aipusim.isa.program import MulticoreMode, check_resources_used
from aipusim.isa.tasks import DpuKind, DpuThen


def check_resources(resources_used: float, cores: int, arch: Arch) -> None:
    """``resources_used`` fits the instance's ``cores`` and the cores fit ``arch``."""
    check_resources_used(resources_used, cores)
    if cores > arch.chip.cores:
        raise ConfigError(
            f"aipu_cores_used must be at most the {arch.chip.cores} cores of {arch.chip.name}, "
            f"not {cores}"
        )


def check_cascade(configs: Sequence[Any], *, chip_cores: int) -> None:
    """Several instances on one chip: resources sum <= 1.0 and cores sum <= chip cores."""
    total = sum(c.resources_used for c in configs)
    if total > 1.0 + 1e-9:
        shares = " + ".join(f"{c.resources_used:g}" for c in configs)
        raise ConfigError(
            f"resources_used of a cascade must sum to at most 1.0, not {shares} = {total:g}"
        )
    cores = sum(c.aipu_cores_used for c in configs)
    if cores > chip_cores:
        raise ConfigError(
            f"aipu_cores_used of a cascade must sum to at most the {chip_cores} chip cores, "
            f"not {cores}"
        )


@dataclass(frozen=True)
class CascadeSlot:
    """Where one model of a cascade sits on the chip: its cores and its memory share."""

    first_core: int
    cores: int
    resources_start: float  # fraction of L2/DDR where its share begins
    resources_used: float


def plan_cascade(configs: Sequence[Any], *, chip_cores: int) -> list[CascadeSlot]:
    """Check a cascade (`check_cascade`) and give each model consecutive cores and a
    consecutive share of the memory, in order.

    >>> from aipusim.compiler import CompilerConfig
    >>> [(s.first_core, s.resources_start) for s in plan_cascade(
    ...     [CompilerConfig(aipu_cores_used=3, resources_used=0.75), CompilerConfig()
    ...      .update(resources_used=0.25)], chip_cores=4)]
    [(0, 0.0), (3, 0.75)]
    """
    check_cascade(configs, chip_cores=chip_cores)
    slots = []
    core = 0
    start = 0.0
    for c in configs:
        slots.append(CascadeSlot(core, c.aipu_cores_used, start, c.resources_used))
        core += c.aipu_cores_used
        start += c.resources_used
    return slots


def core_layout(
    layers: Sequence[LayerPlan],
    tiles: TilePlan,
    target: Target,
    graph: Any,
    work: Callable[[int], int] | None = None,
) -> CoreLayout:
    """The `CoreLayout` of the target's effective mode (see the module docstring);
    ``work(i)`` is the estimated cycles of layer ``i`` on one core (pipeline stage cuts)."""
    arch, cores, mode = target.arch, target.cores, target.effective_mode
    check_resources(target.knobs.resources_used, cores, arch)
    if cores == 1:
        return CoreLayout(1, mode)
    fetch_bw = weight_fetch_bw(target, layers)
    multicast_bw = multicast_fetch_bw(target, layers)
    if mode is MulticoreMode.BATCH:
        return CoreLayout(cores, mode, weight_fetch_bw=fetch_bw)
    if mode is MulticoreMode.COOPERATIVE:
        opts = ImcOptions.from_config(target.knobs)
        choices = {
            i: _cooperative_split(
                layer, tiles.tilings[i], cores, target, opts, (fetch_bw, multicast_bw)
            )
            for i, layer in enumerate(layers)
        }
        splits = {i: split for i, (split, _) in choices.items()}
        split_cycles = {i: cycles for i, (_, cycles) in choices.items() if cycles}
        host_read = host_read_tensors(layers, graph.outputs)
        decode = bool(cache_state(graph))
        local: frozenset[str] = frozenset()
        heads: dict[int, int] = {}
        if decode:
            splits, local = tensor_parallel(layers, splits, host_read, cores)
            splits, by_heads, heads = head_parallel(layers, splits, host_read, cores, graph)
            local |= by_heads
        return CoreLayout(
            cores,
            mode,
            splits=splits,
            split_cycles=split_cycles,
            weight_fetch_bw=fetch_bw,
            multicast_fetch_bw=multicast_bw,
            l1_exchange=l1_exchange_tensors(layers, host_read),
            shared_copies=decode,
            local_tensors=local,
            heads=heads,
        )
    assert mode is MulticoreMode.PIPELINE, f"no core layout for {mode} on {cores} cores"
    assert work is not None, "pipeline stage cuts need the layers' estimated work"
    return _pipeline(layers, tiles.groups, cores, graph, work)


def _cooperative_split(
    layer: LayerPlan,
    tiling: Tiling,
    cores: int,
    target: Target,
    opts: ImcOptions,
    fetch_bws: tuple[float | None, float | None],
) -> tuple[Split, dict[str, int]]:
    """How one layer is shared by ``cores``, and the estimated cycles per core of each
    split the cost model weighed (empty: none was weighed). MVM layers take the cheaper of
    the two per core: output channels (each core loads a quarter of the weights, but
    streams every input vector, and narrower blocks may allow more ICR) or rows (a quarter
    of the vectors, but every core loads all weights). With weights streamed every frame
    (``fetch_bws``: `weight_fetch_bw`, `multicast_fetch_bw`), the fetch a core waits for
    counts too: its own part of a channel split, at its share of the source, or a row
    split's one multicast of all the weights, at the whole source (`CoreLayout.fetch_bw`).
    """
    fetch_bw, multicast_bw = fetch_bws
    arch = target.arch
    geo = layer.geometry
    can_rows = splittable_rows(layer) and out_rows(layer) >= cores * tiling.h_tiles
    if layer.unit is LayerUnit.MVM and is_runtime(layer):
        can_rows = geo is not None and geo.out_h >= cores * tiling.h_tiles
        return (Split.ROWS if can_rows else Split.NONE), {}  # heads: each core loads its own
    if layer.unit is LayerUnit.MVM and geo is not None:
        options: dict[Split, int] = {}
        for split, sub_geo, ok, bw in (
            (Split.CHANNELS, replace(geo, cout=-(-geo.cout // cores)), geo.cout >= cores, fetch_bw),
            (Split.ROWS, replace(geo, out_h=-(-geo.out_h // cores)), can_rows, multicast_bw),
        ):
            if ok:
                sub = map_layer(sub_geo, target.cost, opts, first_layer=layer.is_first, fetch_bw=bw)
                options[split] = frame_cycles(sub, target.cost, bw)
        best = min(options, key=options.__getitem__) if options else Split.NONE
        return best, {str(k): v for k, v in options.items()}
    if layer.unit is LayerUnit.DWPU and geo is not None:
        if geo.cout >= cores * arch.dwpu.channels:
            return Split.CHANNELS, {}
        return (Split.ROWS if can_rows else Split.NONE), {}
    if layer.unit is LayerUnit.DPU and layer.elements >= cores * arch.dpu.lanes:
        return (Split.ROWS if can_rows and tiling.h_tiles == 1 else Split.NONE), {}
    return Split.NONE, {}


#: DPU kinds a core can run on its own channel part of a one-row tensor: element-wise with
#: one scalar record (no per-channel parameters, no constant operand to slice).
_LOCAL_DPU_KINDS = frozenset({DpuKind.MUL, DpuKind.ADD, DpuKind.SUB, DpuKind.LUT})


def _may_be_local(layer: LayerPlan) -> bool:
    """An alias, or an element-wise DPU layer a core can run on its channels alone."""
    if layer.unit is LayerUnit.ALIAS:
        return True
    return (
        layer.unit is LayerUnit.DPU
        and layer.dpu_kind in _LOCAL_DPU_KINDS
        and layer.then is DpuThen.NONE
        and layer.rowwise
        and not layer.consts
    )


def tensor_parallel(
    layers: Sequence[LayerPlan], splits: dict[int, Split], host_read: set[str], cores: int
) -> tuple[dict[int, Split], frozenset[str]]:
    """A cooperative decode step as tensor parallelism (Megatron-style): MVM layers split
    by output channels (an FFN's gate and up projections) keep their parts on their cores;
    element-wise DPU layers of those parts (SiLU, gate * up) run on each core's channels
    (`Split.CHANNELS`); an MVM reading such a part (the down projection) is split by
    input channels (`Split.INPUTS`): each core multiplies its part by its rows of the
    weights into int32 partial sums, and one DPU task sums the parts and requantizes. No
    hidden column crosses a core; the reduction moves ``cores - 1`` int32 partial-sum
    vectors instead. Returns the new splits and the tensors kept local.

    Only one-row tensors qualify (a decode step's token: a channel part is one run of
    bytes), the partial sums stay exact in the accumulator (the 1-core layer sums the same
    products in int32 too) and a residual add may follow the requantize, not a table before
    it (`PostOp.REQUANT_LUT_ADD`).
    """
    producer = {o: i for i, layer in enumerate(layers) for o in layer.outputs}
    readers: dict[str, list[int]] = {}
    for i, layer in enumerate(layers):
        for t in layer.inputs:
            readers.setdefault(t, []).append(i)

    def one_row_mvm(i: int) -> bool:
        layer = layers[i]
        geo = layer.geometry
        return (
            layer.unit is LayerUnit.MVM
            and layer.runtime is None
            and geo is not None
            and geo.out_h * geo.out_w == 1
        )

    def width(t: str) -> int:  # channels of a one-row tensor (its bytes: int8)
        i = producer[t]
        return layers[i].out_bytes[layers[i].outputs.index(t)]

    # grow the local region from the channel-split projections through element-wise work
    local: dict[int, int] = {  # layer -> the channels of its output
        i: layers[i].geometry.cout  # type: ignore[union-attr]
        for i in range(len(layers))
        if splits.get(i) is Split.CHANNELS and one_row_mvm(i)
    }
    grew = True
    while grew:
        grew = False
        for i, layer in enumerate(layers):
            if i in local or not _may_be_local(layer):
                continue
            ins = [producer.get(t) for t in layer.inputs]
            if not ins or any(p not in local for p in ins):
                continue
            chans = {local[p] for p in ins if p is not None}
            if len(chans) == 1 and layer.out_bytes[0] == next(iter(chans)):
                local[i] = layer.out_bytes[0]
                grew = True

    def sink(i: int, t: str) -> bool:  # an MVM summing a local part's products
        layer = layers[i]
        return (
            one_row_mvm(i)
            and layer.inputs[0] == t
            and t not in layer.inputs[1:]
            and not layer.lut_before_add
            and layer.geometry.cin == width(t)  # type: ignore[union-attr]
            and width(t) >= cores
        )

    # drop a layer whose output anything else reads (another core's part would be missing)
    dropped = True
    while dropped:
        dropped = False
        for i in list(local):
            t = layers[i].outputs[0]
            ok = t not in host_read and all(r in local or sink(r, t) for r in readers.get(t, []))
            if not ok or not any(r in local or sink(r, t) for r in readers.get(t, [])):
                del local[i]
                dropped = True
    sinks = {
        r
        for i in local
        for r in readers.get(layers[i].outputs[0], [])
        if r not in local and sink(r, layers[i].outputs[0])
    }
    # a sink whose local input's producers are not all channel parts stays as it was
    out = dict(splits)
    for i in local:
        if layers[i].unit is not LayerUnit.ALIAS:  # (an alias moves nothing)
            out[i] = Split.CHANNELS
    for i in sinks:
        out[i] = Split.INPUTS
    return out, frozenset(layers[i].outputs[0] for i in local)


#: DPU kinds of a per-head layer between two products besides the products themselves: an
#: element-wise step with scalar constants (the scale) and the softmax over the last axis.
_HEAD_CHAIN_KINDS = frozenset({DpuKind.MUL, DpuKind.ADD, DpuKind.SUB, DpuKind.LUT, DpuKind.SOFTMAX})


def _interleaved_heads(shape: Sequence[int]) -> int:
    """The heads of a ``[1, heads, rows, cols]`` tensor whose heads are its channels (one
    memory row of a channels-last tensor: every head at its own offset, neighbours
    ``heads`` elements apart), 0 for any other shape."""
    if len(shape) != 4 or shape[0] != 1 or shape[2] != 1:
        return 0
    return int(shape[1])


def head_parallel(
    layers: Sequence[LayerPlan],
    splits: dict[int, Split],
    host_read: set[str],
    cores: int,
    graph: Any,
) -> tuple[dict[int, Split], frozenset[str], dict[int, int]]:
    """A cooperative decode step's attention split by query heads (`Split.HEADS`): each
    core runs Q·Kᵀ, the scale, the softmax and P·V of its block of heads on its DPU.

    The layers: every product of two activations on the DPU (not the MVM, whose run-time
    weights are split by rows of heads already) whose output is one token's row of
    interleaved heads ``[1, H, 1, T]`` (`_interleaved_heads`), H a multiple of ``cores``;
    and every one-input element-wise or softmax layer of that shape whose input such a
    layer writes (`_HEAD_CHAIN_KINDS`, scalar constants only: a core's heads are a strided
    slice, which a broadcast operand would not follow). Each core reads its heads of every
    operand at their offsets (a strided fetch of its heads alone from L2/DDR), so with
    grouped-query attention a core fetches only the expanded copies of its own KV heads.

    Returns the new splits, the tensors kept local (written and read by head-split layers
    only: each core reads the heads it wrote, nothing is exchanged) and the heads of each
    split layer."""
    heads: dict[int, int] = {}
    for i, layer in enumerate(layers):
        if layer.unit is not LayerUnit.DPU or layer.runtime is not None or len(layer.outputs) != 1:
            continue
        h = _interleaved_heads(graph.shape(layer.outputs[0]))
        if h < cores or h % cores or layer.then is not DpuThen.NONE:
            continue
        shapes = [tuple(graph.shape(t)) for t in layer.inputs]
        if layer.dpu_kind is DpuKind.MATMUL and all(
            len(s) == 4 and s[0] == 1 and s[1] == h for s in shapes
        ):
            heads[i] = h
    producer = {o: i for i, layer in enumerate(layers) for o in layer.outputs}
    for i, layer in enumerate(layers):  # (in graph order: a chain grows from its product)
        if i in heads or layer.unit is not LayerUnit.DPU or layer.dpu_kind not in _HEAD_CHAIN_KINDS:
            continue
        node = graph.node(layer.name)
        consts = [t for t in node.present_inputs if graph.is_constant(t)]
        if (
            len(layer.inputs) != 1
            or layer.then is not DpuThen.NONE
            or any(math.prod(graph.shape(t)) != 1 for t in consts)
            or tuple(graph.shape(layer.inputs[0])) != tuple(graph.shape(layer.outputs[0]))
        ):
            continue
        src = producer.get(layer.inputs[0])
        if src in heads and _interleaved_heads(graph.shape(layer.outputs[0])) == heads[src]:
            heads[i] = heads[src]
    readers: dict[str, list[int]] = {}
    for i, layer in enumerate(layers):
        for t in layer.inputs:
            readers.setdefault(t, []).append(i)
    out = dict(splits)
    kept: set[str] = set()
    for i, j, chain in _head_transposes(layers, heads, readers, cores, graph):
        heads[i] = heads[producer[layers[i].inputs[0]]]
        out[j] = Split.INPUTS
        kept |= chain
    for i in heads:
        out[i] = Split.HEADS
    local = frozenset(kept) | frozenset(
        t
        for i in heads
        for t in layers[i].outputs
        if t not in host_read
        and readers.get(t)
        and all(r in heads and heads[r] == heads[i] for r in readers[t])
    )
    return out, local, heads


def _head_transposes(
    layers: Sequence[LayerPlan],
    heads: dict[int, int],
    readers: dict[str, list[int]],
    cores: int,
    graph: Any,
) -> list[tuple[int, int, set[str]]]:
    """The output projections a head split feeds, each as (the transpose of the heads'
    context, the projection, the tensors from one to the other): P·V's ``[1, H, 1, d]``
    transposed to ``[1, 1, H, d]`` (each core moves its heads, `layout_dma.copy_heads`),
    read through aliases only by a one-row MVM layer over all ``H * d`` channels. The
    projection is split by input channels (`Split.INPUTS`, as the FFN's down projection):
    a core's channels are its heads' context, so nothing crosses a core before the one
    reduction of partial sums."""
    producer = {o: i for i, layer in enumerate(layers) for o in layer.outputs}
    found = []
    for i, layer in enumerate(layers):
        src = producer.get(layer.inputs[0]) if layer.inputs else None
        if layer.unit is not LayerUnit.DMA or src not in heads or len(layer.outputs) != 1:
            continue
        h = heads[src]
        node = graph.node(layer.name)
        shape = tuple(graph.shape(layer.outputs[0]))
        if node.op is not Op.TRANSPOSE or len(shape) != 4 or shape[:3] != (1, 1, h):
            continue
        plan = copy_plan(node, graph)
        if any(
            copy_heads(c, h, *part_range(h, cores, k)) is None
            for _, copies in plan
            for c in copies
            for k in range(cores)
        ):
            continue
        chain, t = {layer.outputs[0]}, layer.outputs[0]
        while len(readers.get(t, [])) == 1 and layers[readers[t][0]].unit is LayerUnit.ALIAS:
            t = layers[readers[t][0]].outputs[0]
            chain.add(t)
        sink = readers.get(t, [])
        if len(sink) != 1 or len(readers.get(layers[i].inputs[0], [])) != 1:
            continue
        j = sink[0]
        mvm = layers[j]
        geo = mvm.geometry
        if (
            mvm.unit is not LayerUnit.MVM
            or mvm.runtime is not None
            or geo is None
            or geo.out_h * geo.out_w != 1
            or mvm.inputs[0] != t
            or t in mvm.inputs[1:]
            or mvm.lut_before_add
            or geo.cin != h * shape[3]
        ):
            continue
        found.append((i, j, chain))
    return found


def weight_sets(layers: Sequence[LayerPlan], cost: CostModel, opts: ImcOptions) -> int:
    """IMC weight sets the MVM layers need in all, each mapped whole (a run-time operand:
    one head's); neither replication nor the per-frame fetch changes the count."""
    total = 0
    for layer in layers:
        if layer.unit is not LayerUnit.MVM or layer.geometry is None:
            continue
        if layer.runtime is not None:
            total += len(head_mapping(layer.runtime, cost, opts).blocks)
        else:
            total += len(map_layer(layer.geometry, cost, opts, first_layer=layer.is_first).blocks)
    return total


def weight_fetch_bw(target: Target, layers: Sequence[LayerPlan]) -> float | None:
    """Bytes per cycle one core's weight fetch gets when several cores share the weights and
    they stream into L1 every frame; None when no per-frame fetch is shared (one core, a
    pipeline, or every weight set stays in the IMC, loaded once in INIT).

    A batch fetches once and multicasts (`multicast_fetch_bw`); in cooperative mode the
    cores of a channel split each fetch their own part, all at once, sharing the source.
    """
    links = _fetch_links(target, layers)
    if links is None:
        return None
    sharers = target.cores if target.effective_mode is MulticoreMode.COOPERATIVE else 1
    return target.cost.weight_fetch_bw(links, sharers)


def multicast_fetch_bw(target: Target, layers: Sequence[LayerPlan]) -> float | None:
    """Bytes per cycle of one per-frame weight fetch multicast into every core's L1 (a batch
    layer's, a cooperative row split's), None when no per-frame fetch is shared
    (`weight_fetch_bw`). The cost model charges a multicast as one transfer over its path
    (`isa.cost.CostModel.dma_transfer`: the NoC once, whatever the mask), so it gets the
    whole source, up to one channel, and its cycles are counted once, not once per core.
    """
    links = _fetch_links(target, layers)
    return None if links is None else target.cost.weight_fetch_bw(links)


def _fetch_links(target: Target, layers: Sequence[LayerPlan]) -> tuple[Link, ...] | None:
    """The links the per-frame weight fetch shared by several cores crosses from the
    weights' home, None without one (`weight_fetch_bw`). Shared weights live in L2 or DDR
    (memplan): DDR when that is their home and promotion cannot lift them, and DDR data
    crosses the L2 port too."""
    shared = (MulticoreMode.BATCH, MulticoreMode.COOPERATIVE)
    if target.cores == 1 or target.effective_mode not in shared:
        return None
    arch, knobs = target.arch, target.knobs
    if weight_sets(layers, target.cost, ImcOptions.from_config(knobs)) <= arch.mvm.weight_sets:
        return None
    if knobs.constant_memory_pool == "global.ddr" and not knobs.enable_buffer_promotion:
        return (Link.L2, Link.DDR)
    return (Link.L2,)


def _pipeline(
    layers: Sequence[LayerPlan],
    groups: Sequence[FusionGroup],
    cores: int,
    graph: Any,
    layer_work: Callable[[int], int],
) -> CoreLayout:
    work = [max(1, sum(layer_work(i) for i in g.layers)) for g in groups]
    computes = [any(layers[i].unit not in (LayerUnit.ALIAS,) for i in g.layers) for g in groups]
    compute_groups = sum(computes)
    if compute_groups < cores:
        raise ConfigError(
            f"aipu_cores_used must be at most the {compute_groups} layer groups a pipeline can "
            f"cut this model into, not {cores}"
        )
    total = sum(work)
    core_of_group: dict[int, int] = {}
    acc = 0
    stage = 0
    for gi, w in enumerate(work):
        remaining_groups = sum(computes[gi:])
        remaining_stages = cores - stage
        # move on when this stage has its share, keeping a group that computes for every
        # later stage (a stage of aliases only would leave its core without a task)
        if (
            computes[gi]
            and stage < cores - 1
            and (
                acc >= total * (stage + 1) / cores - w / 2
                or remaining_groups <= remaining_stages - 1
            )
            and acc > 0
        ):
            stage += 1
        core_of_group[gi] = stage
        acc += w
    stage_of_layer = {li: core_of_group[g.index] for g in groups for li in g.layers}
    producer_stage: dict[str, int] = {}
    shared: set[str] = set()
    for li, layer in enumerate(layers):
        st = stage_of_layer[li]
        for t in layer.inputs:
            if producer_stage.get(t, 0) != st or t in graph.inputs:
                shared.add(t)
        for o in layer.outputs:
            producer_stage[o] = st
    # aliases share their source's buffer: a shared alias shares its source too
    for layer in reversed(layers):
        if layer.unit is LayerUnit.ALIAS and set(layer.outputs) & shared:
            shared.update(layer.inputs)
    used = sorted(set(core_of_group.values()))
    assert used == list(range(cores)), f"pipeline stages {used} do not cover {cores} cores"
    return CoreLayout(
        cores, MulticoreMode.PIPELINE, core_of_group=core_of_group, shared_tensors=shared
    )


__all__ = [
    "CascadeSlot",
    "check_cascade",
    "check_resources",
    "core_layout",
    "head_parallel",
    "multicast_fetch_bw",
    "plan_cascade",
    "tensor_parallel",
    "weight_fetch_bw",
    "weight_sets",
]
