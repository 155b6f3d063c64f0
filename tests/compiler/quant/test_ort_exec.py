"""Calibration in onnxruntime against the numpy float executor as the oracle.

The two executors sum in different orders, so their float32 activations differ in the last
bits. The chosen parameters should not: every scale and zero point should be the numpy
executor's, and so the int8 reference outputs, bit for bit. `compare_executors` checks that,
and names each tensor where they differ with its cause, which must be one of two:

- a *straddle*: the raw range extremes are within float noise of each other but on two
  sides of a `snap_range` grid point;
- a *near-tie* of the histogram observer's MSE search: under the oracle's own histogram
  the onnxruntime range costs at most `NEAR_TIE_REL` more than the oracle's choice (the
  two ranges are equally good; which one wins is decided by float noise).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
from zoo_compiles import zoo_model

import aipusim.zoo as zoo
from aipusim.base.errors import QuantizationError
from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.ir import Graph, Node, Op, Tensor
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.pipeline import run_pipeline
from aipusim.compiler.quant.data import random_calibration
from aipusim.compiler.quant.float_exec import run_fp32
from aipusim.compiler.quant.observers import HistogramObserver, range_cost
from aipusim.compiler.quant.ort_exec import OrtFloatSession
from aipusim.compiler.quant.quantize import (
    ObservedRange,
    QuantizedGraph,
    observe_ranges,
    quantize_graph,
)
from aipusim.compiler.quant.reference import run_int8
from aipusim.compiler.quant.scheme import Scheme

#: How far apart (relative) the two executors' raw range extremes may be: float32 rounding
#: noise grown over a network's depth (measured up to ~1e-5 over the zoo).
FLOAT_NOISE_REL = 1e-4
#: A near-tie: the other range's estimated MSE is within 0.1 % of the optimum (0.004 dB).
NEAR_TIE_REL = 1e-3


def _float_graph(name: str, size: int | None = None) -> Graph:
    model = zoo_model(name, size)
    return run_pipeline(model, PassContext(CompilerConfig()), stop_after="check_operators").graph


@dataclass
class Comparison:
    """Tensors whose parameters differ between the executors, each with its cause
    (``straddle`` or ``near-tie``), and how the int8 reference outputs compare."""

    observed: int = 0
    differences: dict[str, str] = field(default_factory=dict)
    int8_identical: bool = True


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.all(np.abs(a - b) <= FLOAT_NOISE_REL * np.maximum(np.abs(a), np.abs(b))))


def _cause(want: ObservedRange, got: ObservedRange) -> str:
    """Why two observed ranges give different parameters (fails if neither cause holds)."""
    assert not want.fixed
    if _close(want.lo, got.lo) and _close(want.hi, got.hi):
        return "straddle"
    obs = want.observer
    assert isinstance(obs, HistogramObserver), (
        f"range [{want.lo}, {want.hi}] vs [{got.lo}, {got.hi}]"
    )
    edges = obs.edges()
    best = range_cost(obs.counts, edges, float(want.lo), float(want.hi))
    other = range_cost(obs.counts, edges, float(got.lo), float(got.hi))
    assert other <= best * (1 + NEAR_TIE_REL), (
        f"range [{want.lo}, {want.hi}] vs [{got.lo}, {got.hi}]: MSE {other / best - 1:.2e} above"
    )
    return "near-tie"


def compare_executors(graph: Graph, scheme: Scheme = Scheme.PER_TENSOR_HISTOGRAM) -> Comparison:
    data = random_calibration({n: graph.shape(n) for n in graph.inputs}, held_aside=2)
    _, oracle = observe_ranges(graph, data, scheme, executor="numpy")
    _, fast = observe_ranges(graph, data, scheme, executor="onnxruntime")
    assert oracle.keys() == fast.keys()
    out = Comparison(observed=len(oracle))
    for name, want in oracle.items():
        if want.qparams() != fast[name].qparams():
            out.differences[name] = _cause(want, fast[name])
    qa = quantize_graph(graph, data, scheme=scheme, executor="numpy")
    qb = quantize_graph(graph, data, scheme=scheme, executor="onnxruntime")
    out.int8_identical = _same_int8(qa, qb, data.held_aside)
    if not out.differences:
        for t in qa.graph.tensors:
            assert qa.graph.tensor(t).quant == qb.graph.tensor(t).quant, t
        assert out.int8_identical
    return out


def _same_int8(qa: QuantizedGraph, qb: QuantizedGraph, samples: tuple) -> bool:
    for sample in samples:
        ra, rb = run_int8(qa, sample, raw=True), run_int8(qb, sample, raw=True)
        if any(not np.array_equal(ra[k], rb[k]) for k in ra):
            return False
    return True


def test_session_matches_the_numpy_executor_to_float_rounding() -> None:
    graph = _float_graph("tiny_cnn")
    sample = random_calibration({n: graph.shape(n) for n in graph.inputs}, samples=1).samples[0]
    want = run_fp32(graph, sample, keep_all=True)
    names = [n.outputs[0] for n in graph.nodes]
    got = OrtFloatSession(graph, [*graph.inputs, *names]).run(sample)
    assert set(got) == {*graph.inputs, *names}
    for name in got:
        np.testing.assert_allclose(
            got[name], want[name], rtol=1e-4, atol=1e-5 * abs(want[name]).max()
        )


def test_run_all_gives_each_samples_run_in_order() -> None:
    """The worker thread computing the next sample changes nothing: the same values, in
    calibration order; a failing sample still raises `QuantizationError` by name."""
    graph = _float_graph("tiny_cnn")
    data = random_calibration({n: graph.shape(n) for n in graph.inputs}, samples=3)
    names = [n.outputs[0] for n in graph.nodes]
    session = OrtFloatSession(graph, names)
    got = list(session.run_all(data.samples))
    assert len(got) == 3
    for sample, values in zip(data.samples, got, strict=True):
        want = session.run(sample)
        assert all(np.array_equal(values[k], want[k]) for k in want)
    bad = [data.samples[0], {k: v[..., :1] for k, v in data.samples[1].items()}]
    with pytest.raises(QuantizationError, match="must have shape"):
        list(session.run_all(bad))


def test_session_names_a_wrong_input_shape() -> None:
    g = Graph(
        "g",
        (Node("r", Op.RELU, ("x",), ("y",)),),
        {n: Tensor(n, (2,)) for n in "xy"},
        {},
        ("x",),
        ("y",),
    )
    with pytest.raises(QuantizationError, match=r"input x must have shape \(2,\), not \(3,\)"):
        OrtFloatSession(g, ["y"]).run({"x": np.zeros(3, np.float32)})


def test_session_that_observes_only_inputs_runs_nothing() -> None:
    # onnxruntime takes an empty list of output names for "every output"; a graph whose
    # observed tensors are all inputs (x -> Expand to its own shape -> y) must not zip those
    g = Graph("g", (Node("r", Op.RELU, ("x",), ("y",)),), {n: Tensor(n, (2,)) for n in "xy"},
              {}, ("x",), ("y",))  # fmt: skip
    got = OrtFloatSession(g, ["x"]).run({"x": np.array([-1.0, 2.0], np.float32)})
    assert list(got) == ["x"] and got["x"].tolist() == [-1.0, 2.0]


def test_tiny_cnn_same_parameters_and_int8_outputs_as_numpy() -> None:
    result = compare_executors(_float_graph("tiny_cnn"))
    assert result.differences == {} and result.int8_identical


@pytest.mark.parametrize(
    "scheme", [Scheme.PER_TENSOR_MIN_MAX, Scheme.HYBRID_PER_TENSOR_PER_CHANNEL]
)
def test_tiny_cnn_other_schemes(scheme: Scheme) -> None:
    assert compare_executors(_float_graph("tiny_cnn"), scheme).differences == {}


def test_mobilenetv2_small_same_parameters_and_int8_outputs_as_numpy() -> None:
    result = compare_executors(_float_graph("mobilenetv2", 32))
    assert result.differences == {} and result.int8_identical


@pytest.mark.slow
@pytest.mark.parametrize("name", zoo.names())
def test_zoo_onnxruntime_calibration_against_numpy(name: str) -> None:
    """Every difference is a straddle or a near-tie (checked in `compare_executors`)."""
    result = compare_executors(_float_graph(name))
    print(
        f"\n{name}: {len(result.differences)} of {result.observed} ranges differ "
        f"{result.differences}; int8 outputs identical: {result.int8_identical}"
    )
