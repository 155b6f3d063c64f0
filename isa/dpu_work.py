"""Lane operations of a `DpuOp`: how much work each DPU task kind is, from its kernel.

The DPU has ``arch.dpu.lanes`` lanes that each do one operation a cycle (int8/int32 or
float18 add or multiply, or a table lookup). A task's duration is its lane operations over
the lanes, plus the pipeline latency; its energy is charged per element. The element-wise
kinds read ``operands`` inputs per element (one operation each). The transformer kinds
follow their int8 kernels (`aipusim.isa.fp_kernels`):

- ``layernorm``: 2 for the statistics (x and x*x summed as integers), then 4 per element
  (N*x - S1, times the row factor, times gamma, plus beta: float18) and the conversion to
  int8; the per-row square root and reciprocal are negligible against N >= 64 elements;
- ``div`` (two tensors, float18): the quotient takes ``float_div_sqrt_cycles`` lane cycles,
  then one multiply by the output scale;
- ``pow``: the log2 table lookup, two multiplies (exponent scale, log), the exp2 table
  lookup with its exponent add, the output scale;
- ``matmul``: ``elements`` counts multiply-accumulates, each a multiply and an add;
- ``psum``: ``operands`` int32 partial sums an element: an add for each after the first,
  the requantize's multiply and its shift; each partial sum is 4 bytes read.

>>> from aipusim.arch import load_arch
>>> dpu_lane_ops(DpuKind.LAYERNORM, 100, 1, load_arch())
700
>>> dpu_lane_ops(DpuKind.ADD, 100, 2, load_arch())
200
>>> dpu_lane_ops(DpuKind.ADD, 100, 2, load_arch(), table=True)
300
>>> dpu_lane_ops(DpuKind.MUL, 100, 2, load_arch(), then=True)  # Mul then Add: 2 + 2 a result
400
>>> dpu_read_bytes(DpuKind.MUL, 100, 2, then=True)  # the Mul's operands, the Add's other one
300
"""

from __future__ import annotations

from typing import Any

from aipusim.isa.tasks import DpuKind

#: Lane operations per element of the fixed-cost transformer kinds (see the docstring).
LAYERNORM_OPS_PER_ELEMENT = 7
POW_OPS_PER_ELEMENT = 6
MATMUL_OPS_PER_MAC = 2
#: Lane operations per element of a second element-wise step (`DpuOp.then`): one per
#: operand, as the step would cost as a task of its own.
THEN_OPS_PER_ELEMENT = 2
#: Lane operations of the requantize after a ``psum`` task's adds: the multiply, the shift.
PSUM_REQUANT_OPS = 2
#: Bytes of one int32 partial sum (the MVM's, and what a ``psum`` task reads).
PSUM_BYTES = 4


def dpu_lane_ops(
    kind: DpuKind,
    elements: int,
    operands: int,
    arch: Any,
    *,
    table: bool = False,
    then: bool = False,
) -> int:
    """Lane operations of a DPU task of ``kind`` over ``elements`` with ``operands`` inputs;
    ``table``: an element-wise kind then looks every result up in a table (an activation
    fused after it, `aipusim.isa.tasks.table_after`), one more operation per element;
    ``then``: a second element-wise step follows (`DpuOp.then`), two more."""
    if kind == DpuKind.LAYERNORM:
        return elements * LAYERNORM_OPS_PER_ELEMENT
    if kind == DpuKind.POW:
        return elements * POW_OPS_PER_ELEMENT
    if kind == DpuKind.MATMUL:
        return elements * MATMUL_OPS_PER_MAC
    if kind == DpuKind.DIV:
        return elements * (arch.dpu.float_div_sqrt_cycles + 1)
    if kind == DpuKind.PSUM:
        return elements * (max(1, operands) - 1 + PSUM_REQUANT_OPS + int(table))
    return elements * (max(1, operands) + int(table) + THEN_OPS_PER_ELEMENT * int(then))


#: The kinds with their own lane-operation count (the others: one per element and operand).
#: Their every lane operation is charged energy (the table's element-wise costs are per
#: output element).
TRANSFORMER_DPU_KINDS = frozenset(
    {DpuKind.LAYERNORM, DpuKind.POW, DpuKind.MATMUL, DpuKind.DIV, DpuKind.PSUM}
)


def dpu_charged_ops(
    kind: DpuKind, elements: int, operands: int, arch: Any, *, then: bool = False
) -> int:
    """Operations the energy table charges ``dpu_lane_op_pj`` for: one per output element
    for the element-wise kinds (two with a second step, ``then``), every lane operation
    for the transformer kinds."""
    if kind in TRANSFORMER_DPU_KINDS:
        return dpu_lane_ops(kind, elements, operands, arch)
    return elements * (1 + int(then))


#: Passes over the input a kind makes (LayerNorm reads its row once for the statistics and
#: once to normalise it).
_READ_PASSES = {DpuKind.LAYERNORM: 2}


def dpu_read_bytes(
    kind: DpuKind, elements: int, operands: int, arch: Any = None, *, then: bool = False
) -> int:
    """Bytes a DPU task reads from L1: each operand once per element and pass (``matmul``:
    both factors of every multiply-accumulate); ``then``: the second step's other operand
    too (its first operand is the first step's result, kept in the lane: never read)."""
    del arch  # operands are int8 (a wide tensor's task counts its elements twice)
    if kind == DpuKind.MATMUL:
        return elements * MATMUL_OPS_PER_MAC
    if kind == DpuKind.PSUM:
        return elements * max(1, operands) * PSUM_BYTES
    return elements * (max(1, operands) * _READ_PASSES.get(kind, 1) + int(then))


__all__ = [
    "LAYERNORM_OPS_PER_ELEMENT",
    "MATMUL_OPS_PER_MAC",
    "POW_OPS_PER_ELEMENT",
    "PSUM_BYTES",
    "PSUM_REQUANT_OPS",
    "THEN_OPS_PER_ELEMENT",
    "TRANSFORMER_DPU_KINDS",
    "dpu_charged_ops",
    "dpu_lane_ops",
    "dpu_read_bytes",
]
