"""Calibration data: bundled default images, image folders (through a transform script or
the built-in preprocessing), random data, and their errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from aipusim.base.errors import QuantizationError
from aipusim.compiler.quant import calibration_for
from aipusim.compiler.quant.data import (
    BUNDLED_IMAGES,
    MIN_IMAGE_SIDE,
    CalibrationData,
    ImageInput,
    Normalization,
    bundled_image_calibration,
    default_image_split,
    image_input,
    imageset_calibration,
    load_transform,
    parse_channel_values,
    preprocess_image,
    random_calibration,
    read_image,
)
from aipusim.compiler.request import InputDataLayout

TRANSFORM = """
import numpy as np

def get_preprocess_transform(image):
    a = np.asarray(image, dtype=np.float32) / 255.0
    if a.ndim == 2:
        a = a[:, :, None]
    return a.transpose(2, 0, 1)
"""


def _images(folder: Path, n: int, size: int = 8) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        arr = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
        Image.fromarray(arr).save(folder / f"img{i:02d}.png")
    return folder


def _script(tmp_path: Path, text: str = TRANSFORM) -> Path:
    p = tmp_path / "pre.py"
    p.write_text(text)
    return p


def test_random_calibration_is_seeded_and_held_aside_differs() -> None:
    a = random_calibration({"x": (1, 3, 4, 4)}, samples=3, held_aside=2, seed=5)
    b = random_calibration({"x": (1, 3, 4, 4)}, samples=3, held_aside=2, seed=5)
    assert all(np.array_equal(p["x"], q["x"]) for p, q in zip(a.samples, b.samples, strict=True))
    assert not any(np.array_equal(a.samples[0]["x"], h["x"]) for h in a.held_aside)


def test_imageset_through_transform(tmp_path: Path) -> None:
    folder = _images(tmp_path / "imgs", 10)
    data = imageset_calibration(folder, _script(tmp_path), "input", (1, 3, 8, 8))
    assert len(data.samples) == 8 and len(data.held_aside) == 2 and data.held_aside_distinct
    assert data.samples[0]["input"].shape == (1, 3, 8, 8)
    assert data.samples[0]["input"].min() >= 0.0 and data.samples[0]["input"].max() <= 1.0


def test_bgr_swaps_channels_and_gray_has_one(tmp_path: Path) -> None:
    folder = _images(tmp_path / "imgs", 1)
    f = next(folder.iterdir())
    rgb = np.asarray(read_image(f, "PIL", "RGB"))
    bgr = np.asarray(read_image(f, "PIL", "BGR"))
    assert np.array_equal(rgb[:, :, ::-1], bgr)
    data = imageset_calibration(folder, _script(tmp_path), "input", (1, 1, 8, 8), color="GRAY")
    assert data.samples[0]["input"].shape == (1, 1, 8, 8)


def test_nhwc_transform_output_is_laid_out_for_the_model(tmp_path: Path) -> None:
    folder = _images(tmp_path / "imgs", 2)
    nhwc = TRANSFORM.replace("return a.transpose(2, 0, 1)", "return a")
    data = imageset_calibration(
        folder, _script(tmp_path, nhwc), "input", (1, 3, 8, 8), layout="NHWC"
    )
    assert data.samples[0]["input"].shape == (1, 3, 8, 8)


def test_empty_folder_is_named(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(QuantizationError, match=r"imageset .*empty contains no images"):
        imageset_calibration(tmp_path / "empty", _script(tmp_path), "input", (1, 3, 8, 8))


def test_script_without_the_function_is_named(tmp_path: Path) -> None:
    p = _script(tmp_path, "def preprocess(image):\n    return image\n")
    with pytest.raises(QuantizationError, match=r"pre\.py must define a function get_preprocess"):
        load_transform(p)


def test_script_that_fails_to_import_is_one_line(tmp_path: Path) -> None:
    p = _script(tmp_path, "import no_such_module_xyz\n")
    with pytest.raises(QuantizationError, match=r"pre\.py failed to load: ModuleNotFoundError"):
        load_transform(p)


def test_transform_returning_the_wrong_shape(tmp_path: Path) -> None:
    folder = _images(tmp_path / "imgs", 1)
    with pytest.raises(QuantizationError, match=r"must return a tensor of shape \(1, 3, 16, 16\)"):
        imageset_calibration(folder, _script(tmp_path), "input", (1, 3, 16, 16))


def test_missing_opencv_is_a_clear_message(tmp_path: Path, monkeypatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_cv2(name, *args, **kwargs):
        if name == "cv2":
            raise ImportError("No module named 'cv2'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_cv2)
    folder = _images(tmp_path / "imgs", 1)
    with pytest.raises(QuantizationError, match="OPENCV needs the opencv-python package"):
        imageset_calibration(folder, _script(tmp_path), "input", (1, 3, 8, 8), backend="OPENCV")


def test_undecodable_image_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "broken.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(QuantizationError, match=r"image .*broken\.jpg cannot be decoded"):
        imageset_calibration(folder, _script(tmp_path), "input", (1, 3, 8, 8))


def test_calibration_for_a_request(cnn, tmp_path: Path) -> None:
    class Request:
        imageset = None
        transform = _script(tmp_path)
        calibration = "random"

    with pytest.raises(QuantizationError, match="--calibration must be images or auto with"):
        calibration_for(cnn, Request())
    Request.calibration = "auto"  # the transform alone: the bundled images through it
    Request.transform = _script(tmp_path, TRANSFORM.replace("(image,", "(image.resize((16, 16)),"))
    data = calibration_for(cnn, Request())
    assert data.source.startswith("scikit-image") and data.extra["transform"]
    assert data.samples[0]["input"].shape == (1, 3, 16, 16)
    assert len(data.samples) == len(data.held_aside) == len(BUNDLED_IMAGES) // 2


@pytest.mark.parametrize(
    ("shape", "layout", "want"),
    [
        ((1, 3, 224, 224), None, ("NCHW", 3, 224, 224)),
        ((1, 240, 320, 3), None, ("NHWC", 3, 240, 320)),
        ((2, 1, 28, 28), None, ("NCHW", 1, 28, 28)),
        ((1, 3, 16, 3), "NHWC", None),  # W = 3 as NCHW, H = 3 as NHWC: no image
        ((1, 3, 32, 3), "NHWC", None),
        ((1, 16, 16, 3), None, ("NHWC", 3, 16, 16)),
        ((1, 3, 3, 3), None, None),  # too small either way
        ((1, 4, 32, 32), None, None),  # 4 channels
        ((1, 8), None, None),
        ((1, 3, 64), None, None),
        ((1, 3, 15, 64), None, None),
    ],
)
def test_the_image_input_rule(shape, layout, want) -> None:
    got = image_input(shape, layout)
    if want is None:
        assert got is None
    else:
        assert (got.layout.value, got.channels, got.height, got.width) == want
    assert MIN_IMAGE_SIDE == 16


def test_no_shape_is_an_image_both_ways() -> None:
    """NCHW puts 1 or 3 channels on axis 1 and >= 16 on axis 3, NHWC the reverse: a shape
    never qualifies both ways, so --input-data-layout cannot change the answer."""
    import itertools

    for shape in itertools.product((1, 3), (1, 3, 16, 32), (1, 3, 16, 32), (1, 3, 16, 32)):
        got = {image_input(shape, lay) for lay in (None, "NCHW", "NHWC")}
        assert len(got) == 1, shape


def test_the_default_split_is_fixed_disjoint_and_mixed() -> None:
    cal, held = default_image_split()
    assert (cal, held) == default_image_split()
    assert len(cal) == len(held) == len(BUNDLED_IMAGES) // 2
    assert not set(cal) & set(held)
    assert [p.name for p in cal + held] == list(BUNDLED_IMAGES[0::2] + BUNDLED_IMAGES[1::2])
    for half in (cal, held):  # each half has colour and grey photographs
        modes = {Image.open(p).mode for p in half}
        assert {"RGB", "L"} <= modes
    assert all(p.is_file() for p in cal + held)


def test_bundled_calibration_layouts_gray_batch_and_normalization() -> None:
    data = bundled_image_calibration("x", (1, 3, 32, 24))
    assert data.samples[0]["x"].shape == (1, 3, 32, 24) and data.held_aside_distinct
    assert min(s["x"].min() for s in data.samples) >= 0.0
    assert max(s["x"].max() for s in data.samples) <= 1.0
    nhwc = bundled_image_calibration("x", (1, 32, 24, 3))
    assert np.array_equal(nhwc.samples[0]["x"], data.samples[0]["x"].transpose(0, 2, 3, 1))
    gray = bundled_image_calibration("x", (1, 1, 32, 32))
    assert gray.samples[0]["x"].shape == (1, 1, 32, 32)
    batch = bundled_image_calibration("x", (4, 3, 32, 24))
    assert [s["x"].shape[0] for s in batch.samples] == [4, 4]  # 6 images, the last wraps
    assert np.array_equal(batch.samples[1]["x"][2], data.samples[0]["x"][0])
    norm = Normalization((0.5,), (0.25,))
    scaled = bundled_image_calibration("x", (1, 3, 32, 24), normalization=norm)
    np.testing.assert_allclose(
        scaled.samples[0]["x"], (data.samples[0]["x"] - 0.5) / 0.25, rtol=1e-5, atol=1e-5
    )
    bgr = bundled_image_calibration("x", (1, 3, 32, 24), color="BGR")
    np.testing.assert_array_equal(bgr.samples[0]["x"], data.samples[0]["x"][:, ::-1])


def test_preprocessing_covers_then_centre_crops() -> None:
    """A wide image is scaled to the input's height and its middle kept."""
    arr = np.zeros((20, 60, 3), np.uint8)
    arr[:, 25:35] = 255  # a white band in the middle: columns 20-28 of 48 once scaled
    inp = ImageInput(InputDataLayout.NCHW, 1, 3, 16, 16)
    out = preprocess_image(Image.fromarray(arr), inp, Normalization())
    assert out.shape == (3, 16, 16)
    # the crop keeps columns 16-32 of 48: the band at 4-12, black at both sides
    assert out[:, :, 5:11].min() > 0.99 and out[:, :, :3].max() < 0.01
    assert out[:, :, 13:].max() < 0.01


def test_normalization_and_channel_value_errors() -> None:
    with pytest.raises(QuantizationError, match=r"--image-mean must have 1 or 3 values .*not 2"):
        Normalization((0.1, 0.2)).per_channel(3)
    with pytest.raises(
        QuantizationError, match=r"--image-std must be positive numbers, not \[0.0\]"
    ):
        Normalization((0.0,), (0.0,))
    with pytest.raises(QuantizationError, match=r"--image-mean must be 1 or 3 numbers .*not 'a,b'"):
        parse_channel_values("a,b", "--image-mean")
    assert parse_channel_values("0.5", "--image-mean") == (0.5,)


def test_calibration_for_picks_images_for_image_inputs_only(cnn, onnx_net) -> None:
    data = calibration_for(cnn, None)
    assert data.source.startswith("scikit-image") and len(data.samples) == 6
    net = onnx_net((1, 8))
    vector = net.graph([net.gemm("input", 8, 4)])
    assert calibration_for(vector, None).source.startswith("random")

    class Random:
        calibration = "random"

    assert calibration_for(cnn, Random()).source.startswith("random")
    assert len(calibration_for(cnn, Random()).samples) == 16

    class Images:
        calibration = "images"

    with pytest.raises(QuantizationError, match=r"need one image input \(rank 4 .*not input of"):
        calibration_for(vector, Images())

    class Mean:
        image_mean = (0.5,)
        transform = Path("t.py")

    with pytest.raises(QuantizationError, match="--image-mean/--image-std must be left out"):
        calibration_for(cnn, Mean())


def test_an_imageset_without_transform_uses_the_builtin_preprocessing(tmp_path: Path) -> None:
    folder = _images(tmp_path / "imgs", 5, size=40)
    data = imageset_calibration(folder, None, "input", (1, 16, 16, 3))
    assert data.samples[0]["input"].shape == (1, 16, 16, 3) and len(data.held_aside) == 1
    with pytest.raises(QuantizationError, match="without --transform needs an image input"):
        imageset_calibration(folder, None, "input", (1, 8))


def test_images_beat_random_data_when_the_model_sees_images(cnn) -> None:
    """Evaluated on held-aside photographs, the small CNN quantized from the other half of
    the photographs is more accurate than when quantized from random data (whose wide
    N(0, 1) input range wastes most of the int8 levels of [0, 1] pictures)."""
    from aipusim.compiler.config import CompilerConfig
    from aipusim.compiler.quant import calibrate_and_quantize, evaluate

    images = calibration_for(cnn, None)
    rand = random_calibration({"input": (1, 3, 16, 16)}, samples=len(images.samples))
    on_images = CalibrationData(rand.samples, images.held_aside, source="random")
    sqnr = {}
    for label, data in (("images", images), ("random", on_images)):
        q = calibrate_and_quantize(cnn, CompilerConfig(), data)
        sqnr[label] = evaluate(cnn, q, images, fp32="numpy")["outputs"]
    (out,) = sqnr["images"]
    assert sqnr["images"][out]["sqnr_db"] > sqnr["random"][out]["sqnr_db"] + 3
