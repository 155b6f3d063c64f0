"""End to end (slow): a simulated ResNet-50 run profiles to a Chrome trace that loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from zoo_compiles import ZooCompiles, quantization_cache

from aipusim.cli.main import main
from aipusim.profiler import layer_table, load_trace


@pytest.mark.slow
def test_resnet50_chrome_trace_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], zoo_compiles: ZooCompiles
) -> None:
    # The session's ResNet-50 (the bytes `aipusim zoo export resnet50` writes; the export
    # command is tested in tests/zoo/test_zoo_cli.py), calibrated once for the session.
    onnx_path = zoo_compiles.model("resnet50", 224)
    out = tmp_path / "r50"
    with quantization_cache(zoo_compiles.quant_cache):
        assert main(["compile", "-i", str(onnx_path), "-o", str(out), "--aipu-cores", "4"]) == 0
    trace = tmp_path / "r50.trace"
    args = ["simulate", str(out / "compiled_model"), "--frames", "4", "--trace", str(trace)]
    assert main([*args, "--levels", "B,PB,PE,K,M,T"]) == 0
    chrome = tmp_path / "r50.json"
    capsys.readouterr()  # drop the other commands' output
    assert main(["profile", str(trace), "--chrome", str(chrome), "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert len(records) > 50  # ResNet-50 has well over 50 layers
    events = json.loads(chrome.read_text())["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert complete and all(e["dur"] >= 0 and e["ts"] >= 0 for e in complete)
    tr = load_trace(trace)
    assert tr.malformed_count == 0 and tr.unknown_count == 0 and tr.power is not None
    assert (layer_table(tr)["samples"] > 0).all()
