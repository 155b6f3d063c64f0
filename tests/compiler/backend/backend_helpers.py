"""Helpers of the back-end tests: zoo graphs through the front passes (without the slow
quantizer: the back end needs only shapes and int8 sizes) and a one-call back end."""

from __future__ import annotations

import functools
import itertools
from typing import Any

import aipusim.zoo as zoo
from aipusim.arch import Arch, load_arch
from aipusim.compiler import CompilerConfig
from aipusim.compiler.backend.ir import Emitted
from aipusim.compiler.backend.run import run_backend
from aipusim.compiler.ir import Graph
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
    model = zoo.build(name, input_size=size) if size else zoo.build(name)
    ctx = PassContext(CompilerConfig(), arch=ARCH)
    passes = [p for p in FRONT if p.name != "quantize"]
    return run_pipeline(model, ctx, passes=passes).graph


@functools.cache
def quantized_program(name: str, size: int | None = None) -> Any:
    """A zoo model through every front pass, quantization included: its integer program
    (cached per size)."""
    model = zoo.build(name, input_size=size) if size else zoo.build(name)
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
