"""fuse_gelu: GELU in element-wise ops (erf form, tanh approximation) -> one Gelu."""

from __future__ import annotations

import math

import numpy as np
import pytest
from graph_helpers import model, node

from aipusim.compiler.importer import import_model
from aipusim.compiler.ir import Op, verify
from aipusim.compiler.passes.gelu import fuse_gelu
from aipusim.compiler.quant import run_fp32

C = {
    "sqrt2": np.array(math.sqrt(2.0), np.float32),
    "rsqrt2": np.array(1 / math.sqrt(2.0), np.float32),
    "one": np.array(1.0, np.float32),
    "half": np.array(0.5, np.float32),
    "three": np.array(3.0, np.float32),
    "c": np.array(0.044715, np.float32),
    "k": np.array(math.sqrt(2.0 / math.pi), np.float32),
    "w": np.random.default_rng(0).normal(size=(4, 4, 1, 1)).astype(np.float32),
}
# x comes from a Conv so that the region's source is an inner tensor, as in a network
SPELLINGS = {
    "erf_div_half_last": [
        node("Div", ["x", "sqrt2"], "a"),
        node("Erf", ["a"], "e"),
        node("Add", ["e", "one"], "p"),
        node("Mul", ["x", "p"], "m"),
        node("Mul", ["m", "half"], "y"),
    ],
    "erf_mul_half_first": [
        node("Mul", ["x", "rsqrt2"], "a"),
        node("Erf", ["a"], "e"),
        node("Add", ["one", "e"], "p"),
        node("Mul", ["half", "x"], "h"),
        node("Mul", ["h", "p"], "y"),
    ],
    "tanh_pow": [
        node("Pow", ["x", "three"], "x3"),
        node("Mul", ["x3", "c"], "cx3"),
        node("Add", ["x", "cx3"], "i"),
        node("Mul", ["i", "k"], "a"),
        node("Tanh", ["a"], "t"),
        node("Add", ["t", "one"], "p"),
        node("Mul", ["x", "half"], "h"),
        node("Mul", ["h", "p"], "y"),
    ],
    "tanh_mul_mul": [
        node("Mul", ["x", "x"], "x2"),
        node("Mul", ["x2", "x"], "x3"),
        node("Mul", ["c", "x3"], "cx3"),
        node("Add", ["cx3", "x"], "i"),
        node("Mul", ["k", "i"], "a"),
        node("Tanh", ["a"], "t"),
        node("Add", ["one", "t"], "p"),
        node("Mul", ["p", "x"], "m"),
        node("Mul", ["m", "half"], "y"),
    ],
}


def _graph(nodes):
    conv = node("Conv", ["inp", "w"], "x")
    m = model([conv, *nodes], C, shape=(1, 4, 3, 3))
    m.graph.input[0].name = "inp"
    return import_model(m)


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_spellings_fuse_into_one_gelu(spelling) -> None:
    graph = _graph(SPELLINGS[spelling])
    fused = fuse_gelu(graph, None)
    verify(fused)
    assert [n.op for n in fused.nodes] == [Op.CONV, Op.GELU]
    gelu = fused.nodes[1]
    assert gelu.inputs == ("x",) and gelu.outputs == ("y",)
    assert gelu.attrs["approximate"] == ("tanh" if spelling.startswith("tanh") else "none")
    feeds = {"inp": np.random.default_rng(1).normal(0, 2, (1, 4, 3, 3)).astype(np.float32)}
    np.testing.assert_allclose(
        run_fp32(fused, feeds)["y"], run_fp32(graph, feeds)["y"], rtol=1e-5, atol=1e-5
    )


def test_something_else_around_an_erf_stays() -> None:
    nodes = [  # 0.5 x (1 + erf(x)): not GELU (no 1/sqrt 2)
        node("Erf", ["x"], "e"),
        node("Add", ["e", "one"], "p"),
        node("Mul", ["x", "p"], "m"),
        node("Mul", ["m", "half"], "y"),
    ]
    graph = _graph(nodes)
    assert fuse_gelu(graph, None) is graph
