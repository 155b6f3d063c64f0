"""What a layer costs, from the one cost model (`aipusim.isa.cost`).

Two figures:

- `estimate_layers` (the ``estimate`` pass, for ``report.json``): the cost of every task
  the schedule emitted, gathered per layer: the busy cycles of each unit queue of each
  core in one frame, the array MACs, the bytes moved and the dynamic energy. A layer's busy
  cycles are exactly what the simulator measures for its tasks when nothing is shared
  (``contention=False``, ``tests/test_cost_pinning.py``). The simulator differs by design
  in two ways only: sharing (DDR, the NoC, L2, the system DMA, PCIe, a core's L1 ports)
  stretches a task that another one overlaps, never shortens it; dispatch and tokens delay
  when a task starts, never how long it runs.
- `plan_cost` (the pipeline's stage cuts before the schedule exists, and the report's
  ``estimated_cycles``): a layer's cycles on one core from the tasks it will emit, costed
  by the same model, with the fetch and load of streamed weights that compute does not
  hide.

>>> from aipusim.arch import load_arch
>>> from aipusim.isa.cost import CostModel
>>> from aipusim.isa.tasks import DpuKind
>>> CostModel(load_arch(overrides={"dpu.lanes": 64})).dpu_cycles(DpuKind.ADD, 64 * 100, 2)
216
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from aipusim.compiler.backend.common.target import Knobs
from aipusim.compiler.backend.imc.mapper import ImcMapping, block_posts
from aipusim.compiler.backend.lower.attention import runtime_estimate
from aipusim.compiler.backend.lower.layer import LayerPlan, LayerUnit, is_runtime
from aipusim.compiler.backend.tile.tiler import Tiling
from aipusim.isa.cost import CostModel, TaskCost, Traffic
from aipusim.isa.metrics import bytes_per_frame
from aipusim.isa.tasks import DpuThen, Phase, Pool, Task, Unit, table_after
from aipusim.isa.units import UnitRole, spec

_POOL_OF = {"global.ddr": Pool.DDR, "global.l2": Pool.L2, "global.l1": Pool.L1}


@dataclass(frozen=True)
class LayerEstimate:
    """What one layer's tasks cost per frame (FRAME phase) on the instance's cores."""

    unit: str  # the layer's unit (`LayerUnit` value)
    #: Busy cycles of each (core, unit queue) in one frame.
    busy: Mapping[tuple[int, str], int] = field(default_factory=dict)
    macs: int = 0  # array MACs (padded rows and columns included)
    energy_pj: float = 0.0  # dynamic energy at the nominal voltage
    traffic: Traffic = field(default_factory=Traffic)

    @property
    def cycles(self) -> int:
        """The layer's busiest unit queue on one core: a floor on its time."""
        return max(self.busy.values(), default=0)

    def by_unit(self) -> dict[str, int]:
        """Busy cycles per unit queue, summed over the cores."""
        out: dict[str, int] = defaultdict(int)
        for (_, unit), cycles in self.busy.items():
            out[unit] += cycles
        return dict(sorted(out.items()))

    @property
    def compute_cycles(self) -> int:
        """Busy cycles of the MVM, DPU and DWPU (all cores)."""
        return sum(c for u, c in self.by_unit().items() if u != Unit.WLOAD and _compute(u))

    @property
    def weight_load_cycles(self) -> int:
        """Busy cycles of the IMC weight-write port (all cores)."""
        return self.by_unit().get(Unit.WLOAD.value, 0)

    @property
    def dma_cycles(self) -> int:
        """Busy cycles of the DMA queues (all cores), over idle links."""
        return sum(c for u, c in self.by_unit().items() if spec(u).role is UnitRole.TRANSFER)


def _compute(unit: str) -> bool:
    return spec(unit).role is UnitRole.COMPUTE


def estimate_layers(
    layers: Sequence[LayerPlan], tasks: Mapping[int, Sequence[Task]], cost: CostModel
) -> tuple[tuple[LayerEstimate, ...], dict[str, LayerEstimate]]:
    """Per layer (aligned with ``layers``) the cost of its FRAME tasks; and the same for
    the tasks of no layer (``input``/``output`` host handshakes, INIT-only names), keyed by
    their layer name. INIT tasks are costed apart: `init_estimate`."""
    busy: dict[str, dict[tuple[int, str], int]] = defaultdict(lambda: defaultdict(int))
    macs: dict[str, int] = defaultdict(int)
    energy: dict[str, float] = defaultdict(float)
    traffic: dict[str, Traffic] = defaultdict(Traffic)
    for core, core_tasks in tasks.items():
        for t in core_tasks:
            if t.phase is not Phase.FRAME:
                continue
            c = cost.task(t)
            busy[t.layer][(core, t.unit.value)] += c.cycles
            macs[t.layer] += c.macs
            energy[t.layer] += c.energy_total_pj
            traffic[t.layer] = traffic[t.layer] + c.traffic

    def one(name: str, unit: str) -> LayerEstimate:
        return LayerEstimate(unit, dict(busy[name]), macs[name], energy[name], traffic[name])

    per_layer = tuple(one(layer.name, layer.unit.value) for layer in layers)
    names = {layer.name for layer in layers}
    others = {name: one(name, "ctrl") for name in busy if name not in names}
    return per_layer, others


def init_estimate(tasks: Mapping[int, Sequence[Task]], cost: CostModel) -> LayerEstimate:
    """The cost of the INIT tasks (constants brought on chip, resident weights loaded)."""
    busy: dict[tuple[int, str], int] = defaultdict(int)
    energy, moved = 0.0, Traffic()
    for core, core_tasks in tasks.items():
        for t in core_tasks:
            if t.phase is Phase.INIT:
                c = cost.task(t)
                busy[(core, t.unit.value)] += c.cycles
                energy += c.energy_total_pj
                moved = moved + c.traffic
    return LayerEstimate("init", dict(busy), 0, energy, moved)


def frame_bytes(
    estimates: Sequence[LayerEstimate],
    others: Mapping[str, LayerEstimate],
    host: Sequence[TaskCost],
    frames_per_start: int,
) -> dict[str, float]:
    """Bytes per frame over DDR, L2 and PCIe (`aipusim.isa.metrics.bytes_per_frame`): what
    the FRAME tasks of every layer and core move (``estimates`` and ``others``), plus the
    host's transfers of one start (``host``), for the ``frames_per_start`` frames of a start.
    INIT is not in it (once per instance, not per frame).
    """
    moved = sum((e.traffic for e in (*estimates, *others.values())), Traffic())
    moved = sum((h.traffic for h in host), moved)
    return bytes_per_frame(moved.as_dict(), frames_per_start)


# -- before the schedule: planning ------------------------------------------------------
@dataclass(frozen=True)
class PlanCost:
    """A layer's planned cycles per frame on one core (before the schedule)."""

    compute_cycles: int  # busy cycles of the layer's unit
    weight_load_cycles: int  # IMC weight writes (MVM layers)
    exposed_weight_cycles: int  # weight fetch + writes not hidden behind compute
    dma_cycles: int  # layout moves (DMA layers)

    @property
    def cycles(self) -> int:
        return self.compute_cycles + self.exposed_weight_cycles + self.dma_cycles


def plan_cost(
    layer: LayerPlan,
    imc: ImcMapping | None,
    tiling: Tiling,
    config: Knobs,
    cost: CostModel,
    *,
    weights_double_buffered: bool,
    weights_resident: bool = False,
) -> PlanCost:
    """The planned cost of one layer (``imc``: an MVM layer's mapping, whole): its tasks
    as it will be tiled, each costed by the model; streamed weights are fetched from their
    home pool into L1 and loaded, block by block, beside compute when a free weight set
    allows (``weights_double_buffered``). Resident weights (``weights_resident``: loaded
    once in INIT, `weight_plan.plan_weights`) cost no frame any load."""
    h_tiles = max(1, tiling.h_tiles)
    if layer.unit is LayerUnit.MVM:
        assert imc is not None, f"{layer.name}: IMC mapping missing"
        if is_runtime(layer):
            compute, load, exposed = runtime_estimate(
                layer, imc, cost.arch, double_buffered=weights_double_buffered
            )
            return PlanCost(compute, load, exposed, 0)
        posts = block_posts(imc.blocks, bool(layer.residual))
        per_block = [
            sum(cost.mvm_cycles(v, b.cols_used, post=post) for v in _split(imc.vectors, h_tiles))
            for b, post in zip(imc.blocks, posts, strict=True)
        ]
        compute = sum(per_block)
        if weights_resident:
            return PlanCost(compute, 0, 0, 0)
        home = _POOL_OF.get(str(getattr(config, "constant_memory_pool", "global.ddr")), Pool.DDR)
        fetches = [cost.dma_cycles(Unit.DMA1, home, Pool.L1, b.weight_bytes) for b in imc.blocks]
        loads = [cost.weight_load_cycles(b.weight_bytes) for b in imc.blocks]
        load = sum(loads)
        if weights_double_buffered and len(imc.blocks) > 1 and cost.arch.mvm.weight_sets > 1:
            # after the first block, fetch and load of the next run beside the compute
            exposed = (
                fetches[0]
                + loads[0]
                + sum(
                    max(0, max(f, ld) - c)
                    for f, ld, c in zip(fetches[1:], loads[1:], per_block, strict=False)
                )
            )
        else:
            # a load waits for the array to go idle; only the next fetch overlaps compute
            exposed = (
                fetches[0]
                + load
                + sum(max(0, f - c) for f, c in zip(fetches[1:], per_block, strict=False))
            )
        return PlanCost(compute, load, exposed, 0)
    if layer.unit is LayerUnit.DWPU:
        geo = layer.geometry
        assert geo is not None
        kh, kw = (geo.kh, geo.kw)
        compute = sum(
            cost.dwpu_cycles(geo.cout, rows, geo.out_w, kh, kw)
            for rows in _split(geo.out_h, h_tiles)
        )
        return PlanCost(compute, 0, 0, 0)
    if layer.unit is LayerUnit.DPU:
        kind = layer.dpu_kind
        assert kind is not None
        operands = max(1, min(2, len(layer.inputs)))
        table = table_after(kind, layer.lut)  # an activation fused after it (`dpu_chain`)
        then = layer.then is not DpuThen.NONE  # a second element-wise step (`dpu_chain`)
        compute = sum(
            cost.dpu_cycles(kind, n, operands, table=table, then=then)
            for n in _split(layer.elements, h_tiles)
        )
        return PlanCost(compute, 0, 0, 0)
    if layer.unit is LayerUnit.DMA:
        home = _POOL_OF.get(str(getattr(config, "workspace_memory_pool", "global.ddr")), Pool.DDR)
        moved = sum(cost.dma_cycles(Unit.DMA0, home, home, b) for b in layer.out_bytes if b)
        return PlanCost(0, 0, 0, moved)
    return PlanCost(0, 0, 0, 0)


def _split(total: int, parts: int) -> list[int]:
    """``total`` cut in ``parts`` tiles as the schedule cuts rows (the last may be short)."""
    per = math.ceil(total / parts)
    out = []
    done = 0
    while done < total:
        out.append(min(per, total - done))
        done += per
    return out or [0]


__all__ = ["LayerEstimate", "PlanCost", "estimate_layers", "init_estimate", "plan_cost"]
