"""Calibration data: seeded random tensors (the default) or an image folder + transform.

`CalibrationData` holds the calibration samples (one dict input-name -> array of the model
input's full shape per sample) and, apart from them, held-aside samples on which the
accuracy report compares the int8 model with the fp32 model.

**This module is the one place where user code runs**: `load_transform` imports the
``--transform FILE.py`` script with importlib (executing its top level) and calls its
``get_preprocess_transform(image)`` on every image. Only pass scripts you trust.

Errors (an empty folder, a script without the function, an image the reader cannot decode,
a transform returning the wrong shape, a missing OpenCV) are `QuantizationError`s whose one
line names the offending path.

Example:
    >>> data = random_calibration({"input": (1, 3, 8, 8)}, samples=4, held_aside=2, seed=0)
    >>> len(data.samples), data.samples[0]["input"].shape, len(data.held_aside)
    (4, (1, 3, 8, 8), 2)
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aipusim.base.errors import QuantizationError

# One definition of the CLI choices (compiler/request.py); DataLayout is the input layout.
from aipusim.compiler.request import ColorFormat, ImreaderBackend
from aipusim.compiler.request import InputDataLayout as DataLayout

Sample = dict[str, np.ndarray]

#: Default calibration sample count (the issue's benchmark uses 16).
DEFAULT_SAMPLES = 16
#: Default held-aside sample count for the accuracy report.
DEFAULT_HELD_ASIDE = 4
#: File suffixes read as images.
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm")
#: Name of the function a transform script must define.
TRANSFORM_FUNCTION = "get_preprocess_transform"


@dataclass(frozen=True)
class CalibrationData:
    """Calibration samples plus held-aside samples (each: input name -> input-shaped array)."""

    samples: tuple[Sample, ...]
    held_aside: tuple[Sample, ...] = ()
    #: Where the data came from, for reports (``random(seed=0)`` or the folder).
    source: str = "random"
    #: True when the held-aside samples are distinct from the calibration samples.
    held_aside_distinct: bool = True
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.samples:
            raise QuantizationError(f"calibration data from {self.source} has no samples")


def float_inputs(graph: Any, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The sample's value of each input of ``graph`` (an IR `Graph`) as float32 (integer
    inputs keep their type), checked for presence and shape.

    >>> from aipusim.compiler.ir import Graph, Node, Op, Tensor
    >>> g = Graph("g", (Node("r", Op.RELU, ("x",), ("y",)),),
    ...           {n: Tensor(n, (2,)) for n in "xy"}, {}, ("x",), ("y",))
    >>> float_inputs(g, {"x": [1, 2]})["x"].dtype
    dtype('float32')
    """
    out = {}
    for name in graph.inputs:
        if name not in sample:
            raise QuantizationError(f"input {name} is missing (graph inputs: {list(graph.inputs)})")
        # integer inputs (token ids of an embedding lookup) keep their integer type
        dtype = graph.tensor(name).dtype.np
        arr = np.ascontiguousarray(sample[name], dtype if dtype.kind in "iu" else np.float32)
        if arr.shape != graph.shape(name):
            raise QuantizationError(
                f"input {name} must have shape {graph.shape(name)}, not {arr.shape}"
            )
        out[name] = arr
    return out


def random_calibration(
    input_shapes: Mapping[str, tuple[int, ...]],
    *,
    samples: int = DEFAULT_SAMPLES,
    held_aside: int = DEFAULT_HELD_ASIDE,
    seed: int = 0,
    index_ranges: Mapping[str, int] | None = None,
) -> CalibrationData:
    """Seeded standard-normal samples (the statistics of normalised images).

    Inputs named in ``index_ranges`` hold indices (token ids of an embedding lookup): they
    get int64 values uniform in [0, range). The held-aside samples come from an independent
    stream, so they never repeat a calibration sample.
    """
    if samples < 1:
        raise QuantizationError(f"calibration samples must be >= 1, not {samples}")
    cal_rng = np.random.default_rng([seed, 0])
    held_rng = np.random.default_rng([seed, 1])
    ranges = dict(index_ranges or {})

    def one(rng: np.random.Generator, name: str, shape: tuple[int, ...]) -> np.ndarray:
        if name in ranges:
            return rng.integers(0, ranges[name], tuple(shape), dtype=np.int64)
        return rng.standard_normal(tuple(shape)).astype(np.float32)

    def draw(rng: np.random.Generator) -> Sample:
        return {name: one(rng, name, shape) for name, shape in input_shapes.items()}

    return CalibrationData(
        samples=tuple(draw(cal_rng) for _ in range(samples)),
        held_aside=tuple(draw(held_rng) for _ in range(held_aside)),
        source=f"random(seed={seed})",
    )


def load_transform(path: str | Path) -> Callable[[Any], Any]:
    """Import a transform script (runs its code) and return its ``get_preprocess_transform``.

    >>> load_transform("/nonexistent/t.py")
    Traceback (most recent call last):
    ...
    aipusim.base.errors.QuantizationError: transform script /nonexistent/t.py does not exist
    """
    p = Path(path)
    if not p.is_file():
        raise QuantizationError(f"transform script {p} does not exist")
    module_name = f"aipusim_user_transform_{abs(hash(str(p.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, p)
    if spec is None or spec.loader is None:
        raise QuantizationError(f"transform script {p} must be a Python file (.py)")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # user code: any failure becomes one line naming the script
        raise QuantizationError(
            f"transform script {p} failed to load: {type(exc).__name__}: {exc}"
        ) from None
    finally:
        sys.modules.pop(module_name, None)
    fn = getattr(module, TRANSFORM_FUNCTION, None)
    if not callable(fn):
        raise QuantizationError(
            f"transform script {p} must define a function {TRANSFORM_FUNCTION}(image)"
        )
    return fn


def list_images(folder: str | Path) -> list[Path]:
    """The image files of a folder (sorted by name; sub-folders are not searched)."""
    d = Path(folder)
    if not d.is_dir():
        raise QuantizationError(f"imageset {d} must be a directory of images")
    files = sorted(f for f in d.iterdir() if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise QuantizationError(
            f"imageset {d} contains no images (looked for {', '.join(IMAGE_SUFFIXES)})"
        )
    return files


def read_image(path: Path, backend: ImreaderBackend | str, color: ColorFormat | str) -> Any:
    """Decode one image: a PIL.Image (PIL) or an HxWxC uint8 array (OPENCV).

    PIL has no BGR mode: for BGR the channels are swapped inside an RGB-mode image.
    """
    backend = ImreaderBackend(backend)
    color = ColorFormat(color)
    if backend is ImreaderBackend.OPENCV:
        cv2 = _import_cv2()
        flag = cv2.IMREAD_GRAYSCALE if color is ColorFormat.GRAY else cv2.IMREAD_COLOR
        img = cv2.imread(str(path), flag)
        if img is None:
            raise QuantizationError(f"image {path} cannot be decoded by OpenCV")
        return img[:, :, ::-1].copy() if color is ColorFormat.RGB else img
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as opened:
            img = opened.convert("L" if color is ColorFormat.GRAY else "RGB")
    except (UnidentifiedImageError, OSError) as exc:
        raise QuantizationError(f"image {path} cannot be decoded by PIL: {exc}") from None
    if color is ColorFormat.BGR:
        img = Image.fromarray(np.asarray(img)[:, :, ::-1].copy(), mode="RGB")
    return img


def _import_cv2() -> Any:
    try:
        import cv2
    except ImportError:
        raise QuantizationError(
            "imreader backend OPENCV needs the opencv-python package, which is not "
            "installed: pip install opencv-python, or use --imreader-backend PIL"
        ) from None
    return cv2


def _to_array(value: Any, path: Path) -> np.ndarray:
    # torch.Tensor (the documented return type) without importing torch here.
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        value = value.detach().cpu().numpy()
    try:
        return np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise QuantizationError(
            f"{TRANSFORM_FUNCTION} returned {type(value).__name__} for image {path}, "
            f"which is not an array: {exc}"
        ) from None


def imageset_calibration(
    folder: str | Path,
    transform: str | Path,
    input_name: str,
    input_shape: tuple[int, ...],
    *,
    layout: DataLayout = DataLayout.NCHW,
    color: ColorFormat = ColorFormat.RGB,
    backend: ImreaderBackend = ImreaderBackend.PIL,
    max_samples: int = 256,
    held_aside: int = DEFAULT_HELD_ASIDE,
) -> CalibrationData:
    """Read a folder of images through the user's transform into calibration samples.

    ``input_shape`` is the model input's shape in the model's own layout; ``layout`` says
    how the transform lays out its tensor (NHWC output is transposed to the model's NCHW
    input when the model input is NCHW and vice versa, judged by the channel count).
    Up to ``held_aside`` images (at most a fifth of the folder) are kept apart for the
    accuracy report; with a single image it serves both.
    """
    backend = ImreaderBackend(backend)
    color = ColorFormat(color)
    layout = DataLayout(layout)
    if backend is ImreaderBackend.OPENCV:
        _import_cv2()
    files = list_images(folder)[:max_samples]
    fn = load_transform(transform)
    want = tuple(input_shape)
    arrays = []
    for f in files:
        image = read_image(f, backend, color)
        try:
            out = fn(image)
        except Exception as exc:  # user code
            raise QuantizationError(
                f"transform script {transform} failed on image {f}: {type(exc).__name__}: {exc}"
            ) from None
        arrays.append(_fit_shape(_to_array(out, f), want, layout, f))
    n_held = min(held_aside, len(arrays) // 5)
    cal = arrays[: len(arrays) - n_held] if n_held else arrays
    held = arrays[len(arrays) - n_held :] if n_held else arrays[: max(1, held_aside)]
    return CalibrationData(
        samples=tuple({input_name: a} for a in cal),
        held_aside=tuple({input_name: a} for a in held),
        source=str(folder),
        held_aside_distinct=n_held > 0,
        extra={"images": len(arrays), "backend": backend.value, "color_format": color.value},
    )


def _fit_shape(a: np.ndarray, want: tuple[int, ...], layout: DataLayout, path: Path) -> np.ndarray:
    if a.ndim == len(want) - 1:
        a = a[None]
    if a.shape == want:
        return a
    if a.ndim == 4 and layout is DataLayout.NHWC and a.transpose(0, 3, 1, 2).shape == want:
        return np.ascontiguousarray(a.transpose(0, 3, 1, 2))
    if a.ndim == 4 and layout is DataLayout.NCHW and a.transpose(0, 2, 3, 1).shape == want:
        return np.ascontiguousarray(a.transpose(0, 2, 3, 1))
    raise QuantizationError(
        f"{TRANSFORM_FUNCTION} must return a tensor of shape {want} for the model input "
        f"(layout {layout.value}), not {a.shape} (image {path})"
    )


__all__ = [
    "DEFAULT_HELD_ASIDE",
    "DEFAULT_SAMPLES",
    "CalibrationData",
    "ColorFormat",
    "DataLayout",
    "ImreaderBackend",
    "imageset_calibration",
    "list_images",
    "load_transform",
    "random_calibration",
    "read_image",
]
