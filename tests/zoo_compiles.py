"""Zoo models built and compiled once per test session: `zoo_model` (any test module) and
the ``zoo_compiles`` fixture of ``tests/conftest.py``.

Building a zoo model runs a numpy forward pass for its BatchNorm statistics (at any input
size about the same work), and compiling it calibrates on onnxruntime: for ResNet-50 that
is seconds each, and test modules across the suite ask for the same models at the same
sizes, the golden, cost-pinning and end-to-end tests in the same configurations too.
Tests read the compiled folders and simulate them; none may write into them.

Under pytest-xdist the workers share one folder (``SHARED_ENV``, made by the controller in
``tests/conftest.py``): a build or compile is made by the first worker that asks for it,
under a file lock, and read by the others, so two workers never build the same model twice.
The compiles share one quantization cache too (``quant-cache`` beside them): a model at one
size is calibrated once, and its other multicore setups reuse the calibration (the mode and
core count are not in the cache key, and a warm compile writes the same files as a cold
one: tests/compiler/quant/test_cache.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import onnx

from aipusim import zoo
from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.driver import compile_model
from aipusim.compiler.quant.cache import DIR_ENV
from aipusim.compiler.request import CompileRequest

#: `zoo.build` itself, bound at import: a test may monkeypatch ``zoo.build`` to serve these
#: shared builds (``zoo list`` in tests/zoo/test_zoo_cli.py), which must not call itself.
_BUILD = zoo.build

#: The folder every worker of one test session shares (set by ``tests/conftest.py``; unset:
#: nothing is shared beyond the process).
SHARED_ENV = "AIPUSIM_TEST_SHARED_DIR"
#: Written last into a shared entry: its presence says the entry is whole.
_DONE = ".complete"


def shared_dir() -> Path | None:
    """The session's folder shared by the xdist workers, if any."""
    value = os.environ.get(SHARED_ENV)
    return Path(value) if value else None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (a lock file; the workers wait for each other)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def quantization_cache(folder: Path) -> Iterator[None]:
    """Compiles inside use the quantization cache in ``folder`` (the test's own one again
    after: `tests/conftest.py` gives each test an empty cache)."""
    before = os.environ.get(DIR_ENV)
    os.environ[DIR_ENV] = str(folder)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(DIR_ENV, None)
        else:
            os.environ[DIR_ENV] = before


def once(folder: Path, make: Callable[[Path], None]) -> Path:
    """``folder``, made by ``make(folder)`` unless another process made it whole already
    (a half-made folder, from a failed attempt, is made again)."""
    with _locked(folder.with_name(folder.name + ".lock")):
        if not (folder / _DONE).exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            make(folder)
            (folder / _DONE).touch()
    return folder


def _published_or(name: str, size: int | None) -> int | None:
    """``size``, or None when it is the model's published side (the same bytes as
    ``zoo.build(name)``: one build serves both spellings)."""
    return None if size is not None and zoo.info(name).input_shape[2:] == (size, size) else size


@functools.cache
def _serialized(name: str, size: int | None) -> bytes:
    shared = shared_dir()
    if shared is None:
        return _BUILD(name, input_size=size).SerializeToString()

    def build(folder: Path) -> None:
        (folder / "model.onnx").write_bytes(_BUILD(name, input_size=size).SerializeToString())

    return (once(shared / "zoo" / f"{name}-{size}", build) / "model.onnx").read_bytes()


def zoo_model(name: str, size: int | None = None) -> onnx.ModelProto:
    """``zoo.build(name, input_size=size)``, built once per session; each call returns a
    fresh copy, so a test may change it.

    >>> zoo_model("tiny_cnn", 32).graph.input[0].name  # doctest: +SKIP
    'input'
    """
    return onnx.load_from_string(_serialized(name, _published_or(name, size)))


class ZooCompiles:
    """Zoo models saved and compiled on first request, then served from ``root``.

    >>> compiles.compiled("tiny_cnn", 32, mode="batch", cores=4, resources=1.0)  # doctest: +SKIP
    PosixPath('.../tiny_cnn-32-batch-4-1.0/compiled_model')
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        #: Compiles go to the workers' shared folder when there is one.
        self.compiles = (shared_dir() or root) / "compiles"
        #: The quantization cache of these compiles (calibrated once per model and size).
        self.quant_cache = self.compiles.with_name("quant-cache")
        self._models: dict[tuple[str, int], Path] = {}
        self._compiled: dict[tuple[str, int, str, int, float], Path] = {}

    def model(self, name: str, size: int) -> Path:
        """The ONNX file of zoo model ``name`` at input side ``size`` (default seed)."""
        key = (name, size)
        if key not in self._models:
            path = self.root / f"{name}-{size}.onnx"
            path.write_bytes(_serialized(name, _published_or(name, size)))  # as onnx.save
            self._models[key] = path
        return self._models[key]

    def compiled(self, name: str, size: int, *, mode: str, cores: int, resources: float) -> Path:
        """The ``compiled_model`` folder of ``name`` at ``size`` in one multicore setup."""
        key = (name, size, mode, cores, resources)
        if key not in self._compiled:
            config = CompilerConfig(
                aipu_cores_used=cores, resources_used=resources, multicore_mode=mode
            )
            model = self.model(name, size)

            def compile_into(out: Path) -> None:
                with quantization_cache(self.quant_cache):
                    compile_model(CompileRequest(model_path=model, output_dir=out, config=config))

            out = once(self.compiles / f"{name}-{size}-{mode}-{cores}-{resources}", compile_into)
            self._compiled[key] = out / "compiled_model"
        return self._compiled[key]
