"""The ``fuse_residual`` pass: which Adds it folds into an MVM layer, the tasks it makes, and
that the fused program computes the unfused integer program bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from backend_helpers import ARCH, check_ok, compile_backend, onnx_model, quantized_program
from onnx import helper, numpy_helper

import aipusim
from aipusim.api.functional_check import chip_inputs, compare, load_reference
from aipusim.compiler import CompilerConfig
from aipusim.compiler.backend.lower.layer import LayerUnit
from aipusim.compiler.backend.lower.residual import fuse_residual_adds
from aipusim.compiler.backend.lower.units import lower_graph
from aipusim.compiler.ir import Graph, Node, Op, Tensor
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.pipeline import BACK, run_pipeline
from aipusim.compiler.quant.reference import run_int8
from aipusim.isa.tasklist import read_tasklist
from aipusim.isa.tasks import ADD_POSTS, DpuOp, LutKind, Mvm, PostOp
from aipusim.simulator import simulate

SHAPE = (1, 8, 4, 4)


def _graph(
    *, conv_readers: int = 1, relu: bool = True, silu: bool = False, after: Op = Op.RELU
) -> Graph:
    """conv(x) [-> silu] + s [-> after]; ``conv_readers`` 2: a Neg reads the conv's output
    too."""
    nodes = [Node("c", Op.CONV, ("x", "w"), ("y0" if silu else "y",), {"kernel_shape": [1, 1]})]
    if silu:
        nodes.append(Node("silu", Op.SILU, ("y0",), ("y",)))
    nodes.append(Node("a", Op.ADD, ("s", "y"), ("z",)))
    tensors = {n: Tensor(n, SHAPE) for n in ("x", "s", "y0", "y", "z", "r", "n")}
    tensors["w"] = Tensor("w", (8, 8, 1, 1))
    outputs: tuple[str, ...] = ("z",)
    if relu:
        nodes.append(Node("relu", after, ("z",), ("r",)))
        outputs = ("r",)
    if conv_readers == 2:
        nodes.append(Node("neg", Op.NEG, ("y",), ("n",)))
        outputs = (*outputs, "n")
    consts = {"w": np.zeros((8, 8, 1, 1), np.float32)}
    return Graph("g", tuple(nodes), tensors, consts, ("x", "s"), outputs)


def test_the_add_and_its_relu_ride_on_the_conv() -> None:
    g = _graph()
    layers = fuse_residual_adds(lower_graph(g), g, None)
    assert [(p.name, p.unit) for p in layers] == [("c", LayerUnit.MVM)]
    (conv,) = layers
    # the shortcut is the Add's other operand, whichever side of the Add it is on
    assert conv.inputs == ("x", "s") and conv.outputs == ("r",)
    assert conv.residual == "a" and conv.fused == ("a", "relu") and conv.lut is LutKind.RELU
    assert conv.in_bytes == (128, 128) and conv.out_bytes == (128,)


def test_not_fused_when_the_conv_output_has_another_reader() -> None:
    g = _graph(conv_readers=2)
    layers = fuse_residual_adds(lower_graph(g), g, None)
    assert [p.name for p in layers] == ["c", "a", "relu", "neg"]
    assert not any(p.residual for p in layers)


def test_the_add_alone_when_its_sum_is_an_output() -> None:
    g = _graph(relu=False)
    (conv,) = fuse_residual_adds(lower_graph(g), g, None)
    assert conv.outputs == ("z",) and conv.fused == ("a",) and conv.lut is LutKind.NONE


def test_a_conv_with_its_table_takes_the_add_after_it() -> None:
    g = _graph(silu=True, relu=False)
    (conv,) = fuse_residual_adds(lower_graph(g), g, None)
    assert conv.inputs == ("x", "s") and conv.outputs == ("z",)
    assert conv.fused == ("silu", "a") and conv.lut is LutKind.SILU and conv.lut_before_add


def test_after_the_conv_s_table_only_a_clamp_joins() -> None:
    g = _graph(silu=True)  # a Relu after the add: the Add's record clamps
    (conv,) = fuse_residual_adds(lower_graph(g), g, None)
    assert conv.outputs == ("r",) and conv.fused == ("silu", "a", "relu")
    assert conv.lut is LutKind.SILU and conv.lut_before_add
    g = _graph(silu=True, after=Op.SIGMOID)  # a second table: the Sigmoid stays a layer
    conv, sig = fuse_residual_adds(lower_graph(g), g, None)
    assert conv.outputs == ("z",) and conv.fused == ("silu", "a") and conv.lut is LutKind.SILU
    assert (sig.name, sig.unit, sig.inputs) == ("relu", LayerUnit.DPU, ("z",))


def test_a_plain_residual_add_is_not_lut_before_add() -> None:
    g = _graph()
    (conv,) = fuse_residual_adds(lower_graph(g), g, None)
    assert not conv.lut_before_add


def silu_block_model(size: int = 8) -> onnx.ModelProto:
    """c1 = SiLU(conv(x)); c2 = SiLU(conv(c1)); head conv of (c1 + c2): a YOLO bottleneck."""
    rng = np.random.default_rng(2)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []
    for name, x, cin in (("c1", "input", 3), ("c2", "c1", 8)):
        w = rng.normal(0, 0.3, (8, cin, 3, 3)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"{name}_w"))
        nodes += [
            helper.make_node(
                "Conv", [x, f"{name}_w"], [f"{name}_y"], kernel_shape=[3, 3], pads=[1] * 4
            ),
            helper.make_node("Sigmoid", [f"{name}_y"], [f"{name}_s"]),
            helper.make_node("Mul", [f"{name}_y", f"{name}_s"], [name]),
        ]
    inits.append(numpy_helper.from_array(rng.normal(0, 0.3, (4, 8, 1, 1)).astype(np.float32), "h"))
    nodes += [
        helper.make_node("Add", ["c1", "c2"], ["sum"]),
        helper.make_node("Conv", ["sum", "h"], ["out"], kernel_shape=[1, 1]),
    ]
    return onnx_model("bottleneck", nodes, inits, [1, 3, size, size], [1, 4, size, size])


@pytest.mark.parametrize("config", [{}, {"force_h_tiling": 4}], ids=["whole", "h_tiles4"])
def test_conv_silu_add_is_one_mvm_post_op_and_bit_exact(config: dict) -> None:
    model = aipusim.compile(silu_block_model(), config=config)
    folder = model.compiled_dir()
    tasks = [t for p in sorted(folder.glob("core*.tasklist")) for t in read_tasklist(p).tasks]
    posts = {t.post for t in tasks if isinstance(t, Mvm) and t.post in ADD_POSTS}
    assert posts == {PostOp.REQUANT_LUT_ADD}
    assert not any(isinstance(t, DpuOp) for t in tasks)  # no Add left on the DPU
    chip, how = chip_inputs(folder, None)
    check = compare(simulate(folder, frames=1, functional=True, inputs=chip), folder, chip, how)
    assert check.bit_exact, check.text()


def test_the_pass_is_in_the_back_end_and_dumps_the_fusion() -> None:
    names = [p.name for p in BACK]
    assert names.index("fuse_residual") == names.index("lower") + 1
    ctx = PassContext(CompilerConfig(), arch=ARCH)
    passes = [p for p in BACK if p.name in ("lower", "fuse_residual")]
    ir = run_pipeline(quantized_program("tiny_cnn"), ctx, passes=passes).ir
    text = ir.dump()
    assert "residual add /block/Add of /Relu_1_output_0" in text
    assert "/block/Add (Add)" not in text and "/block/Relu_1 (Relu)" not in text


def test_the_fused_mvm_reads_the_shortcut_and_no_dpu_add_is_left() -> None:
    result = compile_backend("tiny_cnn")
    check_ok(result)
    tasks = [t for ts in result.tasks.values() for t in ts]
    fused = [t for t in tasks if isinstance(t, Mvm) and t.layer == "/block/conv2/Conv"]
    last = [t for t in fused if t.post is not PostOp.NONE]
    assert last and all(t.post is PostOp.REQUANT_ADD_LUT for t in last)
    assert all(t.add_pitch == 32 and t.add_row_pitch == 16 * 32 for t in last)
    assert not any(isinstance(t, DpuOp) and t.layer in ("/block/Add", "/block/Relu_1")
                   for t in tasks)  # fmt: skip


@pytest.fixture(scope="module")
def tiny_model() -> aipusim.CompiledModel:
    return aipusim.compile("tiny_cnn")


@pytest.fixture(scope="module")
def tiny_folder(tiny_model: aipusim.CompiledModel) -> Path:
    return tiny_model.compiled_dir()  # (the model keeps its folder while it lives)


def test_the_reference_is_the_unfused_integer_program(tiny_folder: Path) -> None:
    chip, _ = chip_inputs(tiny_folder, None)
    fused = run_int8(load_reference(tiny_folder), dict(chip), raw=True)
    unfused = run_int8(quantized_program("tiny_cnn"), dict(chip), raw=True)
    assert fused.keys() == unfused.keys() == {"logits"}
    assert np.array_equal(fused["logits"], unfused["logits"])


@pytest.mark.parametrize(
    "config",
    [
        {"aipu_cores_used": 4, "multicore_mode": "cooperative", "resources_used": 1.0},
        {"aipu_cores_used": 4, "multicore_mode": "batch", "resources_used": 1.0},
        {"aipu_cores_used": 4, "multicore_mode": "pipeline", "resources_used": 1.0},
        {"force_h_tiling": 4},  # the shortcut in row tiles
    ],
    ids=["coop4", "batch4", "pipeline4", "h_tiles4"],
)
def test_fused_models_are_bit_exact(config: dict) -> None:
    model = aipusim.compile("tiny_cnn", config=config)
    folder = model.compiled_dir()
    chip, how = chip_inputs(folder, None)
    check = compare(simulate(folder, frames=1, functional=True, inputs=chip), folder, chip, how)
    assert check.bit_exact, check.text()


def test_one_core_is_bit_exact(tiny_folder: Path) -> None:
    chip, how = chip_inputs(tiny_folder, None)
    result = simulate(tiny_folder, frames=1, functional=True, inputs=chip)
    assert compare(result, tiny_folder, chip, how).bit_exact
