"""The constants image and the memory map of a compiled program (`aipusim.isa.image`).

The memory plan gives every constant blob (`constants.LayerConstants`) a DDR address: its
home when it stays in DDR, its image source when INIT copies it on chip. The image is the
DDR range covering all of them, each blob at its address; the memory map names the I/O
buffers, every whole layer output and every buffer of the plan.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aipusim.compiler.backend.lower.layer import LayerUnit, activation_bytes
from aipusim.compiler.backend.memplan.buffers import CONSTANT_KINDS, BufKind, MemPlan
from aipusim.compiler.backend.memplan.plan import pool_capacities
from aipusim.compiler.decoder import append_in_place
from aipusim.isa.image import (
    CONSTANTS_FILE,
    BufferPlace,
    ConstantImage,
    IoBuffer,
    MemoryMap,
    TensorPlace,
)
from aipusim.isa.tasks import Pool

_BLOBS = ("weights", "params", "operand")


def constant_blob(state: Any, name: str) -> np.ndarray:
    """The bytes of constant buffer ``name`` (``params:conv1``, ``image:weights:conv1``)."""
    prefix, _, layer = name.removeprefix("image:").partition(":")
    assert prefix in _BLOBS, name
    index = next(i for i, la in enumerate(state.layers) if la.name == layer)
    return getattr(state.constants[index], prefix)


def constants_image(state: Any) -> tuple[bytearray, ConstantImage]:
    """The constants image and where it is loaded (an empty image at 0 when none). A
    bytearray, filled in place: llama_1b's is 1.3 GB, and ``bytes()`` of it, or of each
    blob, would be a second copy."""
    plan: MemPlan = state.memory
    lo, hi = plan.image_range()
    image = bytearray(hi - lo)
    for buf in plan.buffers.values():
        sourced = buf.kind is BufKind.IMAGE_SOURCE
        if buf.pool is not Pool.DDR or not (sourced or buf.kind in CONSTANT_KINDS):
            continue
        data = memoryview(np.ascontiguousarray(constant_blob(state, buf.name))).cast("B")
        assert len(data) == buf.size_bytes, f"{buf.name}: {len(data)} != {buf.size_bytes}"
        image[buf.addr - lo : buf.addr - lo + len(data)] = data
    return image, ConstantImage(CONSTANTS_FILE, lo, hi - lo)


def _quant(graph: Any, name: str) -> tuple[str, list[float], list[int]]:
    t = graph.tensor(name)
    q = t.quant
    if q is None:
        return t.dtype.value, [], []
    return (
        q.dtype.value,
        [float(x) for x in np.asarray(q.scale).reshape(-1)],
        [int(x) for x in np.asarray(q.zero_point).reshape(-1)],
    )


def _layout(shape: tuple[int, ...]) -> str:
    return "nhwc" if len(shape) == 4 else "row_major"


def memory_map(state: Any, image: ConstantImage) -> MemoryMap:
    """The program's `MemoryMap`: I/O buffers per frame core, placed layer outputs, every
    buffer, and the L2/DDR partition of one instance."""
    plan: MemPlan = state.memory
    g = state.graph
    # a KV cache grown in place is one buffer of one slot (memplan), past and present
    grown = append_in_place(g)
    one_slot = set(grown) | set(grown.values())
    io = []
    for (copy, name), bname in sorted(plan.tensor_buffer.items()):
        if name not in g.inputs and name not in g.outputs:
            continue
        slots = 1 if name in one_slot else plan.io_slots
        buf = plan.buffers[bname]
        shape = tuple(g.shape(name))
        dtype, scale, zp = _quant(g, name)
        io.append(
            IoBuffer(
                name,
                "h2d" if name in g.inputs else "d2h",
                buf.pool.value,
                buf.addr,
                activation_bytes(g, name),
                slots,
                copy if copy >= 0 else buf.core,
                shape,
                _layout(shape),
                dtype,
                scale,
                zp,
            )
        )
    tensors = []
    fused = {t for grp in state.groups for t in grp.intermediates}
    for layer in state.layers:
        if layer.unit is LayerUnit.ALIAS:
            continue
        for out in layer.outputs:
            if out in fused:
                continue
            for (copy, name), bname in sorted(plan.tensor_buffer.items()):
                if name != out:
                    continue
                buf = plan.buffers[bname]
                shape = tuple(g.shape(out))
                dtype, scale, zp = _quant(g, out)
                core = buf.core if buf.pool is Pool.L1 else (copy if copy >= 0 else -1)
                place = TensorPlace(
                    out, buf.pool.value, buf.addr, activation_bytes(g, out), core,
                    shape, _layout(shape), dtype, scale, zp, layer.name,
                )  # fmt: skip
                tensors.append(place)
    buffers = tuple(
        BufferPlace(b.name, b.pool.value, b.core if b.pool is Pool.L1 else -1, b.addr, b.size_bytes)
        for b in sorted(plan.buffers.values(), key=lambda b: (b.pool.value, b.addr, b.name))
        if b.addr >= 0
    )
    caps = pool_capacities(state.target)
    partition = {"l2": int(caps[Pool.L2]), "ddr": int(caps[Pool.DDR])}
    return MemoryMap(image, tuple(io), tuple(tensors), buffers, partition)


__all__ = ["constant_blob", "constants_image", "memory_map"]
