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

>>> rec = channel_records(bias=[5], mult=[1 << 30], shift=[31], zo=[-3])
>>> len(rec), int(rec["bias"][0]), int(rec["lo"][0]), int(rec["hi"][0])
(1, 5, -128, 127)
>>> CHANNEL.itemsize, SCALAR.itemsize, COUNT.itemsize, COORD.itemsize
(24, 40, 8, 12)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

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
    "LUT_BYTES",
    "RESIZE_WEIGHT_BITS",
    "SCALAR",
    "SCALAR_USE",
    "SOFTMAX_EXP_BITS",
    "SOFTMAX_TABLE_BYTES",
    "channel_records",
    "read",
    "scalar_record",
]
