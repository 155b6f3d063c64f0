"""Graph cleaner: host pre/post-processing split off; pre -> core -> post == full model."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from aipusim.base.errors import OnnxImportError
from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.export import run_onnx, to_onnx
from aipusim.compiler.importer import import_model
from aipusim.compiler.ir import DATA_DEPENDENT_OPS, Op, verify
from aipusim.compiler.passes.cleaner import graph_cleaner, run_split
from aipusim.compiler.passes.context import PassContext


def clean(model, *, shape=None, layout="NCHW", **config):
    graph = import_model(model, input_shape=shape, layout=layout)
    ctx = PassContext(CompilerConfig(**config), input_layout=layout)
    core = graph_cleaner(graph, ctx)
    verify(core)
    for part in ctx.host_graphs.values():
        verify(part)
    return graph, core, ctx


def assert_split_reproduces(onnx_models, model, ctx, core, shape=None) -> None:
    """pre -> core -> post reproduces the model, with the host parts run from the ONNX
    files the cleaner wrote (``preprocess.onnx`` / ``postprocess.onnx``)."""
    first = model.graph.input[0].name
    feeds = onnx_models.random_feeds(model, seed=3, shapes={first: shape} if shape else None)
    ref = onnx_models.run_model(model, feeds)
    parts = [ctx.host_graphs.get("preprocess"), core, ctx.host_graphs.get("postprocess")]
    got = run_split(parts, list(ref), feeds)
    env = dict(feeds)
    for key in ("preprocess", None, "postprocess"):
        if key is None:
            env.update(run_split([core], core.outputs, {i: env[i] for i in core.inputs}))
        elif key in ctx.host_graphs:
            proto = to_onnx(ctx.files[f"{key}.onnx"])
            onnx.checker.check_model(proto)
            names = [i.name for i in proto.graph.input]
            env.update(run_onnx(proto, {i: env[i] for i in names}))
    for key, value in ref.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(env[key], value, rtol=1e-5, atol=1e-5)


def test_softmax_at_the_output_goes_to_the_host(onnx_models) -> None:
    model = onnx_models.classifier()
    _graph, core, ctx = clean(model)
    post = ctx.host_graphs["postprocess"]
    assert post.ops() == {"Softmax": 1}
    assert "Softmax" not in core.ops() and "Gemm" in core.ops()
    assert "preprocess" not in ctx.host_graphs
    assert post.inputs == core.outputs
    assert_split_reproduces(onnx_models, model, ctx, core)


@pytest.mark.parametrize("nms", [False, True])
def test_detector_box_decoding_goes_to_the_host(onnx_models, nms: bool) -> None:
    model = onnx_models.detector(nms=nms)
    graph, core, ctx = clean(model)
    assert set(core.ops()) == {"Conv", "Relu"}
    post = ctx.host_graphs["postprocess"]
    assert {"Sigmoid", "Exp", "Concat", "Transpose", "Reshape"} <= set(post.ops())
    assert not any(n.op in DATA_DEPENDENT_OPS for n in core.nodes)
    assert post.outputs == graph.outputs
    assert_split_reproduces(onnx_models, model, ctx, core)


def test_nhwc_preprocessing_goes_to_the_host(onnx_models) -> None:
    model = onnx_models.nhwc_preprocess()
    _graph, core, ctx = clean(model, shape=(1, 16, 16, 3), layout="NHWC")
    pre = ctx.host_graphs["preprocess"]
    assert pre.ops() == {"Cast": 1, "Div": 2, "Sub": 1, "Transpose": 1}
    (core_input,) = core.inputs
    assert core.shape(core_input) == (1, 3, 16, 16)
    assert core.tensor(core_input).dtype == "float32"
    assert ctx.results["graph_cleaner"]["core_inputs"] == [core_input]
    assert_split_reproduces(onnx_models, model, ctx, core, shape=(1, 16, 16, 3))


def test_layout_transpose_stays_when_the_sdk_does_not_handle_it(onnx_models) -> None:
    model = onnx_models.nhwc_preprocess(dynamic=False)
    _, core, ctx = clean(
        model,
        remove_io_padding_and_layout_transform=False,
        remove_layout_transform_from_preamble=False,
    )
    assert "Transpose" in core.ops() and "Transpose" not in ctx.host_graphs["preprocess"].ops()
    assert_split_reproduces(onnx_models, model, ctx, core)


def test_no_preprocess_split_when_switched_off(onnx_models) -> None:
    model = onnx_models.nhwc_preprocess(dynamic=False)
    _, core, ctx = clean(model, graph_cleaner_split_pre_post_processing=False)
    assert "preprocess" not in ctx.host_graphs and "Cast" in core.ops()


def test_arithmetic_on_aipu_tensors_stays_on_the_aipu(onnx_models) -> None:
    # constant_weights ends in MatMul + bias Add: the Add is part of the network
    _, core, ctx = clean(onnx_models.constant_weights())
    assert "postprocess" not in ctx.host_graphs and "Add" in core.ops()


def test_cleaner_off_keeps_the_graph(onnx_models) -> None:
    graph, core, ctx = clean(onnx_models.classifier(), run_graph_cleaner=False)
    assert core is graph and not ctx.host_graphs and not ctx.files


def test_cleaner_off_with_nms_is_an_error(onnx_models) -> None:
    with pytest.raises(OnnxImportError, match=r"`NonMaxSuppression_\d+` \(NonMaxSuppression\)"):
        clean(onnx_models.detector(nms=True), run_graph_cleaner=False)


def test_condition_split_after_largest_matmul(onnx_models) -> None:
    model = onnx_models.constant_weights()
    _, core, ctx = clean(
        model,
        graph_cleaner_condition="maximum_weight_tensor_size",
        graph_cleaner_node="MatMul",
    )
    assert ctx.host_graphs["postprocess"].ops() == {"Add": 1}
    assert core.nodes[-1].op is Op.MATMUL
    assert_split_reproduces(onnx_models, model, ctx, core)
    # a threshold above the weight size (128 x 5) leaves the graph whole
    _, core, ctx = clean(
        model,
        graph_cleaner_condition="maximum_weight_tensor_first_dimension_size",
        graph_cleaner_node="MatMul",
        graph_cleaner_threshold=129,
    )
    assert "postprocess" not in ctx.host_graphs


def test_dumps_of_core_and_full_graph(onnx_models) -> None:
    _, _core, ctx = clean(
        onnx_models.classifier(),
        graph_cleaner_dump_core_onnx="core.onnx",
        graph_cleaner_dump_full_opt_onnx="full.onnx",
    )
    onnx.checker.check_model(ctx.files["core.onnx"])
    onnx.checker.check_model(ctx.files["full.onnx"])
    assert [n.op_type for n in ctx.files["full.onnx"].graph.node][-1] == "Softmax"
    assert "Softmax" not in {n.op_type for n in ctx.files["core.onnx"].graph.node}


def test_all_host_suited_graph_is_kept_whole(onnx_models) -> None:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 10])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])
    model = helper.make_model(
        helper.make_graph([helper.make_node("Softmax", ["x"], ["y"])], "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    _, core, ctx = clean(model)
    assert core.ops() == {"Softmax": 1} and not ctx.host_graphs


def test_only_channel_padding_of_the_input_moves(onnx_models) -> None:
    from graph_helpers import model, node, w

    m = model(
        [
            node("Pad", ["x", "cpad"], "xc"),
            node("Pad", ["xc", "spad"], "xs"),
            node("Conv", ["xs", "w"], "y"),
        ],
        {
            "cpad": np.array([0, 0, 0, 0, 0, 1, 0, 0], np.int64),
            "spad": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64),
            "w": w(2, 5, 3, 3),
        },
    )
    _, core, ctx = clean(m)
    assert ctx.host_graphs["preprocess"].ops() == {"Pad": 1}
    assert core.ops() == {"Pad": 1, "Conv": 1} and core.shape(core.inputs[0]) == (1, 5, 6, 6)
    assert_split_reproduces(onnx_models, m, ctx, core)


def test_embedding_lookup_of_the_input_ids_goes_to_the_host(caplog) -> None:
    from onnx import TensorProto, helper, numpy_helper

    table = np.random.default_rng(0).normal(size=(50, 8)).astype(np.float32)
    w = np.random.default_rng(1).normal(size=(8, 8)).astype(np.float32)
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 8])
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["e"], name="embed", axis=0),
        helper.make_node("MatMul", ["e", "w"], ["y"], name="proj"),
    ]
    inits = [numpy_helper.from_array(table, "table"), numpy_helper.from_array(w, "w")]
    model = helper.make_model(
        helper.make_graph(nodes, "text", [ids], [y], initializer=inits),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    with caplog.at_level("INFO", logger="aipusim.compiler"):
        _graph, core, ctx = clean(model)
    assert ctx.host_graphs["preprocess"].ops() == {"Gather": 1}
    assert core.ops() == {"MatMul": 1} and core.inputs == ("e",)
    assert "before the AIPU graph: `embed` (Gather)" in caplog.text
    feeds = {"ids": np.array([[0, 3, 49, 7, 7, 1]], np.int64)}
    ref = run_onnx(model, feeds)
    got = run_split([ctx.host_graphs["preprocess"], core], ["y"], feeds)
    np.testing.assert_allclose(got["y"], ref["y"], rtol=1e-5, atol=1e-5)
