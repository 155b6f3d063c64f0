"""Per-layer analytic estimates: cycles on each unit, weight-load cycles, MACs.

These are first-order figures for ``report.json`` and for decisions (pipeline stage cuts,
tiling choices); the simulator measures the real time of the emitted tasks.

>>> from aipusim.arch import load_arch
>>> arch = load_arch()
>>> dpu_cycles(64 * 100, 1, arch)
116
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aipusim.arch import Arch
from aipusim.compiler.backend.attention import is_runtime, runtime_estimate
from aipusim.compiler.backend.lower import LayerPlan, LayerUnit
from aipusim.isa.dpu_work import TRANSFORMER_DPU_KINDS, dpu_task_cycles
from aipusim.isa.tasks import DwpuKind


@dataclass(frozen=True)
class LayerEstimate:
    """Estimated cycles of one layer per frame on one core (before multicore splitting)."""

    unit: str
    compute_cycles: int  # busy cycles of the layer's unit
    weight_load_cycles: int  # IMC weight writes (MVM layers)
    exposed_weight_cycles: int  # weight fetch + writes not hidden behind compute
    dma_cycles: int  # layout moves (DMA layers)
    macs: int

    @property
    def cycles(self) -> int:
        return self.compute_cycles + self.exposed_weight_cycles + self.dma_cycles


def dpu_cycles(elements: int, operands: int, arch: Arch) -> int:
    """Cycles the DPU needs for ``elements`` outputs (one lane-op per output per operand)."""
    del operands  # operands stream in parallel on the lane inputs
    return math.ceil(elements / arch.dpu.lanes) + arch.dpu.pipeline_latency_cycles


def dwpu_cycles(layer: LayerPlan, arch: Arch) -> int:
    geo = layer.geometry
    assert geo is not None
    groups = math.ceil(geo.cout / arch.dwpu.channels)
    if layer.dwpu_kind in (DwpuKind.RESIZE_NEAREST, DwpuKind.RESIZE_LINEAR):
        per_pixel = 1
    else:
        per_pixel = math.ceil(geo.kh * geo.kw / arch.dwpu.macs_per_channel_per_cycle)
    return groups * geo.out_h * geo.out_w * per_pixel + arch.dwpu.pipeline_latency_cycles


def dma_cycles(num_bytes: int, arch: Arch) -> int:
    return math.ceil(num_bytes / arch.dma.channel_bw_bytes_per_cycle) + arch.dma.setup_cycles


def estimate_layer(layer: LayerPlan, arch: Arch, *, weights_double_buffered: bool) -> LayerEstimate:
    """The estimate of one lowered layer (MVM layers need their IMC mapping first)."""
    if layer.unit is LayerUnit.MVM and is_runtime(layer):
        compute, load, exposed = runtime_estimate(
            layer, arch, double_buffered=weights_double_buffered
        )
        return LayerEstimate("mvm", compute, load, exposed, 0, layer.macs)
    if layer.unit is LayerUnit.MVM:
        imc = layer.imc
        assert imc is not None, f"{layer.name}: IMC mapping missing"
        compute = imc.compute_cycles + arch.mvm.pipeline_latency_cycles
        # streamed weights: a DMA into L1 staging, then the load into the array
        fetch = dma_cycles(imc.weight_bytes, arch)
        load = imc.weight_load_cycles
        sets = imc.weight_sets
        per_block = imc.compute_cycles // sets
        per_fetch, per_load = fetch // sets, load // sets
        if weights_double_buffered and sets > 1 and arch.mvm.weight_sets > 1:
            # after the first set, fetch and load of the next set run beside the compute
            hidden_behind = max(per_fetch, per_load)
            exposed = per_fetch + per_load + (sets - 1) * max(0, hidden_behind - per_block)
        else:
            # a load waits for the array to go idle; only the next fetch overlaps compute
            exposed = per_fetch + load + (sets - 1) * max(0, per_fetch - per_block)
        return LayerEstimate("mvm", compute, load, exposed, 0, layer.macs)
    if layer.unit is LayerUnit.DWPU:
        return LayerEstimate("dwpu", dwpu_cycles(layer, arch), 0, 0, 0, layer.macs)
    if layer.unit is LayerUnit.DPU and layer.dpu_kind in TRANSFORMER_DPU_KINDS:
        cycles = dpu_task_cycles(layer.dpu_kind, layer.elements, len(layer.inputs), arch)
        return LayerEstimate("dpu", cycles, 0, 0, 0, layer.macs)
    if layer.unit is LayerUnit.DPU:
        return LayerEstimate("dpu", dpu_cycles(layer.elements, len(layer.inputs), arch), 0, 0, 0, 0)
    if layer.unit is LayerUnit.DMA:
        return LayerEstimate("dma", 0, 0, 0, dma_cycles(sum(layer.out_bytes), arch), 0)
    return LayerEstimate("alias", 0, 0, 0, 0, 0)


__all__ = ["LayerEstimate", "dma_cycles", "dpu_cycles", "dwpu_cycles", "estimate_layer"]
