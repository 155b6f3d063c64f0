"""Below the SQNR target, quantize-only names the limiting layers and the scheme that helps."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from graph_helpers import model, node

from aipusim.cli.main import main
from aipusim.compiler.ir import Graph, Node, Op, Tensor
from aipusim.compiler.quant.advice import SQNR_TARGET_DB, advise, limiting_layers


def _channel_spread() -> onnx.ModelProto:
    """A conv that spreads four channels over 5 decades, then a depthwise conv that brings
    them back: one per-tensor int8 grid cannot hold the small channels at the depthwise
    input, per-channel activation parameters (the hybrid scheme) can."""
    s = np.array([30.0, 1.0, 0.03, 0.001], np.float32)
    w1 = np.diag(s).reshape(4, 4, 1, 1).astype(np.float32)
    dw = (np.ones((4, 1, 3, 3)) / 9 / s.reshape(4, 1, 1, 1)).astype(np.float32)
    return model(
        [node("Conv", ["x", "w1"], "a"), node("Conv", ["a", "dw"], "y", group=4, pads=[1] * 4)],
        {"w1": w1, "dw": dw},
        shape=(1, 4, 8, 8),
    )


def test_quantize_only_names_the_limiting_layer_and_the_scheme_that_helps(tmp_path: Path) -> None:
    path = tmp_path / "spread.onnx"
    onnx.save(_channel_spread(), path)
    out = tmp_path / "q"
    knobs = ["--set", "quantize_dw_channel_wise=true", "--set", "run_graph_cleaner=false"]
    args = ["compile", "-i", str(path), "--quantize-only", "-o", str(out), *knobs]
    assert main(args) == 0
    accuracy = json.loads((out / "compilation_report.json").read_text())["accuracy"]
    assert set(accuracy["per_layer_sqnr_db"]) >= {"a", "y"}
    advice = accuracy["advice"]["y"]
    assert advice["sqnr_db"] < SQNR_TARGET_DB
    assert advice["limiting_layers"][0]["node"] == "y"
    assert advice["suggested_scheme"] == "hybrid_per_tensor_per_channel"
    assert advice["alternatives_db"]["hybrid_per_tensor_per_channel"] > SQNR_TARGET_DB
    log = (out / "compilation_log.txt").read_text()
    line = next(ln for ln in log.splitlines() if "below the 20 dB target" in ln)
    assert "output `y` reaches" in line and "limiting layers: `y` (" in line
    assert "quantization_scheme = hybrid_per_tensor_per_channel gives" in line


def test_limiting_layers_are_the_largest_drops() -> None:
    names = "xabc"
    nodes = tuple(Node(n, Op.RELU, (names[i],), (n,)) for i, n in enumerate(names[1:]))
    g = Graph("g", nodes, {n: Tensor(n, (1, 2)) for n in names}, {}, ("x",), ("c",))
    per_layer = {"x": 50.0, "a": 49.5, "b": 30.0, "c": "inf"}
    assert limiting_layers(g, per_layer) == [("b", 30.0, 19.5)]


def test_an_output_at_the_target_gets_one_info_line_and_no_advice(caplog) -> None:
    g = Graph("g", (Node("a", Op.RELU, ("x",), ("y",)),), {n: Tensor(n, (1, 2)) for n in "xy"},
              {}, ("x",), ("y",))  # fmt: skip
    report = {"outputs": {"y": {"sqnr_db": 31.26}}, "per_layer_sqnr_db": {"x": 40.0, "y": 31.26}}

    def never(scheme: str) -> dict[str, float]:
        raise AssertionError("no other scheme is tried when the target is met")

    with caplog.at_level("INFO", logger="aipusim.compiler.quant.advice"):
        out = advise(g, report, "per_tensor_histogram", never, ["per_tensor_min_max"])
    assert "advice" not in out
    assert caplog.messages == [
        "quantization: output `y` reaches 31.3 dB SQNR against fp32 (target 20 dB); "
        "weakest tensor `y` (31.3 dB)"
    ]
