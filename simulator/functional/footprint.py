"""Footprints: the bytes a task reads and writes, as sorted, disjoint ``[start, end)`` runs.

A task's footprint is a list of `Access`es, one per operand: the address space, the runs
(program addresses until `Access.moved` shifts them where the runtime put them) and whether
the operand is written. `runs` expands a strided pattern (``levels`` of ``(count, stride)``
around a contiguous run) exactly, so a strided DMA or a channel slice of a tile is what it
touches, not its bounding box.

>>> s, e = runs(100, 4, [(2, 20), (3, 4)])  # 2 planes 20 apart of 3 rows 4 apart
>>> s.tolist(), e.tolist()
([100, 120], [112, 132])
>>> merge(np.array([0, 5, 3]), np.array([2, 9, 6])) [0].tolist()
[0, 3]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, disjoint runs covering the same bytes as ``[starts, ends)`` (empty runs
    dropped; touching runs joined)."""
    keep = ends > starts
    s, e = starts[keep].astype(np.int64), ends[keep].astype(np.int64)
    if len(s) <= 1:
        return s, e
    if not np.all(s[1:] >= s[:-1]):
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def runs(base: int, length: int, levels: Sequence[tuple[int, int]]) -> tuple[np.ndarray, ...]:
    """Runs of ``length`` bytes at ``base + sum(i_k * stride_k)`` for every index of
    ``levels`` (outermost first), merged."""
    starts = np.array([base], np.int64)
    for count, stride in levels:
        if count <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        starts = (starts[:, None] + np.arange(count, dtype=np.int64) * stride).reshape(-1)
    return merge(starts, starts + length)


def span(base: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """One contiguous run."""
    return np.array([base], np.int64), np.array([base + max(length, 0)], np.int64)


@dataclass(slots=True)
class Access:
    """One operand of a task: ``[starts, ends)`` runs in address space ``space``."""

    space: int
    starts: np.ndarray
    ends: np.ndarray
    write: bool

    @property
    def hi(self) -> int:
        return int(self.ends[-1]) if len(self.ends) else 0

    @property
    def nbytes(self) -> int:
        return int((self.ends - self.starts).sum())


__all__ = ["Access", "merge", "runs", "span"]
