"""The ``fuse_dpu_chains`` pass: which element-wise DPU ops take the activation after them,
the one DPU task that results, and that the fused program computes the unfused integer
program bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from backend_helpers import ARCH, onnx_model
from onnx import helper, numpy_helper

import aipusim
from aipusim.compiler import CompilerConfig
from aipusim.compiler.backend.dpu_chain import fuse_dpu_chains
from aipusim.compiler.backend.lower import LayerUnit, lower_graph
from aipusim.compiler.backend.residual import fuse_residual_adds
from aipusim.compiler.ir import DType, Graph, Node, Op, Tensor
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.pipeline import BACK, FRONT, run_pipeline
from aipusim.compiler.quant.reference import run_int8
from aipusim.functional_check import chip_inputs, compare, load_reference
from aipusim.isa import params as P
from aipusim.isa.tasklist import read_tasklist
from aipusim.isa.tasks import DpuKind, DpuOp, LutKind
from aipusim.simulator import simulate

SHAPE = (1, 4, 2, 2)


def _graph(
    op: Op = Op.ADD,
    act: Op = Op.RELU,
    *,
    readers: int = 1,
    output: bool = False,
    wide: bool = False,
) -> Graph:
    """``act(op(x, y))``; ``readers`` 2: a Neg reads ``op``'s result too; ``output``: that
    result is a graph output as well; ``wide``: the result is int16."""
    nodes = [Node("op", op, ("x", "y"), ("s",)), Node("act", act, ("s",), ("z",))]
    outputs: tuple[str, ...] = ("z",)
    if readers == 2:
        nodes.append(Node("neg", Op.NEG, ("s",), ("n",)))
        outputs = (*outputs, "n")
    if output:
        outputs = (*outputs, "s")
    tensors = {n: Tensor(n, SHAPE) for n in ("x", "y", "s", "z", "n")}
    if wide:
        tensors["s"] = Tensor("s", SHAPE, dtype=DType.INT16)
    return Graph("g", tuple(nodes), tensors, {}, ("x", "y"), outputs)


@pytest.mark.parametrize(
    ("op", "act", "kind", "lut"),
    [
        (Op.ADD, Op.RELU, DpuKind.ADD, LutKind.RELU),
        (Op.MUL, Op.SIGMOID, DpuKind.MUL, LutKind.SIGMOID),
        (Op.SUB, Op.SILU, DpuKind.SUB, LutKind.SILU),
        (Op.MAX, Op.CLIP, DpuKind.MAX, LutKind.CLIP),
    ],
)
def test_the_activation_joins_the_element_wise_op(
    op: Op, act: Op, kind: DpuKind, lut: LutKind
) -> None:
    g = _graph(op, act)
    (layer,) = fuse_dpu_chains(lower_graph(g), g, None)
    assert (layer.name, layer.unit, layer.dpu_kind, layer.lut) == ("op", LayerUnit.DPU, kind, lut)
    assert layer.inputs == ("x", "y") and layer.outputs == ("z",) and layer.fused == ("act",)
    assert layer.in_bytes == (16, 16) and layer.out_bytes == (16,)


@pytest.mark.parametrize(
    ("graph", "why"),
    [
        (_graph(readers=2), "the sum has another reader"),
        (_graph(output=True), "the sum is a graph output"),
        (_graph(Op.DIV), "a float18 quotient, not an int8 record"),
        (_graph(Op.ADD, Op.TANH), "Tanh is no activation the output stream takes"),
    ],
    ids=["two-readers", "graph-output", "div", "tanh"],
)
def test_not_fused(graph: Graph, why: str) -> None:
    layers = fuse_dpu_chains(lower_graph(graph), graph, None)
    assert [p.name for p in layers] == [p.name for p in lower_graph(graph)], why
    assert not any(p.fused for p in layers)


def test_not_fused_into_an_int16_sum() -> None:
    g = _graph(wide=True)
    assert [p.name for p in fuse_dpu_chains(lower_graph(g), g, None)] == ["op", "act"]


def chain_model(size: int = 8) -> onnx.ModelProto:
    """Two convs with a SiLU each, max-pooled (a DWPU output: no Add operand the residual
    fusion takes), then ``Relu(Add)``, and ``Sigmoid(Mul)`` of the sum with a third conv's
    output, then a last conv."""
    rng = np.random.default_rng(1)
    inits: list[onnx.TensorProto] = []

    def conv(name: str, x: str) -> list[onnx.NodeProto]:
        w = rng.normal(0, 0.3, (8, 3 if x == "input" else 8, 1, 1)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"{name}_w"))
        return [
            helper.make_node("Conv", [x, f"{name}_w"], [f"{name}_y"], kernel_shape=[1, 1]),
            helper.make_node("Sigmoid", [f"{name}_y"], [f"{name}_s"]),
            helper.make_node("Mul", [f"{name}_y", f"{name}_s"], [name]),  # SiLU
        ]

    nodes = [
        *conv("c1", "input"),
        *conv("c2", "input"),
        *(
            helper.make_node("MaxPool", [c], [f"{c}_p"], kernel_shape=[3, 3], pads=[1] * 4)
            for c in ("c1", "c2")
        ),
        helper.make_node("Add", ["c1_p", "c2_p"], ["sum"]),
        helper.make_node("Relu", ["sum"], ["r"]),
        *conv("c3", "r"),
        helper.make_node("Mul", ["r", "c3"], ["prod"]),
        helper.make_node("Sigmoid", ["prod"], ["gate"]),
        # a conv last: the front end leaves trailing element-wise ops to the host
        helper.make_node("Conv", ["gate", "head_w"], ["out"], kernel_shape=[1, 1]),
    ]
    inits.append(
        numpy_helper.from_array(rng.normal(0, 0.3, (8, 8, 1, 1)).astype(np.float32), "head_w")
    )
    return onnx_model("chains", nodes, inits, [1, 3, size, size], [1, 8, size, size])


@pytest.fixture(scope="module")
def program() -> object:
    ctx = PassContext(CompilerConfig(), arch=ARCH)
    return run_pipeline(chain_model(), ctx, passes=FRONT).ir


def test_the_pass_follows_the_residual_fusion_and_dumps_the_chains(program) -> None:
    names = [p.name for p in BACK]
    assert names.index("fuse_dpu_chains") == names.index("fuse_residual") + 1
    ctx = PassContext(CompilerConfig(), arch=ARCH)
    passes = [p for p in BACK if p.name in ("lower", "fuse_residual", "fuse_dpu_chains")]
    ir = run_pipeline(program, ctx, passes=passes).ir
    dpu = [(p.op, p.dpu_kind, p.lut, p.fused) for p in ir.layers if p.unit is LayerUnit.DPU]
    assert len(dpu) == 2
    assert dpu[0][1:3] == (DpuKind.ADD, LutKind.RELU) and len(dpu[0][3]) == 1
    assert dpu[1][1:3] == (DpuKind.MUL, LutKind.SIGMOID) and len(dpu[1][3]) == 1
    assert sum(" (Relu) on dpu" in line for line in ir.dump().splitlines()) == 0
    residual_only = fuse_residual_adds(ir.layers, ir.graph, ir.program)
    assert residual_only == ir.layers  # nothing the residual fusion could have taken


@pytest.fixture(scope="module")
def compiled() -> aipusim.CompiledModel:
    return aipusim.compile(chain_model())


@pytest.fixture(scope="module")
def folder(compiled: aipusim.CompiledModel) -> Path:
    return compiled.compiled_dir()  # (the model keeps its folder while it lives)


def test_one_dpu_task_per_chain(folder) -> None:
    tasks = [t for t in read_tasklist(folder / "core0.tasklist").tasks if isinstance(t, DpuOp)]
    assert [(t.layer, t.kind, t.lut, t.elements) for t in tasks] == [
        ("Add_8", DpuKind.ADD, LutKind.RELU, 8 * 8 * 8),
        ("Mul_13", DpuKind.MUL, LutKind.SIGMOID, 8 * 8 * 8),
    ]
    # the Relu is the Add record's clamp (no table); the Sigmoid's table follows the Mul's
    # one SCALAR record
    assert tasks[0].lut_addr == 0
    assert tasks[1].lut_addr == tasks[1].param_addr + P.SCALAR.itemsize


def test_the_reference_is_the_unfused_program_and_the_chip_matches_it(folder, program) -> None:
    chip, how = chip_inputs(folder, None)
    fused = run_int8(load_reference(folder), dict(chip), raw=True)
    unfused = run_int8(program, dict(chip), raw=True)
    assert np.array_equal(fused["out"], unfused["out"])
    check = compare(simulate(folder, frames=1, functional=True, inputs=chip), folder, chip, how)
    assert check.bit_exact, check.text()
