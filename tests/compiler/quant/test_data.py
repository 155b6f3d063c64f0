"""Calibration data: random, image folders through a transform script, and their errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from aipusim.base.errors import QuantizationError
from aipusim.compiler.quant import calibration_for
from aipusim.compiler.quant.data import (
    imageset_calibration,
    load_transform,
    random_calibration,
    read_image,
)

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

    with pytest.raises(QuantizationError, match="--imageset is required"):
        calibration_for(cnn, Request())
    data = calibration_for(cnn, None)
    assert data.source.startswith("random") and len(data.samples) == 16
