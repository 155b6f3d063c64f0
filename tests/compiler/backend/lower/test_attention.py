"""Activation x activation MatMul: both mappings costed, the cheaper one emitted."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest
from backend_helpers import ARCH, COST, check_ok

from aipusim.compiler import CompilerConfig
from aipusim.compiler.backend.imc.mapper import ImcOptions
from aipusim.compiler.backend.lower.attention import choose, head_mapping
from aipusim.compiler.backend.lower.layer import RuntimeMatmul, is_runtime
from aipusim.compiler.backend.run import run_backend
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.pipeline import FRONT, run_pipeline
from aipusim.isa.tasks import DpuKind, DpuOp, Mvm, Phase, WeightLoad

sys.path.insert(0, str(Path(__file__).parents[1]))
from transformer_models import encoder


def _backend(**model_kwargs):
    ctx = PassContext(CompilerConfig(), arch=ARCH)
    passes = [p for p in FRONT if p.name != "quantize"]
    graph = run_pipeline(encoder(**model_kwargs), ctx, passes=passes).graph
    return run_backend(graph, CompilerConfig(), ARCH)


@pytest.mark.parametrize(
    ("mm", "unit"),
    [
        (RuntimeMatmul(heads=3, m=197, k=64, n=197), "mvm"),  # DeiT-Tiny Q.K^T
        (RuntimeMatmul(heads=12, m=197, k=197, n=64), "mvm"),  # ViT-B attention.V
        (RuntimeMatmul(heads=1, m=1, k=16, n=16), "dpu"),  # one vector: the load dominates
    ],
)
def test_the_cheaper_mapping_is_chosen(mm: RuntimeMatmul, unit: str) -> None:
    c = choose(mm, COST, ImcOptions())
    assert c.unit == unit
    assert (c.mvm_cycles <= c.dpu_cycles) == (unit == "mvm")
    # the MVM writes every head's operand (its ICR copies and padding included) each frame
    head = head_mapping(mm, COST, ImcOptions())
    assert c.weight_bytes_per_frame == (0 if unit == "dpu" else mm.heads * head.weight_bytes)
    assert head.weight_bytes >= mm.k * mm.n
    # the DPU does two lane operations per MAC over its lanes and reads both factors of
    # every MAC through one L1 read port (more than it writes), whichever takes longer
    lanes = -(-2 * mm.macs // ARCH.dpu.lanes)
    port = -(-2 * mm.macs // ARCH.l1.port_bytes_per_cycle)
    assert c.dpu_cycles == max(lanes, port) + ARCH.dpu.pipeline_latency_cycles


def test_mvm_mapping_loads_every_head_in_the_frame() -> None:
    result = _backend()  # 16 tokens, 2 heads of 32: the MVM is cheaper
    chosen = [i for i, layer in enumerate(result.layers) if layer.matmul_choice is not None]
    assert len(chosen) == 4 and all(is_runtime(result.layers[i]) for i in chosen)
    tasks = result.tasks[0]
    for i in chosen:
        layer, mapping = result.layers[i], result.mappings[i]
        loads = [t for t in tasks if isinstance(t, WeightLoad) and t.layer == layer.name]
        mvms = [t for t in tasks if isinstance(t, Mvm) and t.layer == layer.name]
        heads = layer.runtime.heads
        assert len(loads) == len(mvms) == heads * len(mapping.whole.blocks)
        assert all(t.phase is Phase.FRAME for t in loads)  # paid every frame, not in INIT
        assert sum(t.bytes for t in loads) == layer.matmul_choice.weight_bytes_per_frame
    check_ok(result)


def test_tiny_products_go_to_the_dpu() -> None:
    result = _backend(tokens=8, d=32)  # 8 vectors per head of 16: the DPU is cheaper
    layers = [layer for layer in result.layers if layer.matmul_choice is not None]
    assert layers and all(layer.matmul_choice.unit == "dpu" for layer in layers)
    matmuls = [t for t in result.tasks[0] if isinstance(t, DpuOp) and t.kind is DpuKind.MATMUL]
    assert sum(t.elements for t in matmuls) == sum(layer.macs for layer in layers)
    check_ok(result)


def test_an_operand_shared_by_every_head_is_loaded_from_one_place() -> None:
    from aipusim.compiler.ir import Graph, Node, Op, Tensor

    # A [1, 4, 64, 32] @ B [32, 64]: four heads, one B (written into the array per head)
    g = Graph(
        "g",
        (
            Node("t", Op.TRANSPOSE, ("x",), ("b",), {"perm": (1, 0)}),
            Node("mm", Op.MATMUL, ("a", "b"), ("y",)),
        ),
        {
            "a": Tensor("a", (1, 4, 64, 32)),
            "x": Tensor("x", (64, 32)),
            "b": Tensor("b", (32, 64)),
            "y": Tensor("y", (1, 4, 64, 64)),
        },
        {},
        ("a", "x"),
        ("y",),
    )
    result = run_backend(g, CompilerConfig(), ARCH)
    (layer,) = [layer for layer in result.layers if layer.matmul_choice is not None]
    assert layer.matmul_choice.unit == "mvm"
    loads = [t for t in result.tasks[0] if isinstance(t, WeightLoad) and t.layer == "mm"]
    assert len(loads) == 4 and len({t.src_addr for t in loads}) == 1
    check_ok(result)


def test_run_time_operands_are_read_with_the_heads_stride() -> None:
    """The encoder's operands are [1, 2, 16, .] channels-last: a head's neighbouring
    elements are 2 bytes apart, head h starts at byte h. Every load reads its head's
    operand with that stride and keeps its column sums; every Mvm gathers and scatters
    with it and offsets its inputs by their zero point."""
    result = _backend()
    tasks = result.tasks[0]
    runtime = [x for x in result.layers if x.runtime is not None]
    assert len(runtime) == 4
    for layer in runtime:
        mm = layer.runtime
        assert mm.steps == (2, 2, 2)
        loads = [t for t in tasks if isinstance(t, WeightLoad) and t.layer == layer.name]
        mvms = [t for t in tasks if isinstance(t, Mvm) and t.layer == layer.name]
        head = head_mapping(mm, COST, ImcOptions())
        assert {
            (t.src_pitch, t.src_row_pitch, t.src_rows, t.copies, t.col_sums) for t in loads
        } == {(2, 2 * mm.n, mm.k, head.icr, 1)}
        steps = [b.src_addr - a.src_addr for a, b in itertools.pairwise(loads)]
        assert steps == [1] * (mm.heads - 1)
        assert {(t.in_chan_pitch, t.out_chan_pitch, t.offset_fill) for t in mvms} == {(2, 2, 1)}
        assert {(t.in_pitch, t.out_pitch, t.cin, t.out_w) for t in mvms} == {
            (2 * mm.k, 2 * mm.n, mm.k, mm.m)
        }
