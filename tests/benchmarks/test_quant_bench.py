"""Quantization speed targets and the zoo's int8 accuracy (issue 4).

Run: ``pytest tests/benchmarks/test_quant_bench.py --benchmark-only -s``.

- calibrate + quantize ResNet-50 at 224x224 on 16 random inputs: target <= 60 s;
- the int8 reference, one ResNet-50 frame: target <= 2 s.

Each benchmark also prints the output SQNR, max abs error and top-1 agreement of the int8
model (default scheme ``per_tensor_histogram``) against the fp32 model on 4 held-aside
inputs, for ResNet-50 and MobileNetV2 (BatchNorm folded by the pipeline first), and, as a
yardstick of how much these random-weight networks amplify small errors, the output SQNR of
the fp32 model when only its input is rounded to the int8 grid.
"""

from __future__ import annotations

import pytest

import aipusim.zoo as zoo
from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.pipeline import run_pipeline
from aipusim.compiler.quant import evaluate, run_int8
from aipusim.compiler.quant.data import random_calibration
from aipusim.compiler.quant.quantize import quantize_graph

SIZE = 224
SAMPLES = 16


def _simplified(name: str):
    ctx = PassContext(CompilerConfig())
    model = zoo.build(name, input_size=SIZE)
    return run_pipeline(model, ctx, stop_after="arithmetic_simplification").graph


@pytest.fixture(scope="module")
def resnet50():
    graph = _simplified("resnet50")
    data = random_calibration({n: graph.shape(n) for n in graph.inputs}, samples=SAMPLES)
    return graph, data


def _print_accuracy(name: str, graph, qgraph, data) -> None:
    report = evaluate(graph, qgraph, data)
    for out, r in report["outputs"].items():
        print(
            f"\n{name} {out}: SQNR {r['sqnr_db']:.2f} dB, max abs error "
            f"{r['max_abs_error']:.3f} (fp32 max {r['fp32_max_abs']:.2f}), "
            f"top-1 agreement {r.get('top1_agreement', float('nan')):.2f} "
            f"over {r['samples']} held-aside inputs; fp32 model with only its input on "
            f"the int8 grid: {r['input_rounding_sqnr_db']:.2f} dB"
        )


def test_calibrate_and_quantize_resnet50(benchmark, resnet50) -> None:
    graph, data = resnet50
    qgraph = benchmark.pedantic(quantize_graph, args=(graph, data), rounds=1, iterations=1)
    print(f"\ncalibrate + quantize ResNet-50 ({SAMPLES} inputs): {benchmark.stats['mean']:.1f} s")
    _print_accuracy("resnet50", graph, qgraph, data)


def test_int8_reference_resnet50_frame(benchmark, resnet50) -> None:
    graph, data = resnet50
    qgraph = quantize_graph(graph, data)
    frame = data.held_aside[0]
    run_int8(qgraph, frame)  # numba kernels compiled (or loaded from cache) outside timing
    benchmark.pedantic(run_int8, args=(qgraph, frame), rounds=5, iterations=1)
    print(f"\nint8 reference ResNet-50, one frame: {benchmark.stats['mean']:.2f} s")


def test_calibrate_and_quantize_mobilenetv2(benchmark) -> None:
    graph = _simplified("mobilenetv2")
    data = random_calibration({n: graph.shape(n) for n in graph.inputs}, samples=SAMPLES)
    qgraph = benchmark.pedantic(quantize_graph, args=(graph, data), rounds=1, iterations=1)
    print(f"\ncalibrate + quantize MobileNetV2 ({SAMPLES} inputs): {benchmark.stats['mean']:.1f} s")
    _print_accuracy("mobilenetv2", graph, qgraph, data)
