"""MatMul of two activations (attention's Q·Kᵀ and attention·V): where it runs, what it costs.

Neither operand is a constant, so there are no weights to load at INIT. Two mappings:

- **MVM with run-time weights.** Per batch entry (a head), the second operand B (K x N,
  symmetric int8: `quant.quantize.imc_operands`) is written from L1 into an IMC weight set
  with `WeightLoad` (``K*N`` bytes, padded rows included, at the weight-load bandwidth) and
  the rows of A stream through it as M input vectors. The loads are frame tasks: their
  time and write energy are paid every frame. With weight double buffering
  (``imc_double_buffer_sequential``, or ``_pipeline`` for a tiled layer) the next head's
  operand loads into another weight set while one head computes; without it a load waits
  for the array to go idle, as for constant weights (`runtime_mvm` schedules it so).
- **DPU.** The lanes multiply and accumulate directly: ``2 * H*M*N*K`` lane operations
  (`aipusim.isa.dpu_work`), no weight writes, no MVM.

`choose` costs both for the layer's shapes (the IMC mapping of one head's K x N block, the
per-head loads, exposed unless double buffered) and takes the faster, the lower energy on a
tie. For attention (K = 64 or N = 197 columns, M = 197 vectors per head) the MVM is 40-90x
faster (DeiT-Tiny's Q.K^T: 4,788 cycles, 3,212 double buffered, against 232,870 on the
DPU; the simulated layer takes the same 4,788); the DPU wins only for
tiny products (one vector through a 16 x 16 operand), where writing B into the array and
the MVM pipeline cost more than the products themselves. The choice, both cycle counts
and both energies are kept in ``layer.extra["matmul_choice"]`` and land in report.json.

>>> from aipusim.arch import load_arch
>>> from aipusim.compiler.backend.imc import ImcOptions
>>> c = choose(RuntimeMatmul(heads=3, m=197, k=64, n=197), load_arch(), ImcOptions())
>>> c.unit, c.mvm_cycles < c.dpu_cycles
('mvm', True)
>>> choose(RuntimeMatmul(heads=1, m=1, k=16, n=16), load_arch(), ImcOptions()).unit
'dpu'
"""

from __future__ import annotations

from dataclasses import dataclass

from aipusim.arch import Arch
from aipusim.compiler.backend.imc import ImcMapping, ImcOptions, map_layer
from aipusim.compiler.backend.lower import (
    RUNTIME,
    ConvGeometry,
    LayerPlan,
    LayerUnit,
    RuntimeMatmul,
    is_runtime,
    runtime_shapes,
)
from aipusim.isa.dpu_work import dpu_charged_ops, dpu_task_cycles
from aipusim.isa.tasks import DpuKind

#: ``layer.extra`` key of the costed choice.
CHOICE = "matmul_choice"


@dataclass(frozen=True)
class MatmulChoice:
    """Both mappings' cycles and dynamic energy (pJ) per frame, and the one taken."""

    unit: str  # "mvm" or "dpu"
    mvm_cycles: int
    dpu_cycles: int
    mvm_energy_pj: float
    dpu_energy_pj: float
    weight_bytes_per_frame: int  # written into the IMC every frame (MVM)

    def as_dict(self) -> dict[str, object]:
        return {
            "unit": self.unit,
            "mvm_cycles": self.mvm_cycles,
            "dpu_cycles": self.dpu_cycles,
            "mvm_energy_pj": round(self.mvm_energy_pj, 1),
            "dpu_energy_pj": round(self.dpu_energy_pj, 1),
            "imc_weight_bytes_per_frame": self.weight_bytes_per_frame,
        }


def head_mapping(mm: RuntimeMatmul, arch: Arch, opts: ImcOptions) -> ImcMapping:
    """The IMC mapping of one head (its K x N operand and M vectors)."""
    one = ConvGeometry(mm.k, mm.n, 1, 1, 1, 1, 1, mm.m, 1, mm.m)
    return map_layer(one, arch, opts, first_layer=False)


def exposed_loads(
    heads: int, load: int, per_head: int, arch: Arch, *, double_buffered: bool
) -> int:
    """Weight-load cycles not hidden. Double buffered: the first head's, then whatever of
    each next head's load outlasts the previous head's compute; otherwise (or with a single
    weight set) every load, since it waits for the array to go idle."""
    if double_buffered and arch.mvm.weight_sets > 1:
        return load + (heads - 1) * max(0, load - per_head)
    return heads * load


def mvm_frame_cycles(
    mm: RuntimeMatmul, head: ImcMapping, arch: Arch, *, double_buffered: bool
) -> int:
    """Per frame: each head's compute, plus the loads it does not hide."""
    compute = head.compute_cycles + arch.mvm.pipeline_latency_cycles
    exposed = exposed_loads(
        mm.heads, head.weight_load_cycles, compute, arch, double_buffered=double_buffered
    )
    return mm.heads * compute + exposed


def choose(
    mm: RuntimeMatmul, arch: Arch, opts: ImcOptions, *, double_buffered: bool = False
) -> MatmulChoice:
    """Cost both mappings of ``mm`` (see the module docstring) and pick one;
    ``double_buffered``: the next head's operand may load while one head computes."""
    head = head_mapping(mm, arch, opts)
    e = arch.energy
    load_bytes = mm.heads * head.weight_bytes
    mvm_cycles = mvm_frame_cycles(mm, head, arch, double_buffered=double_buffered)
    active_macs = mm.heads * head.vectors * sum(b.rows_used * b.cols_used for b in head.blocks)
    mvm_energy = (
        active_macs * e.mvm_mac_pj
        + load_bytes * (e.imc_weight_write_pj_per_byte + e.l1_read_pj_per_byte)
        + mm.heads * mm.m * mm.n * e.dpu_requant_act_pj
    )
    dpu_cycles = dpu_task_cycles(DpuKind.MATMUL, mm.macs, 2, arch)
    dpu_energy = dpu_charged_ops(DpuKind.MATMUL, mm.macs, 2, arch) * e.dpu_lane_op_pj
    faster_dpu = (dpu_cycles, dpu_energy) < (mvm_cycles, mvm_energy)
    return MatmulChoice(
        "dpu" if faster_dpu else "mvm", mvm_cycles, dpu_cycles, mvm_energy, dpu_energy,
        0 if faster_dpu else load_bytes,
    )  # fmt: skip


def map_runtime_layers(
    layers: list[LayerPlan], arch: Arch, opts: ImcOptions, *, double_buffered: bool = False
) -> None:
    """The IMC pass's part for activation x activation MatMuls: cost both mappings, keep the
    MVM ones (their `imc` is the mapping of one head: its operand and its M vectors) and
    turn the others into DPU layers. ``double_buffered``: the config's weight double
    buffering of an untiled layer (tiles are not cut yet)."""
    for layer in layers:
        if not is_runtime(layer):
            continue
        mm: RuntimeMatmul = layer.extra[RUNTIME]
        choice = choose(mm, arch, opts, double_buffered=double_buffered)
        layer.extra[CHOICE] = choice
        if choice.unit == "dpu":
            del layer.extra[RUNTIME]
            layer.unit = LayerUnit.DPU
            layer.dpu_kind = DpuKind.MATMUL
            layer.elements = mm.macs
            layer.extra["macs"] = mm.macs
            layer.geometry = None
            layer.imc = None
        else:
            # one head: its M vectors against one load of its operand, as `choose` costed
            layer.imc = head_mapping(mm, arch, opts)


def runtime_estimate(
    layer: LayerPlan, arch: Arch, *, double_buffered: bool = False
) -> tuple[int, int, int]:
    """(compute, weight-load, exposed weight-load) cycles per frame of an MVM layer with
    run-time weights (every head loads its operand)."""
    mm: RuntimeMatmul = layer.extra[RUNTIME]
    imc = layer.imc  # one head's mapping
    per_head = imc.compute_cycles + arch.mvm.pipeline_latency_cycles
    load = imc.weight_load_cycles
    exposed = exposed_loads(mm.heads, load, per_head, arch, double_buffered=double_buffered)
    return mm.heads * per_head, mm.heads * load, exposed


__all__ = [
    "CHOICE",
    "RUNTIME",
    "MatmulChoice",
    "RuntimeMatmul",
    "choose",
    "exposed_loads",
    "head_mapping",
    "is_runtime",
    "map_runtime_layers",
    "mvm_frame_cycles",
    "runtime_estimate",
    "runtime_shapes",
]
