"""The zoo models: valid ONNX, published MAC counts, sane activations, determinism."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator
from zoo_compiles import zoo_model

from aipusim import zoo
from aipusim.base.errors import ZooError
from aipusim.zoo.builder import GraphBuilder
from aipusim.zoo.registry import _SPECS

#: Small but valid sizes for running onnx.reference quickly (YOLO needs multiples of 32).
SMALL_SIZE = {
    "resnet18": 32,
    "resnet50": 32,
    "mobilenetv2": 32,
    "efficientnet_b0": 32,
    "yolov5s": 64,
    "yolov8n": 64,
    "tiny_cnn": 16,
    "deit_tiny": 32,
    "vit_b16": 32,
}
TRANSFORMERS = ["deit_tiny", "vit_b16"]
PUBLISHED = [
    "resnet18",
    "resnet50",
    "mobilenetv2",
    "efficientnet_b0",
    "yolov5s",
    "yolov8n",
    *TRANSFORMERS,
]
CNNS = [n for n in zoo.names() if n not in TRANSFORMERS]
#: ViT-B/16 carries 87 M weights at any input size: building it takes seconds.
SLOW = {"vit_b16"}


def _names(names: list[str]) -> list:
    """``names`` as parameters, the big ones marked slow."""
    return [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in names]


@functools.cache
def _default(name: str) -> onnx.ModelProto:
    # the session's shared build (`zoo list` in test_zoo_cli.py builds the same ones)
    return zoo_model(name)


@functools.cache
def _small(name: str) -> onnx.ModelProto:
    return zoo_model(name, SMALL_SIZE[name])


@functools.cache
def _run_small(name: str) -> dict[str, np.ndarray]:
    """Every tensor of the small model on a fixed N(0, 1) image (onnx.reference)."""
    model = _small(name)
    size = SMALL_SIZE[name]
    image = np.random.default_rng(123).standard_normal((1, 3, size, size)).astype(np.float32)
    with warnings.catch_warnings():
        # Sigmoid of large negative logits overflows exp() inside onnx.reference; harmless.
        warnings.simplefilter("ignore", RuntimeWarning)
        return ReferenceEvaluator(model).run(None, {"input": image}, intermediate=True)


def test_names_cover_the_issue_list() -> None:
    assert zoo.names() == sorted([*PUBLISHED, "tiny_cnn"])


@pytest.mark.parametrize("name", _names(zoo.names()))
def test_default_model_passes_the_full_checker(name: str) -> None:
    model = _default(name)
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 17
    assert [i.name for i in model.graph.input] == ["input"]
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert tuple(dims) == zoo.info(name).input_shape


@pytest.mark.parametrize("name", _names(PUBLISHED))
def test_macs_match_the_published_figure_within_3_percent(name: str) -> None:
    gmacs = zoo.count_macs(_default(name)) / 1e9
    published = zoo.info(name).published_gmacs
    assert published is not None
    assert abs(gmacs / published - 1) <= 0.03, f"{name}: {gmacs:.3f} vs {published}"


@pytest.mark.parametrize(
    ("name", "params"),
    [
        # torchvision / ultralytics (unfused) parameter counts of the same architectures.
        ("resnet18", 11_689_512),
        ("resnet50", 25_557_032),
        ("mobilenetv2", 3_504_872),
        ("efficientnet_b0", 5_288_548),
        ("yolov5s", 7_235_389),
        ("yolov8n", 3_157_200),
        # timm deit_tiny_patch16_224 / vit_base_patch16_224
        ("deit_tiny", 5_717_416),
        pytest.param("vit_b16", 86_567_656, marks=pytest.mark.slow),
    ],
)
def test_parameter_counts_match_the_reference_implementations(name: str, params: int) -> None:
    assert zoo.count_params(_default(name)) == params


@pytest.mark.parametrize(
    ("name", "output", "shape"),
    [
        ("resnet50", "logits", [1, 1000]),
        ("efficientnet_b0", "logits", [1, 1000]),
        ("tiny_cnn", "logits", [1, 10]),
        ("deit_tiny", "logits", [1, 1000]),
        ("yolov5s", "output0", [1, 25200, 85]),
        ("yolov8n", "output0", [1, 84, 8400]),
    ],
)
def test_outputs_are_named_and_shaped_like_the_real_exports(
    name: str, output: str, shape: list[int]
) -> None:
    (out,) = _default(name).graph.output
    assert out.name == output
    assert [d.dim_value for d in out.type.tensor_type.shape.dim] == shape


@pytest.mark.parametrize("name", _names(zoo.names()))
def test_small_model_runs_in_onnx_reference_with_sane_activations(name: str) -> None:
    """No inf/nan anywhere and every normalised activation (BatchNorm, LayerNorm) within
    10x of unit scale: realistic ranges for int8 quantisation through the whole depth."""
    model = _small(name)
    onnx.checker.check_model(model, full_check=True)
    results = _run_small(name)
    for out in model.graph.output:
        assert np.isfinite(results[out.name]).all(), f"{name}: {out.name} not finite"
    checked = 0
    for node in model.graph.node:
        if node.op_type in ("BatchNormalization", "LayerNormalization"):
            std = float(results[node.output[0]].std())
            assert 0.1 < std < 10.0, f"{name}: {node.name} std {std:.3g}"
            checked += 1
    assert checked >= 5


@pytest.mark.parametrize("name", ["resnet50", "yolov8n"])
def test_network_output_magnitude_is_sane(name: str) -> None:
    out = _run_small(name)[_small(name).graph.output[0].name]
    assert 1e-2 < float(out.std()) < 1e3


@pytest.mark.parametrize("name", CNNS)
def test_batchnorm_is_not_folded_and_has_real_statistics(name: str) -> None:
    model = _small(name)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    bns = [n for n in model.graph.node if n.op_type == "BatchNormalization"]
    assert bns
    for node in bns:
        mean, var = inits[node.input[3]], inits[node.input[4]]
        assert np.all(var > 0)
        assert not np.allclose(mean, 0) and not np.allclose(var, 1), node.name


def _op_types(model: onnx.ModelProto) -> set[str]:
    return {n.op_type for n in model.graph.node}


def test_families_use_the_exporter_ops() -> None:
    assert "Clip" in _op_types(_small("mobilenetv2"))
    vit = _op_types(_small("deit_tiny"))
    assert {"LayerNormalization", "MatMul", "Softmax", "Erf", "Gather", "Expand"} <= vit
    assert {"Sigmoid", "Mul", "GlobalAveragePool"} <= _op_types(_small("efficientnet_b0"))
    assert {"MaxPool", "Flatten", "Gemm", "Relu", "Add"} <= _op_types(_small("resnet18"))
    v5 = _op_types(_small("yolov5s"))
    assert {"Resize", "Concat", "Reshape", "Transpose", "Split", "Pow"} <= v5
    v8 = _op_types(_small("yolov8n"))
    assert {"Resize", "Split", "Softmax", "Slice", "Sub", "Div"} <= v8
    for node in _small("yolov8n").graph.node:
        if node.op_type == "Resize":
            attrs = {a.name: a for a in node.attribute}
            assert attrs["mode"].s == b"nearest"
        if node.op_type == "Gemm":
            pytest.fail("YOLOv8n has no Gemm")


def test_depthwise_and_squeeze_excite_in_efficientnet() -> None:
    model = _small("efficientnet_b0")
    kernels = set()
    for node in model.graph.node:
        attrs = {a.name: a for a in node.attribute}
        if node.op_type == "Conv" and attrs["group"].i > 1:
            kernels.add(tuple(attrs["kernel_shape"].ints))
    assert kernels == {(3, 3), (5, 5)}
    assert sum(n.op_type == "GlobalAveragePool" for n in model.graph.node) == 16 + 1


def test_yolov8n_dfl_conv_has_fixed_arange_weights() -> None:
    model = _small("yolov8n")
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    weight = inits["model.22.dfl.conv.weight"]
    assert weight.shape == (1, 16, 1, 1)
    np.testing.assert_array_equal(weight.ravel(), np.arange(16))


def test_yolov8n_boxes_decode_into_the_image() -> None:
    """Box centres lie in the image and class scores are probabilities: the tail decodes."""
    out = _run_small("yolov8n")["output0"]
    size = SMALL_SIZE["yolov8n"]
    assert out.shape == (1, 84, (size // 8) ** 2 + (size // 16) ** 2 + (size // 32) ** 2)
    centres, scores = out[0, :2], out[0, 4:]
    assert centres.min() > -size and centres.max() < 2 * size
    assert scores.min() >= 0 and scores.max() <= 1


def test_same_seed_gives_identical_bytes_and_other_seed_differs() -> None:
    # `again` is the session's build of the same arguments (default seed 0), made once per
    # session and maybe by another worker process: the same bytes across processes too.
    first = zoo.build("yolov8n", input_size=64, seed=0).SerializeToString()
    again = _small("yolov8n").SerializeToString()
    other = zoo.build("yolov8n", input_size=64, seed=4).SerializeToString()
    assert first == again
    assert first != other


def test_weights_do_not_depend_on_the_input_size() -> None:
    """A small test build carries the full model's conv weights (only BN statistics,
    measured at the built size, differ)."""
    small = {i.name: i for i in zoo.build("tiny_cnn", input_size=16).graph.initializer}
    full = {i.name: i for i in zoo.build("tiny_cnn").graph.initializer}
    assert small["conv1.weight"] == full["conv1.weight"]
    assert small["fc.weight"] == full["fc.weight"]


def test_batch_and_rectangular_size() -> None:
    model = zoo.build("yolov8n", input_size=(64, 96), batch=2)
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [2, 3, 64, 96]
    out = model.graph.output[0]
    anchors = 8 * 12 + 4 * 6 + 2 * 3
    assert [d.dim_value for d in out.type.tensor_type.shape.dim] == [2, 84, anchors]
    onnx.checker.check_model(model, full_check=True)


def test_builder_numpy_pass_agrees_with_onnx_reference() -> None:
    """The calibration forward pass (which sets the BN statistics) computes the same
    tensors as onnx.reference: its conv/pool/resize/split helpers are right."""
    builder = GraphBuilder(input_shape=(1, 3, 64, 64), seed=1, name="yolov8n", calib_batch=1)
    outputs = _SPECS["yolov8n"].family(builder)
    values = dict(builder.values)
    model = builder.finish(outputs)
    results = ReferenceEvaluator(model).run(None, {"input": values["input"]}, intermediate=True)
    compared = 0
    for node in model.graph.node:
        for name in node.output:
            if values.get(name) is not None:
                np.testing.assert_allclose(results[name], values[name], rtol=1e-3, atol=1e-3)
                compared += 1
    assert compared > 200


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(
        ZooError, match=r"must be one of deit_tiny, efficientnet_b0, .*yolov8n, not 'vgg'"
    ):
        zoo.build("vgg")
    with pytest.raises(ZooError, match="not 'vgg'"):
        zoo.info("vgg")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"input_size": 100}, r"input_size of yolov8n must be .*multiples of 32, not 100"),
        ({"input_size": 0}, r"integers >= 32"),
        ({"input_size": (64, 64, 64)}, r"not \(64, 64, 64\)"),
        ({"input_size": 64.0}, r"not 64.0"),
        ({"batch": 0}, r"batch must be an integer >= 1, not 0"),
        ({"seed": -1}, r"seed must be an integer >= 0, not -1"),
    ],
)
def test_bad_builder_arguments(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ZooError, match=match):
        zoo.build("yolov8n", **kwargs)


def test_info_is_a_frozen_record() -> None:
    entry = zoo.info("yolov5s")
    assert entry.input_shape == (1, 3, 640, 640)
    assert entry.published_gmacs == 8.25
    assert "16.5 GFLOPs" in entry.source
    with pytest.raises(AttributeError):
        entry.name = "other"  # type: ignore[misc]


@pytest.mark.slow
@pytest.mark.parametrize("name", CNNS)
def test_full_size_model_has_sane_activations(name: str) -> None:
    """The published-size build (BN statistics measured at that size) stays unit-scale."""
    model = _default(name)
    shape = zoo.info(name).input_shape
    image = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        results = ReferenceEvaluator(model).run(None, {"input": image}, intermediate=True)
    for node in model.graph.node:
        if node.op_type == "BatchNormalization":
            std = float(results[node.output[0]].std())
            assert 0.1 < std < 10.0, f"{name}: {node.name} std {std:.3g}"
    assert np.isfinite(results[model.graph.output[0].name]).all()
