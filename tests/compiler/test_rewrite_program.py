"""The rewrites after quantization keep the integer program: the int8 reference of the
rewritten graph is what the AIPU must compute, and where a rewrite is exact in integers it
computes the same int8 outputs as before it."""

from __future__ import annotations

import functools
import gc
import weakref

import numpy as np
import pytest
from zoo_compiles import zoo_model

from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.ir import PLACE_PARTS_ATTR, Op
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.passes.rewrite import mac_around_lut, pword_padding
from aipusim.compiler.pipeline import FRONT, run_pipeline
from aipusim.compiler.quant import run_int8
from aipusim.compiler.quant.quantize import QuantizedGraph

SIDE = {"yolov5s": 64, "yolov8n": 64}
#: the rewrites that must not change one int8 value
EXACT = (
    "rewrite_dense_to_conv2d",
    "place_concat",
    "rewrite_concat_to_resadd",
    "apply_pword_padding",
)


@functools.cache  # two tests read the same models' programs; each costs a calibration
def _programs(name: str, **knobs: bool) -> tuple[QuantizedGraph, QuantizedGraph]:
    ctx = PassContext(CompilerConfig(**knobs))
    result = run_pipeline(zoo_model(name, SIDE.get(name, 32)), ctx, passes=FRONT)
    assert isinstance(result.ir, QuantizedGraph)
    return ctx.results["quantize"]["qgraph"], result.ir


def _inputs(q: QuantizedGraph) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {n: rng.standard_normal(q.graph.shape(n)).astype(np.float32) for n in q.graph.inputs}


@pytest.mark.parametrize("name", ["tiny_cnn", "resnet18", "mobilenetv2", "yolov5s", "deit_tiny"])
def test_exact_rewrites_keep_every_int8_output(name: str) -> None:
    before, after = _programs(name, simplify_mac_before_after_lut=False)
    x = _inputs(before)
    want = run_int8(before, x, raw=True)
    got = run_int8(after, x, raw=True)
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def test_every_exact_rewrite_ran_on_these_models() -> None:
    _, after = _programs("yolov5s", simplify_mac_before_after_lut=False)
    ops = after.graph.ops()
    pads = [n.name for n in after.graph.nodes if n.op is Op.PAD]
    assert pads and all(p.endswith("/pword_pad") for p in pads)  # no concat pads; pword pads
    concats = [n for n in after.graph.nodes if n.op is Op.CONCAT]
    assert len(concats) == ops["Concat"] and all(n.attr(PLACE_PARTS_ATTR) for n in concats)
    _, dense = _programs("deit_tiny", simplify_mac_before_after_lut=False)
    assert "MatMul" in dense.graph.ops() and "Conv" in dense.graph.ops()  # dense -> 1x1 conv


def test_folding_affine_steps_into_a_table_rounds_once_but_agrees_closely() -> None:
    before, after = _programs("efficientnet_b0")
    x = _inputs(before)
    want = run_int8(before, x)
    got = run_int8(after, x)
    for k in want:
        err = np.abs(got[k] - want[k]).max()
        spread = np.abs(want[k]).max()
        assert err <= 0.05 * spread, (k, err, spread)


def test_a_rewrite_runs_once_per_quantized_graph_and_keeps_no_graph_alive() -> None:
    ctx = PassContext(CompilerConfig())
    q = run_pipeline(zoo_model("tiny_cnn", 16), ctx, passes=FRONT, stop_after="quantize").ir
    ctx.results.clear()
    assert isinstance(q, QuantizedGraph)
    padded = pword_padding(q, ctx)
    # a warm compile's program is the very object of the compile before
    assert padded is not q and pword_padding(q, PassContext(CompilerConfig())) is padded
    assert mac_around_lut(q, ctx) is q  # nothing to fold: the graph itself, not a copy
    graphs = [weakref.ref(q), weakref.ref(padded)]
    del q, padded
    gc.collect()
    assert [g() for g in graphs] == [None, None]
