"""Arrays read from a file through a memory map, and giving their pages back.

A model with gigabytes of weights in an external-data file (llama_1b: 4.95 GB of float32)
is not read into memory: each weight is a read-only array over a map of the file
(`mapped_array`), whose pages the kernel reads when they are first touched. Touched pages
stay resident (and count in the process's RSS) as long as the map lives, so a pass that
reads every weight once, one after the other (hashing, quantizing), hands each one's pages
back when done with it (`release`): the peak is then one weight, not all of them.

>>> import tempfile
>>> with tempfile.NamedTemporaryFile() as f:
...     _ = f.write(np.arange(4, dtype=np.float32).tobytes()); f.flush()
...     a = mapped_array(f.name, 4, np.dtype(np.float32), (3,))
...     release(a)  # the values are read again from the file when next touched
...     a.tolist(), a.flags.writeable, is_mapped(a.T), is_mapped(a.copy())
([1.0, 2.0, 3.0], False, True, False)
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence

import numpy as np

#: Open maps by resolved file path: every tensor of one file shares one map.
_maps: dict[str, mmap.mmap] = {}


def _file_map(path: str | os.PathLike[str]) -> mmap.mmap:
    key = os.path.realpath(path)
    found = _maps.get(key)
    if found is None or found.closed:
        with open(key, "rb") as fh:
            found = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        _maps[key] = found
    return found


def mapped_array(
    path: str | os.PathLike[str], offset: int, dtype: np.dtype, shape: Sequence[int]
) -> np.ndarray:
    """A read-only array of ``shape`` and ``dtype`` (stored little-endian, C order) starting
    ``offset`` bytes into file ``path``, backed by a map of the file (nothing is read)."""
    count = int(np.prod(shape, dtype=np.int64))
    flat = np.frombuffer(_file_map(path), dtype=dtype.newbyteorder("<"), count=count, offset=offset)
    return flat.reshape(tuple(shape))


def _mapping_of(arr: np.ndarray) -> mmap.mmap | None:
    base: object = arr
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):  # (numpy's frombuffer holds a view of the buffer)
        base = base.obj
    return base if isinstance(base, mmap.mmap) else None


def is_mapped(arr: np.ndarray) -> bool:
    """Whether ``arr`` is a `mapped_array` or a view of one."""
    return isinstance(arr, np.ndarray) and _mapping_of(arr) is not None


def release(arr: np.ndarray) -> None:
    """Drop the resident pages of ``arr`` if it is a `mapped_array` (or a view of one); a
    no-op for any other array. The values stay readable: the file is read again."""
    mapping = _mapping_of(arr) if isinstance(arr, np.ndarray) else None
    if mapping is None or mapping.closed or arr.size == 0:
        return
    start_addr = np.frombuffer(mapping, np.uint8, count=1).ctypes.data
    lo, hi = np.lib.array_utils.byte_bounds(arr)
    page = mmap.PAGESIZE
    first = (lo - start_addr) // page * page
    mapping.madvise(mmap.MADV_DONTNEED, first, hi - start_addr - first)


__all__ = ["is_mapped", "mapped_array", "release"]
