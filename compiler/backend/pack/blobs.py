"""The constant blobs of a layer (`LayerConstants`) and the byte helpers the `pack`
packers share (`constants` for MVM, DWPU and layout layers, `dpu` for DPU layers).

>>> LayerConstants(params=_bytes(np.arange(3, dtype="<i2"))).nbytes
6
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from aipusim.compiler.backend.lower.layout_dma import Copy
from aipusim.compiler.quant.quantize import QStep, QuantizedGraph


@dataclass(frozen=True)
class LayerConstants:
    """A layer's constant blobs (uint8 arrays) and where its weight blocks start."""

    weights: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    params: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    operand: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    #: ``(part, oc_tile, block)`` -> byte offset of that weight block in ``weights``.
    blocks: dict[tuple[int, int, int], int] = field(default_factory=dict)
    #: Byte offset of the layer's table in ``params`` (-1: none).
    table_offset: int = -1
    #: Byte offset of a fused residual add's `SCALAR` record in ``params`` (-1: none).
    add_offset: int = -1
    #: Byte offset of a second element-wise step's constant operand in ``operand``
    #: (`dpu_chain`; -1: none).
    then_offset: int = -1
    #: Byte offset of a pool's COUNT records in ``params`` (-1: none).
    count_offset: int = -1
    #: Byte offset of the output columns' coordinate table in ``weights`` (resize; -1: none).
    cols_offset: int = -1
    #: A layout layer's copies per output (`layout_dma.copy_plan`); fill copies read the
    #: ``operand`` blob (the pad value, as long as the longest fill run).
    copies: tuple[tuple[int, tuple[Copy, ...]], ...] = ()
    #: The part of the program these bytes could not express (empty: complete).
    incomplete: str = ""

    @property
    def nbytes(self) -> int:
        return len(self.weights) + len(self.params) + len(self.operand)


def _bytes(records: np.ndarray) -> np.ndarray:
    return np.frombuffer(np.ascontiguousarray(records).tobytes(), np.uint8).copy()


def _zp(program: QuantizedGraph, tensor: str) -> np.ndarray:
    return np.asarray(program.qparams(tensor).zero_point, np.int64).reshape(-1)


def _one_range(clamp: QStep) -> tuple[int, int]:
    """The one ``(lo, hi)`` of a clamp step that a fused op's record takes over:
    clamp(clamp(x, -128, 127), lo', hi') is clamp(x, lo', hi') when -128 <= lo' <= hi' <=
    127 (what the fusion passes checked)."""
    lo = int(np.asarray(clamp.params["lo"]).reshape(-1)[0])
    hi = int(np.asarray(clamp.params["hi"]).reshape(-1)[0])
    return lo, hi


__all__ = [
    "LayerConstants",
]
