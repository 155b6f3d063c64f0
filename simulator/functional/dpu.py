"""`DpuOp`: the vector unit's element-wise, table, reduction, product and float kinds.

Per `aipusim.isa.tasks.DpuOp`, with the parameter blocks of `aipusim.isa.params`. The
integer kinds run in numba (`_elementwise`, `_reduce`); ``matmul`` is a float64 GEMM (exact:
int8 products summed far below 2**53); the float kinds (``layernorm``, ``div``, ``pow``) run
the ISA's float18 kernels (`aipusim.isa.fp_kernels`), the definitions the int8 reference
runs too. Elements are little-endian signed integers of ``in_elem`` / ``in1_elem`` /
``out_elem`` bytes (1, 2 or 4).

Readings the ISA leaves open:

- ``requant`` and a ``lut`` with ``lut`` relu/clip (a clamp) read one `CHANNEL` per channel,
  at ``(e // p_div) % p_mod``; the other integer kinds one `SCALAR` per channel the same
  way (``p_mod`` 1: one for all);
- results are clamped to the record's ``[lo, hi]`` and then to the range of ``out_elem``;
  a `SCALAR` kind with a ``lut`` other than none, relu or clip then looks its clamped
  result up in the table at ``lut_addr`` (an activation fused after it);
- a second step (``then``) takes the first step's result clamped to its record's
  ``[lo, hi]`` and to int8 as its operand a and runs the binary kernel of its kind with
  the `SCALAR` record after the first step's ``p_mod`` records, operand b at ``in_addr2``;
  a shift of 0 rounds nothing; a table lookup clamps its index to the int8 range;
- ``softmax`` gives ``zo`` to a group whose exponentials sum to 0; with ``operands`` 2 it
  reads a keep mask (one byte an entry, 0: masked) at ``in_addr1``, entry ``(off //
  b_div) % b_mod`` for the element at offset ``off`` of its group layout;
- ``matmul`` strides are in elements, as a reduction's: head ``o`` of A starts at element
  ``o * o_stride`` (rows of ``n``), of B at ``o * k_stride`` (rows of ``b_mod``), of the
  result at ``o * out_row_pitch`` (0: right after the previous head); within a head,
  neighbouring elements of all three are ``g_stride`` apart (0 or 1: row-major; the
  number of heads when they are the channels of a channels-last tensor);
- ``psum`` reads its partial sums as little-endian int32 and its `CHANNEL` records as an
  `Mvm` post-op does (`aipusim.simulator.functional.mvm.requant_table`);
- ``gather`` reads int64 indices; a negative one counts from the end of a table of ``b_mod``
  rows when ``b_mod`` > 1 (the ISA gives no other table size), and is refused otherwise.
"""

from __future__ import annotations

import numba
import numpy as np

from aipusim.isa import fp_kernels as FK
from aipusim.isa import params as P
from aipusim.isa.tasks import CLAMP_LUTS, DpuKind, DpuOp, DpuThen, LutKind, Pool, table_after
from aipusim.simulator.functional.context import TaskRun
from aipusim.simulator.functional.footprint import merge, runs, span
from aipusim.simulator.functional.mvm import PSUM_BYTES, requant_table

#: Integer element-wise kinds -> kernel code (the clamp form of ``lut`` is 8).
_ELEMENTWISE = {
    DpuKind.REQUANT: 0,
    DpuKind.ADD: 1,
    DpuKind.SUB: 2,
    DpuKind.MUL: 3,
    DpuKind.MIN: 4,
    DpuKind.MAX: 5,
    DpuKind.RESCALE: 6,
    DpuKind.LUT: 7,
    DpuKind.COPY: 9,
}
_CLAMP = 8
#: Kinds a second step (`DpuOp.then`) may follow: binary steps ending in one SCALAR record.
_THEN_FIRST = frozenset({DpuKind.ADD, DpuKind.SUB, DpuKind.MUL})
_TWO_OPERANDS = frozenset(
    {DpuKind.ADD, DpuKind.SUB, DpuKind.MUL, DpuKind.MIN, DpuKind.MAX, DpuKind.DIV, DpuKind.POW}
)
_REDUCTIONS = {DpuKind.REDUCE: 0, DpuKind.REDUCE_MAX: 1, DpuKind.SOFTMAX: 2}
_CHANNEL_FIELDS = ("bias", "mult", "shift", "zo", "lo", "hi", "zi", "scale")
_SCALAR_FIELDS = ("m0", "m1", "shift", "za", "zb", "zo", "lo", "hi")
_ELEM_BYTES = (1, 2, 4)


# ----------------------------------------------------------------------- element access


@numba.njit(cache=True, inline="always")
def _load(mem, addr, elem):  # pragma: no cover - jitted
    """The little-endian signed integer of ``elem`` bytes at ``addr``."""
    if elem == 1:
        v = np.int64(mem[addr])
        return v - 256 if v >= 128 else v
    v = np.int64(0)
    for i in range(elem):
        v |= np.int64(mem[addr + i]) << (8 * i)
    top = np.int64(1) << (8 * elem - 1)
    return v - 2 * top if v >= top else v


@numba.njit(cache=True, inline="always")
def _store(mem, addr, elem, v):  # pragma: no cover - jitted
    """``v``, saturated to ``elem`` signed bytes, little-endian at ``addr``."""
    if elem == 1:
        mem[addr] = min(max(v, -128), 127) & 0xFF
        return
    top = np.int64(1) << (8 * elem - 1)
    v = min(max(v, -top), top - 1)
    for i in range(elem):
        mem[addr + i] = (v >> (8 * i)) & 0xFF


@numba.njit(cache=True, inline="always")
def _rshift(v, s):  # pragma: no cover - jitted
    """``(v + 2**(s-1)) >> s`` (round half up); a shift of 0 rounds nothing. (Numba
    compiles a cached kernel's helpers into it: they live in the kernel's file.)"""
    return (v + ((np.int64(1) << s) >> 1)) >> s


# ----------------------------------------------------------------------- kernels


@numba.njit(cache=True, inline="always")
def _binary(code, a, b, m0, m1, s, za, zb, zo, lo, hi):  # pragma: no cover - jitted
    """A SCALAR kind's step on ``a`` and ``b`` (add 1, sub 2, mul 3, rescale 6, min 4,
    max 5), clamped to ``[lo, hi]``."""
    if code == 1:
        r = _rshift(m0 * (a - za) + m1 * (b - zb), s) + zo
    elif code == 2:
        r = _rshift(m0 * (a - za) - m1 * (b - zb), s) + zo
    elif code == 3:
        r = _rshift((a - za) * (b - zb) * m0, s) + zo
    elif code == 6:
        r = _rshift(m0 * (a - za), s) + zo
    else:
        ra = min(max(_rshift(m0 * (a - za), s) + zo, lo), hi)
        rb = min(max(_rshift(m1 * (b - zb), s) + zo, lo), hi)
        r = min(ra, rb) if code == 4 else max(ra, rb)
    return min(max(r, lo), hi)


@numba.njit(cache=True)
def _elementwise(mem, geo, code, prm, lut, then_table, then, q):  # pragma: no cover - jitted
    """Integer element-wise kinds. ``geo``: elements, a base, a elem, row_len,
    in_row_pitch, b base, b elem, b_div, b_mod, out base, out elem, out_row_pitch, p_div,
    p_mod, c base, c elem, c_div, c_mod. ``prm`` rows: CHANNEL fields (codes 0, 8) or
    SCALAR fields (the others). ``then``: the code of a second step (0: none) with the
    SCALAR fields ``q``, operand b at c. ``then_table``: a SCALAR kind's clamped result
    is then looked up in ``lut``."""
    n, a0, ae, row_len, a_pitch = geo[0], geo[1], geo[2], geo[3], geo[4]
    b0, be, b_div, b_mod = geo[5], geo[6], geo[7], geo[8]
    o0, oe, o_pitch, p_div, p_mod = geo[9], geo[10], geo[11], geo[12], geo[13]
    c0, ce, c_div, c_mod = geo[14], geo[15], geo[16], geo[17]
    # the element's indices, stepped instead of divided: (e // p_div) % p_mod, (e // b_div)
    # % b_mod, (e // c_div) % c_mod, and e's row and column in rows of row_len
    pc = pk = bc = bk = cc = ck = col = row = 0
    for e in range(n):
        if row_len > 0:
            a = _load(mem, a0 + row * a_pitch + col * ae, ae)
            at = o0 + row * o_pitch + col * oe
        else:
            a = _load(mem, a0 + e * ae, ae)
            at = o0 + e * oe
        b = _load(mem, b0 + bk * be, be) if be > 0 else np.int64(0)
        if code == 0:  # requant: bias, mult, shift, zo, lo, hi, zi, scale
            acc = (a - prm[pk, 6]) * prm[pk, 7]
            r = _rshift((acc + prm[pk, 0]) * prm[pk, 1], prm[pk, 2]) + prm[pk, 3]
            r = min(max(r, prm[pk, 4]), prm[pk, 5])
        elif code == 8:  # clamp
            r = min(max(a, prm[pk, 4]), prm[pk, 5])
        elif code == 7:  # table
            r = lut[min(max(a, -128), 127) + 128]
        elif code == 9:
            r = a
        else:  # m0, m1, shift, za, zb, zo, lo, hi
            p = prm[pk]
            r = _binary(code, a, b, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7])
            if then > 0:  # the second step, on the first's int8 result (never stored)
                c = _load(mem, c0 + ck * ce, ce)
                r = min(max(r, -128), 127)
                r = _binary(then, r, c, q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7])
            if then_table:
                r = lut[min(max(r, -128), 127) + 128]
        _store(mem, at, oe, r)
        pc += 1
        if pc == p_div:
            pc = 0
            pk = pk + 1 if pk + 1 < p_mod else 0
        bc += 1
        if bc == b_div:
            bc = 0
            bk = bk + 1 if bk + 1 < b_mod else 0
        cc += 1
        if cc == c_div:
            cc = 0
            ck = ck + 1 if ck + 1 < c_mod else 0
        col += 1
        if col == row_len:
            col = 0
            row += 1


@numba.njit(cache=True, inline="always")
def _kept(mem, mask, off):  # pragma: no cover - jitted
    """True if element ``off`` of a softmax group is attended: no mask (``mask[0]`` < 0),
    or a non-zero byte of the mask at ``mask[0] + (off // mask[1]) % mask[2]``."""
    if mask[0] < 0:
        return True
    return mem[mask[0] + (off // mask[1]) % mask[2]] != 0


@numba.njit(cache=True)
def _reduce(mem, geo, mode, p, table, mask):  # pragma: no cover - jitted
    """``reduce`` (0), ``reduce_max`` (1), ``softmax`` (2) over ``outer x groups`` groups.
    ``geo``: outer, groups, n, o_stride, g_stride, k_stride, in base, in elem, out base,
    out elem. ``p``: the SCALAR fields. ``mask``: a softmax's keep mask (base, div, mod;
    base -1: none): masked elements leave the max and the sum and come out ``zo``."""
    outer, groups, n, os, gs, ks = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5]
    i0, ie, o0, oe = geo[6], geo[7], geo[8], geo[9]
    m0, s, za, zo, lo, hi = p[0], p[2], p[3], p[5], p[6], p[7]
    for o in range(outer):
        for g in range(groups):
            first = o * os + g * gs
            total = np.int64(0)
            best = np.int64(-(1 << 62))
            for k in range(n):
                x = _load(mem, i0 + (first + k * ks) * ie, ie)
                total += x - za
                if x > best and _kept(mem, mask, first + k * ks):
                    best = x
            if mode == 0:
                r = min(max(_rshift(total * m0, s) + zo, lo), hi)
                _store(mem, o0 + (o * groups + g) * oe, oe, r)
            elif mode == 1:
                _store(mem, o0 + (o * groups + g) * oe, oe, best)
            else:
                esum = np.int64(0)
                for k in range(n):
                    if _kept(mem, mask, first + k * ks):
                        x = _load(mem, i0 + (first + k * ks) * ie, ie)
                        esum += table[min(max(x - best + 255, 0), 255)]
                for k in range(n):
                    off = first + k * ks
                    x = _load(mem, i0 + off * ie, ie)
                    ex = table[min(max(x - best + 255, 0), 255)]
                    if not _kept(mem, mask, off):
                        ex = 0
                    r = zo
                    if esum > 0:
                        r = _rshift((ex * m0) // esum, 16) + zo
                    _store(mem, o0 + off * oe, oe, min(max(r, lo), hi))


# ----------------------------------------------------------------------- footprints


def _linear(addr: int, elements: int, elem: int, row_len: int, pitch: int):
    """Runs of ``elements`` elements at ``addr``, in rows of ``row_len`` when given."""
    if row_len <= 0:
        return span(addr, elements * elem)
    full, rest = divmod(elements, row_len)
    s, e = runs(addr, row_len * elem, [(full, pitch)])
    if rest:
        s = np.append(s, addr + full * pitch)
        e = np.append(e, addr + full * pitch + rest * elem)
    return merge(s, e)


def _offsets(t: DpuOp) -> np.ndarray:
    """Element offsets ``o * o_stride + g * g_stride + k * k_stride`` of a reduction,
    shaped (outer * groups, n)."""
    o = np.arange(t.outer, dtype=np.int64)[:, None, None] * t.o_stride
    g = np.arange(t.groups, dtype=np.int64)[None, :, None] * t.g_stride
    k = np.arange(t.n, dtype=np.int64)[None, None, :] * t.k_stride
    return (o + g + k).reshape(t.outer * t.groups, t.n)


def _elements_runs(addr: int, offsets: np.ndarray, elem: int):
    starts = addr + np.sort(offsets.reshape(-1)) * elem
    return merge(starts, starts + elem)


def _load_np(data: np.ndarray, addrs: np.ndarray, elem: int) -> np.ndarray:
    v = np.zeros(addrs.shape, np.int64)
    for i in range(elem):
        v |= data[addrs + i].astype(np.int64) << (8 * i)
    top = 1 << (8 * elem - 1)
    return np.where(v >= top, v - 2 * top, v)


def _store_np(data: np.ndarray, addrs: np.ndarray, elem: int, values: np.ndarray) -> None:
    top = 1 << (8 * elem - 1)
    v = np.clip(values.astype(np.int64), -top, top - 1)
    for i in range(elem):
        data[addrs + i] = ((v >> (8 * i)) & 0xFF).astype(np.uint8)


# ----------------------------------------------------------------------- kinds


def _scalar_rows(run: TaskRun, addr: int, count: int) -> np.ndarray:
    rec = run.records(addr, P.SCALAR, count)
    return np.stack([rec[f].astype(np.int64) for f in _SCALAR_FIELDS], axis=1)


def _elementwise_kind(run: TaskRun, t: DpuOp) -> None:
    n = t.elements
    code = _ELEMENTWISE.get(t.kind, -1)
    if t.kind is DpuKind.LUT and t.lut in CLAMP_LUTS:
        code = _CLAMP
    count = min(t.p_mod, (n - 1) // t.p_div + 1)
    lut = np.zeros(1, np.int64)
    if code in (0, _CLAMP):
        rec = run.records(t.param_addr, P.CHANNEL, count)
        prm = np.stack([rec[f].astype(np.int64) for f in _CHANNEL_FIELDS], axis=1)
    elif code in (7, 9):
        prm = np.zeros((1, 8), np.int64)
        if code == 7:
            if t.lut is LutKind.NONE:
                raise run.fail("a lut task needs a lut other than none")
            lut = run.table(t.lut_addr)
    else:
        prm = _scalar_rows(run, t.param_addr, count)
    # an element-wise op with its activation fused (`compiler.backend.lower.dpu_chain`): the
    # table after the record (relu/clip: the record's clamp did it)
    then_table = table_after(t.kind, t.lut)
    if then_table:
        lut = run.table(t.lut_addr)
    s, e = _linear(t.in_addr0, n, t.in_elem, t.row_len, t.in_row_pitch)
    data, d0 = run.operand(Pool.L1, s, e, write=False)
    b_base, b_elem = 0, 0
    if t.kind in _TWO_OPERANDS:
        reach = min(t.b_mod, (n - 1) // t.b_div + 1)
        s, e = span(t.in_addr1, reach * t.in1_elem)
        _, d1 = run.operand(Pool.L1, s, e, write=False)
        b_base, b_elem = t.in_addr1 + d1, t.in1_elem
    then, q, c_base = _then_step(run, t, n)
    s, e = _linear(t.out_addr, n, t.out_elem, t.row_len, t.out_row_pitch)
    _, d_out = run.operand(Pool.L1, s, e, write=True)
    geo = np.array(
        [n, t.in_addr0 + d0, t.in_elem, t.row_len, t.in_row_pitch, b_base, b_elem, t.b_div,
         t.b_mod, t.out_addr + d_out, t.out_elem, t.out_row_pitch, t.p_div, len(prm),
         c_base, t.in2_elem, t.c_div, t.c_mod],
        np.int64,
    )  # fmt: skip
    _elementwise(data, geo, code, prm, lut, then_table, then, q)


def _then_step(run: TaskRun, t: DpuOp, n: int) -> tuple[int, np.ndarray, int]:
    """(kernel code, SCALAR fields, operand b's base) of a second step (code 0: none)."""
    if t.then is DpuThen.NONE:
        return 0, np.zeros(8, np.int64), 0
    if t.kind not in _THEN_FIRST or t.operands != 2:
        raise run.fail(
            f"then must be none after a {t.kind.value} of {t.operands} operands, not {t.then.value}"
        )
    q = _scalar_rows(run, t.param_addr + t.p_mod * P.SCALAR.itemsize, 1)[0]
    reach = min(t.c_mod, (n - 1) // t.c_div + 1)
    s, e = span(t.in_addr2, reach * t.in2_elem)
    _, d2 = run.operand(Pool.L1, s, e, write=False)
    return _ELEMENTWISE[DpuKind(t.then.value)], q, t.in_addr2 + d2


def _float_elementwise(run: TaskRun, t: DpuOp) -> None:
    """``div`` and ``pow``: the float18 kernels, element by element."""
    kind = t.kind.value
    words = sum(c for _, c in P.FLOAT_PARAMS[kind] if isinstance(c, int))
    data, at = run.block(t.param_addr, P.SCALAR.itemsize + P.FLOAT_WORD.itemsize * words)
    scalar, prm = P.read_float_block(data, at, kind, run.fmt)
    n = t.elements
    e = np.arange(n, dtype=np.int64)
    s, end = _linear(t.in_addr0, n, t.in_elem, t.row_len, t.in_row_pitch)
    mem, d0 = run.operand(Pool.L1, s, end, write=False)
    reach = min(t.b_mod, (n - 1) // t.b_div + 1)
    s, end = span(t.in_addr1, reach * t.in1_elem)
    _, d1 = run.operand(Pool.L1, s, end, write=False)
    s, end = _linear(t.out_addr, n, t.out_elem, t.row_len, t.out_row_pitch)
    _, d_out = run.operand(Pool.L1, s, end, write=True)
    a_at = _addresses(t.in_addr0 + d0, e, t.in_elem, t.row_len, t.in_row_pitch)
    b_at = t.in_addr1 + d1 + ((e // t.b_div) % t.b_mod) * t.in1_elem
    qa, qb = _load_np(mem, a_at, t.in_elem), _load_np(mem, b_at, t.in1_elem)
    fn = FK.div_int if t.kind is DpuKind.DIV else FK.pow_int
    za, zb, zo = int(scalar["za"]), int(scalar["zb"]), int(scalar["zo"])
    res = np.clip(fn(qa, za, qb, zb, prm, zo, run.fmt), scalar["lo"], scalar["hi"])
    o_at = _addresses(t.out_addr + d_out, e, t.out_elem, t.row_len, t.out_row_pitch)
    _store_np(mem, o_at, t.out_elem, res)


def _addresses(base: int, e: np.ndarray, elem: int, row_len: int, pitch: int) -> np.ndarray:
    if row_len > 0:
        return base + (e // row_len) * pitch + (e % row_len) * elem
    return base + e * elem


def _reduction(run: TaskRun, t: DpuOp) -> None:
    offsets = _offsets(t)
    p = np.zeros(8, np.int64)
    if t.kind is not DpuKind.REDUCE_MAX:
        p = _scalar_rows(run, t.param_addr, 1)[0]
    table = np.zeros(1, np.int64)
    if t.kind is DpuKind.SOFTMAX:
        data, at = run.block(t.lut_addr, P.SOFTMAX_TABLE_BYTES)
        table = data[at : at + P.SOFTMAX_TABLE_BYTES].view("<i4").astype(np.int64)
    s, e = _elements_runs(t.in_addr0, offsets, t.in_elem)
    mem, d_in = run.operand(Pool.L1, s, e, write=False)
    mask = np.array([-1, 1, 1], np.int64)
    if t.kind is DpuKind.SOFTMAX and t.operands == 2:  # the keep mask, one byte an entry
        reach = min(t.b_mod, int(offsets.max()) // t.b_div + 1)
        s, e = span(t.in_addr1, reach * t.in1_elem)
        mem_b, d1 = run.operand(Pool.L1, s, e, write=False)
        if mem_b is not mem or t.in1_elem != 1:
            raise run.fail("a softmax's keep mask must be one byte an entry in L1 beside its input")
        mask = np.array([t.in_addr1 + d1, t.b_div, t.b_mod], np.int64)
    if t.kind is DpuKind.SOFTMAX:
        s, e = _elements_runs(t.out_addr, offsets, t.out_elem)
    else:
        s, e = span(t.out_addr, t.outer * t.groups * t.out_elem)
    _, d_out = run.operand(Pool.L1, s, e, write=True)
    geo = np.array(
        [t.outer, t.groups, t.n, t.o_stride, t.g_stride, t.k_stride, t.in_addr0 + d_in,
         t.in_elem, t.out_addr + d_out, t.out_elem],
        np.int64,
    )  # fmt: skip
    _reduce(mem, geo, _REDUCTIONS[t.kind], p, table, mask)


def _layernorm(run: TaskRun, t: DpuOp) -> None:
    words = 1 + 2 * t.n
    data, at = run.block(t.param_addr, P.SCALAR.itemsize + P.FLOAT_WORD.itemsize * words)
    scalar, prm = P.read_float_block(data, at, "layernorm", run.fmt, t.n)
    offsets = _offsets(t)
    s, e = _elements_runs(t.in_addr0, offsets, t.in_elem)
    mem, d_in = run.operand(Pool.L1, s, e, write=False)
    s, e = _elements_runs(t.out_addr, offsets, t.out_elem)
    _, d_out = run.operand(Pool.L1, s, e, write=True)
    q = _load_np(mem, t.in_addr0 + d_in + offsets * t.in_elem, t.in_elem)
    res = FK.layer_norm_int(q, int(scalar["za"]), prm, int(scalar["zo"]), run.fmt)
    res = np.clip(res.astype(np.int64), scalar["lo"], scalar["hi"])
    _store_np(mem, t.out_addr + d_out + offsets * t.out_elem, t.out_elem, res)


def _matmul_offsets(t: DpuOp) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Element offsets of A [outer, groups, n], B [outer, n, b_mod] and the result [outer,
    groups, b_mod]: within a head neighbours are ``g_stride`` apart (0 or 1: row-major), a
    result head starts ``out_row_pitch`` elements after the previous one (0: right after
    it)."""
    step = max(1, t.g_stride)
    o = np.arange(t.outer, dtype=np.int64)[:, None, None]
    out_head = t.out_row_pitch or t.groups * t.b_mod * step
    a = o * t.o_stride + np.arange(t.groups * t.n).reshape(1, t.groups, t.n) * step
    b = o * t.k_stride + np.arange(t.n * t.b_mod).reshape(1, t.n, t.b_mod) * step
    out = o * out_head + np.arange(t.groups * t.b_mod).reshape(1, t.groups, t.b_mod) * step
    return a, b, out


def _matmul(run: TaskRun, t: DpuOp) -> None:
    p = _scalar_rows(run, t.param_addr, 1)[0]
    ie, be, oe = t.in_elem, t.in1_elem, t.out_elem
    a_off, b_off, o_off = _matmul_offsets(t)
    s, e = _elements_runs(t.in_addr0, a_off, ie)
    mem, d0 = run.operand(Pool.L1, s, e, write=False)
    s, e = _elements_runs(t.in_addr1, b_off, be)
    _, d1 = run.operand(Pool.L1, s, e, write=False)
    s, e = _elements_runs(t.out_addr, o_off, oe)
    _, d_out = run.operand(Pool.L1, s, e, write=True)
    a = _load_np(mem, t.in_addr0 + d0 + a_off * ie, ie) - p[3]
    b = _load_np(mem, t.in_addr1 + d1 + b_off * be, be)
    prod = np.rint(np.matmul(a.astype(np.float64), b.astype(np.float64))).astype(np.int64)
    s_ = int(p[2])
    v = prod * p[0]
    if s_ > 0:
        v = (v + (1 << (s_ - 1))) >> s_
    res = np.clip(v + p[5], p[6], p[7])
    _store_np(mem, t.out_addr + d_out + o_off * oe, oe, res)


def _gather(run: TaskRun, t: DpuOp) -> None:
    data, at = run.block(t.in_addr0, t.groups * 8)
    idx = data[at : at + t.groups * 8].view("<i8").astype(np.int64)
    if len(idx) and idx.min() < 0:
        if t.b_mod <= 1:
            raise run.fail(
                f"gather index must be >= 0 (b_mod gives no table size to count back from), "
                f"not {int(idx.min())}"
            )
        if idx.min() < -t.b_mod or idx.max() >= t.b_mod:
            raise run.fail(
                f"gather index must lie in [{-t.b_mod}, {t.b_mod - 1}], "
                f"not {int(idx.min())}..{int(idx.max())}"
            )
        idx = np.where(idx < 0, idx + t.b_mod, idx)
    rows = t.in_addr1 + idx * t.n
    s, e = merge(np.sort(rows), np.sort(rows) + t.n)
    mem, d1 = run.operand(Pool.L1, s, e, write=False)
    s, e = span(t.out_addr, t.groups * t.n)
    _, d_out = run.operand(Pool.L1, s, e, write=True)
    src = (rows + d1)[:, None] + np.arange(t.n)
    out = t.out_addr + d_out + np.arange(t.groups * t.n)
    mem[out] = mem[src.reshape(-1)]


def _psum(run: TaskRun, t: DpuOp) -> None:
    """The cores' int32 partial sums of a layer split by input channels, summed (each add
    saturated as the array's ``accumulate``) and requantized as an `Mvm` ``requant``."""
    n, planes, stride = t.elements, max(1, t.operands), t.k_stride
    reach = ((planes - 1) * stride + n) * PSUM_BYTES
    data, at = run.block(t.in_addr0, reach)
    raw = data[at : at + reach].view("<i4").astype(np.int64)
    lo_acc, hi_acc = run.arch.mvm.accumulator_range
    acc = np.zeros(n, np.int64)
    for k in range(planes):
        acc = np.clip(acc + raw[k * stride : k * stride + n], lo_acc, hi_acc)
    ch = requant_table(run.records(t.param_addr, P.CHANNEL, min(t.p_mod, (n - 1) // t.p_div + 1)))
    k = (np.arange(n, dtype=np.int64) // t.p_div) % t.p_mod
    r = (((acc + ch[0, k]) * ch[1, k] + ch[3, k]) >> ch[2, k]) + ch[4, k]
    r = np.minimum(np.maximum(r, np.maximum(ch[5, k], -128)), np.minimum(ch[6, k], 127))
    if t.lut is not LutKind.NONE and t.lut not in CLAMP_LUTS:
        r = run.table(t.lut_addr)[r + 128]
    s, e = span(t.out_addr, n)
    mem, d_out = run.operand(Pool.L1, s, e, write=True)
    mem[t.out_addr + d_out : t.out_addr + d_out + n] = r.astype(np.int8).view(np.uint8)


def _check(run: TaskRun, t: DpuOp) -> None:
    for name in ("in_elem", "in1_elem", "in2_elem", "out_elem"):
        if getattr(t, name) not in _ELEM_BYTES:
            raise run.fail(f"{name} must be 1, 2 or 4, not {getattr(t, name)}")
    for name in ("b_div", "b_mod", "c_div", "c_mod", "p_div", "p_mod", "outer", "groups", "n"):
        if getattr(t, name) < 1:
            raise run.fail(f"{name} must be >= 1, not {getattr(t, name)}")
    if t.elements < 1 and t.kind not in (*_REDUCTIONS, DpuKind.LAYERNORM, DpuKind.GATHER):
        raise run.fail(f"elements must be >= 1, not {t.elements}")
    two = t.kind in _TWO_OPERANDS
    if two and t.operands != 2:
        raise run.fail(f"operands must be 2 for {t.kind.value}, not {t.operands}")


def execute_dpu(run: TaskRun) -> None:
    t = run.task
    assert isinstance(t, DpuOp)
    _check(run, t)
    if t.kind in _ELEMENTWISE:
        _elementwise_kind(run, t)
    elif t.kind in (DpuKind.DIV, DpuKind.POW):
        _float_elementwise(run, t)
    elif t.kind in _REDUCTIONS:
        _reduction(run, t)
    elif t.kind is DpuKind.LAYERNORM:
        _layernorm(run, t)
    elif t.kind is DpuKind.MATMUL:
        _matmul(run, t)
    elif t.kind is DpuKind.GATHER:
        _gather(run, t)
    elif t.kind is DpuKind.PSUM:
        _psum(run, t)
    else:  # pragma: no cover - every DpuKind is handled above
        raise run.fail(f"kind {t.kind.value} has no functional kernel")


__all__ = ["execute_dpu"]
