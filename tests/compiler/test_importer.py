"""ONNX import: loading, checks, opset conversion, static shapes, folding, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from zoo_compiles import zoo_model

from aipusim.base.errors import OnnxImportError
from aipusim.compiler.export import run_onnx, to_onnx
from aipusim.compiler.importer import import_model, load_model
from aipusim.compiler.ir import Op, verify

CASES = [
    ("conv_bn_relu", {}, None, "NCHW"),
    ("classifier", {}, None, "NCHW"),
    ("residual_concat", {}, None, "NCHW"),
    ("constant_weights", {"dynamic": True}, (2, 3, 8, 8), "NCHW"),
    ("nhwc_preprocess", {}, (1, 16, 16, 3), "NHWC"),
    ("detector", {}, None, "NCHW"),
    ("detector", {"nms": True}, None, "NCHW"),
    ("opset11", {}, None, "NCHW"),
]


@pytest.mark.parametrize(("name", "kwargs", "shape", "layout"), CASES)
def test_import_keeps_the_model_numerically(onnx_models, name, kwargs, shape, layout) -> None:
    model = getattr(onnx_models, name)(**kwargs)
    graph = import_model(model, input_shape=shape, layout=layout)
    verify(graph)
    assert graph.opset == 17
    first = model.graph.input[0].name
    feeds = onnx_models.random_feeds(model, shapes={first: shape} if shape else None)
    ref = onnx_models.run_model(model, feeds)
    got = run_onnx(to_onnx(graph), feeds)
    for key, value in ref.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=1e-5)


def test_constant_nodes_and_shape_subgraphs_become_constants(onnx_models) -> None:
    graph = import_model(onnx_models.constant_weights(dynamic=True), input_shape=(4, 3, 8, 8))
    ops = graph.ops()
    assert "Constant" not in ops and "Shape" not in ops and "Gather" not in ops
    assert "Concat" not in ops and "Unsqueeze" not in ops
    conv = next(n for n in graph.nodes if n.op is Op.CONV)
    assert graph.is_constant(conv.inputs[1]) and graph.shape(conv.inputs[1]) == (8, 3, 3, 3)
    reshape = next(n for n in graph.nodes if n.op is Op.RESHAPE)
    assert graph.const(reshape.inputs[1]).tolist() == [4, -1]
    assert graph.shape(graph.outputs[0]) == (4, 5)


def test_opset11_is_converted(onnx_models) -> None:
    graph = import_model(onnx_models.opset11(), target_opset=17)
    squeeze = next(n for n in graph.nodes if n.op is Op.SQUEEZE)
    # axes moved from an attribute (opset 11) to a constant input (opset 13+)
    assert "axes" not in squeeze.attrs and graph.is_constant(squeeze.inputs[1])
    split = next(n for n in graph.nodes if n.op is Op.SPLIT)
    assert graph.const(split.inputs[1]).tolist() == [4, 4]


def test_dynamic_input_without_shape_names_input_and_dim(onnx_models) -> None:
    model = onnx_models.constant_weights(dynamic=True)
    with pytest.raises(OnnxImportError, match=r"input `x` dim 0 \(N\) `batch` is dynamic"):
        import_model(model)


def test_nhwc_dynamic_dims_fixed_by_input_shape(onnx_models) -> None:
    model = onnx_models.nhwc_preprocess(dynamic=True)
    graph = import_model(model, input_shape=(1, 32, 24, 3), layout="NHWC")
    assert graph.shape("image") == (1, 32, 24, 3)
    assert graph.shape(graph.outputs[0]) == (1, 4, 32, 24)
    with pytest.raises(
        OnnxImportError, match=r"positive integers, not 0 \(input `image` dim 1 \(H\) `H`\)"
    ):
        import_model(model, input_shape={"image": (1, 0, 24, 3)}, layout="NHWC")


def test_shape_given_in_the_other_layout_is_transposed(onnx_models) -> None:
    model = onnx_models.nhwc_preprocess(dynamic=True)
    # NCHW numbers for an NHWC input: the static C=3 only fits the transposed order
    graph = import_model(model, input_shape=(1, 3, 32, 24), layout="NCHW")
    assert graph.shape("image") == (1, 32, 24, 3)


def test_input_shape_conflicts_are_reported(onnx_models) -> None:
    model = onnx_models.conv_bn_relu()
    with pytest.raises(OnnxImportError, match=r"dim 1 \(C\) is 3 in the model, not 4"):
        import_model(model, input_shape=(1, 4, 16, 16))
    with pytest.raises(OnnxImportError, match="must have 4 dims for input `x`"):
        import_model(model, input_shape=(1, 3, 16))
    with pytest.raises(OnnxImportError, match="not an input"):
        import_model(model, input_shape={"nope": (1, 3, 16, 16)})
    with pytest.raises(OnnxImportError, match="layout must be one of NCHW, NHWC"):
        import_model(model, layout="CHWN")


def test_not_a_file_and_not_onnx(tmp_path: Path) -> None:
    with pytest.raises(OnnxImportError, match="must be an ONNX file, but it is not a file"):
        load_model(tmp_path / "missing.onnx")
    with pytest.raises(OnnxImportError, match="must be an ONNX file"):
        load_model(tmp_path)
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00\xffthis is not protobuf at all\x12\x99")
    with pytest.raises(OnnxImportError, match=r"`.*junk.onnx` is not an ONNX model"):
        load_model(junk)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(OnnxImportError, match="is not an ONNX model"):
        load_model(empty)


def test_checker_failure_is_one_line(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    node = helper.make_node("Relu", ["undefined"], ["y"])
    model = helper.make_model(
        helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]
    )
    path = tmp_path / "bad.onnx"
    onnx.save(model, path)
    with pytest.raises(OnnxImportError, match="fails the ONNX checker") as err:
        load_model(path)
    assert "\n" not in str(err.value)


def test_a_whole_model_file_is_checked_once_on_the_bytes_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "relu.onnx"
    onnx.save(_relu_model(17), path)
    seen: list[object] = []
    check = onnx.checker.check_model
    monkeypatch.setattr(onnx.checker, "check_model", lambda m: (seen.append(m), check(m)))
    model = load_model(path)
    assert seen == [path.read_bytes()]
    assert model.SerializeToString() == path.read_bytes()


def _relu_model(opset: int) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    return helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "old", [x], [y]),
        opset_imports=[helper.make_opsetid("", opset)],
    )


def test_opset_below_7_is_rejected() -> None:
    with pytest.raises(OnnxImportError, match="opset of model `old` must be >= 7, not 6"):
        import_model(_relu_model(6))


@pytest.mark.parametrize("opset", [7, 8, 9, 10])
def test_opsets_7_to_10_are_upgraded_and_the_log_says_so(opset, caplog) -> None:
    with caplog.at_level("INFO", logger="aipusim.compiler.importer"):
        graph = import_model(_relu_model(opset))
    assert graph.opset == 17
    assert f"model `old` has opset {opset}: upgraded to opset 17 with onnx.version_converter" in (
        caplog.text
    )


def _resize_model(opset: int, mode: str) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 8, 12])
    scales = numpy_helper.from_array(np.array([1, 1, 2, 3], np.float32), "scales")
    if opset < 9:
        node = helper.make_node("Upsample", ["x"], ["y"], mode=mode, scales=[1.0, 1.0, 2.0, 3.0])
        inits = []
    else:
        op = "Upsample" if opset == 9 else "Resize"
        node = helper.make_node(op, ["x", "scales"], ["y"], mode=mode)
        inits = [scales]
    return helper.make_model(
        helper.make_graph([node], "up", [x], [y], initializer=inits),
        opset_imports=[helper.make_opsetid("", opset)],
    )


@pytest.mark.parametrize("opset", [7, 9, 10])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_old_upsample_keeps_its_asymmetric_coordinates(opset, mode) -> None:
    # The converter's Resize adapter keeps the opset-11 default (half_pixel), which moves
    # linear samples by a quarter pixel: the importer restores the old semantics.
    graph = import_model(_resize_model(opset, mode))
    resize = next(n for n in graph.nodes if n.op is Op.RESIZE)
    assert resize.attrs["coordinate_transformation_mode"] == "asymmetric"
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 4)).astype(np.float32)
    got = run_onnx(to_onnx(graph), {"x": x})["y"]
    # Upsample-9 maps output pixel i to input i / scale
    src_h, src_w = np.arange(8) / 2, np.arange(12) / 3
    if mode == "nearest":
        want = x[:, :, np.floor(src_h).astype(int)][:, :, :, np.floor(src_w).astype(int)]
    else:
        h0, w0 = np.floor(src_h).astype(int), np.floor(src_w).astype(int)
        h1, w1 = np.minimum(h0 + 1, 3), np.minimum(w0 + 1, 3)
        fh, fw = (src_h - h0)[:, None], (src_w - w0)[None, :]
        top = x[:, :, h0][:, :, :, w0] * (1 - fw) + x[:, :, h0][:, :, :, w1] * fw
        bottom = x[:, :, h1][:, :, :, w0] * (1 - fw) + x[:, :, h1][:, :, :, w1] * fw
        want = top * (1 - fh) + bottom * fh
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_a_failed_conversion_names_the_blocking_node() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])
    inits = [numpy_helper.from_array(np.ones(4, np.float32), n) for n in "sbmv"]
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="act"),
        helper.make_node("BatchNormalization", ["r", *"sbmv"], ["y"], name="bn", spatial=0),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "old", [x], [y], initializer=inits),
        opset_imports=[helper.make_opsetid("", 7)],
    )
    with pytest.raises(OnnxImportError) as err:
        import_model(model)
    # the converter's reason without its C++ file, line and assertion
    assert str(err.value) == (
        "model `old` cannot be converted from opset 7 to 17: node `bn` (BatchNormalization) "
        "cannot be upgraded (Attribute spatial must have value 1)"
    )


def _with_external(onnx_models, folder: Path) -> Path:
    model = onnx_models.conv_bn_relu()
    path = folder / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, location="weights.bin", size_threshold=0)
    return path


def test_external_data_is_loaded(onnx_models, tmp_path: Path) -> None:
    path = _with_external(onnx_models, tmp_path)
    assert (tmp_path / "weights.bin").stat().st_size > 0
    graph = import_model(path)
    ref = import_model(onnx_models.conv_bn_relu())
    for name, array in ref.constants.items():
        np.testing.assert_array_equal(graph.constants[name], array)


def test_large_external_weights_are_mapped_not_read(tmp_path: Path) -> None:
    """A weight over 4096 elements in an external-data file is a read-only array over a
    map of the file (its pages are read when touched); a small one is read in."""
    from aipusim.base.mapped import is_mapped

    rng = np.random.default_rng(0)
    big = rng.standard_normal((64, 128)).astype(np.float32)  # 8192 elements
    small = rng.standard_normal((128,)).astype(np.float32)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 128])
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["y"]),
    ]
    inits = [numpy_helper.from_array(big, "w"), numpy_helper.from_array(small, "b")]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y], initializer=inits),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    path = tmp_path / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, location="weights.bin", size_threshold=0)
    graph = import_model(path)
    assert is_mapped(graph.constants["w"]) and not graph.constants["w"].flags.writeable
    assert not is_mapped(graph.constants["b"])
    np.testing.assert_array_equal(graph.constants["w"], big)
    np.testing.assert_array_equal(graph.constants["b"], small)


def _point_external(path: Path, location: str) -> None:
    model = onnx.load(path, load_external_data=False)
    for t in model.graph.initializer:
        for entry in t.external_data:
            if entry.key == "location":
                entry.value = location
    onnx.save(model, path)


def test_external_data_may_not_leave_the_model_folder(onnx_models, tmp_path: Path) -> None:
    inner = tmp_path / "models"
    inner.mkdir()
    path = _with_external(onnx_models, inner)
    (inner / "weights.bin").rename(tmp_path / "weights.bin")
    _point_external(path, "../weights.bin")
    with pytest.raises(OnnxImportError, match=r"must stay inside the model's folder"):
        load_model(path)
    _point_external(path, str(tmp_path / "weights.bin"))
    with pytest.raises(OnnxImportError, match=r"must stay inside the model's folder"):
        load_model(path)


def test_external_data_missing_or_short(onnx_models, tmp_path: Path) -> None:
    path = _with_external(onnx_models, tmp_path)
    data = (tmp_path / "weights.bin").read_bytes()
    (tmp_path / "weights.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(OnnxImportError, match="has only"):
        load_model(path)
    (tmp_path / "weights.bin").unlink()
    with pytest.raises(OnnxImportError, match="does not exist"):
        load_model(path)


def test_shape_computed_reshape_and_expand_fold(onnx_models) -> None:
    """Range/Expand/ConstantOfShape/Cast on shapes fold away once the input is static."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    y.type.tensor_type.shape.SetInParent()
    inits = [
        numpy_helper.from_array(np.array([2], np.int64), "idx2"),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array(1, np.int64), "one"),
    ]
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "idx2"], ["h"], axis=0),
        helper.make_node("Cast", ["h"], ["hf"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["hf"], ["hi"], to=TensorProto.INT64),
        helper.make_node("Squeeze", ["hi"], ["hs"]),
        helper.make_node("Range", ["zero", "hs", "one"], ["r"]),
        helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
        helper.make_node(
            "ConstantOfShape",
            ["s"],
            ["ones"],
            value=numpy_helper.from_array(np.ones(1, np.float32)),
        ),
        helper.make_node("Mul", ["x", "ones"], ["xm"]),
        helper.make_node("Add", ["xm", "rf"], ["y0"]),
        helper.make_node("Shape", ["y0"], ["s2"]),
        helper.make_node("Expand", ["y0", "s2"], ["y"]),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "shapes", [x], [y], initializer=inits),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    graph = import_model(model, input_shape=(1, 4, 6, 6))
    verify(graph)
    assert set(graph.ops()) == {"Mul", "Add", "Expand"}
    assert graph.const(next(n for n in graph.nodes if n.op is Op.ADD).inputs[1]).tolist() == list(
        range(6)
    )
    feeds = {"x": np.random.default_rng(0).normal(size=(1, 4, 6, 6)).astype(np.float32)}
    np.testing.assert_allclose(
        run_onnx(to_onnx(graph), feeds)["y"], onnx_models.run_model(model, feeds)["y"]
    )


def _export_style(model: onnx.ModelProto) -> onnx.ModelProto:
    """A zoo model as exporters often ship it: weights in Constant nodes, an NHWC uint8
    input with dynamic batch and spatial dims, Cast and /255 and a Transpose in front."""
    g = model.graph
    first = g.input[0].name
    consts = [
        helper.make_node("Constant", [], [t.name], value=t, name=f"const_{t.name}")
        for t in g.initializer
    ]
    pre = [
        helper.make_node("Cast", ["image"], ["image_f"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["image_f", "c255"], ["image_n"]),
        helper.make_node("Transpose", ["image_n"], [first], perm=[0, 3, 1, 2]),
    ]
    c255 = helper.make_node(
        "Constant", [], ["c255"], value=numpy_helper.from_array(np.float32(255.0), "c255")
    )
    channels = g.input[0].type.tensor_type.shape.dim[1].dim_value
    image = helper.make_tensor_value_info("image", TensorProto.UINT8, ["N", "H", "W", channels])
    outputs = []
    for o in g.output:
        vi = helper.make_tensor_value_info(o.name, o.type.tensor_type.elem_type, None)
        vi.type.tensor_type.shape.SetInParent()
        outputs.append(vi)
    new = helper.make_graph([c255, *consts, *pre, *g.node], g.name, [image], outputs)
    out = helper.make_model(new, opset_imports=list(model.opset_import))
    out.ir_version = model.ir_version
    onnx.checker.check_model(out)
    return out


@pytest.mark.parametrize("name", ["mobilenetv2", "yolov8n"])
def test_real_world_export_style_imports(name: str) -> None:
    original = zoo_model(name, 64)
    model = _export_style(original)
    with pytest.raises(OnnxImportError, match=r"input `image` dim 0 \(N\) `N` is dynamic"):
        import_model(model, layout="NHWC")
    graph = import_model(model, input_shape=(1, 64, 64, 3), layout="NHWC")
    verify(graph)
    assert "Constant" not in graph.ops()
    reference = import_model(original)
    assert len(graph.constants) >= len(reference.constants)
    assert graph.ops().get("Conv") == reference.ops().get("Conv")
    image = np.random.default_rng(0).integers(0, 256, (1, 64, 64, 3), dtype=np.uint8)
    x = (image.astype(np.float32) / 255.0).transpose(0, 3, 1, 2)
    got = run_onnx(to_onnx(graph), {"image": image})
    ref = run_onnx(original, {original.graph.input[0].name: x})
    for key, value in ref.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-4)


def test_folding_never_allocates_huge_constants() -> None:
    """A ConstantOfShape asking for 2^40 elements stays a node instead of being evaluated."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1 << 20])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    y.type.tensor_type.shape.SetInParent()
    shape = numpy_helper.from_array(np.array([1 << 20, 1 << 20], np.int64), "big")
    nodes = [
        helper.make_node("ConstantOfShape", ["big"], ["c"]),
        helper.make_node("Add", ["x", "c"], ["y"]),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "huge", [x], [y], initializer=[shape]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    graph = import_model(model)
    assert graph.ops() == {"ConstantOfShape": 1, "Add": 1}
    assert graph.shape("y") == (1 << 20, 1 << 20)
