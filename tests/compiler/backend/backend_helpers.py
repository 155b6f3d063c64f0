"""Helpers of the back-end tests: zoo graphs through the front passes (without the slow
quantizer: the back end needs only shapes and int8 sizes) and a one-call back end."""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper
from zoo_compiles import zoo_model

from aipusim.arch import Arch, load_arch
from aipusim.compiler import CompilerConfig
from aipusim.compiler.backend.common.ir import Emitted
from aipusim.compiler.backend.run import run_backend
from aipusim.compiler.ir import Graph, Node, Op, Tensor
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.pipeline import FRONT, run_pipeline
from aipusim.isa.check import check_tasklists
from aipusim.isa.cost import cost_model
from aipusim.isa.tasklist import Tasklist

ARCH = load_arch()
#: The cost model at the default clock and utilization limit (what the IMC mapper asks).
COST = cost_model(ARCH)


@functools.cache
def front_graph(name: str, size: int | None = None) -> Graph:
    """A zoo model after every front pass except quantization (cached per size)."""
    model = zoo_model(name, size or None)  # built once per session, shared by the workers
    ctx = PassContext(CompilerConfig(), arch=ARCH)
    passes = [p for p in FRONT if p.name != "quantize"]
    return run_pipeline(model, ctx, passes=passes).graph


@functools.cache
def quantized_program(name: str, size: int | None = None) -> Any:
    """A zoo model through every front pass, quantization included: its integer program
    (cached per size)."""
    model = zoo_model(name, size or None)
    ctx = PassContext(CompilerConfig(), arch=ARCH)
    return run_pipeline(model, ctx, passes=FRONT).ir


def compile_backend(
    name: str = "tiny_cnn", size: int | None = None, *, arch: Arch = ARCH, **config: Any
) -> Emitted:
    """The back end of zoo model ``name`` under the given config properties."""
    return run_backend(front_graph(name, size), CompilerConfig(**config), arch)


def check_ok(result: Emitted) -> None:
    """The ISA checker accepts the result's tasklists (tokens balance, no deadlock)."""
    report = check_tasklists([Tasklist(c, tuple(t)) for c, t in result.tasks.items()], ARCH)
    assert report.ok, [p.message for p in report.errors][:3]


def conv_chain(channels: list[int], side: int) -> Graph:
    """1x1 convolutions ``channels[0] -> channels[1] -> ...`` on a ``side`` x ``side``
    image, zero weights (layers ``c0``, ``c1``, ...)."""
    import numpy as np

    from aipusim.compiler.ir import Node, Op, Tensor

    nodes, consts = [], {}
    tensors = {"x0": Tensor("x0", (1, channels[0], side, side))}
    for i, (cin, cout) in enumerate(itertools.pairwise(channels)):
        w = np.zeros((cout, cin, 1, 1), np.float32)
        attrs = {"kernel_shape": [1, 1]}
        nodes.append(Node(f"c{i}", Op.CONV, (f"x{i}", f"w{i}"), (f"x{i + 1}",), attrs))
        tensors[f"w{i}"], consts[f"w{i}"] = Tensor(f"w{i}", w.shape), w
        tensors[f"x{i + 1}"] = Tensor(f"x{i + 1}", (1, cout, side, side))
    n = len(channels) - 1
    return Graph("chain", tuple(nodes), tensors, consts, ("x0",), (f"x{n}",))


def onnx_model(name: str, nodes: list, inits: list, in_shape: list, out_shape: list) -> Any:
    """An opset-17 ONNX model of ``nodes`` from float input ``input`` to output ``out``."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, in_shape)],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, out_shape)],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def halo_graph(side: int, channels: int) -> Graph:
    """A 1x1 conv ``c0`` then a 3x3 conv ``c1`` (padding 1) on a ``side`` x ``side`` image
    of ``channels`` channels: ``c1``'s window reads one row above and below its rows."""
    nodes, consts = [], {}
    tensors = {"x0": Tensor("x0", (1, channels, side, side))}
    for i, k in enumerate((1, 3)):
        w = np.zeros((channels, channels, k, k), np.float32)
        attrs = {"kernel_shape": [k, k], "pads": [k // 2] * 4}
        nodes.append(Node(f"c{i}", Op.CONV, (f"x{i}", f"w{i}"), (f"x{i + 1}",), attrs))
        tensors[f"w{i}"], consts[f"w{i}"] = Tensor(f"w{i}", w.shape), w
        tensors[f"x{i + 1}"] = Tensor(f"x{i + 1}", (1, channels, side, side))
    return Graph("halo", tuple(nodes), tensors, consts, ("x0",), ("x2",))


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
