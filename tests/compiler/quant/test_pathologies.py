"""Trained-weight pathologies: near-dead channels with a bias, zero-variance BatchNorm,
outlier channels, a bias no int32 can hold. Each compiles, runs bit-exact and keeps its
accuracy, or warns by name; none ends in an internal error."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from bitexact import compile_bit_exact
from graph_helpers import model, node

from aipusim.compiler.ir import Graph, Node, Op, Tensor
from aipusim.compiler.passes.bn_fold import fold_batchnorm
from aipusim.compiler.quant import calibration_for
from aipusim.compiler.quant.accuracy import sqnr_db
from aipusim.compiler.quant.data import CalibrationData
from aipusim.compiler.quant.quantize import quantize_graph
from aipusim.compiler.quant.reference import run_int8
from aipusim.compiler.quant.scheme import INT32_MAX, bias_limit

RNG = np.random.default_rng(11)
DEAD = [2, 5]
DEAD_BIAS = {2: 0.7, 5: -0.4}


def _fp32(m: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def near_dead_cnn() -> onnx.ModelProto:
    """Conv (channels 2 and 5 pruned to weights ~1e-9, with a bias) -> Relu -> Conv: the
    six-line model that ended in INTERNAL_ERROR (int32 bias overflow in pack)."""
    w1 = RNG.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32)
    w1[DEAD] *= 1e-9
    b1 = RNG.normal(0, 0.1, 8).astype(np.float32)
    for c, v in DEAD_BIAS.items():
        b1[c] = v
    w2 = RNG.normal(0, 0.3, (4, 8, 3, 3)).astype(np.float32)
    b2 = RNG.normal(0, 0.1, 4).astype(np.float32)
    return model(
        [
            node("Conv", ["x", "w1", "b1"], "a", pads=[1] * 4),
            node("Relu", ["a"], "r"),
            node("Conv", ["r", "w2", "b2"], "y", pads=[1] * 4),
        ],
        {"w1": w1, "b1": b1, "w2": w2, "b2": b2},
        shape=(1, 3, 16, 16),
    )


def test_near_dead_channels_with_a_bias_compile_bit_exact_and_output_their_bias(
    tmp_path: Path,
) -> None:
    m = near_dead_cnn()
    q = compile_bit_exact(m, tmp_path / "out")
    w_q = q.graph.const(q.graph.node("a").inputs[1])
    # the dead channels' weights quantize to 0; the live ones use the full int8 range
    assert not np.any(w_q[DEAD])
    live = [c for c in range(8) if c not in DEAD]
    assert np.all(np.abs(w_q[live]).reshape(len(live), -1).max(axis=1) == 127)
    # an image input calibrates on the bundled photographs: evaluate on the held-aside ones
    x = calibration_for(q.graph).held_aside[0]["x"]
    r = run_int8(q, {"x": x}, keep_all=True)
    step = float(q.qparams("r").scale)
    # the bias carries the channel: relu(0.7) everywhere, relu(-0.4) = 0 everywhere
    assert np.abs(r["r"][0, 2] - 0.7).max() <= step
    assert np.abs(r["r"][0, 5]).max() <= step / 2
    assert sqnr_db(_fp32(m, x), r["y"]) > 25.0


def _gemm_graph(fan_in: int, bias: float) -> Graph:
    """x (1, fan_in) -> Gemm with every weight 1 and a large bias on channel 0."""
    nodes = (Node("fc", Op.GEMM, ("x", "w", "b"), ("y",), {"transB": 1}),)
    tensors = {"x": Tensor("x", (1, fan_in)), "y": Tensor("y", (1, 2))}
    consts = {
        "w": np.ones((2, fan_in), np.float32),
        "b": np.array([bias, 0.0], np.float32),
    }
    for name, value in consts.items():
        tensors[name] = Tensor(name, value.shape)
    return Graph("g", nodes, tensors, consts, ("x",), ("y",))


def test_a_bias_int32_cannot_hold_is_saturated_with_a_warning_naming_layer_and_channel(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Beyond ~66,000 products the input zero point's fold (-zp * sum w_q, up to 128 * 127
    # per product) leaves the bias less than half of int32. Input grid [0, 1] (scale 1/255,
    # zero point -128), weights 1 (all at 127): a bias of 1.04e9 steps of s_in * s_w is below
    # the bias floor's limit, so the weights keep their scale, but over what the fold leaves.
    fan_in = 70_000
    assert bias_limit(fan_in) == INT32_MAX // 2
    bias = 1.04e9 / (255 * 127)
    g = _gemm_graph(fan_in, bias)
    data = CalibrationData((
        {"x": np.ones((1, fan_in), np.float32)}, {"x": np.zeros((1, fan_in), np.float32)}
    ))  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="aipusim.compiler"):
        q = quantize_graph(g, data)
    w_q = q.graph.const("w")
    assert np.all(w_q == 127)
    line = next(r.getMessage() for r in caplog.records if "saturated" in r.getMessage())
    assert f"layer `fc` (Gemm): int32 bias saturated in channel 0 (bias {bias:.6g}" in line
    assert "channel 1" not in line
    b_q = int(np.asarray(q.steps["fc"].params["bias"], np.int64)[0])
    zp = int(q.qparams("x").zero_point)
    # what the back end folds in still fits int32, at its limit
    assert b_q - zp * fan_in * 127 == INT32_MAX


def zero_variance_bn(eps: float) -> onnx.ModelProto:
    """Conv -> BatchNormalization whose channels 1 and 3 had zero variance -> Relu; channel 3's
    conv weights are dead too (the BN folds into a bias-only channel)."""
    w = RNG.normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32)
    w[3] = 0.0
    var = np.array([0.5, 0.0, 1.2, 0.0], np.float32)
    return model(
        [
            node("Conv", ["x", "w"], "c", pads=[1] * 4),
            node("BatchNormalization", ["c", "g", "be", "mu", "var"], "bn", epsilon=eps),
            node("Relu", ["bn"], "y"),
        ],
        {
            "w": w,
            "g": np.array([1.0, 0.8, 1.1, 0.9], np.float32),
            "be": np.array([0.1, 0.3, -0.2, 0.6], np.float32),
            "mu": np.array([0.05, 0.0, -0.1, 0.0], np.float32),
            "var": var,
        },
        shape=(1, 3, 12, 12),
    )


def test_zero_variance_batchnorm_folds_finite_compiles_and_runs_bit_exact(tmp_path: Path) -> None:
    m = zero_variance_bn(1e-12)
    q = compile_bit_exact(m, tmp_path / "out")
    for name in q.graph.constants:
        assert np.all(np.isfinite(np.asarray(q.graph.const(name), np.float64))), name
    x = np.random.default_rng(5).standard_normal((1, 3, 12, 12)).astype(np.float32)
    got = run_int8(q, {"x": x})["y"]
    want = _fp32(m, x)
    # channel 3 (dead conv, zero variance) is its beta, 0.6
    assert np.abs(got[0, 3] - 0.6).max() <= float(q.qparams("y").scale)
    assert np.isfinite(want).all()


def test_batchnorm_with_var_plus_eps_zero_folds_to_its_beta() -> None:
    from aipusim.compiler.importer import import_model

    g = fold_batchnorm(import_model(zero_variance_bn(0.0)), None)
    assert not any(n.op is Op.BATCH_NORM for n in g.nodes)
    for name in g.constants:
        assert np.all(np.isfinite(np.asarray(g.const(name), np.float64))), name
    conv = next(n for n in g.nodes if n.op is Op.CONV)
    w, b = g.const(conv.inputs[1]), g.const(conv.inputs[2])
    # zero-variance channels: scale 0 (weights 0), bias beta
    assert not np.any(w[[1, 3]]) and np.allclose(b[[1, 3]], [0.3, 0.6])


def outlier_cnn(compensated: bool = True) -> onnx.ModelProto:
    """Conv whose output channel 0 is 10^4 x the others; ``compensated``: then a depthwise
    conv that scales it back (as after cross-layer equalization's opposite)."""
    # its own generator: with the module's, the weights (and how many int8 levels the small
    # channels keep) depended on which tests had drawn before it
    w1 = np.random.default_rng(11).normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32)
    w1[0] *= 1e4
    dw = np.full((4, 1, 3, 3), 1 / 9, np.float32)
    dw[0] *= 1e-4
    nodes = [node("Conv", ["x", "w1"], "a" if compensated else "y", pads=[1] * 4)]
    inits = {"w1": w1}
    if compensated:
        nodes.append(node("Conv", ["a", "dw"], "y", group=4, pads=[1] * 4))
        inits["dw"] = dw
    return model(nodes, inits, shape=(1, 3, 12, 12))


def _first_conv_levels(q) -> np.ndarray:
    w_q = q.graph.const(next(n for n in q.graph.nodes if n.op is Op.CONV).inputs[1])
    return np.abs(w_q).reshape(4, -1).max(axis=1)


def test_an_outlier_output_channel_keeps_the_others_within_a_step(tmp_path: Path) -> None:
    m = outlier_cnn(compensated=False)
    q = compile_bit_exact(m, tmp_path / "out")
    # Per-channel weights: every channel has its own scale; the small channels' stop at the
    # resolution floor (a finer step would move their output by less than 1/512 of a step
    # of the outlier's grid), which leaves them most of the int8 range.
    levels = _first_conv_levels(q)
    assert levels[0] == 127 and np.all(levels[1:] >= 64)
    x = np.random.default_rng(8).standard_normal((1, 3, 12, 12)).astype(np.float32)
    got, want = run_int8(q, {"x": x})["y"], _fp32(m, x)
    step = float(q.qparams("y").scale)
    assert sqnr_db(want, got) > 30.0
    # the small channels are below one step of the outlier's grid: they are off by at most
    # a step (the zero point holds them), not pushed elsewhere
    assert np.abs(got[0, 1:] - want[0, 1:]).max() <= np.abs(want[0, 1:]).max() + step


def test_an_outlier_channel_scaled_back_keeps_every_channel_with_per_channel_parameters(
    tmp_path: Path,
) -> None:
    m = outlier_cnn()
    # the vendor defaults (per-tensor activations and depthwise weights) compile and run;
    # one per-tensor int8 grid cannot hold both sizes at the depthwise input, which the
    # advice of quantize-only names (test_advice)
    compile_bit_exact(m, tmp_path / "default")
    knobs = {"quantization_scheme": "hybrid_per_tensor_per_channel",
             "quantize_dw_channel_wise": True}  # fmt: skip
    q = compile_bit_exact(m, tmp_path / "hybrid", knobs)
    x = np.random.default_rng(8).standard_normal((1, 3, 12, 12)).astype(np.float32)
    got, want = run_int8(q, {"x": x})["y"], _fp32(m, x)
    for c in range(4):
        assert sqnr_db(want[0, c], got[0, c]) > 25.0, c


@pytest.mark.parametrize("dw_channel_wise", [False, True])
def test_depthwise_weights_follow_quantize_dw_channel_wise(
    tmp_path: Path, dw_channel_wise: bool
) -> None:
    m = outlier_cnn()
    q = compile_bit_exact(m, tmp_path / "out", {"quantize_dw_channel_wise": dw_channel_wise})
    scales = np.atleast_1d(q.graph.tensor(q.graph.node("y").inputs[1]).quant.scale)
    # the vendor default (false): one scale for the depthwise conv; true: one per channel
    assert (len(set(scales.tolist())) > 1) == dw_channel_wise


def test_a_channel_its_relu_clamps_next_to_one_of_1e_20_compiles_bit_exact(
    tmp_path: Path,
) -> None:
    # The output grid spans 1e-20 (channel 1) while channel 0's bias (-100) sets its weight
    # scale: its requantize multiplier is ~1e15, which saturates every nonzero sum (the
    # Relu clamps the channel to 0 anyway); it is capped, no longer refused as degenerate.
    wt = RNG.normal(0, 0.3, (2, 3, 3, 3)).astype(np.float32)
    wt[1] *= 1e-20
    m = model(
        [node("Conv", ["x", "w", "b"], "c", pads=[1] * 4), node("Relu", ["c"], "y")],
        {"w": wt, "b": np.array([-100.0, 0.0], np.float32)},
        shape=(1, 3, 8, 8),
    )
    q = compile_bit_exact(m, tmp_path / "out")
    conv = next(n for n in q.graph.nodes if n.op is Op.CONV)
    assert int(np.asarray(q.steps[conv.name].params["shift"])[0]) == 1
