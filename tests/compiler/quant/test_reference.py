"""Quantize pass + int8 reference on small graphs: structure, parameters and accuracy.

SQNR floors are set from what int8 with 256 levels gives a few layers deep (about 6 dB per
bit, minus accumulated rounding): they check that the integer pipeline is right, not that a
number was reached. Kernel checks run on a calibration sample, whose values lie inside the
calibrated ranges; held-aside samples of these tiny graphs also measure how well 16 samples
cover the tails, which `evaluate` reports but is not what these tests are about.
"""

from __future__ import annotations

import numpy as np
import pytest

from aipusim.compiler.ir import DType, Op, verify
from aipusim.compiler.quant import evaluate, run_fp32, run_int8
from aipusim.compiler.quant.accuracy import sqnr_db
from aipusim.compiler.quant.data import random_calibration
from aipusim.compiler.quant.quantize import quantize_graph


def _data(graph, samples: int = 16):
    return random_calibration({n: graph.shape(n) for n in graph.inputs}, samples=samples)


def test_fp32_executor_matches_onnx_reference(cnn) -> None:
    from aipusim.compiler.export import run_graph

    x = np.random.default_rng(0).standard_normal(cnn.shape("input")).astype(np.float32)
    ours = run_fp32(cnn, {"input": x})
    ref = run_graph(cnn, {"input": x})
    for name in cnn.outputs:
        assert np.allclose(ours[name], ref[name], atol=1e-4)


@pytest.mark.parametrize(
    "scheme", ["per_tensor_histogram", "per_tensor_min_max", "hybrid_per_tensor_per_channel"]
)
def test_small_cnn_int8_tracks_fp32(cnn, scheme: str) -> None:
    data = _data(cnn)
    q = quantize_graph(cnn, data, scheme=scheme)
    verify(q.graph)
    report = evaluate(cnn, q, data, fp32="numpy")
    out = report["outputs"][cnn.outputs[0]]
    assert out["sqnr_db"] > 25
    assert out["top1_agreement"] >= 0.75


def test_weights_int8_per_channel_and_bias_int32(cnn) -> None:
    q = quantize_graph(cnn, _data(cnn, 4))
    convs = [n for n in q.graph.nodes if n.op is Op.CONV]
    dense, dw = convs[0], convs[2]
    w = q.graph.tensor(dense.inputs[1])
    assert w.dtype is DType.INT8 and w.quant.axis == 0 and w.quant.scale.size == 8
    assert q.graph.tensor(dense.inputs[2]).dtype is DType.INT32
    # depthwise weights: one scale unless quantize_dw_channel_wise
    assert np.unique(q.graph.tensor(dw.inputs[1]).quant.scale).size == 1
    q2 = quantize_graph(cnn, _data(cnn, 4), quantize_dw_channel_wise=True)
    assert np.unique(q2.graph.tensor(dw.inputs[1]).quant.scale).size == 8


def test_fused_relu_shares_parameters_with_its_producer(cnn) -> None:
    q = quantize_graph(cnn, _data(cnn, 4))
    relu = next(n for n in q.graph.nodes if n.op is Op.RELU)
    before, after = q.qparams(relu.inputs[0]), q.qparams(relu.outputs[0])
    assert float(before.scale) == float(after.scale)
    assert int(after.zero_point) == -128  # the whole grid is spent on [0, max]
    assert q.steps[relu.name].kind == "clamp"


def test_hybrid_scheme_gives_depthwise_inputs_per_channel_params(cnn) -> None:
    q = quantize_graph(cnn, _data(cnn, 4), scheme="hybrid_per_tensor_per_channel")
    dw = [n for n in q.graph.nodes if n.op is Op.CONV][2]
    assert q.qparams(dw.inputs[0]).axis is None  # produced by MaxPool: stays per tensor
    qp = quantize_graph(cnn, _data(cnn, 4), scheme="per_tensor_histogram")
    assert qp.qparams(dw.inputs[0]).axis is None


def test_hybrid_per_channel_when_a_conv_feeds_a_depthwise(onnx_net) -> None:
    net = onnx_net((1, 4, 8, 8))
    y = net.op("Relu", [net.conv("input", 4, 6, k=1)])
    y = net.conv(y, 6, 6, group=6)
    g = net.graph([y])
    data = _data(g)
    q = quantize_graph(g, data, scheme="hybrid_per_tensor_per_channel")
    dw = [n for n in q.graph.nodes if n.op is Op.CONV][1]
    assert q.qparams(dw.inputs[0]).axis == 1
    x = data.samples[0]
    assert sqnr_db(run_fp32(g, x)[y], run_int8(q, x)[y]) > 30


def test_remove_io_quantization_makes_the_boundary_int8(cnn) -> None:
    keep = quantize_graph(cnn, _data(cnn, 4))
    drop = quantize_graph(cnn, _data(cnn, 4), remove_io_quantization=True)
    assert keep.graph.tensor("input").dtype is DType.FLOAT32
    assert drop.graph.tensor("input").dtype is DType.INT8
    assert drop.graph.tensor(cnn.outputs[0]).dtype is DType.INT8
    x = _data(cnn, 1).held_aside[0]
    q = drop.qparams("input")
    xq = np.clip(np.rint(x["input"] / q.scale) + q.zero_point, -128, 127).astype(np.int8)
    raw = run_int8(drop, {"input": xq}, raw=True)[cnn.outputs[0]]
    assert raw.dtype == np.int8
    assert np.array_equal(run_int8(keep, x, raw=True)[cnn.outputs[0]], raw)


@pytest.mark.parametrize("act", ["Sigmoid", "HardSwish", "Tanh", "Erf", "LeakyRelu"])
def test_lut_activations(onnx_net, act: str) -> None:
    net = onnx_net((1, 3, 8, 8))
    y = net.op(act, [net.conv("input", 3, 4)])
    g = net.graph([net.conv(y, 4, 4)])
    data = _data(g)
    q = quantize_graph(g, data)
    assert any(s.kind == "lut" for s in q.steps.values())
    x = data.samples[0]
    assert sqnr_db(run_fp32(g, x)[g.outputs[0]], run_int8(q, x)[g.outputs[0]]) > 28


def test_elementwise_concat_resize_softmax(onnx_net) -> None:
    net = onnx_net((1, 3, 8, 8))
    a = net.conv("input", 3, 4)
    b = net.op("Sigmoid", [net.conv("input", 3, 4)])
    m = net.op("Mul", [a, b])  # SiLU-style gating: two activations
    s = net.op("Sub", [a, m])
    c = net.op("Concat", [m, s], axis=1)
    r = net.op("Resize", [c, "", net.const(np.array([1, 1, 2, 2], np.float32))], mode="linear")
    n = net.op("Resize", [c, "", net.const(np.array([1, 1, 2, 2], np.float32))], mode="nearest")
    p = net.op("AveragePool", [net.op("Add", [r, n])], kernel_shape=[3, 3], pads=[1] * 4)
    t = net.op("Softmax", [net.op("Flatten", [net.op("GlobalAveragePool", [p])])], axis=1)
    g = net.graph([p, t])
    data = _data(g)
    q = quantize_graph(g, data)
    kinds = {q.steps[n.name].kind for n in q.graph.nodes}
    assert {"mul", "rescale", "resize_linear", "pool_avg", "softmax", "share"} <= kinds
    x = data.samples[0]
    ref, got = run_fp32(g, x), run_int8(q, x)
    assert sqnr_db(ref[p], got[p]) > 25
    assert np.abs(ref[t] - got[t]).max() < 0.02


def test_constant_operands_are_quantized(onnx_net) -> None:
    net = onnx_net((1, 4, 6, 6))
    y = net.conv("input", 4, 4)
    y = net.op("Mul", [y, net.const(np.linspace(0.5, 2, 4, dtype=np.float32).reshape(4, 1, 1))])
    y = net.op("Div", [y, net.const(np.float32(6.0))])
    y = net.op("Div", [y, net.const(np.array([1.0, 2.0, 4.0, 0.5], np.float32).reshape(4, 1, 1))])
    y = net.op("Add", [y, net.const(np.linspace(-1, 1, 4, dtype=np.float32).reshape(4, 1, 1))])
    g = net.graph([y])
    data = _data(g)
    q = quantize_graph(g, data)
    # division by a constant vector became a multiplication by its (int8) reciprocal
    ops = [n.op for n in q.graph.nodes]
    assert ops.count(Op.DIV) == 1 and ops.count(Op.MUL) == 2
    for n in q.graph.nodes:
        for i in n.present_inputs:
            # a one-element operand is folded into the node's LUT instead
            if i in q.graph.constants and q.graph.constants[i].size > 1:
                assert q.graph.constants[i].dtype in (np.int8, np.int32)
    assert q.steps[q.graph.producer(y).name].kind == "rescale"
    x = data.samples[0]
    assert sqnr_db(run_fp32(g, x)[y], run_int8(q, x)[y]) > 30


def test_tiny_zoo_model_quantizes() -> None:
    import aipusim.zoo as zoo
    from aipusim.compiler.importer import import_model

    g = import_model(zoo.build("tiny_cnn"))
    data = _data(g, 8)
    q = quantize_graph(g, data)
    rep = evaluate(g, q, data)
    for out in rep["outputs"].values():
        assert out["sqnr_db"] > 15


def test_quantize_pass_in_the_pipeline() -> None:
    import aipusim.zoo as zoo
    from aipusim.compiler.config import CompilerConfig
    from aipusim.compiler.passes.context import PassContext
    from aipusim.compiler.pipeline import run_pipeline

    ctx = PassContext(CompilerConfig(quantization_scheme="per_tensor_min_max"))
    result = run_pipeline(zoo.build("tiny_cnn"), ctx, stop_after="quantize")
    found = ctx.results["quantize"]
    assert found["qgraph"].scheme == "per_tensor_min_max"
    assert result.graph is found["qgraph"].graph
    assert all(
        t.quant is not None
        for name, t in result.graph.tensors.items()
        if name not in result.graph.constants
    )


@pytest.mark.parametrize(
    ("cin", "cout", "k", "stride", "group"),
    [(3, 8, 3, 1, 1), (8, 8, 3, 2, 8), (6, 4, 1, 1, 2), (4, 16, 5, 2, 1)],
)
def test_int8_conv_equals_float_math_on_the_int8_grid(onnx_net, cin, cout, k, stride, group):
    """The integer conv + requantize is the exact real-valued conv of the int8 operands,
    requantized: equal within one step (the fixed-point multiplier's rounding)."""
    from aipusim.compiler.quant.kernels import conv_acc_reference

    net = onnx_net((1, cin, 12, 12), seed=cin + cout)
    y = net.conv("input", cin, cout, k=k, stride=stride, group=group)
    g = net.graph([y])
    data = _data(g, 8)
    q = quantize_graph(g, data)
    node = q.graph.nodes[0]
    raw = run_int8(q, data.samples[0], raw=True, keep_all=True)
    qi, qw, qo = q.qparams("input"), q.qparams(node.inputs[1]), q.qparams(y)
    xc = raw["input"].astype(np.int64) - int(qi.zero_point)
    pads = tuple(node.attr("pads"))
    acc = conv_acc_reference(xc, q.graph.const(node.inputs[1]), (stride,) * 2, pads, (1, 1), group)
    s_w = qw.scale.astype(np.float64).reshape(1, -1, 1, 1)
    bias = q.graph.const(node.inputs[2]) * q.qparams(node.inputs[2]).scale.astype(np.float64)
    real = acc * float(qi.scale) * s_w + bias.reshape(1, -1, 1, 1)
    expect = np.clip(np.rint(real / float(qo.scale)) + int(qo.zero_point), -128, 127)
    assert np.abs(raw[y].astype(np.int64) - expect).max() <= 1


@pytest.mark.parametrize("alpha", [0.01, 0.1, 0.3, -0.2])
def test_leaky_relu_table_is_within_one_step_of_float(onnx_net, alpha: float) -> None:
    """The int8 LeakyRelu table, read on the int8 input, lands within one output step of the
    float LeakyRelu of that same (dequantized) input, whatever the slope."""
    net = onnx_net((1, 3, 8, 8))
    c = net.conv("input", 3, 4)
    y = net.op("LeakyRelu", [c], alpha=alpha)
    g = net.graph([c, y])
    data = _data(g)
    q = quantize_graph(g, data)
    got = run_int8(q, data.samples[0])
    x = got[c]
    want = np.where(x >= 0, x, alpha * x)
    assert np.abs(got[y] - want).max() <= q.qparams(y).scale * 1.0001
