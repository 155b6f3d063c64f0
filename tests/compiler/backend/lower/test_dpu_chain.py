"""The ``fuse_dpu_chains`` pass: which element-wise DPU ops take the activation after them,
the one DPU task that results, and that the fused program computes the unfused integer
program bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from backend_helpers import ARCH, chain_model, onnx_model
from onnx import helper, numpy_helper

import aipusim
from aipusim.api.functional_check import chip_inputs, compare, load_reference
from aipusim.compiler import CompilerConfig
from aipusim.compiler.backend.lower import dpu_chain
from aipusim.compiler.backend.lower.dpu_chain import fuse_dpu_chains
from aipusim.compiler.backend.lower.layer import LayerUnit
from aipusim.compiler.backend.lower.residual import fuse_residual_adds
from aipusim.compiler.backend.lower.units import lower_graph
from aipusim.compiler.backend.pack.blobs import LayerConstants
from aipusim.compiler.ir import DType, Graph, Node, Op, Tensor
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.pipeline import BACK, FRONT, run_pipeline
from aipusim.compiler.quant.reference import run_int8
from aipusim.isa import params as P
from aipusim.isa.cost import CostModel
from aipusim.isa.tasklist import read_tasklist
from aipusim.isa.tasks import DpuKind, DpuOp, DpuThen, LutKind
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


# -- two element-wise layers in one pass (``DpuOp.then``) ----------------------------------


def _pair(first: Op = Op.MUL, second: Op = Op.ADD, *, mid_first: bool = True, act: bool = False):
    """``second(first(x, y), w)`` (``mid_first`` False: ``second(w, first(x, y))``), a Relu
    after it with ``act``."""
    ins = ("s", "w") if mid_first else ("w", "s")
    nodes = [Node("m", first, ("x", "y"), ("s",)), Node("a", second, ins, ("z",))]
    outputs = ("z",)
    if act:
        nodes.append(Node("r", Op.RELU, ("z",), ("o",)))
        outputs = ("o",)
    tensors = {n: Tensor(n, SHAPE) for n in ("x", "y", "s", "w", "z", "o")}
    return Graph("g", tuple(nodes), tensors, {}, ("x", "y", "w"), outputs)


@pytest.mark.parametrize(
    ("first", "second", "mid_first", "then"),
    [
        (Op.MUL, Op.ADD, True, DpuThen.ADD),
        (Op.MUL, Op.ADD, False, DpuThen.ADD),
        (Op.ADD, Op.MUL, True, DpuThen.MUL),
        (Op.SUB, Op.SUB, True, DpuThen.SUB),
    ],
)
def test_two_element_wise_layers_become_one(
    first: Op, second: Op, mid_first: bool, then: DpuThen
) -> None:
    g = _pair(first, second, mid_first=mid_first)
    (layer,) = fuse_dpu_chains(lower_graph(g), g, None)
    assert (layer.name, layer.inputs, layer.outputs, layer.fused) == ("m", ("x", "y", "w"),
                                                                      ("z",), ("a",))  # fmt: skip
    assert layer.then is then and layer.lut is LutKind.NONE
    assert layer.in_bytes == (16, 16, 16) and layer.out_bytes == (16,)


def test_not_chained_into_the_subtrahend_and_no_activation_on_top() -> None:
    g = _pair(Op.MUL, Op.SUB, mid_first=False)  # w - x * y: the record subtracts operand b
    assert [(p.name, p.then) for p in fuse_dpu_chains(lower_graph(g), g, None)] == [
        ("m", DpuThen.NONE),
        ("a", DpuThen.NONE),
    ]
    g = _pair(act=True)  # the pair fuses; the Relu stays a layer of its own
    layers = fuse_dpu_chains(lower_graph(g), g, None)
    assert [(p.name, p.fused, p.then, p.lut) for p in layers] == [
        ("m", ("a",), DpuThen.ADD, LutKind.NONE),
        ("r", (), DpuThen.NONE, LutKind.RELU),
    ]


def affine_model(kind: str, size: int = 8) -> onnx.ModelProto:
    """A conv, max-pooled (no residual fusion takes a DWPU output), then ``x * gamma +
    beta`` with per-channel constants (``affine``), or the product of two such activations
    plus a third (``activations``); a last conv."""
    rng = np.random.default_rng(2)
    inits: list[onnx.TensorProto] = []

    def pooled_conv(name: str) -> list[onnx.NodeProto]:
        w = rng.normal(0, 0.3, (8, 3, 1, 1)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"{name}_w"))
        return [
            helper.make_node("Conv", ["input", f"{name}_w"], [f"{name}_y"], kernel_shape=[1, 1]),
            helper.make_node("MaxPool", [f"{name}_y"], [name], kernel_shape=[3, 3], pads=[1] * 4),
        ]

    if kind == "affine":
        for name, value in (("gamma", rng.uniform(0.5, 1.5, 8)), ("beta", rng.normal(0, 0.5, 8))):
            inits.append(
                numpy_helper.from_array(value.reshape(1, 8, 1, 1).astype(np.float32), name)
            )
        nodes = [*pooled_conv("c1"), helper.make_node("Mul", ["c1", "gamma"], ["prod"]),
                 helper.make_node("Add", ["prod", "beta"], ["aff"])]  # fmt: skip
    else:
        nodes = [*pooled_conv("c1"), *pooled_conv("c2"), *pooled_conv("c3"),
                 helper.make_node("Mul", ["c1", "c2"], ["prod"]),
                 helper.make_node("Add", ["prod", "c3"], ["aff"])]  # fmt: skip
    inits.append(
        numpy_helper.from_array(rng.normal(0, 0.3, (8, 8, 1, 1)).astype(np.float32), "head_w")
    )
    nodes.append(helper.make_node("Conv", ["aff", "head_w"], ["out"], kernel_shape=[1, 1]))
    return onnx_model(kind, nodes, inits, [1, 3, size, size], [1, 8, size, size])


KINDS = ("affine", "activations")


@pytest.fixture(scope="module")
def pairs() -> dict[tuple[str, bool], aipusim.CompiledModel]:
    """Each model compiled with the two-layer rule (True) and without it (False)."""
    out = {(kind, True): aipusim.compile(affine_model(kind)) for kind in KINDS}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dpu_chain, "THEN_KINDS", frozenset())
        out |= {(kind, False): aipusim.compile(affine_model(kind)) for kind in KINDS}
    return out


def _dpu_tasks(model: aipusim.CompiledModel) -> list[DpuOp]:
    tasks = read_tasklist(model.compiled_dir() / "core0.tasklist").tasks
    return [t for t in tasks if isinstance(t, DpuOp)]


@pytest.mark.parametrize("kind", KINDS)
def test_the_pair_is_one_layer_after_the_pass(kind: str) -> None:
    ctx = PassContext(CompilerConfig(), arch=ARCH)
    program = run_pipeline(affine_model(kind), ctx, passes=FRONT).ir
    passes = [p for p in BACK if p.name in ("lower", "fuse_residual", "fuse_dpu_chains")]
    ir = run_pipeline(program, PassContext(CompilerConfig(), arch=ARCH), passes=passes).ir
    dpu = [(p.op, p.dpu_kind, p.then, len(p.inputs)) for p in ir.layers if p.unit is LayerUnit.DPU]
    assert dpu == [("Mul", DpuKind.MUL, DpuThen.ADD, 1 if kind == "affine" else 3)]
    (mul,) = (p for p in ir.layers if p.unit is LayerUnit.DPU)
    assert [program.graph.node(n).op for n in (mul.name, *mul.fused)] == [Op.MUL, Op.ADD]
    assert sum(" (Add) on dpu" in line for line in ir.dump().splitlines()) == 0
    assert f"then add {mul.fused[0]}" in ir.dump()


@pytest.mark.parametrize("kind", KINDS)
def test_one_dpu_task_computes_both_layers(pairs, kind: str) -> None:
    (t,) = _dpu_tasks(pairs[kind, True])
    elements = 8 * 8 * 8
    assert (t.kind, t.then, t.operands, t.elements, t.lut) == (
        DpuKind.MUL, DpuThen.ADD, 2, elements, LutKind.NONE,
    )  # fmt: skip
    # channels-last: a per-channel constant is read at e % 8, an activation element by element
    period = 8 if kind == "affine" else elements
    assert (t.b_div, t.b_mod, t.c_div, t.c_mod) == (1, period, 1, period)
    if kind == "affine":  # gamma's 8 bytes, then beta's, in the layer's operand blob
        assert t.in_addr2 == t.in_addr1 + 8
    unfused = _dpu_tasks(pairs[kind, False])
    assert [(u.kind, u.then) for u in unfused] == [(DpuKind.MUL, DpuThen.NONE),
                                                   (DpuKind.ADD, DpuThen.NONE)]  # fmt: skip


def _packed(kind: str) -> dict[str, LayerConstants]:
    """The DPU layers' constant bytes after ``pack``, by layer name."""
    ctx = PassContext(CompilerConfig(), arch=ARCH)
    passes = BACK[: [p.name for p in BACK].index("pack") + 1]
    ir = run_pipeline(affine_model(kind), ctx, passes=FRONT + passes).ir
    return {p.name: c for p, c in zip(ir.layers, ir.constants, strict=True) if p.dpu_kind}


@pytest.mark.parametrize("kind", KINDS)
def test_the_fused_constants_are_both_layers_records_and_operands(kind: str) -> None:
    (fused,) = _packed(kind).values()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dpu_chain, "THEN_KINDS", frozenset())
        mul, add = _packed(kind).values()
    # the Mul's SCALAR record, then the Add's (what DpuOp.then reads after p_mod records)
    assert len(mul.params) == len(add.params) == P.SCALAR.itemsize
    assert fused.params.tobytes() == mul.params.tobytes() + add.params.tobytes()
    # gamma, then beta (the Add's operand after the Mul's: ``then_offset``)
    assert fused.operand.tobytes() == mul.operand.tobytes() + add.operand.tobytes()
    assert fused.then_offset == (8 if kind == "affine" else 0)
    assert len(fused.operand) == (16 if kind == "affine" else 0)


@pytest.mark.parametrize("kind", KINDS)
def test_the_fused_task_is_bit_exact_against_the_unfused_program(pairs, kind: str) -> None:
    fused, unfused = (pairs[kind, on].compiled_dir() for on in (True, False))
    chip, how = chip_inputs(fused, None)
    ref = run_int8(load_reference(fused), dict(chip), raw=True)
    assert np.array_equal(
        ref["out"], run_int8(load_reference(unfused), dict(chip), raw=True)["out"]
    )
    check = compare(simulate(fused, frames=1, functional=True, inputs=chip), fused, chip, how)
    assert check.bit_exact, check.text()


@pytest.mark.parametrize("kind", KINDS)
def test_one_pass_costs_less_than_two(pairs, kind: str) -> None:
    model = CostModel(ARCH)
    (t,) = _dpu_tasks(pairs[kind, True])
    n, lanes, port = t.elements, ARCH.dpu.lanes, ARCH.l1.port_bytes_per_cycle
    # both steps' lane operations (2 + 2 an element), the Mul's two operands and the Add's
    # other one read, one result written, one pipeline fill
    ops, read = 4 * n, 3 * n
    expect = max(-(-ops // lanes), -(-read // port)) + ARCH.dpu.pipeline_latency_cycles
    cost = model.task(t)
    assert (cost.cycles, cost.traffic.l1_read, cost.traffic.l1_write) == (expect, read, n)
    unfused = [model.task(u) for u in _dpu_tasks(pairs[kind, False])]
    assert sum(u.traffic.l1_write for u in unfused) == 2 * n  # the product stored ...
    assert sum(u.traffic.l1_read for u in unfused) == 4 * n  # ... and read back
    assert cost.cycles < sum(u.cycles for u in unfused)
    # the simulator's DPU is busy for what the cost model charges, and the frame is shorter
    runs = {on: simulate(pairs[kind, on].compiled_dir(), frames=1) for on in (True, False)}
    assert runs[True].busy_cycles["core0.dpu"] == cost.cycles
    assert runs[False].busy_cycles["core0.dpu"] == sum(u.cycles for u in unfused)
    assert runs[True].device_latency_cycles[0] < runs[False].device_latency_cycles[0]
