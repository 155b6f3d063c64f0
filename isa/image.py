"""What a complete program keeps in memory: its constants image, its I/O buffers and where
each layer's result lies (``model.json`` ``memory``).

- The **constants image** (``constants.bin`` beside the tasklists, CRC'd like them) holds
  every weight block in the layout its `WeightLoad` writes, every parameter block
  (`aipusim.isa.params`), every table; it is loaded into DDR at ``addr`` before the
  instance starts, and INIT tasks copy what the memory plan keeps on chip.
- **I/O buffers**: where the host writes each input and reads each output, per logical core
  (batch mode: core ``k`` runs frame ``k`` of a start), how the tensor lies (``nhwc``:
  a 4-D tensor channels-last; ``row_major``: any other rank) and its quantization. With
  ``slots`` > 1 frame ``f`` uses slot ``f % slots`` at ``addr + slot * bytes``: the runtime
  relocates every access a frame makes into the buffer by that offset (a DMA base
  register), so the tasklists, the same every frame, address slot 0. ``f`` counts the
  frames through that buffer, i.e. the start: in batch mode core ``k``'s buffer carries
  frame ``s * cores + k`` of start ``s`` in slot ``s % slots`` (counting the batch's frames
  instead would pin each core to one slot and defeat double buffering).
- **Tensors**: each layer output the program keeps whole in one buffer (pool, address,
  core, layout, quantization): what a functional run compares with the int8 reference,
  layer by layer, to find the first one that differs.
- **Buffers**: every buffer of the memory plan by name (pool, core, address, bytes), to
  name the data a hazard or a mismatch concerns.
- **Partition**: the bytes of L2 and DDR one instance owns. Replica ``r`` of a program
  (the runtime places several copies of a Batch-1 model) sees L2 and DDR address ``a`` at
  ``a + r * partition[pool]``; L1 is per core anyway.

>>> io = IoBuffer("x", "h2d", "l2", 0x1000, 48, 2, 0, (1, 3, 4, 4), "nhwc", "int8", [0.1], [3])
>>> mm = MemoryMap(ConstantImage("constants.bin", 0, 16), (io,), ())
>>> MemoryMap.from_dict(mm.to_dict()).io == mm.io, io.slot_addr(3) == 0x1000 + 48
(True, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aipusim.base.errors import ConfigError

#: File name of the constants image inside a compiled directory.
CONSTANTS_FILE = "constants.bin"
#: Physical layouts of tensors in memory.
LAYOUTS = ("nhwc", "row_major")


def _record(place: Any) -> dict[str, Any]:
    """``asdict`` of one of the flat records below (fields of numbers, strings and lists or
    tuples of them), without its recursion: a program has thousands of them."""
    return {k: list(v) if isinstance(v, list) else v for k, v in vars(place).items()}


@dataclass(frozen=True)
class ConstantImage:
    """The constants image: its file, and the DDR address it is loaded at."""

    file: str
    addr: int
    bytes: int


@dataclass(frozen=True)
class TensorPlace:
    """Where a tensor lies in memory and how (the fields of an I/O buffer or a layer's
    result; ``core`` -1: shared memory seen by every core of the instance)."""

    name: str
    pool: str
    addr: int
    bytes: int
    core: int
    shape: tuple[int, ...]
    layout: str
    dtype: str
    scale: list[float]
    zero_point: list[int]
    layer: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if self.layout not in LAYOUTS:
            raise ConfigError(
                f"tensor {self.name} layout must be one of {LAYOUTS}, not {self.layout!r}"
            )


@dataclass(frozen=True)
class IoBuffer:
    """A graph input (``h2d``) or output (``d2h``) buffer of one logical core."""

    name: str
    direction: str
    pool: str
    addr: int
    bytes: int
    slots: int
    core: int
    shape: tuple[int, ...]
    layout: str
    dtype: str
    scale: list[float]
    zero_point: list[int]

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if self.direction not in ("h2d", "d2h"):
            raise ConfigError(f"I/O buffer {self.name} direction must be h2d or d2h")
        if self.layout not in LAYOUTS:
            raise ConfigError(f"I/O buffer {self.name} layout must be one of {LAYOUTS}")

    def slot_addr(self, frame: int) -> int:
        """Address of the slot the ``frame``-th frame through this buffer (the start) uses."""
        return self.addr + (frame % self.slots) * self.bytes


@dataclass(frozen=True)
class BufferPlace:
    """One buffer of the memory plan (``core`` -1: shared)."""

    name: str
    pool: str
    core: int
    addr: int
    bytes: int


@dataclass(frozen=True)
class MemoryMap:
    """The constants image, the I/O buffers and the placed layer results of a program."""

    constants: ConstantImage
    io: tuple[IoBuffer, ...]
    tensors: tuple[TensorPlace, ...]
    buffers: tuple[BufferPlace, ...] = ()
    partition: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "constants": _record(self.constants),
            "io": [_record(b) for b in self.io],
            "tensors": [_record(t) for t in self.tensors],
            "buffers": [_record(b) for b in self.buffers],
            "partition": dict(self.partition or {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemoryMap:
        try:
            return cls(
                ConstantImage(**data["constants"]),
                tuple(IoBuffer(**b) for b in data["io"]),
                tuple(TensorPlace(**t) for t in data["tensors"]),
                tuple(BufferPlace(**b) for b in data.get("buffers", ())),
                dict(data.get("partition") or {}),
            )
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"model.json memory map is malformed: {exc}") from None

    def inputs(self) -> tuple[IoBuffer, ...]:
        return tuple(b for b in self.io if b.direction == "h2d")

    def outputs(self) -> tuple[IoBuffer, ...]:
        return tuple(b for b in self.io if b.direction == "d2h")


__all__ = [
    "CONSTANTS_FILE",
    "LAYOUTS",
    "BufferPlace",
    "ConstantImage",
    "IoBuffer",
    "MemoryMap",
    "TensorPlace",
]
