"""Speed of the compiler front half on full-size zoo models.

Run: ``pytest tests/benchmarks/test_compiler_front_bench.py --benchmark-only -s``. Prints
the seconds of import and of the float front half (import, clean, simplify, rewrite) of
ResNet-50 and YOLOv8n at their published input sizes. Import hides the weights from shape
inference and folds with numpy, so it scales with the node count, not the weight bytes.
"""

from __future__ import annotations

import pytest

from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.importer import import_model
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.pipeline import FRONT, run_pipeline

zoo = pytest.importorskip("aipusim.zoo")
FLOAT_FRONT = tuple(p for p in FRONT if p.name != "quantize")


@pytest.fixture(scope="module", params=["resnet50", "yolov8n"])
def model(request: pytest.FixtureRequest):
    return request.param, zoo.build(request.param)


def test_import_full_size(benchmark, model) -> None:
    name, proto = model
    graph = benchmark(import_model, proto)
    print(f"\nimport {name}: {len(graph.nodes)} nodes, {benchmark.stats['mean']:.3f} s")


def test_float_front_half_full_size(benchmark, model) -> None:
    name, proto = model

    def run():
        return run_pipeline(proto, PassContext(CompilerConfig()), passes=FLOAT_FRONT)

    result = benchmark(run)
    slowest = sorted(result.pass_seconds.items(), key=lambda kv: -kv[1])[:3]
    print(f"\nfront half {name}: {benchmark.stats['mean']:.3f} s; slowest passes {slowest}")
