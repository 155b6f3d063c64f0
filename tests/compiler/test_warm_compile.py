"""Warm compiles in one process: what a sweep worker reuses, and that reusing it changes no
byte of the compiled output."""

from __future__ import annotations

import gc
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest

from aipusim import zoo
from aipusim.base.memo import ArrayMemo
from aipusim.compiler import driver, importer
from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.driver import compile_model
from aipusim.compiler.quant import cache as qcache
from aipusim.compiler.request import CompileRequest

#: JSON keys that differ between two compiles of the same model (ids, timings).
RUN_DEPENDENT = {"model_id", "pass_seconds", "timing_s", "crc32"}


def _compile(model: Path, out: Path, **config: object) -> dict:
    result = compile_model(
        CompileRequest(model_path=model, output_dir=out, config=CompilerConfig(**config))
    )
    return dict(result.results)


def _strip(value: object) -> object:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in RUN_DEPENDENT}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _compiled_files(out: Path) -> dict[str, str]:
    """SHA-256 of every file of ``compiled_model/`` (JSON without run-dependent keys;
    an npz by its arrays: a zip member carries its write time)."""
    hashes = {}
    for path in sorted((out / "compiled_model").rglob("*")):
        if not path.is_file():
            continue
        if path.suffix == ".json":
            data = json.dumps(_strip(json.loads(path.read_text())), sort_keys=True).encode()
        elif path.suffix == ".npz":
            with np.load(path) as npz:
                data = b"".join(k.encode() + npz[k].tobytes() for k in sorted(npz.files))
        else:
            data = path.read_bytes()
        hashes[str(path.relative_to(out))] = hashlib.sha256(data).hexdigest()
    return hashes


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny_cnn.onnx"
    onnx.save(zoo.build("tiny_cnn"), path)
    return path


def test_read_model_checks_a_file_once_while_it_is_unchanged(
    tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    importer.read_model(tiny)
    checks = []
    monkeypatch.setattr(importer, "check_model", lambda *a, **k: checks.append(a))
    first, _ = importer.read_model(tiny)
    second, _ = importer.read_model(tiny)
    assert checks == []
    assert first is not second  # each caller gets a proto of its own (the import edits it)
    assert first.SerializeToString() == tiny.read_bytes()
    # another model at the same path: read and checked again
    other = zoo.build("tiny_cnn")
    other.graph.name = "renamed"
    onnx.save(other, tiny)
    st = tiny.stat()
    os.utime(tiny, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    again, _ = importer.read_model(tiny)
    assert again.graph.name == "renamed"
    assert len(checks) == 1


def test_warm_compile_reuses_the_import_and_writes_the_same_output(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = _compile(tiny, tmp_path / "cold", aipu_cores_used=4, multicore_mode="batch")
    assert cold["quantize"]["cache"] == "computed"
    imports = []
    real = driver.read_model
    monkeypatch.setattr(driver, "read_model", lambda p: imports.append(p) or real(p))
    warm = _compile(tiny, tmp_path / "warm", aipu_cores_used=4, multicore_mode="batch")
    assert warm["quantize"]["cache"] == "cached"
    assert imports == []  # started from the graph imported by the cold compile
    assert warm["quantize"]["qgraph"] is not cold["quantize"]["qgraph"]
    again = _compile(tiny, tmp_path / "again", aipu_cores_used=4, multicore_mode="batch")
    # the entry's quantized graph is rebuilt once, then taken as is
    assert again["quantize"]["qgraph"] is warm["quantize"]["qgraph"]
    assert _compiled_files(tmp_path / "cold") == _compiled_files(tmp_path / "warm")
    assert _compiled_files(tmp_path / "warm") == _compiled_files(tmp_path / "again")
    # the input model is still copied, byte for byte
    assert (tmp_path / "again" / "input_model" / "fp32_model.onnx").read_bytes() == (
        tiny.read_bytes()
    )


def test_a_changed_input_shape_imports_again(tmp_path: Path) -> None:
    model = zoo.build("tiny_cnn")
    dim = model.graph.input[0].type.tensor_type.shape.dim[0]
    dim.Clear()
    dim.dim_param = "N"
    path = tmp_path / "dynamic.onnx"
    onnx.save(model, path)
    graphs = []
    for batch in (1, 2):
        compile_model(
            CompileRequest(
                model_path=path,
                output_dir=tmp_path / f"b{batch}",
                config=CompilerConfig(),
                input_shape=(batch, 3, 32, 32),
                stop_after="import",
            )
        )
        assert driver._last_import is not None
        graphs.append(driver._last_import[1])
    assert graphs[0] is not graphs[1]
    assert [g.shape(g.inputs[0])[0] for g in graphs] == [1, 2]


def test_the_cache_key_is_the_same_with_and_without_remembered_digests(tiny: Path) -> None:
    from aipusim.compiler.importer import import_model
    from aipusim.compiler.quant import calibration_for

    graph = import_model(tiny)
    calibration = calibration_for(graph)
    first = qcache.cache_key(graph, calibration, CompilerConfig())
    assert len(qcache._DIGESTS) > 0
    remembered = qcache.cache_key(graph, calibration, CompilerConfig())
    qcache._DIGESTS._entries.clear()
    fresh = qcache.cache_key(graph, calibration, CompilerConfig())
    assert first == remembered == fresh


def test_array_memo_takes_only_read_only_arrays_and_forgets_freed_ones() -> None:
    memo = ArrayMemo()
    calls = []

    def compute() -> int:
        calls.append(1)
        return len(calls)

    writable = np.zeros(3)
    assert memo.get((writable,), "x", compute) == 1
    assert memo.get((writable,), "x", compute) == 2  # a writable array may change
    frozen = np.zeros(3)
    frozen.flags.writeable = False
    assert memo.get((frozen,), "x", compute) == 3
    assert memo.get((frozen,), "x", compute) == 3
    assert memo.get((frozen,), "y", compute) == 4  # another computation
    del frozen
    gc.collect()
    assert len(memo) == 0


def test_api_compiles_an_unbound_file_itself(tiny: Path, tmp_path: Path) -> None:
    import aipusim

    aipusim.compile(tiny, {"aipu_cores_used": 1}, output_dir=tmp_path / "direct")
    args = json.loads((tmp_path / "direct" / "cli_args.json").read_text())
    assert args["input"] == str(tiny)  # not a re-saved copy in a temporary folder
    # the same model as a proto goes through a saved copy: the same compiled output
    aipusim.compile(onnx.load(tiny), {"aipu_cores_used": 1}, output_dir=tmp_path / "proto")
    args = json.loads((tmp_path / "proto" / "cli_args.json").read_text())
    assert args["input"] != str(tiny)
    assert _compiled_files(tmp_path / "direct") == _compiled_files(tmp_path / "proto")
