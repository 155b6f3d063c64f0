"""Tensors between the host's view and memory: the inputs a run is given, the outputs and
layer results it reads back.

A place (`IoBuffer` or `TensorPlace`) holds a tensor of its logical shape (NCHW for 4-D)
in its layout: ``nhwc`` stores a 4-D tensor channels-last, ``row_major`` as it is.

>>> from aipusim.isa.image import IoBuffer
>>> buf = IoBuffer("x", "h2d", "l2", 0, 24, 1, 0, (1, 2, 3, 4), "nhwc", "int8", [1.0], [0])
>>> x = np.arange(24, dtype=np.int8).reshape(1, 2, 3, 4)
>>> raw = to_bytes(buf, x)
>>> raw[:4].tolist(), bool((from_bytes(buf, raw) == x).all())
([0, 12, 1, 13], True)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from aipusim.base.errors import ConfigError, SimulationError
from aipusim.isa.image import IoBuffer, MemoryMap, TensorPlace

#: Seed of the input a functional run makes up when it is given none.
INPUT_SEED = 0
#: The error for a program that cannot run on data (no memory map in ``model.json``).
NOT_COMPLETE = "compiled without a complete program: recompile"

Place = IoBuffer | TensorPlace


def _dtype(place: Place) -> np.dtype:
    try:
        return np.dtype(place.dtype)
    except TypeError:
        raise SimulationError(
            f"tensor {place.name} dtype must be a numpy integer type, not {place.dtype!r}"
        ) from None


def _memory_shape(place: Place) -> tuple[int, ...]:
    shape = tuple(place.shape)
    if place.layout == "nhwc":
        if len(shape) != 4:
            raise SimulationError(
                f"tensor {place.name} layout nhwc needs a 4-D shape, not {list(shape)}"
            )
        n, c, h, w = shape
        return (n, h, w, c)
    return shape


def _check_size(place: Place) -> None:
    need = int(np.prod(place.shape, dtype=np.int64)) * _dtype(place).itemsize
    if need != place.bytes:
        raise SimulationError(
            f"tensor {place.name} must take {need} bytes (shape {list(place.shape)}, "
            f"{place.dtype}), not {place.bytes}"
        )


def to_bytes(place: Place, values: np.ndarray) -> np.ndarray:
    """The bytes of logical ``values`` in ``place``'s layout."""
    _check_size(place)
    arr = np.asarray(values, _dtype(place)).reshape(place.shape)
    if place.layout == "nhwc":
        arr = arr.transpose(0, 2, 3, 1)
    return np.ascontiguousarray(arr).view(np.uint8).reshape(-1)


def from_bytes(place: Place, raw: np.ndarray) -> np.ndarray:
    """The logical tensor of ``place`` from its bytes."""
    _check_size(place)
    arr = np.ascontiguousarray(raw).view(_dtype(place)).reshape(_memory_shape(place))
    return arr.transpose(0, 3, 1, 2).copy() if place.layout == "nhwc" else arr.copy()


def by_element(place: Place, per_byte: np.ndarray) -> np.ndarray:
    """A per-byte array (in memory order) as one value per element of the logical tensor:
    each element's first byte."""
    size = _dtype(place).itemsize
    arr = np.asarray(per_byte)[::size].reshape(_memory_shape(place))
    return arr.transpose(0, 3, 1, 2).copy() if place.layout == "nhwc" else arr.copy()


def check_inputs(
    memory: MemoryMap, inputs: Mapping[str, Any] | None
) -> tuple[dict[str, np.ndarray], str]:
    """The input of every graph input by name, checked against its I/O buffer, and how it
    was chosen. Without ``inputs``: seeded random values (`INPUT_SEED`)."""
    bufs: dict[str, IoBuffer] = {}
    for buf in memory.inputs():
        bufs.setdefault(buf.name, buf)
    names = ", ".join(bufs) or "none"
    if inputs is None:
        rng = np.random.default_rng(INPUT_SEED)
        made = {}
        for name, buf in bufs.items():
            info = np.iinfo(_dtype(buf))
            made[name] = rng.integers(info.min, info.max + 1, buf.shape).astype(_dtype(buf))
        return made, f"seeded random {', '.join(sorted({b.dtype for b in bufs.values()}))} " \
            f"(numpy default_rng({INPUT_SEED}))"  # fmt: skip
    if not isinstance(inputs, Mapping):
        raise ConfigError(f"inputs must be a mapping of input name to array, not {inputs!r}")
    unknown = sorted(set(inputs) - set(bufs))
    if unknown:
        raise ConfigError(
            f"inputs must be among the program's inputs ({names}), not {unknown[0]!r}"
        )
    out = {}
    for name, buf in bufs.items():
        if name not in inputs:
            raise ConfigError(f"inputs must give {name} (the program's inputs: {names})")
        arr = np.asarray(inputs[name])
        dtype = _dtype(buf)
        if arr.dtype != dtype:
            raise ConfigError(
                f"input {name} must be an {dtype} array (quantized with scale {buf.scale} and "
                f"zero point {buf.zero_point}), not {arr.dtype}"
            )
        if tuple(arr.shape) != tuple(buf.shape):
            raise ConfigError(
                f"input {name} must have shape {list(buf.shape)}, not {list(arr.shape)}"
            )
        out[name] = arr
    return out, "given"


__all__ = ["INPUT_SEED", "NOT_COMPLETE", "by_element", "check_inputs", "from_bytes", "to_bytes"]
