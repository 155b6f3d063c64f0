"""The layer IR of the back end: `LayerPlan` (one node, plus what is fused into it, on the
unit that runs it), its constants and window arithmetic, and the byte sizes of tensors on
the AIPU (docs/architecture.md §5). The `lower` pass (`units`) makes the plans; every later
pass reads them.

>>> memory_rows((2, 8, 5, 5)), memory_rows((1, 197, 768))
(10, 197)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from aipusim.compiler.ir import DType, Graph
from aipusim.isa.tasks import DpuKind, DpuThen, DwpuKind, LutKind


class LayerUnit(StrEnum):
    """Which unit carries a layer."""

    MVM = "mvm"
    DPU = "dpu"
    DWPU = "dwpu"
    DMA = "dma"  # layout moves (copies between buffers)
    ALIAS = "alias"  # a new view of the input buffer: no task at all


class ConstKind(StrEnum):
    WEIGHT = "weight"  # IMC weights (MVM) or DWPU kernels, int8
    DPU_CONST = "dpu_const"  # biases, requantize scales, BN/element-wise operands


@dataclass(frozen=True)
class ConstRef:
    """A constant a layer needs on chip, with its size after quantization."""

    name: str
    size_bytes: int
    kind: ConstKind


@dataclass(frozen=True)
class ConvGeometry:
    """The window arithmetic of an MVM or DWPU layer (Gemm/MatMul: 1x1 over 1 x M pixels)."""

    cin: int
    cout: int
    kh: int
    kw: int
    stride_h: int
    stride_w: int
    in_h: int
    in_w: int
    out_h: int
    out_w: int
    groups: int = 1
    #: Rows and columns of padding before the first input row/column (where the window of
    #: output (0, 0) starts: ``-pad_top``), and the spacing of window taps.
    pad_top: int = 0
    pad_left: int = 0
    dilation_h: int = 1
    dilation_w: int = 1
    #: A transposed conv runs over its input spread ``upsample``-fold (its stride), which
    #: holds ``src_h`` x ``src_w`` real pixels (0: ``in_h`` x ``in_w``, no spreading).
    upsample: int = 1
    src_h: int = 0
    src_w: int = 0
    #: Images of a batch, stacked as rows (``in_h`` and ``out_h`` count all of them).
    images: int = 1

    @property
    def src_rows(self) -> int:
        """Memory rows of the input (all images)."""
        return self.src_h or self.in_h

    @property
    def src_cols(self) -> int:
        """Pixels per memory row of the input."""
        return self.src_w or self.in_w

    @property
    def macs(self) -> int:
        per_out = self.kh * self.kw * (self.cin // self.groups)
        return self.out_h * self.out_w * self.cout * per_out


@dataclass(frozen=True)
class RuntimeMatmul:
    """[heads] x (M x K) @ (K x N): the shapes of an activation x activation MatMul.
    ``steps``: bytes between neighbouring elements of A, B and the output (the heads'
    count where the heads are the channels of a channels-last tensor, else 1)."""

    heads: int
    m: int
    k: int
    n: int
    steps: tuple[int, int, int] = (1, 1, 1)

    @property
    def macs(self) -> int:
        return self.heads * self.m * self.k * self.n

    def geometry(self) -> ConvGeometry:
        """As the MVM sees it: a 1x1 'conv' of K inputs and N outputs over M vectors per
        head; the heads are the rows (what tiles and row splits cut)."""
        return ConvGeometry(self.k, self.n, 1, 1, 1, 1, self.heads, self.m, self.heads, self.m)


@dataclass(frozen=True)
class MatmulChoice:
    """Where an activation x activation MatMul runs: both mappings' cycles and dynamic
    energy (pJ) per frame, and the one taken (`aipusim.compiler.backend.lower.attention`)."""

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


@dataclass(frozen=True)
class LayerPlan:
    """One layer of the back end: a node (plus fused activations) on the unit that runs it.

    What later passes decide about a layer (its tiling, IMC mapping, memory, tasks) lives
    in their own IR (`aipusim.compiler.backend.common.ir`), never written back into the plan.
    """

    name: str
    op: str
    unit: LayerUnit
    inputs: tuple[str, ...]  # activation tensors read (constants excluded)
    outputs: tuple[str, ...]  # activation tensors written
    in_bytes: tuple[int, ...]
    out_bytes: tuple[int, ...]
    consts: tuple[ConstRef, ...] = ()
    geometry: ConvGeometry | None = None
    dpu_kind: DpuKind | None = None
    dwpu_kind: DwpuKind | None = None
    lut: LutKind = LutKind.NONE
    elements: int = 0  # output elements (DPU work, DMA layout moves; DPU MatMul: its MACs)
    fused: tuple[str, ...] = ()  # names of activation nodes folded into this layer
    is_first: bool = False  # reads a graph input directly (swICR candidate)
    rows: int = 1  # output rows H (the dimension tiles split)
    #: An MVM layer whose weights are an activation written at run time (attention).
    runtime: RuntimeMatmul | None = None
    #: The costed choice of an activation x activation MatMul (MVM or DPU).
    matmul_choice: MatmulChoice | None = None
    #: A DPU layer whose every output row depends on its own input row only (element-wise
    #: work, or a softmax/normalisation along the last axis of a row-major tensor).
    rowwise: bool = False
    #: The residual Add fused on an MVM layer's output stream (`residual`): its second
    #: input is the Add's other operand.
    residual: str = ""
    #: A second element-wise layer (``fused[0]``) computed on this DPU layer's result in
    #: the same pass (`dpu_chain`): its kind; its other operand is an input or a constant.
    then: DpuThen = DpuThen.NONE

    @property
    def lut_before_add(self) -> bool:
        """A fused residual add that follows the layer's own activation (conv + SiLU +
        Add: `aipusim.isa.tasks.PostOp.REQUANT_LUT_ADD`), not one before it."""
        return bool(self.residual) and self.fused[0] != self.residual

    @property
    def weight_bytes(self) -> int:
        return sum(c.size_bytes for c in self.consts if c.kind is ConstKind.WEIGHT)

    @property
    def dpu_const_bytes(self) -> int:
        return sum(c.size_bytes for c in self.consts if c.kind is ConstKind.DPU_CONST)

    @property
    def macs(self) -> int:
        """The network's multiply-accumulates of the layer in one frame."""
        if self.geometry is not None:
            return self.geometry.macs
        return self.elements if self.dpu_kind is DpuKind.MATMUL else 0


def activation_bytes(graph: Graph, name: str) -> int:
    """Bytes of an activation tensor on the AIPU: one int8 per element, two for the 16-bit
    tensors of the quantized graph (`quant.quantize.wide_tensors`)."""
    t = graph.tensor(name)
    return max(1, t.size * (2 if t.dtype is DType.INT16 else 1))


def const_bytes(array: np.ndarray, *, bias: bool) -> int:
    """Quantized size of a constant: int8 weights, int32 biases (integer arrays as they are)."""
    if np.issubdtype(array.dtype, np.integer):
        return int(array.nbytes)
    return int(array.size) * (4 if bias else 1)


def memory_rows(shape: tuple[int, ...]) -> int:
    """Rows of a tensor in memory: ``N * H`` of a 4-D tensor (channels-last), else one per
    vector of the last axis (row-major).

    >>> memory_rows((2, 8, 5, 5)), memory_rows((1, 197, 768)), memory_rows((10,))
    (10, 197, 1)
    """
    if len(shape) == 4:
        return shape[0] * shape[2]
    return max(1, math.prod(shape[:-1]))


def is_shortcut(layer: LayerPlan, k: int) -> bool:
    """True for input ``k`` of an MVM layer that is the shortcut of its fused residual add
    (laid out as the layer's output, read row for row with it)."""
    return bool(layer.residual) and k == 1


def is_runtime(layer: LayerPlan) -> bool:
    """True for an MVM layer whose weights are an activation written at run time."""
    return layer.runtime is not None


__all__ = [
    "ConstKind",
    "ConstRef",
    "ConvGeometry",
    "LayerPlan",
    "LayerUnit",
    "MatmulChoice",
    "RuntimeMatmul",
    "activation_bytes",
    "const_bytes",
    "is_runtime",
    "is_shortcut",
    "memory_rows",
]
