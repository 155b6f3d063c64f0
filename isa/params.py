"""Parameter blocks: the constants a compute task reads besides its data, byte for byte.

A compute task points at its parameters by address (``param_addr``, ``lut_addr``,
``weight_addr`` of `aipusim.isa.tasks`); the compiler writes them into the constants image
(and on chip where the memory plan keeps them) in the layouts below, and the functional
simulator reads them back from the same bytes. All values are little-endian.

- `CHANNEL` (24 bytes, one per output channel; a channel tile's records are contiguous):
  the requantize of a channel, ``((acc + bias) * mult + 2**(shift-1)) >> shift) + zo``
  clamped to ``[lo, hi]``; ``zi`` is the input zero point a DWPU sum subtracts, ``scale``
  the per-channel factor of a DPU ``requant`` (``acc = (x - zi) * scale``).
- `SCALAR` (40 bytes): the integer parameters of the element-wise and reduction kinds
  (see `SCALAR_USE`).
- `COUNT` (8 bytes each): an average pool's requantize by the number of pixels it summed,
  ``kh * kw`` records after the pool's `SCALAR` (record ``i`` is for ``i + 1`` pixels).
- `COORD` (12 bytes each): the source of one output row or column of a resize: indices
  ``i0``, ``i1`` and the weight ``w`` of ``i1`` in units of ``2**-RESIZE_WEIGHT_BITS``
  (nearest: ``i0`` only). The table at ``weight_addr`` holds ``out_h`` rows then ``out_w``
  columns.
- A LUT is 256 int8 values (index ``x + 128``); a softmax table 256 int32 values of
  ``2**SOFTMAX_EXP_BITS * exp(s_in * d)``, index ``d + 255`` for ``d = x - max <= 0``.
- The DPU's float kinds (``layernorm``, ``div``, ``pow``): their `SCALAR` (zero points),
  then `FLOAT_WORD` words, one float18 value each (`aipusim.isa.float18.FloatFormat.encode`),
  in the order of `FLOAT_PARAMS`; `float_block` writes them, `read_float_block` reads them
  back as the parameters of `aipusim.isa.fp_kernels`.

Which block each kind reads at ``param_addr``: an ``Mvm``, a DWPU ``dwconv`` and a DPU
``requant`` one `CHANNEL` per output channel; a DPU ``lut`` with ``lut`` relu/clip (a clamp)
one `CHANNEL` per channel for ``lo``/``hi``, with any other ``lut`` nothing (the table is at
``lut_addr``); the other element-wise and reduction kinds a `SCALAR` (per channel at ``(e //
p_div) % p_mod`` where a kind takes per-channel parameters); ``avgpool`` a `SCALAR` then its
`COUNT` records; ``copy``, ``gather``, ``reduce_max`` and the max pools nothing.

>>> rec = channel_records(bias=[5], mult=[1 << 30], shift=[31], zo=[-3])
>>> len(rec), int(rec["bias"][0]), int(rec["lo"][0]), int(rec["hi"][0])
(1, 5, -128, 127)
>>> CHANNEL.itemsize, SCALAR.itemsize, COUNT.itemsize, COORD.itemsize
(24, 40, 8, 12)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from aipusim.isa.float18 import FloatFormat
from aipusim.isa.fp_kernels import EXP2_STEPS

#: Weights of a linear resize are fixed point with this many fraction bits.
RESIZE_WEIGHT_BITS = 10
#: A softmax's exponentials are fixed point with this many fraction bits.
SOFTMAX_EXP_BITS = 15
#: Bytes of a lookup table of int8 values and of a softmax table.
LUT_BYTES = 256
SOFTMAX_TABLE_BYTES = 256 * 4

CHANNEL = np.dtype(
    [
        ("bias", "<i4"),
        ("mult", "<i4"),
        ("scale", "<i4"),
        ("zi", "<i2"),
        ("zo", "<i2"),
        ("lo", "<i2"),
        ("hi", "<i2"),
        ("shift", "u1"),
        ("pad", "u1", (3,)),
    ]
)
SCALAR = np.dtype(
    [
        ("m0", "<i8"),
        ("m1", "<i8"),
        ("shift", "<i4"),
        ("za", "<i4"),
        ("zb", "<i4"),
        ("zo", "<i4"),
        ("lo", "<i4"),
        ("hi", "<i4"),
    ]
)
COUNT = np.dtype([("mult", "<i4"), ("shift", "<i4")])
COORD = np.dtype([("i0", "<i4"), ("i1", "<i4"), ("w", "<i4")])

#: What each DPU/DWPU kind takes from its `SCALAR` (unlisted fields are 0).
SCALAR_USE: dict[str, str] = {
    "add": "sat(rshift(m0 * (a - za) + m1 * (b - zb), shift) + zo) into [lo, hi]",
    "sub": "sat(rshift(m0 * (a - za) - m1 * (b - zb), shift) + zo) into [lo, hi]",
    "min": "min/max of sat(rshift(m0 * (a - za), shift) + zo) and the same of b with m1",
    "max": "(as min)",
    "rescale": "sat(rshift(m0 * (a - za), shift) + zo) into [lo, hi]",
    "mul": "sat(rshift((a - za) * (b - zb) * m0, shift) + zo) into [lo, hi]",
    "reduce": "sat(rshift(sum(x - za) * m0, shift) + zo) into [lo, hi]",
    "matmul": "sat(rshift(sum((a - za) * b) * m0, shift) + zo) into [lo, hi]",
    "softmax": "sat(rshift((e * m0) // sum(e), 16) + zo) into [lo, hi], e from the table",
    "globalpool": "sat(rshift(sum(x - za) * m0, shift) + zo) into [lo, hi]",
    "avgpool": "za, zo, lo, hi; the multiplier and shift from the COUNT of the window",
    "resize_linear": "sat(rshift(interpolated(x - za) * m0, shift) + zo) into [lo, hi]",
    "layernorm": "za, zo, lo, hi; then the float18 words eps_q, gain[n], shift[n]",
    "div": "za, zb, zo, lo, hi; then the float18 word scale",
    "pow": "za, zb, zo, lo, hi; then the float18 words b_scale, out_scale, log2, exp2",
}

#: One float18 value in the low bits of a little-endian word.
FLOAT_WORD = np.dtype("<u4")
#: The float parameters of the DPU's float kinds after their `SCALAR`, in order: (name,
#: words); ``"n"`` is the task's ``n`` (the elements of a LayerNorm group, in group order).
#: The names are those of the parameter dicts of `aipusim.isa.fp_kernels`.
FLOAT_PARAMS: dict[str, tuple[tuple[str, int | str], ...]] = {
    "layernorm": (("eps_q", 1), ("gain", "n"), ("shift", "n")),
    "div": (("scale", 1),),
    "pow": (("b_scale", 1), ("out_scale", 1), ("log2", 256), ("exp2", EXP2_STEPS + 1)),
}


def channel_records(
    *,
    bias: Sequence[int] | np.ndarray,
    mult: Sequence[int] | np.ndarray,
    shift: Sequence[int] | np.ndarray,
    zo: Sequence[int] | np.ndarray | int,
    lo: Sequence[int] | np.ndarray | int = -128,
    hi: Sequence[int] | np.ndarray | int = 127,
    zi: Sequence[int] | np.ndarray | int = 0,
    scale: Sequence[int] | np.ndarray | int = 0,
) -> np.ndarray:
    """`CHANNEL` records of ``len(bias)`` channels (scalars broadcast)."""
    n = len(np.atleast_1d(bias))
    rec = np.zeros(n, CHANNEL)
    for name, value in (
        ("bias", bias),
        ("mult", mult),
        ("shift", shift),
        ("zo", zo),
        ("lo", lo),
        ("hi", hi),
        ("zi", zi),
        ("scale", scale),
    ):
        v = np.broadcast_to(np.asarray(value, np.int64), (n,))
        info = np.iinfo(rec.dtype[name].base)
        if v.size and (v.min() < info.min or v.max() > info.max):
            raise ValueError(f"channel {name} must fit {rec.dtype[name].base}, not {v}")
        rec[name] = v
    return rec


def scalar_record(**values: int) -> np.ndarray:
    """One `SCALAR` record; ``lo``/``hi`` default to the int8 range."""
    rec = np.zeros(1, SCALAR)
    rec["lo"], rec["hi"] = -128, 127
    for name, value in values.items():
        if name not in SCALAR.names:
            raise KeyError(f"SCALAR has no field {name!r} (fields: {', '.join(SCALAR.names)})")
        rec[name] = int(value)
    return rec


def _float_kind(kind: str) -> tuple[tuple[str, int | str], ...]:
    if kind not in FLOAT_PARAMS:
        raise KeyError(f"float kind must be one of {', '.join(FLOAT_PARAMS)}, not {kind!r}")
    return FLOAT_PARAMS[kind]


def float_block(
    kind: str, fmt: FloatFormat, scalar: np.ndarray, params: Mapping[str, Any]
) -> np.ndarray:
    """The parameter block (uint8) of a DPU float kind: the `SCALAR` record ``scalar``, then
    the float18 words of ``params`` (a dict as `aipusim.isa.fp_kernels` takes it).

    >>> from aipusim.isa.float18 import FloatFormat
    >>> fmt = FloatFormat(8, 9)
    >>> block = float_block("div", fmt, scalar_record(za=1, zb=2, zo=3), {"scale": 0.5})
    >>> len(block), float(read_float_block(block, 0, "div", fmt)[1]["scale"])
    (44, 0.5)
    """
    words = []
    for name, _count in _float_kind(kind):
        words.append(np.atleast_1d(fmt.encode(np.asarray(params[name]).reshape(-1))))
    body = np.concatenate(words).astype(FLOAT_WORD)
    head = np.ascontiguousarray(scalar, SCALAR).view(np.uint8).reshape(-1)
    return np.concatenate([head, body.view(np.uint8)])


def read_float_block(
    memory: np.ndarray, addr: int, kind: str, fmt: FloatFormat, n: int = 1
) -> tuple[np.ndarray, dict[str, Any]]:
    """(`SCALAR` record, parameters for `aipusim.isa.fp_kernels`) of a float kind's block
    at ``addr``; ``n`` is the task's ``n`` (LayerNorm's group size, also given as
    ``params["n"]``)."""
    scalar = read(memory, addr, SCALAR)[0]
    at = addr + SCALAR.itemsize
    out: dict[str, Any] = {}
    for name, count in _float_kind(kind):
        k = n if count == "n" else int(count)
        values = fmt.decode(read(memory, at, FLOAT_WORD, k))
        out[name] = values if isinstance(count, str) or k > 1 else values[0]
        at += FLOAT_WORD.itemsize * k
    if kind == "layernorm":
        out["n"] = np.int64(n)
    return scalar, out


def read(memory: np.ndarray, addr: int, dtype: np.dtype, count: int = 1) -> np.ndarray:
    """``count`` records of ``dtype`` at byte ``addr`` of a uint8 ``memory`` array."""
    end = addr + dtype.itemsize * count
    if addr < 0 or end > len(memory):
        raise IndexError(f"parameters at {addr:#x}..{end:#x} lie outside memory of {len(memory)}")
    return memory[addr:end].view(dtype)


__all__ = [
    "CHANNEL",
    "COORD",
    "COUNT",
    "FLOAT_PARAMS",
    "FLOAT_WORD",
    "LUT_BYTES",
    "RESIZE_WEIGHT_BITS",
    "SCALAR",
    "SCALAR_USE",
    "SOFTMAX_EXP_BITS",
    "SOFTMAX_TABLE_BYTES",
    "channel_records",
    "float_block",
    "read",
    "read_float_block",
    "scalar_record",
]
