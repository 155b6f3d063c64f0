"""Tasks: the instructions of a core's tasklist (docs/architecture.md §4).

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
    REQUANT_ADD = "requant_add"  # bias + requantize + residual add of an L1 operand
    REQUANT_ADD_LUT = "requant_add_lut"  # ... then the LUT activation of the sum
    REQUANT_LUT_ADD = "requant_lut_add"  # bias + requantize + LUT activation, then the add


#: Post-ops that add a second operand, read from L1, to the requantized outputs.
ADD_POSTS = frozenset({PostOp.REQUANT_ADD, PostOp.REQUANT_ADD_LUT, PostOp.REQUANT_LUT_ADD})
#: Post-ops that apply the ``lut`` activation (after the add, or before it for
#: ``requant_lut_add``).
LUT_POSTS = frozenset({PostOp.REQUANT_LUT, PostOp.REQUANT_ADD_LUT, PostOp.REQUANT_LUT_ADD})


class DpuKind(enum.StrEnum):
    """What a `DpuOp` computes (its parameter block: `aipusim.isa.params`)."""

    REQUANT = "requant"  # per-channel scale and requantize (a BatchNorm of its own)
    ADD = "add"  # rescale both operands to the output grid and add
    SUB = "sub"
    MUL = "mul"
    DIV = "div"  # float18 quotient of two tensors
    LUT = "lut"  # any non-linear function through the lookup table (Relu/Clip: a clamp)
    REDUCE = "reduce"  # mean over a reduced axis (ReduceMean, GlobalAveragePool)
    SOFTMAX = "softmax"
    COPY = "copy"  # layout moves the DMA cannot express (Transpose of small tensors)
    # transformer ops (see `aipusim.isa.dpu_work` for their lane operations)
    LAYERNORM = "layernorm"  # integer row statistics, float18 normalisation
    POW = "pow"  # a tensor to a tensor power (log2 table, float18 multiply, exp2)
    MATMUL = "matmul"  # product of two activations: ``elements`` counts the MACs
    MIN = "min"  # element-wise minimum / maximum on the output grid
    MAX = "max"
    RESCALE = "rescale"  # one operand moved to another grid (a Concat's part)
    REDUCE_MAX = "reduce_max"  # maximum over a reduced axis
    GATHER = "gather"  # rows of a table (in_addr1) picked by int64 indices (in_addr0)
    PSUM = "psum"  # int32 partial sums of the cores summed and requantized (tensor parallel)


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
    TABLE = "table"  # a function given only by its table (say a Relu between unequal grids)


#: Activations a compute task applies as a clamp of its record's range: no table lookup.
CLAMP_LUTS = frozenset({LutKind.RELU, LutKind.CLIP})
#: Element-wise `DpuOp` kinds that may pass their result on to a table in the same task
#: (an activation fused after them, ``lut`` neither none nor a clamp).
TABLE_AFTER_KINDS = frozenset(
    {DpuKind.ADD, DpuKind.SUB, DpuKind.MUL, DpuKind.MIN, DpuKind.MAX, DpuKind.RESCALE}
)


class DpuThen(enum.StrEnum):
    """A second element-wise step a `DpuOp` computes on its own result in the same pass
    (`compiler.backend.lower.dpu_chain`): ``none``, or the binary kind of that step."""

    NONE = "none"
    ADD = "add"
    SUB = "sub"
    MUL = "mul"


def table_after(kind: DpuKind, lut: LutKind) -> bool:
    """True when a `DpuOp` of ``kind`` looks its result up in the table at ``lut_addr``
    after its own record (an activation fused after an element-wise op).

    >>> table_after(DpuKind.ADD, LutKind.SIGMOID), table_after(DpuKind.ADD, LutKind.RELU)
    (True, False)
    """
    return kind in TABLE_AFTER_KINDS and lut is not LutKind.NONE and lut not in CLAMP_LUTS


class DwpuKind(enum.StrEnum):
    """What a `DwpuOp` computes per channel over windows."""

    DWCONV = "dwconv"
    MAXPOOL = "maxpool"
    AVGPOOL = "avgpool"
    GLOBALPOOL = "globalpool"  # the mean of every channel
    RESIZE_NEAREST = "resize_nearest"
    RESIZE_LINEAR = "resize_linear"
    GLOBALMAX = "globalmax"  # the maximum of every channel


class Direction(enum.StrEnum):
    H2D = "h2d"
    D2H = "d2h"


_REQUIRED: Any = dataclasses.MISSING


def bits(
    n: int,
    *,
    enum_type: type[enum.StrEnum] | None = None,
    default: Any = _REQUIRED,
    where: bool = False,
) -> Any:
    """A kind-specific task field of ``n`` bits (unsigned), optionally an enum index.

    ``where``: the field only says where the task's data lies or how it is laid out
    (addresses, pitches, window offsets); what the task costs never depends on it.
    """
    return field(default=default, metadata={"bits": n, "enum": enum_type, "where": where})


def address(default: Any = _REQUIRED) -> Any:
    """A 64-bit address field (where data lies: never part of a task's cost)."""
    return bits(64, default=default, where=True)


def where(n: int, default: Any = 0) -> Any:
    """An ``n``-bit layout field (pitch, offset, fill value): never part of the cost."""
    return bits(n, default=default, where=True)


def where_fields(kind: type[Task]) -> frozenset[str]:
    """The fields of ``kind`` that never change what the task costs (`bits` ``where``)."""
    return frozenset(f.name for f in kind.kind_fields() if f.metadata.get("where"))


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
    """Copy ``bytes`` from ``src_pool`` to ``dst_pool`` in ``planes`` x ``rows`` equal runs.

    Run ``(p, r)`` moves ``bytes / (planes * rows)`` contiguous bytes from ``src_addr + p *
    src_plane_stride + r * src_stride`` to ``dst_addr + p * dst_plane_stride + r *
    dst_stride`` (a stride of 0 with one row or plane: contiguous). Three nested levels
    express any strided slice and any two-axis transpose. ``dst_core_mask`` (bit per core
    of the instance, 0 = the issuing core) writes the same bytes into the L1 of several
    cores: batch mode multicasts weights fetched once.
    """

    OPCODE: ClassVar[int] = 1
    UNITS: ClassVar[frozenset[Unit]] = _DMA_UNITS
    src_pool: Pool = bits(8, enum_type=Pool)
    src_addr: int = address()
    dst_pool: Pool = bits(8, enum_type=Pool)
    dst_addr: int = address()
    bytes: int = bits(32)
    rows: int = bits(32, default=1)
    src_stride: int = where(32)
    dst_stride: int = where(32)
    dst_core_mask: int = bits(8, default=0)
    planes: int = bits(32, default=1)
    src_plane_stride: int = where(32)
    dst_plane_stride: int = where(32)


@dataclass(frozen=True, kw_only=True)
class WeightLoad(Task):
    """Write a block of ``rows_used`` x ``cols_used`` int8 weights, row-major from L1
    ``src_addr``, into IMC weight set ``weight_set`` (the rest of the set is not read).

    **A run-time operand** (attention's second matrix, `src_rows` > 0) is read as a matrix
    of ``src_rows`` x ``cols_used / copies`` elements, element ``(r, c)`` at ``src_addr + r
    * src_row_pitch + c * src_pitch`` (heads interleaved as channels: ``src_pitch`` is the
    heads' count), and written as ``copies`` copies (the ICR layout of a 1x1 window): copy
    ``i`` at rows ``i * copy_rows`` and columns ``i * cols_used / copies``, every other
    weight of the block 0. The L1 port reads each source row whole, strides included
    (`read_bytes`). With ``col_sums`` the load path also sums each column of the block as
    it writes it, kept with the set for an `Mvm` with ``offset_fill``.
    """

    OPCODE: ClassVar[int] = 2
    UNITS: ClassVar[frozenset[Unit]] = frozenset({Unit.WLOAD})
    weight_set: int = bits(8)
    src_addr: int = address()
    bytes: int = bits(32)
    rows_used: int = bits(16)
    cols_used: int = bits(16)
    src_rows: int = bits(16, default=0)
    src_pitch: int = bits(16, default=1)
    copies: int = bits(8, default=1)
    col_sums: int = bits(8, default=0)
    src_row_pitch: int = where(32)
    copy_rows: int = where(16)

    @property
    def read_bytes(self) -> int:
        """L1 bytes the load reads: ``bytes`` of a row-major block; of a run-time operand its
        ``src_rows`` rows, each ``cols_used / copies`` elements ``src_pitch`` apart.

        >>> WeightLoad(unit=Unit.WLOAD, weight_set=0, src_addr=0, bytes=512, rows_used=8,
        ...            cols_used=64, src_rows=3, src_pitch=3, copies=2).read_bytes
        288
        """
        if self.src_rows == 0:
            return self.bytes
        return self.src_rows * (self.cols_used // max(1, self.copies)) * self.src_pitch


@dataclass(frozen=True, kw_only=True)
class Mvm(Task):
    """Stream ``vectors`` input vectors through weight set ``weight_set``.

    **Input vectors** are gathered from a channels-last tile in L1 at ``in_addr``: pixel
    ``(y, x)`` of the tile starts at ``in_addr + y * in_row_pitch + x * in_pitch`` and holds
    ``cin`` int8 channels. Vector ``v`` serves output row ``oy = v // vx`` and output
    pixels ``ox0 .. ox0 + icr - 1`` with ``ox0 = (v % vx) * icr``, ``vx = ceil(out_w /
    icr)``. Its row ``(ky, j, c)`` (window row ``ky < kh``, column ``j < kw + (icr - 1) *
    stride_w``, channel ``c``) reads tile pixel ``(oy * stride_h + ky * dilation -
    pad_top, ox0 * stride_w + j * dilation - pad_left)``; with ``upsample`` u > 1 the tile
    is first spread u-fold with empty pixels between (a transposed conv). Pixels outside
    the tile, empty ones and channels ``c >= cin`` read ``fill`` (int8, two's
    complement). The row index is ``(ky * width + j) * cpad + c`` (``cpad``: channels per
    tap, PWORD); with ``swicr`` the taps of a window row are packed,
    ``ky * ceil(width * cin / cpad) * cpad + j * cin + c``. The task uses rows ``row0 ..
    row0 + rows_used - 1`` of that space (a row block).

    **Sums**: ``acc[col] = sum_r vec[row0 + r] * W[r][col]`` over ``rows_used`` rows and
    ``cols_used`` columns, saturated to ``arch.mvm.accumulator_bits``; with
    ``accumulate`` the int32 partial sums at ``psum_addr`` (``[vectors][cols_used]``) are
    added first (saturating). Column ``col`` is output pixel ``ox0 + col // cout``, channel
    ``col % cout``, ``cout = cols_used / icr``.

    **Output** (``post``): ``none`` writes the sums as int32 partial sums at ``psum_addr``;
    ``requant`` turns each into int8 with the channel's record at ``param_addr``
    (`aipusim.isa.params.CHANNEL`): ``((acc + bias) * mult + 2**(shift-1)) >> shift) + zo``
    clamped to ``[lo, hi]``; ``requant_lut`` then looks the value up in the 256-byte table
    at ``lut_addr`` unless ``lut`` is ``relu``/``clip`` (the clamp already did it). Pixel
    ``(oy, ox)`` channel ``k`` lands at ``out_addr + oy * out_row_pitch + ox * out_pitch +
    k`` (pixels ``ox >= out_w`` are not written).

    **Residual add** (``requant_add``, ``requant_add_lut``): the requantized int8 value
    ``r`` (clamped as above) is added to the int8 ``b`` at ``add_addr + oy * add_row_pitch
    + ox * add_pitch + k`` with the `SCALAR` record at ``add_param_addr`` exactly as a DPU
    ``add`` does, ``sat(rshift(m0 * (r - za) + m1 * (b - zb), shift) + zo)`` into ``[lo,
    hi]`` and int8; ``requant_add_lut`` then looks the sum up in the table at ``lut_addr``
    unless ``lut`` is ``relu``/``clip`` (the record's clamp did it). ``requant_lut_add``
    looks ``r`` up in the table first (the conv's own activation, as ``requant_lut`` does)
    and adds the result; a clamp after the add is the `SCALAR`'s range. The requantized
    ``r`` is never stored.

    **Channel pitches**: channel ``c`` of an input pixel is at ``c * in_chan_pitch`` from
    its first byte and output channel ``k`` at ``k * out_chan_pitch`` (1: channels are
    contiguous; attention's operands hold the heads interleaved as channels, so a head's
    row steps by the heads' count). With ``offset_fill`` the sums are of the inputs less
    ``fill``, ``acc[col] = sum_r (vec[row0 + r] - fill) * W[r][col]``: the array adds
    ``-fill`` times the column sums its set's `WeightLoad` kept (``col_sums``), which is
    how a run-time operand's input zero point is folded (a constant one's is in the bias).
    """

    OPCODE: ClassVar[int] = 3
    UNITS: ClassVar[frozenset[Unit]] = frozenset({Unit.MVM})
    weight_set: int = bits(8)
    in_addr: int = address()
    out_addr: int = address()
    vectors: int = bits(32)
    rows_used: int = bits(16)
    cols_used: int = bits(16)
    icr: int = bits(8, default=1)
    accumulate: int = bits(8, default=0)
    post: PostOp = bits(8, enum_type=PostOp, default=PostOp.REQUANT)
    lut: LutKind = bits(8, enum_type=LutKind, default=LutKind.NONE)
    psum_addr: int = address(default=0)
    param_addr: int = address(default=0)
    lut_addr: int = address(default=0)
    in_w: int = where(16)
    in_rows: int = where(16)
    in_pitch: int = where(32)
    in_row_pitch: int = where(32)
    # the window geometry that says which rows are channel padding is costed: a padded row
    # costs only the zero-product energy (`aipusim.isa.cost.mvm_data_rows`)
    cin: int = bits(16, default=0)
    cpad: int = bits(16, default=0)
    kh: int = where(8, default=1)
    kw: int = bits(8, default=1)
    stride_h: int = where(8, default=1)
    stride_w: int = bits(8, default=1)
    pad_top: int = where(8)
    pad_left: int = where(8)
    dilation: int = where(8, default=1)
    upsample: int = where(8, default=1)
    swicr: int = bits(8, default=0)
    row0: int = bits(32, default=0)
    fill: int = where(8)
    out_w: int = where(16)
    out_pitch: int = where(32)
    out_row_pitch: int = where(32)
    add_addr: int = address(default=0)
    add_param_addr: int = address(default=0)
    add_pitch: int = where(32)
    add_row_pitch: int = where(32)
    # 8 bits (up to 255 heads): the record keeps its 176 bytes
    in_chan_pitch: int = bits(8, default=1)
    out_chan_pitch: int = bits(8, default=1)
    offset_fill: int = where(8)

    @property
    def macs(self) -> int:
        """Active multiply-accumulates (what the energy model charges)."""
        return self.vectors * self.rows_used * self.cols_used


@dataclass(frozen=True, kw_only=True)
class DpuOp(Task):
    """An element-wise, table, reduction or float op of the vector unit over ``elements``
    results (its parameters: `aipusim.isa.params`, at ``param_addr``; a table at
    ``lut_addr``).

    **Element-wise kinds** (``requant``, ``add``, ``sub``, ``mul``, ``min``, ``max``,
    ``rescale``, ``lut``, ``div``, ``pow``, ``copy``): result ``e`` (``e < elements``)
    reads operand 0 at element ``e`` and operand 1 (``operands`` = 2) at element ``(e //
    b_div) % b_mod`` (a broadcast: ``b_mod`` = 1 a scalar, ``b_div`` = 1 a per-channel
    vector of ``b_mod`` values); per-channel parameters are taken at ``(e // p_div) %
    p_mod``. Elements are ``in_elem``/``out_elem`` bytes (1: int8; 2: the int16 residual
    stream), operand 1 ``in1_elem``. Element ``e`` lies at ``addr + e * elem`` unless a
    ``rows`` x ``row_len`` layout is given: then row ``e // row_len`` starts at
    ``in_row_pitch`` (operand 0) / ``out_row_pitch`` (result) steps (a channel slice of a
    pixel: a Concat's part).

    **A table after the op** (`table_after`): a ``add``, ``sub``, ``mul``, ``min``, ``max``
    or ``rescale`` with a ``lut`` other than none, relu or clip looks its result, clamped
    to its record's ``[lo, hi]``, up in the 256-byte table at ``lut_addr`` and writes
    that (an activation fused after the op, one pass); relu and clip are the record's
    clamp.

    **A second step** (``then`` other than none; ``add``, ``sub`` or ``mul`` with two
    operands): the op's result, clamped to its record's ``[lo, hi]`` and to int8, is
    operand a of a second step of kind ``then`` whose operand b is element ``(e // c_div)
    % c_mod`` at ``in_addr2`` (``in2_elem`` bytes) and whose `SCALAR` record follows the
    op's ``p_mod`` records at ``param_addr``; its result (then the table, if any) is
    written (two element-wise layers in one pass: the first result is never stored).

    **Reductions** (``reduce``, ``reduce_max``, ``softmax``, ``layernorm``): ``outer`` x
    ``groups`` independent groups of ``n`` elements; group ``(o, g)`` element ``k`` lies at
    ``in_addr0 + (o * o_stride + g * g_stride + k * k_stride) * in_elem``. ``reduce``
    writes one result per group at ``out_addr + (o * groups + g) * out_elem``; ``softmax``
    and ``layernorm`` write each element where they read it, relative to ``out_addr``. A
    ``softmax`` with ``operands`` = 2 is masked: the element at offset ``off`` (``o *
    o_stride + g * g_stride + k * k_stride``) is attended when byte ``(off // b_div) %
    b_mod`` at ``in_addr1`` is not 0; masked elements leave the max and the sum and come
    out ``zo``.

    **Products** (``matmul``): ``outer`` heads of ``[groups x n] @ [n x b_mod]`` (``in_addr0``
    row-major A, ``in_addr1`` row-major B with zero point 0, ``o_stride``/``k_stride`` the
    per-head strides of A and B), results row-major at ``out_addr``. **Gather**: ``groups``
    int64 indices at ``in_addr0`` pick rows of ``n`` bytes of the table at ``in_addr1``.

    **Partial sums** (``psum``, a layer split by input channels over the cores): result
    ``e`` sums the ``operands`` int32 partial sums at ``in_addr0 + (k * k_stride + e) * 4``
    (``k < operands``), each add saturated to ``arch.mvm.accumulator_bits`` as the array's
    ``accumulate`` does, then requantizes the sum with the `CHANNEL` record ``(e // p_div)
    % p_mod`` at ``param_addr`` exactly as an `Mvm` ``requant`` post-op (bias, multiplier,
    shift, ``zo``, clamp to ``[lo, hi]`` and int8) and, with a ``lut`` other than none,
    relu or clip, looks the result up in the table at ``lut_addr``; int8 results at
    ``out_addr + e``.
    """

    OPCODE: ClassVar[int] = 4
    UNITS: ClassVar[frozenset[Unit]] = frozenset({Unit.DPU})
    kind: DpuKind = bits(8, enum_type=DpuKind)
    in_addr0: int = address()
    in_addr1: int = address(default=0)
    out_addr: int = address()
    elements: int = bits(32)
    operands: int = bits(8, default=1)  # 1 or 2 tensor inputs
    lut: LutKind = bits(8, enum_type=LutKind, default=LutKind.NONE)
    param_addr: int = address(default=0)
    lut_addr: int = address(default=0)
    in_elem: int = where(8, default=1)
    in1_elem: int = where(8, default=1)
    out_elem: int = where(8, default=1)
    b_div: int = where(32, default=1)
    b_mod: int = where(32, default=1)
    p_div: int = where(32, default=1)
    p_mod: int = where(32, default=1)
    row_len: int = where(32)
    in_row_pitch: int = where(32)
    out_row_pitch: int = where(32)
    outer: int = where(32, default=1)
    groups: int = where(32, default=1)
    n: int = where(32, default=1)
    o_stride: int = where(32)
    g_stride: int = where(32)
    k_stride: int = where(32)
    then: DpuThen = bits(8, enum_type=DpuThen, default=DpuThen.NONE)
    in_addr2: int = address(default=0)
    in2_elem: int = where(8, default=1)
    c_div: int = where(32, default=1)
    c_mod: int = where(32, default=1)


@dataclass(frozen=True, kw_only=True)
class DwpuOp(Task):
    """A depthwise conv, pooling or resize of ``channels`` x ``h`` x ``w`` -> out_h x out_w.

    The input is a channels-last tile at ``in_addr`` (pixel ``(y, x)`` at ``y *
    in_row_pitch + x * in_pitch``, channel ``c`` at ``+ c``); output pixel ``(oy, ox)``
    channel ``c`` lands at ``out_addr + oy * out_row_pitch + ox * out_pitch + c``. Output
    ``(oy, ox)`` reads the ``kh`` x ``kw`` window at ``(oy * stride - pad_top, ox *
    stride_w - pad_left)`` (``stride_w`` 0: ``stride``), pixels outside the tile reading
    ``fill``. ``dwconv``: sums of ``(x - zi) * w`` with the ``kh * kw`` int8 weights of each
    channel at ``weight_addr`` (channel-major), then the channel's requantize record; its
    pixels outside the tile read the channel's ``zi`` (they add nothing), not ``fill``;
    ``maxpool``/``globalmax``: the maximum (``fill`` never wins); ``avgpool``/``globalpool``:
    the sum of ``x - zi`` over the window's real pixels (or all its pixels with
    ``count_include_pad``) requantized with the record of its pixel count;
    ``resize_nearest``/``resize_linear``: the source rows and columns of every output row
    and column from the tables at ``weight_addr`` (`aipusim.isa.params`). A ``lut`` other
    than none then applies as for the MVM (``lut_addr``).
    """

    OPCODE: ClassVar[int] = 5
    UNITS: ClassVar[frozenset[Unit]] = frozenset({Unit.DWPU})
    kind: DwpuKind = bits(8, enum_type=DwpuKind)
    in_addr: int = address()
    out_addr: int = address()
    channels: int = bits(16)
    h: int = bits(16)
    w: int = bits(16)
    out_h: int = bits(16)
    out_w: int = bits(16)
    kh: int = bits(8)
    kw: int = bits(8)
    stride: int = bits(8)
    lut: LutKind = bits(8, enum_type=LutKind, default=LutKind.NONE)
    weight_addr: int = address(default=0)
    param_addr: int = address(default=0)
    lut_addr: int = address(default=0)
    stride_w: int = where(8)
    pad_top: int = where(8)
    pad_left: int = where(8)
    fill: int = where(8)
    count_include_pad: int = where(8)
    in_pitch: int = where(32)
    in_row_pitch: int = where(32)
    out_pitch: int = where(32)
    out_row_pitch: int = where(32)

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
    """The core's side of a host transfer: input ready (h2d) / output handed over (d2h) of
    ``bytes`` at ``addr`` in ``pool`` (the I/O buffers of the program, `Program.io`)."""

    OPCODE: ClassVar[int] = 9
    UNITS: ClassVar[frozenset[Unit]] = frozenset({Unit.CTRL})
    direction: Direction = bits(8, enum_type=Direction)
    pool: Pool = bits(8, enum_type=Pool)
    addr: int = bits(64, where=True)
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
