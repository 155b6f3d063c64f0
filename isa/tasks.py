"""Tasks: the instructions of a core's tasklist (DESIGN.md §3).

Every task kind is declared ONCE here as a frozen dataclass whose kind-specific fields carry
their binary width in ``metadata`` (``bits``, and ``enum`` for fixed choices). The binary
encoder/decoder, the text assembler and the simulator are all generic over these
declarations, so a new kind or field is a change in this file only.

Every task also carries the common part: the unit queue it runs on, its origin (layer,
tile, frame slot), its phase (``init`` runs once per instance, ``frame`` once per frame) and
the hardware tokens it waits for before it starts and signals when it ends.

Token semantics: a token is a counting semaphore. ``TokenRef(scope, index, count)`` in
``waits`` blocks the task until the token holds at least ``count`` and then takes ``count``
away; in ``signals`` it adds ``count`` when the task ends. Because unit queues are in order,
the k-th wait on a producer->consumer token matches the producer's k-th signal.

>>> t = Mvm(unit=Unit.MVM, layer="conv1", weight_set=0, in_addr=0, out_addr=4096,
...         vectors=100, rows_used=147, cols_used=64, icr=1,
...         waits=(TokenRef(TokenScope.LOCAL, 3, 1),))
>>> t.macs
940800
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, ClassVar


class Unit(enum.StrEnum):
    """The unit queues of one core. Each runs its own queue in order."""

    MVM = "mvm"  # D-IMC matrix-vector multiplier (with its DPU output stream)
    WLOAD = "wload"  # IMC weight-set write port: loads a set while another computes
    DPU = "dpu"  # vector unit: element-wise ops, LUT activations
    DWPU = "dwpu"  # depthwise unit: depthwise conv, pooling, resize
    DMA0 = "dma0"  # core DMA channel 0
    DMA1 = "dma1"  # core DMA channel 1
    SYSDMA = "sysdma"  # the chip's system DMA (DDR -> L2), shared by the cores
    CTRL = "ctrl"  # the RISC-V control core itself (barriers, host handshakes)


class Pool(enum.StrEnum):
    """Where a buffer lives."""

    DDR = "ddr"
    L2 = "l2"
    L1 = "l1"
    HOST = "host"


class Phase(enum.StrEnum):
    """``init`` tasks run once when an instance starts (constants to L2/IMC); ``frame``
    tasks run for every frame."""

    INIT = "init"
    FRAME = "frame"


class TokenScope(enum.StrEnum):
    LOCAL = "local"  # one of the core's own tokens
    GLOBAL = "global"  # a chip-global token, for cross-core synchronisation


class PostOp(enum.StrEnum):
    """What the DPU does to the MVM's int32 outputs as they stream out."""

    NONE = "none"  # keep int32 partial sums (more row blocks follow)
    REQUANT = "requant"  # bias + requantize to int8
    REQUANT_LUT = "requant_lut"  # bias + requantize + LUT activation


class DpuKind(enum.StrEnum):
    REQUANT = "requant"
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    LUT = "lut"  # any non-linear function through the lookup table
    REDUCE = "reduce"  # reductions along channels (ReduceMean, Softmax sums)
    SOFTMAX = "softmax"
    COPY = "copy"  # layout moves the DMA cannot express (Transpose of small tensors)
    # transformer ops (see `aipusim.isa.dpu_work` for their lane operations)
    LAYERNORM = "layernorm"  # integer row statistics, float18 normalisation
    POW = "pow"  # a tensor to a tensor power (log2 table, float18 multiply, exp2)
    MATMUL = "matmul"  # product of two activations: ``elements`` counts the MACs


class LutKind(enum.StrEnum):
    NONE = "none"
    RELU = "relu"
    CLIP = "clip"
    SIGMOID = "sigmoid"
    HARD_SIGMOID = "hard_sigmoid"
    HARD_SWISH = "hard_swish"
    SILU = "silu"
    EXP = "exp"
    ERF = "erf"
    GELU = "gelu"
    SQRT = "sqrt"
    RECIPROCAL = "reciprocal"
    POW = "pow"
    TANH = "tanh"


class DwpuKind(enum.StrEnum):
    DWCONV = "dwconv"
    MAXPOOL = "maxpool"
    AVGPOOL = "avgpool"
    GLOBALPOOL = "globalpool"
    RESIZE_NEAREST = "resize_nearest"
    RESIZE_LINEAR = "resize_linear"


class Direction(enum.StrEnum):
    H2D = "h2d"
    D2H = "d2h"


_REQUIRED: Any = dataclasses.MISSING


def bits(n: int, *, enum_type: type[enum.StrEnum] | None = None, default: Any = _REQUIRED) -> Any:
    """A kind-specific task field of ``n`` bits (unsigned), optionally an enum index."""
    return field(default=default, metadata={"bits": n, "enum": enum_type})


@dataclass(frozen=True, slots=True)
class TokenRef:
    """A token operand: wait for / signal ``count`` on token ``index`` of ``scope``."""

    scope: TokenScope
    index: int
    count: int = 1


#: Token operands a single task may carry (fixed slots in the binary record).
MAX_TOKEN_REFS = 4


@dataclass(frozen=True, kw_only=True)
class Task:
    """Common part of every task. Do not instantiate; use a kind below."""

    unit: Unit
    layer: str = ""
    tile: int = 0
    frame_slot: int = 0
    phase: Phase = Phase.FRAME
    waits: tuple[TokenRef, ...] = ()
    signals: tuple[TokenRef, ...] = ()

    #: Binary opcode of the kind (unique).
    OPCODE: ClassVar[int] = -1
    #: Unit queues this kind may be placed on.
    UNITS: ClassVar[frozenset[Unit]] = frozenset()

    def __post_init__(self) -> None:
        # Internal invariant: builders (compiler, tests, assembler) validate user input and
        # raise TasklistError before constructing; reaching this is a programming error.
        assert self.unit in self.UNITS, f"{type(self).__name__} cannot run on {self.unit}"
        assert len(self.waits) <= MAX_TOKEN_REFS and len(self.signals) <= MAX_TOKEN_REFS

    @classmethod
    def kind_fields(cls) -> tuple[dataclasses.Field[Any], ...]:
        """The kind-specific fields, in declaration (= binary) order."""
        common = {f.name for f in dataclasses.fields(Task)}
        return tuple(f for f in dataclasses.fields(cls) if f.name not in common)


_DMA_UNITS = frozenset({Unit.DMA0, Unit.DMA1, Unit.SYSDMA})


@dataclass(frozen=True, kw_only=True)
class DmaCopy(Task):
    """Copy ``bytes`` in ``rows`` rows between pools (strides are bytes between row starts).

    ``dst_core_mask`` (bit per core, 0 = the issuing core) multicasts one read to the L1 of
    several cores, as batch mode does with weights fetched once into L2.
    """

    OPCODE: ClassVar[int] = 1
    UNITS: ClassVar[frozenset[Unit]] = _DMA_UNITS
    src_pool: Pool = bits(8, enum_type=Pool)
    src_addr: int = bits(64)
    dst_pool: Pool = bits(8, enum_type=Pool)
    dst_addr: int = bits(64)
    bytes: int = bits(32)
    rows: int = bits(32, default=1)
    src_stride: int = bits(32, default=0)
    dst_stride: int = bits(32, default=0)
    dst_core_mask: int = bits(8, default=0)


@dataclass(frozen=True, kw_only=True)
class WeightLoad(Task):
    """Write ``bytes`` of weights from L1 ``src_addr`` into IMC weight set ``weight_set``."""

    OPCODE: ClassVar[int] = 2
    UNITS: ClassVar[frozenset[Unit]] = frozenset({Unit.WLOAD})
    weight_set: int = bits(8)
    src_addr: int = bits(64)
    bytes: int = bits(32)
    rows_used: int = bits(16)
    cols_used: int = bits(16)


@dataclass(frozen=True, kw_only=True)
class Mvm(Task):
    """Stream ``vectors`` input vectors through weight set ``weight_set``.

    ``rows_used`` x ``cols_used`` of the array are active; ``icr`` output pixels share one
    pass (in-core replication, already folded into ``vectors``); ``accumulate`` adds onto the
    partial sums at ``out_addr`` (row blocks after the first); ``post`` is what the DPU does
    to the outputs as they stream out.
    """

    OPCODE: ClassVar[int] = 3
    UNITS: ClassVar[frozenset[Unit]] = frozenset({Unit.MVM})
    weight_set: int = bits(8)
    in_addr: int = bits(64)
    out_addr: int = bits(64)
    vectors: int = bits(32)
    rows_used: int = bits(16)
    cols_used: int = bits(16)
    icr: int = bits(8, default=1)
    accumulate: int = bits(8, default=0)
    post: PostOp = bits(8, enum_type=PostOp, default=PostOp.REQUANT)
    lut: LutKind = bits(8, enum_type=LutKind, default=LutKind.NONE)

    @property
    def macs(self) -> int:
        """Active multiply-accumulates (what the energy model charges)."""
        return self.vectors * self.rows_used * self.cols_used


@dataclass(frozen=True, kw_only=True)
class DpuOp(Task):
    """An element-wise / LUT / reduction op over ``elements`` int8 elements."""

    OPCODE: ClassVar[int] = 4
    UNITS: ClassVar[frozenset[Unit]] = frozenset({Unit.DPU})
    kind: DpuKind = bits(8, enum_type=DpuKind)
    in_addr0: int = bits(64)
    in_addr1: int = bits(64, default=0)
    out_addr: int = bits(64)
    elements: int = bits(32)
    operands: int = bits(8, default=1)  # 1 or 2 tensor inputs
    lut: LutKind = bits(8, enum_type=LutKind, default=LutKind.NONE)


@dataclass(frozen=True, kw_only=True)
class DwpuOp(Task):
    """A depthwise conv, pooling or resize over ``channels`` x ``h`` x ``w`` -> out_h x out_w."""

    OPCODE: ClassVar[int] = 5
    UNITS: ClassVar[frozenset[Unit]] = frozenset({Unit.DWPU})
    kind: DwpuKind = bits(8, enum_type=DwpuKind)
    in_addr: int = bits(64)
    out_addr: int = bits(64)
    channels: int = bits(16)
    h: int = bits(16)
    w: int = bits(16)
    out_h: int = bits(16)
    out_w: int = bits(16)
    kh: int = bits(8)
    kw: int = bits(8)
    stride: int = bits(8)
    lut: LutKind = bits(8, enum_type=LutKind, default=LutKind.NONE)

    @property
    def macs(self) -> int:
        """Window operations (MACs for depthwise conv, compares/adds for pooling)."""
        return self.channels * self.out_h * self.out_w * self.kh * self.kw


@dataclass(frozen=True, kw_only=True)
class TokenWait(Task):
    """Block this unit's queue until ``waits`` are satisfied (no other work)."""

    OPCODE: ClassVar[int] = 6
    UNITS: ClassVar[frozenset[Unit]] = frozenset(Unit)


@dataclass(frozen=True, kw_only=True)
class TokenSignal(Task):
    """Signal ``signals`` from this unit's queue (no other work)."""

    OPCODE: ClassVar[int] = 7
    UNITS: ClassVar[frozenset[Unit]] = frozenset(Unit)


@dataclass(frozen=True, kw_only=True)
class Barrier(Task):
    """Wait until every core in ``core_mask`` reached barrier ``barrier_id``."""

    OPCODE: ClassVar[int] = 8
    UNITS: ClassVar[frozenset[Unit]] = frozenset({Unit.CTRL})
    barrier_id: int = bits(16)
    core_mask: int = bits(8)


@dataclass(frozen=True, kw_only=True)
class HostTransfer(Task):
    """The core's side of a host transfer: input ready (h2d) / output handed over (d2h)."""

    OPCODE: ClassVar[int] = 9
    UNITS: ClassVar[frozenset[Unit]] = frozenset({Unit.CTRL})
    direction: Direction = bits(8, enum_type=Direction)
    pool: Pool = bits(8, enum_type=Pool)
    addr: int = bits(64)
    bytes: int = bits(32)


#: Every task kind, by opcode.
KINDS: dict[int, type[Task]] = {
    k.OPCODE: k
    for k in (
        DmaCopy,
        WeightLoad,
        Mvm,
        DpuOp,
        DwpuOp,
        TokenWait,
        TokenSignal,
        Barrier,
        HostTransfer,
    )
}
