"""fuse_layernorm: the decomposed LayerNorm spellings become one LayerNormalization."""

from __future__ import annotations

import numpy as np
import pytest
from graph_helpers import model, node

from aipusim.compiler.importer import import_model
from aipusim.compiler.ir import Op, verify
from aipusim.compiler.passes.layernorm import fuse_layernorm
from aipusim.compiler.quant import run_fp32

D = 6
RNG = np.random.default_rng(5)


def _decomposed(*, square="pow", divide="div", affine=True, axes=(-1,), leak=False):
    nodes = [
        node("ReduceMean", ["x"], "mean", axes=list(axes), keepdims=1),
        node("Sub", ["x", "mean"], "d"),
        node("Pow", ["d", "two"], "sq") if square == "pow" else node("Mul", ["d", "d"], "sq"),
        node("ReduceMean", ["sq"], "var", axes=list(axes), keepdims=1),
        node("Add", ["var", "eps"], "ve"),
        node("Sqrt", ["ve"], "std"),
    ]
    if divide == "div":
        nodes.append(node("Div", ["d", "std"], "n" if affine else "y"))
    else:
        nodes += [node("Reciprocal", ["std"], "r"), node("Mul", ["d", "r"], "n" if affine else "y")]
    if affine:
        nodes += [node("Mul", ["n", "gamma"], "g"), node("Add", ["g", "beta"], "y")]
    outputs = ["y"]
    if leak:  # an intermediate read outside the pattern: nothing may be fused
        nodes.append(node("Relu", ["d"], "side"))
        outputs.append("side")
    inits = {
        "two": np.array(2.0, np.float32),
        "eps": np.array(1e-5, np.float32),
        "gamma": RNG.normal(1, 0.2, D).astype(np.float32),
        "beta": RNG.normal(0, 0.2, D).astype(np.float32),
    }
    return model(nodes, inits, shape=(1, 3, 4, D), outputs=outputs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"square": "mul"},
        {"divide": "reciprocal"},
        {"affine": False},
        {"axes": (-2, -1)},
    ],
)
def test_decompositions_fuse_and_compute_the_same(kwargs) -> None:
    graph = import_model(_decomposed(**kwargs))
    fused = fuse_layernorm(graph, None)
    verify(fused)
    assert [n.op for n in fused.nodes] == [Op.LAYER_NORM]
    ln = fused.nodes[0]
    assert ln.attrs["axis"] == -len(kwargs.get("axes", (-1,)))
    assert ln.attrs["epsilon"] == pytest.approx(1e-5)
    x = {"x": RNG.normal(size=(1, 3, 4, D)).astype(np.float32)}
    np.testing.assert_allclose(
        run_fp32(fused, x)["y"], run_fp32(graph, x)["y"], rtol=1e-4, atol=1e-4
    )


def test_a_shared_intermediate_or_other_axes_stay_decomposed() -> None:
    for graph in (
        import_model(_decomposed(leak=True)),
        import_model(_decomposed(axes=(1,))),  # not the trailing axes
    ):
        assert fuse_layernorm(graph, None) is graph
