"""Files written whole or not at all, and operating-system failures as one clear error.

`output_path` hands a writer a temporary name beside the target and renames it into place
when the writer is done, so a reader never sees half a file and a failed write leaves the
old file as it was. An existing target that is not a regular file (``/dev/null``, a pipe,
a terminal) is written in place instead: renaming over it would replace the device.

Any `OSError` on the way (permissions, a missing folder, a full disk, a name over 255
bytes) becomes a `FileAccessError` whose message names the path and the reason, e.g.
``cannot write 'out/x.csv': folder 'out' does not exist``.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> write_text(d / "a.txt", "hello")
>>> (d / "a.txt").read_text()
'hello'
>>> try:
...     write_text(d / "no" / "a.txt", "hello")
... except FileAccessError as exc:
...     print(str(exc).replace(str(d), "D"))
cannot write 'D/no/a.txt': folder 'D/no' does not exist
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from aipusim.base.atomic import clean_stale, temp_name
from aipusim.base.errors import AipuSimError, FileAccessError

#: Errors that only a write can raise.
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS})
#: Longest path shown whole in a message; longer ones keep their two ends.
_SHOWN_CHARS = 120


def shown(path: str | os.PathLike[str]) -> str:
    """``path`` quoted for a message, shortened in the middle when it is very long.

    >>> shown("a" * 300)[:12], shown("a" * 300)[-13:]
    ("'aaaaaaaaaaa", "' (300 bytes)")
    """
    text = os.fspath(path)
    if len(text) <= _SHOWN_CHARS:
        return repr(text)
    size = len(os.fsencode(text))
    return repr(text[:60] + "..." + text[-40:]) + f" ({size} bytes)"


def _longest_name_bytes(path: str) -> int:
    """Bytes of the longest name in ``path`` (the limit applies to each name)."""
    return max((len(os.fsencode(p)) for p in Path(path).parts if p != "/"), default=0)


def describe(
    exc: OSError, action: str = "write", path: str | os.PathLike[str] | None = None
) -> str:
    """One line for ``exc``: what could not be done to which path, and why.

    >>> describe(PermissionError(13, "Permission denied", "ro/x"), "write")
    "cannot write 'ro/x': Permission denied"
    """
    target = os.fspath(path) if path is not None else exc.filename
    reason = exc.strerror or str(exc)
    if target is None:
        return f"cannot {action}: {reason}"
    target = os.fspath(target)
    where = f"cannot {action} {shown(target)}"
    code = exc.errno
    if code == errno.ENAMETOOLONG:
        size = _longest_name_bytes(target)
        if size > 255:
            return f"{where}: a name in it is {size} bytes, over the file system's 255-byte limit"
        return f"{where}: {reason}"
    if code == errno.ENOENT and action in ("write", "create"):
        parent = Path(target).parent
        missing = parent
        while not missing.parent.exists() and missing.parent != missing:
            missing = missing.parent
        if not missing.exists():
            return f"{where}: folder {shown(missing)} does not exist"
    if code == errno.EBUSY:
        return f"{where}: {reason} (a current folder or a mount point cannot be replaced)"
    return f"{where}: {reason}"


def access_error(
    exc: OSError, action: str = "write", path: str | os.PathLike[str] | None = None
) -> FileAccessError:
    """``exc`` as a `FileAccessError` naming ``path`` (default: the error's own file name)."""
    if isinstance(exc, AipuSimError):
        return exc  # type: ignore[return-value]
    target = os.fspath(path) if path is not None else exc.filename
    return FileAccessError(exc.errno, describe(exc, action, target), target)


def folder_error(exc: OSError, tmp: Path, out: Path) -> FileAccessError:
    """``exc``, raised while ``out`` was built in its temporary folder ``tmp``, as a
    `FileAccessError` about ``out`` (or about the other file it names)."""
    name = exc.filename
    if (
        name is None
        or os.fspath(name).startswith(os.fspath(tmp))
        or exc.errno in _WRITE_ERRNOS  # a copy names its source even when writing failed
    ):
        return access_error(exc, "write", out)
    return access_error(exc, "access")


@contextlib.contextmanager
def reporting(path: str | os.PathLike[str], action: str = "write") -> Iterator[None]:
    """Turn an `OSError` raised inside the block into a `FileAccessError` about ``path``."""
    try:
        yield
    except FileAccessError:
        raise
    except OSError as exc:
        raise access_error(exc, action, path) from None


def is_special(path: Path) -> bool:
    """An existing target that is neither a regular file nor a folder (device, pipe)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def check_name(path: Path) -> None:
    """Refuse up front a path with a name over the file system's limit."""
    size = _longest_name_bytes(os.fspath(path))
    limit = 255
    with contextlib.suppress(OSError, ValueError):
        probe = Path(path).parent
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        limit = os.pathconf(probe, "PC_NAME_MAX")
    if size > limit:
        raise FileAccessError(
            errno.ENAMETOOLONG,
            f"cannot write {shown(path)}: a name in it is {size} bytes, over the file "
            f"system's {limit}-byte limit",
            os.fspath(path),
        )


def check_output(path: str | os.PathLike[str], folder: bool = False) -> None:
    """Refuse before any work an output that cannot be written: a name over the limit, a
    missing or read-only folder to write it in, a file where a folder is wanted or the
    reverse. Output folders may be missing: their nearest existing parent is checked."""
    target = Path(path)
    check_name(target)
    if is_special(target) and not folder:
        return
    if folder and target.exists() and not target.is_dir():
        raise FileAccessError(
            errno.ENOTDIR, f"cannot write {shown(target)}: it is a file, not a folder", str(target)
        )
    if not folder and target.is_dir():
        raise FileAccessError(
            errno.EISDIR, f"cannot write {shown(target)}: it is a folder, not a file", str(target)
        )
    parent = target.parent
    if folder:
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
    if not parent.is_dir():
        why = "does not exist" if not parent.exists() else "is a file"
        raise FileAccessError(
            errno.ENOENT, f"cannot write {shown(target)}: folder {shown(parent)} {why}", str(target)
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise FileAccessError(
            errno.EACCES,
            f"cannot write {shown(target)}: Permission denied (folder {shown(parent)} is not "
            "writable)",
            str(target),
        )


@contextlib.contextmanager
def output_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """The name to write ``path`` under: a temporary one beside it, renamed into place when
    the block ends without error (removed when it fails); the target itself when it is a
    device or a pipe. The target's folder must exist. OS errors name ``path``."""
    target = Path(path)
    if is_special(target):
        with reporting(target):
            yield target
        return
    if target.is_dir():
        raise FileAccessError(
            errno.EISDIR, f"cannot write {shown(target)}: it is a folder, not a file", str(target)
        )
    check_name(target)
    folder = target.parent
    if not folder.is_dir():
        raise FileAccessError(
            errno.ENOENT,
            describe(FileNotFoundError(errno.ENOENT, "No such file or directory"), "write", target),
            str(target),
        )
    clean_stale(target)
    tmp = temp_name(target)
    try:
        with reporting(target):
            yield tmp
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (see `output_path`)."""
    with output_path(path) as tmp, open(tmp, "wb") as fh:
        fh.write(data)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` whole or not at all (see `output_path`)."""
    write_bytes(path, text.encode("utf-8"))


__all__ = [
    "access_error",
    "check_name",
    "check_output",
    "describe",
    "folder_error",
    "is_special",
    "output_path",
    "reporting",
    "shown",
    "write_bytes",
    "write_text",
]
