"""quantized_model/ round trip, checksum, atomic writing and the accuracy report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from aipusim.base.errors import QuantizationError
from aipusim.compiler.quant import (
    evaluate,
    read_quantized_model,
    run_int8,
    write_quantized_model,
)
from aipusim.compiler.quant.accuracy import accuracy_report, sqnr_db
from aipusim.compiler.quant.artifacts import MANIFEST
from aipusim.compiler.quant.data import random_calibration
from aipusim.compiler.quant.quantize import quantize_graph

FILES = {
    "quantized_model_manifest.json",
    "quantized_model.json",
    "quantized_model.txt",
    "quantized_model.npz",
    "report.json",
}


def _quantized(graph):
    data = random_calibration({n: graph.shape(n) for n in graph.inputs}, samples=4)
    return quantize_graph(graph, data, scheme="hybrid_per_tensor_per_channel"), data


def test_round_trip_runs_bit_identically(cnn, tmp_path: Path) -> None:
    q, data = _quantized(cnn)
    report = evaluate(cnn, q, data, debug=True, fp32="numpy")
    manifest = write_quantized_model(tmp_path / "quantized_model", q, report)
    assert {p.name for p in manifest.parent.iterdir()} == FILES
    back = read_quantized_model(manifest)
    x = data.held_aside[0]
    a, b = run_int8(q, x, raw=True), run_int8(back, x, raw=True)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert back.scheme == q.scheme and back.io_quantized == q.io_quantized
    m = json.loads(manifest.read_text())
    assert m["tensors"]["input"]["scale"] and "zero_point" in m["tensors"]["input"]
    rep = json.loads((manifest.parent / "report.json").read_text())
    assert "per_layer_sqnr_db" in rep and cnn.outputs[0] in rep["outputs"]
    assert "scale=" in (manifest.parent / "quantized_model.txt").read_text()


def test_corrupted_arrays_fail_the_checksum(cnn, tmp_path: Path) -> None:
    q, _ = _quantized(cnn)
    manifest = write_quantized_model(tmp_path / "qm", q, {})
    npz = manifest.parent / "quantized_model.npz"
    npz.write_bytes(npz.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(QuantizationError, match="do not match the checksum"):
        read_quantized_model(manifest)


def test_the_core_files_rebuild_the_graph_in_memory(cnn) -> None:
    from aipusim.compiler.quant.artifacts import (
        ARRAYS,
        quantized_graph_files,
        quantized_graph_from_files,
    )

    q, data = _quantized(cnn)
    files = quantized_graph_files(q)
    back = quantized_graph_from_files(files, "memory")
    assert quantized_graph_files(back)[MANIFEST] == files[MANIFEST]
    x = data.held_aside[0]
    a, b = run_int8(q, x, raw=True), run_int8(back, x, raw=True)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    bad = {**files, ARRAYS: files[ARRAYS][:-1] + b"?"}
    with pytest.raises(QuantizationError, match="arrays in memory do not match the checksum"):
        quantized_graph_from_files(bad, "memory")
    with pytest.raises(QuantizationError, match="quantized model memory lacks"):
        quantized_graph_from_files({ARRAYS: files[ARRAYS]}, "memory")


def test_not_a_manifest(tmp_path: Path) -> None:
    p = tmp_path / "m.json"
    p.write_text('{"format": "something else"}')
    with pytest.raises(QuantizationError, match="must have format aipusim-quantized-model"):
        read_quantized_model(p)
    with pytest.raises(QuantizationError, match="does not exist"):
        read_quantized_model(tmp_path / "missing.json")


def test_failed_write_leaves_nothing(cnn, tmp_path: Path) -> None:
    q, _ = _quantized(cnn)
    target = tmp_path / "qm"
    with pytest.raises(TypeError):
        write_quantized_model(target, q, {"bad": object()})
    assert list(tmp_path.iterdir()) == []


def test_accuracy_report_fields() -> None:
    ref = [{"y": np.array([[1.0, 2.0, 3.0]])}, {"y": np.array([[3.0, 2.0, 1.0]])}]
    got = [{"y": np.array([[1.0, 2.0, 3.1]])}, {"y": np.array([[2.0, 3.0, 1.0]])}]
    out = accuracy_report(ref, got)["outputs"]["y"]
    assert out["top1_agreement"] == 0.5
    assert out["max_abs_error"] == pytest.approx(1.0)
    want = sqnr_db(np.stack([r["y"] for r in ref]), np.stack([g["y"] for g in got]))
    assert out["sqnr_db"] == pytest.approx(want)
