"""Replace an output folder in one step, so a reader never sees it half written.

Every command that writes a folder (compile, run, quantized model, save) builds it in a
temporary folder beside the target (`temp_folder_beside`) and then calls
`swap_into_place`. The temporary names carry the writer's process id
(``.NAME.tmp-<pid>-<random>``, ``.NAME.old-<pid>-<random>``), so the next writer into the
same place removes what a killed one left (`clean_stale`) without touching the folders of
one still running.

>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> (root / "new").mkdir(); (root / "new" / "f").write_text("2")
1
>>> (root / "out").mkdir(); (root / "out" / "f").write_text("1")
1
>>> swap_into_place(root / "new", root / "out")
>>> (root / "out" / "f").read_text(), (root / "new").exists()
('2', False)
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
from pathlib import Path

from aipusim.base.errors import FileAccessError

#: Bytes of the target's name kept in a temporary name, so that the temporary name stays
#: under the file system's limit even when the target's own name is near it.
_STEM_BYTES = 100


def _stem(out: Path) -> str:
    return os.fsencode(out.name)[:_STEM_BYTES].decode("utf-8", "ignore")


def temp_name(out: Path, kind: str = "tmp") -> Path:
    """A fresh name beside ``out`` for a temporary copy of it,
    ``.NAME.<kind>-<pid>-<hex><suffix>`` (the suffix kept for writers that choose the
    format by it)."""
    token = secrets.token_hex(4)
    return out.parent / f".{_stem(out)}.{kind}-{os.getpid()}-{token}{out.suffix}"


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (an exited one that nobody reaped does not)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    try:  # Linux: a zombie (exited, parent gone, not reaped in a container) is not running
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def clean_stale(out: Path) -> list[Path]:
    """Remove the temporary copies of ``out`` left by writers that no longer run (killed
    during a compile, a run, a swap); returns what was removed."""
    removed: list[Path] = []
    parent = out.parent
    prefix = f".{_stem(out)}."
    pattern = re.compile(
        re.escape(prefix) + r"(?:tmp|old)-(\d+)-[0-9a-f]{8}" + re.escape(out.suffix)
    )
    try:
        names = [n for n in os.listdir(parent) if n.startswith(prefix)]
    except OSError:
        return removed
    for name in names:
        match = pattern.fullmatch(name)
        if match is None or process_alive(int(match.group(1))):
            continue
        path = parent / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
        removed.append(path)
    return removed


def default_mode(folder: bool) -> int:
    """The mode a plain ``mkdir``/``open`` gives under the process's umask."""
    mask = os.umask(0)
    os.umask(mask)
    return (0o777 if folder else 0o666) & ~mask


def check_replaceable(out: Path, flag: str = "output folder") -> None:
    """Refuse, before any work, an output folder that cannot be renamed into place: the
    current folder (or one holding it) and mount points; `FileAccessError` (EBUSY)."""
    here = Path.cwd()
    target = Path(os.path.abspath(out))
    if target == here or target in here.parents:
        raise FileAccessError(
            errno.EBUSY,
            f"{flag} {str(out)!r} cannot be replaced: it is the current folder or holds it "
            "(Device or resource busy); name a folder below it",
            str(out),
        )
    if target.exists() and os.path.ismount(target):
        raise FileAccessError(
            errno.EBUSY,
            f"{flag} {str(out)!r} cannot be replaced: it is a mount point (Device or "
            "resource busy); name a folder inside it",
            str(out),
        )


def temp_folder_beside(out: Path) -> Path:
    """Create the temporary folder a new ``out`` is built in (parents of ``out`` are created
    as needed), after removing stale ones; `OSError` if the place cannot be written."""
    out = Path(os.path.abspath(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(out)
    tmp = temp_name(out)
    tmp.mkdir()
    return tmp


def swap_into_place(tmp: Path, out: Path) -> None:
    """Rename ``tmp`` to ``out``; an existing ``out`` is moved aside first, then deleted.

    ``tmp`` gets the mode a plain ``mkdir`` would give (temporary folders are private). If
    the final rename fails, the old ``out`` is put back before the error propagates.
    """
    out = Path(os.path.abspath(out))
    os.chmod(tmp, default_mode(folder=True))
    old = None
    if out.exists() or out.is_symlink():
        old = temp_name(out, "old")
        os.rename(out, old)
    try:
        os.rename(tmp, out)
    except OSError:
        if old is not None:
            os.rename(old, out)
        raise
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink()
