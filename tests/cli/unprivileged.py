"""Run a child process that file permissions apply to, even when the tests run as root.

Root ignores permission bits through two capabilities, CAP_DAC_OVERRIDE (write anywhere)
and CAP_DAC_READ_SEARCH (read anywhere). Dropping them from the capability bounding set
before ``exec`` (``preexec_fn``) gives a child that is refused a read-only folder like any
user, while it can still read the interpreter under ``/root`` (which it owns). When the
tests do not run as root, nothing needs dropping. On a system without ``prctl`` the
caller skips, saying why (`drop_reason`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

#: linux/capability.h and linux/prctl.h
CAP_DAC_OVERRIDE = 1
CAP_DAC_READ_SEARCH = 2
PR_CAPBSET_DROP = 24


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name, use_errno=True) if name else None


def drop_reason() -> str | None:
    """Why privileges cannot be dropped here (None: they can, or need not be)."""
    if os.geteuid() != 0:
        return None
    if not sys.platform.startswith("linux"):
        return "running as root on a system without Linux capabilities: permissions would not apply"
    if _libc() is None:
        return "running as root and libc (prctl) is not found: permissions would not apply"
    return None


def _drop_privileges() -> None:
    """In the child, before exec: no permission override, and SIGXFSZ ignored, so a file
    size limit (RLIMIT_FSIZE, a stand-in for a full disk) is an error, not a kill."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if os.geteuid() != 0:
        return
    libc = _libc()
    assert libc is not None
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def run_unprivileged(
    args: Sequence[str], cwd: Path, timeout: float = 300.0
) -> subprocess.CompletedProcess[str]:
    """``args`` run with file permissions in force (see the module docstring)."""
    return subprocess.run(
        list(args),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_drop_privileges,
        check=False,
    )
