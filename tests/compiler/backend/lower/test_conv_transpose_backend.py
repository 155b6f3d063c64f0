"""ConvTranspose through the back end: its MVM mapping, and the whole compile + simulate.

The MVM runs a stride-s ConvTranspose as a stride-1 conv over the zero-upsampled input:
R = kh*kw*Cin weight rows, Cout columns, one input vector per output pixel.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from backend_helpers import ARCH, COST, check_ok
from onnx import TensorProto, helper, numpy_helper

from aipusim.cli.main import main
from aipusim.compiler import CompilerConfig
from aipusim.compiler.backend.imc.mapper import ImcOptions, map_layer
from aipusim.compiler.backend.lower.layer import LayerUnit
from aipusim.compiler.backend.lower.units import lower_graph
from aipusim.compiler.backend.run import run_backend
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.pipeline import FRONT, run_pipeline
from aipusim.simulator import simulate


def ct_model(size: int = 16) -> onnx.ModelProto:
    """Conv(3->16) -> Relu -> ConvTranspose(16->8, k4, s2, p1) -> Relu -> Conv(8->4)."""
    rng = np.random.default_rng(0)
    inits: list[onnx.TensorProto] = []

    def const(name: str, shape: tuple[int, ...], std: float) -> str:
        inits.append(numpy_helper.from_array(rng.normal(0, std, shape).astype(np.float32), name))
        return name

    nodes = [
        helper.make_node(
            "Conv",
            ["input", const("w1", (16, 3, 3, 3), 0.27), const("b1", (16,), 0.1)],
            ["a"],
            kernel_shape=[3, 3],
            pads=[1] * 4,
        ),
        helper.make_node("Relu", ["a"], ["a_relu"]),
        helper.make_node(
            "ConvTranspose",
            ["a_relu", const("w2", (16, 8, 4, 4), 0.18), const("b2", (8,), 0.1)],
            ["t"],
            kernel_shape=[4, 4],
            strides=[2, 2],
            pads=[1] * 4,
        ),
        helper.make_node("Relu", ["t"], ["t_relu"]),
        helper.make_node(
            "Conv",
            ["t_relu", const("w3", (4, 8, 3, 3), 0.17), const("b3", (4,), 0.1)],
            ["out"],
            kernel_shape=[3, 3],
            pads=[1] * 4,
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "ct",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 2 * size, 2 * size])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


@pytest.fixture(scope="module")
def front() -> object:
    """The model after the front passes (float: the back end needs only shapes)."""
    ctx = PassContext(CompilerConfig(), arch=ARCH)
    passes = [p for p in FRONT if p.name != "quantize"]
    return run_pipeline(ct_model(), ctx, passes=passes).graph


def test_lowered_like_a_conv_over_the_upsampled_input(front) -> None:
    plan = next(p for p in lower_graph(front) if p.op == "ConvTranspose")
    geo = plan.geometry
    assert plan.unit is LayerUnit.MVM and plan.fused  # the Relu rides on the output stream
    assert (geo.cin, geo.cout, geo.kh, geo.kw) == (16, 8, 4, 4)
    assert (geo.stride_h, geo.stride_w, geo.out_h, geo.out_w) == (1, 1, 32, 32)
    assert (geo.in_h, geo.in_w) == (32 + 3, 32 + 3)  # upsampled, bordered for a 4-tap window
    assert plan.macs == 32 * 32 * 8 * 4 * 4 * 16
    m = map_layer(geo, COST, ImcOptions(enable_icr=False), first_layer=False)
    pword = ARCH.mvm.pword_channels
    assert m.rows_needed == 4 * 4 * (-(-16 // pword) * pword)  # every tap of every channel
    assert m.vectors == 32 * 32


@pytest.mark.parametrize("h_tiles", [1, 4])
def test_backend_tasklists_pass_the_checker(front, h_tiles: int) -> None:
    result = run_backend(front, CompilerConfig(force_h_tiling=h_tiles), ARCH)
    check_ok(result)


def test_compile_and_simulate_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``aipusim compile``: import -> quantize -> back end -> tasklists, then simulate."""
    model = tmp_path / "ct.onnx"
    onnx.save(ct_model(), model)
    out = tmp_path / "out"
    assert main(["compile", "-i", str(model), "-o", str(out)]) == 0
    capsys.readouterr()
    quant = out / "quantized_model"
    assert quant.is_dir() and any(quant.iterdir())
    compiled = out / "compiled_model"
    assert sorted(p.name for p in compiled.glob("core*.tasklist"))
    result = simulate(compiled, frames=2)
    latency = np.asarray(result.device_latency_cycles)
    assert latency.shape == (2,) and np.all(latency > 0)
