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
faster (DeiT-Tiny's Q.K^T: 7,308 cycles, 6,126 double buffered, against 232,870 on the
DPU: its heads are interleaved, so the MVM moves 3x its bytes, see `operand_block`); the DPU
wins only for
tiny products (one vector through a 16 x 16 operand), where writing B into the array and
the MVM pipeline cost more than the products themselves. The choice, both cycle counts
and both energies are kept in the layer's ``matmul_choice`` and land in report.json.

>>> from aipusim.arch import load_arch
>>> from aipusim.compiler.backend.imc.mapper import ImcOptions
>>> from aipusim.isa.cost import cost_model
>>> cost = cost_model(load_arch())
>>> c = choose(RuntimeMatmul(heads=3, m=197, k=64, n=197), cost, ImcOptions())
>>> c.unit, c.mvm_cycles < c.dpu_cycles
('mvm', True)
>>> choose(RuntimeMatmul(heads=1, m=1, k=16, n=16), cost, ImcOptions()).unit
'dpu'
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from aipusim.arch import Arch
from aipusim.compiler.backend.imc.mapper import ImcBlock, ImcMapping, ImcOptions, map_layer
from aipusim.compiler.backend.lower.layer import (
    ConvGeometry,
    LayerPlan,
    LayerUnit,
    MatmulChoice,
    RuntimeMatmul,
)
from aipusim.isa.cost import CostModel
from aipusim.isa.tasks import DpuKind, DpuOp, Mvm, PostOp, Task, Unit, WeightLoad


def head_mapping(mm: RuntimeMatmul, cost: CostModel, opts: ImcOptions) -> ImcMapping:
    """The IMC mapping of one head (its K x N operand and M vectors): the constant-weight
    mapping of a 1x1 conv, its cycles charged for the operands' strides (``mm.steps``)."""
    one = ConvGeometry(mm.k, mm.n, 1, 1, 1, 1, 1, mm.m, 1, mm.m)
    m = map_layer(one, cost, opts, first_layer=False)
    if mm.steps == (1, 1, 1):
        return m
    pitches = (mm.steps[0], mm.steps[2])
    compute = sum(
        cost.mvm_cycles(m.vectors, b.cols_used, b.rows_used, pitches=pitches) for b in m.blocks
    )
    load = sum(
        cost.weight_load_cycles(
            b.weight_bytes, operand_block(mm, m, b, cost.arch.mvm.rows).read_bytes
        )
        for b in m.blocks
    )
    return replace(m, compute_cycles=compute, weight_load_cycles=load)


@dataclass(frozen=True)
class OperandBlock:
    """Where weight block ``(row_block, col_block)`` of a head's operand B comes from: its
    first element (row, column of B), the rows and columns of B it holds, its ICR copies
    ``copy_rows`` apart, and what the load reads (B's elements ``step`` apart)."""

    row: int
    col: int
    rows: int
    cols: int
    copies: int
    copy_rows: int
    step: int

    @property
    def read_bytes(self) -> int:
        return self.rows * self.cols * self.step


def operand_block(
    mm: RuntimeMatmul, head: ImcMapping, blk: ImcBlock, array_rows: int
) -> OperandBlock:
    """The part of B that weight block ``blk`` of ``head`` holds. ICR copies the operand
    along the diagonal (rows of a 1x1 window's taps, ``cin_padded`` apart, or ``k`` with
    swICR); ICR over several row blocks is not expressed (the schedule marks it timed
    only)."""
    copies = head.icr
    cols = blk.cols_used // copies
    copy_rows = mm.k if head.swicr else head.cin_padded
    row = blk.row_block * array_rows
    rows = min(mm.k - row, blk.rows_used) if copies == 1 else mm.k
    return OperandBlock(row, blk.col_block * head.active_cols, rows, cols, copies, copy_rows,
                        mm.steps[1])  # fmt: skip


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
    compute = head.compute_cycles
    exposed = exposed_loads(
        mm.heads, head.weight_load_cycles, compute, arch, double_buffered=double_buffered
    )
    return mm.heads * compute + exposed


def head_tasks(mm: RuntimeMatmul, head: ImcMapping, arch: Arch) -> list[Task]:
    """The tasks of one head on the MVM: per weight block a load and an `Mvm` (their cost
    fields as the schedule emits them)."""
    tasks: list[Task] = []
    for blk in head.blocks:
        last_row = blk.row_block == head.row_blocks - 1
        src = operand_block(mm, head, blk, arch.mvm.rows)
        tasks.append(
            WeightLoad(unit=Unit.WLOAD, weight_set=0, src_addr=0, bytes=blk.weight_bytes,
                       rows_used=blk.rows_used, cols_used=blk.cols_used, src_rows=src.rows,
                       src_pitch=src.step, copies=src.copies, col_sums=1)
        )  # fmt: skip
        tasks.append(
            Mvm(unit=Unit.MVM, weight_set=0, in_addr=0, out_addr=0, vectors=head.vectors,
                rows_used=blk.rows_used, cols_used=blk.cols_used, icr=head.icr,
                accumulate=int(blk.row_block > 0),
                post=PostOp.REQUANT if last_row else PostOp.NONE,
                in_chan_pitch=mm.steps[0], out_chan_pitch=mm.steps[2])
        )  # fmt: skip
    return tasks


def choose(
    mm: RuntimeMatmul, cost: CostModel, opts: ImcOptions, *, double_buffered: bool = False
) -> MatmulChoice:
    """Cost both mappings of ``mm`` (see the module docstring) and pick one; the energies
    are the cost model's for the tasks each mapping emits. ``double_buffered``: the next
    head's operand may load while one head computes."""
    arch = cost.arch
    head = head_mapping(mm, cost, opts)
    load_bytes = mm.heads * head.weight_bytes
    mvm_cycles = mvm_frame_cycles(mm, head, arch, double_buffered=double_buffered)
    mvm_energy = mm.heads * sum(cost.task(t).energy_total_pj for t in head_tasks(mm, head, arch))
    dpu = cost.task(
        DpuOp(unit=Unit.DPU, kind=DpuKind.MATMUL, in_addr0=0, in_addr1=0, out_addr=0,
              elements=mm.macs, operands=2)
    )  # fmt: skip
    dpu_cycles, dpu_energy = dpu.cycles, dpu.energy_total_pj
    faster_dpu = (dpu_cycles, dpu_energy) < (mvm_cycles, mvm_energy)
    return MatmulChoice(
        "dpu" if faster_dpu else "mvm", mvm_cycles, dpu_cycles, mvm_energy, dpu_energy,
        0 if faster_dpu else load_bytes,
    )  # fmt: skip


def assign_units(
    layers: tuple[LayerPlan, ...],
    cost: CostModel,
    opts: ImcOptions,
    *,
    double_buffered: bool = False,
) -> tuple[LayerPlan, ...]:
    """Cost both mappings of every activation x activation MatMul and put it on the faster
    unit: the MVM ones keep their `RuntimeMatmul`, the others become DPU layers. Each keeps
    its `MatmulChoice` (for report.json). ``double_buffered``: the config's weight double
    buffering of an untiled layer (tiles are not cut yet)."""
    out = []
    for layer in layers:
        mm = layer.runtime
        if mm is None:
            out.append(layer)
            continue
        choice = choose(mm, cost, opts, double_buffered=double_buffered)
        if choice.unit == "dpu":
            layer = replace(
                layer,
                unit=LayerUnit.DPU,
                dpu_kind=DpuKind.MATMUL,
                elements=mm.macs,
                geometry=None,
                runtime=None,
            )
        out.append(replace(layer, matmul_choice=choice))
    return tuple(out)


def runtime_estimate(
    layer: LayerPlan, imc: ImcMapping, arch: Arch, *, double_buffered: bool = False
) -> tuple[int, int, int]:
    """(compute, weight-load, exposed weight-load) cycles per frame of an MVM layer with
    run-time weights (every head loads its operand); ``imc`` maps one head."""
    mm = layer.runtime
    assert mm is not None, layer.name
    per_head = imc.compute_cycles
    load = imc.weight_load_cycles
    exposed = exposed_loads(mm.heads, load, per_head, arch, double_buffered=double_buffered)
    return mm.heads * per_head, mm.heads * load, exposed


__all__ = [
    "assign_units",
    "choose",
    "exposed_loads",
    "head_mapping",
    "head_tasks",
    "mvm_frame_cycles",
    "operand_block",
    "runtime_estimate",
]
