"""What the machine can give a run: available memory, and sizes in words a person reads.

A run whose estimated memory exceeds what is available is refused before it starts, with
the estimate in the message (`aipusim.base.errors.ResourceLimitError`), instead of being
killed by the kernel an hour later.

>>> format_bytes(3 * 2**30)
'3.22 GB'
>>> available_memory_bytes() > 0
True
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

#: cgroup (v2, then v1) files that may cap the memory of this process below the machine's.
_CGROUP_LIMITS = (
    ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
    (
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
        "/sys/fs/cgroup/memory/memory.usage_in_bytes",
    ),
)


def _meminfo_available() -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


def _cgroup_room() -> int | None:
    for limit_file, usage_file in _CGROUP_LIMITS:
        with contextlib.suppress(OSError, ValueError):
            limit = Path(limit_file).read_text().strip()
            if limit == "max":
                return None
            usage = int(Path(usage_file).read_text().strip())
            room = int(limit) - usage
            # v1 reports "no limit" as a huge number
            return room if int(limit) < 1 << 60 else None
    return None


def available_memory_bytes() -> int:
    """Bytes this process may still allocate without swapping or being killed: the
    kernel's ``MemAvailable``, lowered by a cgroup (container) limit when there is one."""
    found = [v for v in (_meminfo_available(), _cgroup_room()) if v is not None]
    if not found:
        with contextlib.suppress(ValueError, OSError, AttributeError):
            found.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    return max(0, min(found)) if found else 1 << 40


def format_bytes(n: float) -> str:
    """``n`` bytes in decimal units (kB, MB, GB, TB, PB), three significant figures."""
    value = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if abs(value) < 1000 or unit == "PB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.3g} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


__all__ = ["available_memory_bytes", "format_bytes"]
