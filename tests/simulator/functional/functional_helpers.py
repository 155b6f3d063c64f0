"""Hand-built complete programs for the functional tests, and their numpy references."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from aipusim.isa import params as P
from aipusim.isa.image import BufferPlace, ConstantImage, IoBuffer, MemoryMap, TensorPlace
from aipusim.isa.program import Instance, MulticoreMode, Program
from aipusim.isa.tasks import DmaCopy, Phase, Pool, Task, TokenRef, TokenScope, Unit
from aipusim.simulator import SimResult, simulate

RNG = np.random.default_rng(15)


def tok(index: int, count: int = 1) -> TokenRef:
    return TokenRef(TokenScope.LOCAL, index, count)


def gtok(index: int, count: int = 1) -> TokenRef:
    return TokenRef(TokenScope.GLOBAL, index, count)


class Image:
    """The constants image, laid out as the tests add blobs (64-byte aligned)."""

    def __init__(self) -> None:
        self.data = bytearray()

    def put(self, blob: np.ndarray | bytes) -> int:
        raw = (
            bytes(np.ascontiguousarray(blob).view(np.uint8).reshape(-1))
            if isinstance(blob, np.ndarray)
            else bytes(blob)
        )
        self.data += bytes(-len(self.data) % 64)
        at = len(self.data)
        self.data += raw
        return at

    def __bytes__(self) -> bytes:
        return bytes(self.data)


def io(
    name: str,
    direction: str,
    addr: int,
    shape: Sequence[int],
    *,
    pool: str = "ddr",
    slots: int = 1,
    core: int = 0,
    layout: str = "nhwc",
    dtype: str = "int8",
) -> IoBuffer:
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return IoBuffer(
        name, direction, pool, addr, nbytes, slots, core, tuple(shape), layout, dtype, [0.1], [0]
    )


def tensor(
    name: str,
    pool: str,
    addr: int,
    shape: Sequence[int],
    *,
    core: int = 0,
    layout: str = "nhwc",
    layer: str = "",
) -> TensorPlace:
    return TensorPlace(
        name, pool, addr, int(np.prod(shape)), core, tuple(shape), layout, "int8", [0.1], [0], layer
    )


def program(
    tasks: Mapping[int, list[Task]],
    image: Image,
    *,
    io_bufs: Sequence[IoBuffer] = (),
    tensors: Sequence[TensorPlace] = (),
    buffers: Sequence[BufferPlace] = (),
    mode: MulticoreMode = MulticoreMode.COOPERATIVE,
    resources: float = 1.0,
    partition: dict[str, int] | None = None,
    double_buffer: bool = False,
    **knobs: Any,
) -> Program:
    cores = len(tasks)
    ins = sum(b.bytes for b in io_bufs if b.direction == "h2d" and b.core == 0)
    outs = sum(b.bytes for b in io_bufs if b.direction == "d2h" and b.core == 0)
    inst = Instance(
        tuple(range(cores)), tuple(f"core{c}.tasklist" for c in range(cores)), ins, outs
    )
    memory = MemoryMap(
        ConstantImage("constants.bin", 0, len(image.data)),
        tuple(io_bufs),
        tuple(tensors),
        tuple(buffers),
        partition,
    )
    return Program(
        model="hand",
        multicore_mode=mode,
        aipu_cores_used=cores,
        resources_used=resources,
        instance=inst,
        memory=memory,
        double_buffer=double_buffer,
        **knobs,
    )


def run(
    prog: Program,
    tasks: Mapping[int, list[Task]],
    image: Image,
    *,
    inputs: Mapping[str, np.ndarray] | None = None,
    frames: int = 1,
    **kw: Any,
) -> SimResult:
    return simulate(
        prog, tasks, frames=frames, functional=True, inputs=inputs, constants=bytes(image), **kw
    )


def dma(
    src_pool: Pool,
    src: int,
    dst_pool: Pool,
    dst: int,
    nbytes: int | None = None,
    *,
    unit: Unit = Unit.DMA0,
    **kw: Any,
) -> DmaCopy:
    """A DmaCopy; keyword fields (``bytes``, ``src_addr``, strides, ...) win."""
    fields = dict(src_pool=src_pool, src_addr=src, dst_pool=dst_pool, dst_addr=dst)
    if nbytes is not None:
        fields["bytes"] = nbytes
    return DmaCopy(unit=unit, **{**fields, **kw})


def preload(img: Image, blobs: Sequence[tuple[np.ndarray | None, int]]) -> list[Task]:
    """INIT copies of constant blobs (skipping None) from the image into L1 addresses."""
    out: list[Task] = []
    for blob, at in blobs:
        if blob is not None:
            raw = np.ascontiguousarray(blob).view(np.uint8).reshape(-1)
            out.append(dma(Pool.DDR, img.put(raw), Pool.L1, at, raw.size, phase=Phase.INIT))
    return out


def chain(tasks: Sequence[Task], first: int = 0) -> list[Task]:
    """``tasks`` in one sequence: where the unit changes, the earlier task signals a local
    token that the later one waits for (tokens ``first``, ``first + 1``, ... mod 32)."""
    out = list(tasks)
    k = first
    for i in range(1, len(out)):
        if out[i].unit != out[i - 1].unit:
            ref = tok(k % 32)
            k += 1
            out[i - 1] = replace(out[i - 1], signals=(*out[i - 1].signals, ref))
            out[i] = replace(out[i], waits=(*out[i].waits, ref))
    return out


def int8(*shape: int, lo: int = -128, hi: int = 128) -> np.ndarray:
    return RNG.integers(lo, hi, shape).astype(np.int8)


def requant_ref(acc: np.ndarray, rec: np.ndarray, channel_axis: int = 1) -> np.ndarray:
    """((acc + bias) * mult + 2**(shift-1)) >> shift, + zo, clamped: per channel."""
    shape = [1] * acc.ndim
    shape[channel_axis] = -1

    def f(name: str) -> np.ndarray:
        return rec[name].astype(np.int64).reshape(shape)

    shift = f("shift")
    v = ((acc.astype(np.int64) + f("bias")) * f("mult") + (np.int64(1) << (shift - 1))) >> shift
    return np.clip(np.clip(v + f("zo"), f("lo"), f("hi")), -128, 127).astype(np.int8)


def channel_params(cout: int, *, acc_scale: float = 1e-3, zo: int = 3) -> np.ndarray:
    """Requantize records of ``cout`` channels with varied multipliers and biases."""
    real = acc_scale * RNG.uniform(0.5, 2.0, cout)
    frac, exp = np.frexp(real)
    mult = np.rint(frac * (1 << 31)).astype(np.int64)
    mult = np.minimum(mult, (1 << 31) - 1)
    shift = 31 - exp
    return P.channel_records(bias=RNG.integers(-500, 500, cout), mult=mult, shift=shift, zo=zo)


__all__ = [
    "RNG",
    "Image",
    "chain",
    "channel_params",
    "dma",
    "gtok",
    "int8",
    "io",
    "preload",
    "program",
    "requant_ref",
    "run",
    "tensor",
    "tok",
]
