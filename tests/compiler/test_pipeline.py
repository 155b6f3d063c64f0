"""The pass pipeline: order, knobs, dumps, verify after every pass, zoo models end to end."""

from __future__ import annotations

import numpy as np
import pytest
from zoo_compiles import zoo_model

from aipusim.base.errors import ConfigError, OnnxImportError, UnsupportedOperatorError
from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.ir import Graph
from aipusim.compiler.passes.cleaner import run_split
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.pipeline import (
    FRONT,
    IMPORT,
    PIPELINE,
    pass_names,
    run_pipeline,
    verify_ir,
)
from aipusim.compiler.quant.quantize import QuantizedGraph

FLOAT_FRONT = [p for p in FRONT if p.name != "quantize"]


def test_front_order_is_the_design_order() -> None:
    assert pass_names(FRONT) == [
        IMPORT,
        "rewrite_einsum",
        "fuse_layernorm",
        "fuse_gelu",
        "fuse_attention_mask",
        "graph_cleaner",
        "fold_constants",
        "fold_batchnorm",
        "arithmetic_simplification",
        "decompose_prelu",
        "check_operators",
        "quantize",
        "rewrite_dense_to_conv2d",
        "place_concat",
        "rewrite_concat_to_resadd",
        "apply_pword_padding",
        "simplify_mac_before_after_lut",
        "validate_operators",
    ]
    assert PIPELINE[: len(FRONT)] == FRONT


def run(model, *, passes=FRONT, shape=None, layout="NCHW", **config):
    ctx = PassContext(CompilerConfig(**config), input_layout=layout)
    seen: dict[str, Graph] = {}

    def after(name: str, ir: object) -> None:
        verify_ir(ir)
        seen[name] = ir

    result = run_pipeline(model, ctx, input_shape=shape, passes=passes, after_pass=after)
    return result, seen


BUILDS = [
    ("conv_bn_relu", {}, None, "NCHW"),
    ("classifier", {}, None, "NCHW"),
    ("residual_concat", {}, None, "NCHW"),
    ("constant_weights", {"dynamic": True}, (2, 3, 8, 8), "NCHW"),
    ("nhwc_preprocess", {}, (1, 16, 16, 3), "NHWC"),
    ("detector", {"nms": True}, None, "NCHW"),
    ("opset11", {}, None, "NCHW"),
]


@pytest.mark.parametrize(("name", "kwargs", "shape", "layout"), BUILDS)
def test_every_pass_keeps_the_ir_valid_and_the_float_model_exact(
    onnx_models, name, kwargs, shape, layout
) -> None:
    model = getattr(onnx_models, name)(**kwargs)
    result, seen = run(model, passes=FLOAT_FRONT, shape=shape, layout=layout)
    assert list(seen) == pass_names(FLOAT_FRONT)
    ctx = result.context
    first = model.graph.input[0].name
    feeds = onnx_models.random_feeds(model, seed=1, shapes={first: shape} if shape else None)
    ref = onnx_models.run_model(model, feeds)
    pre, post = ctx.host_graphs.get("preprocess"), ctx.host_graphs.get("postprocess")
    whole = True  # until the graph cleaner has cut off the host's parts
    for pass_name, graph in seen.items():
        whole = whole and pass_name != "graph_cleaner"
        if pass_name == IMPORT:
            continue
        got = run_split([graph] if whole else [pre, graph, post], list(ref), feeds)
        for key, value in ref.items():
            np.testing.assert_allclose(
                got[key], value, rtol=1e-4, atol=1e-4, err_msg=f"after {pass_name}"
            )


@pytest.mark.parametrize("name", ["classifier", "residual_concat", "detector"])
def test_full_front_with_quantizer_verifies(onnx_models, name: str) -> None:
    result, seen = run(getattr(onnx_models, name)())
    assert list(seen) == pass_names(FRONT)
    assert result.graph.tensor(result.graph.nodes[0].outputs[0]).quant is not None
    # the rewrites after quantization keep an integer step for every node
    assert isinstance(result.ir, QuantizedGraph)
    assert {n.name for n in result.ir.graph.nodes} == set(result.ir.steps)


def test_knobs_switch_passes_off(onnx_models) -> None:
    result, seen = run(
        onnx_models.residual_concat(),
        passes=FLOAT_FRONT,
        rewrite_concat_to_resadd=False,
        apply_pword_padding=False,
        validate_operators=False,
    )
    assert "Concat" in result.graph.ops() and "Pad" not in result.graph.ops()
    skipped = {r.name: r.note for r in result.records if not r.ran}
    assert skipped == {
        "check_operators": "switched off",
        "rewrite_concat_to_resadd": "switched off",
        "apply_pword_padding": "switched off",
        "validate_operators": "switched off",
    }
    assert "apply_pword_padding" not in seen
    assert all(r.seconds >= 0 for r in result.records)
    assert set(result.pass_seconds) == set(seen)


def test_dump_and_stop_after(onnx_models) -> None:
    ctx = PassContext(CompilerConfig())
    result = run_pipeline(
        onnx_models.classifier(),
        ctx,
        passes=FLOAT_FRONT,
        dump_after={"import", "fold_batchnorm"},
        stop_after="fold_batchnorm",
    )
    assert set(result.dumps) == {"import", "fold_batchnorm"}
    assert "BatchNormalization" in result.dumps["import"]
    assert "BatchNormalization" not in result.dumps["fold_batchnorm"]
    assert [r.name for r in result.records][-1] == "fold_batchnorm"
    everything = run_pipeline(
        onnx_models.classifier(),
        PassContext(CompilerConfig()),
        dump_after={"all"},
        passes=FLOAT_FRONT,
    )
    assert list(everything.dumps) == pass_names(FLOAT_FRONT)


def test_unknown_pass_names_are_config_errors(onnx_models) -> None:
    with pytest.raises(ConfigError, match=r"dump_after must name passes .* not fold_bn"):
        run_pipeline(
            onnx_models.classifier(), PassContext(CompilerConfig()), dump_after={"fold_bn"}
        )
    with pytest.raises(ConfigError, match="stop_after must name passes"):
        run_pipeline(
            onnx_models.classifier(), PassContext(CompilerConfig()), stop_after="no_such_pass"
        )


def test_failures_record_pass_and_status(onnx_models) -> None:
    ctx = PassContext(CompilerConfig())
    with pytest.raises(OnnxImportError):
        run_pipeline(onnx_models.constant_weights(dynamic=True), ctx)
    assert (ctx.failed_pass, ctx.failed_status) == ("import", "ONNX_GRAPH_CLEANER_ERROR")
    ctx = PassContext(CompilerConfig(run_graph_cleaner=False, apply_pword_padding=False))
    passes = [p for p in FLOAT_FRONT if p.name != "graph_cleaner"]
    with pytest.raises(UnsupportedOperatorError):
        run_pipeline(onnx_models.detector(nms=True), ctx, passes=passes)
    assert (ctx.failed_pass, ctx.failed_status) == ("check_operators", "LOWER_FRONTEND_ERROR")
    assert [r.name for r in ctx.records][-1] == "decompose_prelu"


#: Zoo models of the fast test (building the big ones takes seconds each; all of them run
#: in the slow test).
FAST_ZOO = ("tiny_cnn", "mobilenetv2", "yolov5s", "yolov8n")


def _zoo_front(name: str):
    model = zoo_model(name, 64)
    result, seen = run(model, passes=FLOAT_FRONT)
    assert list(seen) == pass_names(FLOAT_FRONT), name
    return result, seen


def test_zoo_models_pass_the_front_half() -> None:
    for name in FAST_ZOO:
        result, _ = _zoo_front(name)
        assert "BatchNormalization" not in result.graph.ops(), name
        if name.startswith("yolo"):
            post = result.context.host_graphs["postprocess"]
            assert "Sigmoid" in post.ops() and "Concat" in post.ops(), name


@pytest.mark.slow
def test_zoo_models_front_half_is_float_exact() -> None:
    """Every zoo model: verify after each pass, and pre -> core -> post == the import."""
    zoo = pytest.importorskip("aipusim.zoo")
    for name in zoo.names():
        result, seen = _zoo_front(name)
        ctx = result.context
        imported = seen[IMPORT]
        x = np.random.default_rng(0).normal(size=imported.shape(imported.inputs[0]))
        feeds = {imported.inputs[0]: x.astype(np.float32)}
        ref = run_split([imported], imported.outputs, feeds)
        pre, post = ctx.host_graphs.get("preprocess"), ctx.host_graphs.get("postprocess")
        got = run_split([pre, result.graph, post], list(ref), feeds)
        for key, value in ref.items():
            scale = float(np.max(np.abs(value))) or 1.0
            assert float(np.max(np.abs(got[key] - value))) <= 1e-4 * scale, (name, key)
