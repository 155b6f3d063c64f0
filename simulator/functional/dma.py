"""`DmaCopy`: ``planes`` x ``rows`` equal runs from one pool to another, multicast to the L1
of several cores.

Semantics as `aipusim.isa.tasks.DmaCopy` states them, literally: run ``(p, r)`` starts at
``addr + p * plane_stride + r * stride`` on each side, so a zero stride with several rows
repeats the same bytes (a broadcast read; on the write side the last run wins, as the runs
go in order). ``bytes`` must divide into ``planes * rows`` runs. ``dst_core_mask`` (bit ``i``:
logical core ``i`` of the instance; 0: the issuing core) needs an L1 destination, since only
the cores' L1s are per core. The source is read whole before anything is written, so a copy
within one pool may overlap itself.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from aipusim.isa.tasks import DmaCopy, Pool
from aipusim.simulator.functional.context import TaskRun
from aipusim.simulator.functional.footprint import runs


def _view(data: np.ndarray, at: int, shape: tuple[int, int, int], strides: tuple[int, int]):
    """The ``planes x rows x run`` bytes at ``at`` with the given plane and row strides."""
    return as_strided(data[at:], shape=shape, strides=(*strides, 1), writeable=True)


def dest_cores(run: TaskRun, t: DmaCopy) -> list[int]:
    """Logical cores whose L1 (or the shared pool) a copy writes."""
    if t.dst_core_mask == 0:
        return [run.where.lcore]
    if t.dst_pool is not Pool.L1:
        raise run.fail(f"dst_core_mask needs an l1 destination, not {t.dst_pool.value}")
    n = run.mem.cores_per_replica
    cores = [i for i in range(8) if t.dst_core_mask >> i & 1]
    if cores[-1] >= n:
        raise run.fail(
            f"dst_core_mask must name cores of the instance 0-{n - 1}, not {t.dst_core_mask:#b}"
        )
    return cores


def execute_dma(run: TaskRun) -> None:
    t = run.task
    assert isinstance(t, DmaCopy)
    planes, rows = max(t.planes, 1), max(t.rows, 1)
    if t.bytes <= 0 or t.bytes % (planes * rows):
        raise run.fail(
            f"bytes must be a positive multiple of planes x rows ({planes} x {rows}), not {t.bytes}"
        )
    length = t.bytes // (planes * rows)
    shape = (planes, rows, length)
    s, e = runs(t.src_addr, length, [(planes, t.src_plane_stride), (rows, t.src_stride)])
    src, delta = run.operand(t.src_pool, s, e, write=False)
    data = _view(src, t.src_addr + delta, shape, (t.src_plane_stride, t.src_stride)).copy()
    d_s, d_e = runs(t.dst_addr, length, [(planes, t.dst_plane_stride), (rows, t.dst_stride)])
    for core in dest_cores(run, t):
        dst, delta = run.operand(t.dst_pool, d_s, d_e, write=True, lcore=core)
        _view(dst, t.dst_addr + delta, shape, (t.dst_plane_stride, t.dst_stride))[...] = data


__all__ = ["dest_cores", "execute_dma"]
