"""Calibration data: bundled photographs, an image folder, or seeded random tensors.

`CalibrationData` holds the calibration samples (one dict input-name -> array of the model
input's full shape per sample) and, apart from them, held-aside samples on which the
accuracy report compares the int8 model with the fp32 model.

**Default images.** A model whose one float input looks like an image (`image_input`: rank
4, 1 or 3 channels on axis 1 (NCHW) or axis 3 (NHWC), height and width >= `MIN_IMAGE_SIDE`)
calibrates on real photographs by default: a dozen sample pictures that scikit-image ships
inside its wheel (`BUNDLED_IMAGES`; no download). `default_image_split` halves them,
deterministically: the calibration half and the evaluation half (the held-aside samples of
the accuracy report). Any other input (a (1, 8) vector, token ids, several inputs) gets
seeded random data, as does ``--calibration random``.

**Built-in preprocessing** (`preprocess_image`; the default images, and an ``--imageset``
given without ``--transform``): the image is read in the colour format (``--color-format``;
a 1-channel input always reads grey, GRAY on a 3-channel input repeats the grey channel),
scaled so that it covers the input's height x width (bilinear), centre-cropped to it, scaled
to [0, 1], then normalised per channel, ``(x - mean) / std`` (`Normalization`: mean 0 and
std 1 unless ``--image-mean``/``--image-std`` say otherwise; ImageNet models want mean
0.485,0.456,0.406 and std 0.229,0.224,0.225). A ``--transform`` script replaces all of it.

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

import hashlib
import importlib.util
import math
import sys
from collections.abc import Callable, Mapping, Sequence
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
#: The default calibration photographs: scikit-image's sample data inside its wheel (no
#: download), in split order: the even positions calibrate, the odd ones are held aside.
#: Each half has colour and grey pictures: a person, an animal, objects, a scene, a
#: microscope, a texture.
BUNDLED_IMAGES = (
    "astronaut.png",
    "chelsea.png",
    "coffee.png",
    "rocket.jpg",
    "motorcycle_left.png",
    "retina.jpg",
    "ihc.png",
    "hubble_deep_field.jpg",
    "camera.png",
    "coins.png",
    "text.png",
    "grass.png",
)
#: Smallest height and width of an input taken for an image (smaller: random data).
MIN_IMAGE_SIDE = 16
#: Channel counts of an image input (grey, colour).
IMAGE_CHANNELS = (1, 3)
#: The package the default images come from (and the sub-folder holding them).
IMAGE_PACKAGE, IMAGE_FOLDER = "skimage", "data"


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


@dataclass(frozen=True)
class ImageInput:
    """The image axes of a model input: its layout, batch, channels, height and width."""

    layout: DataLayout
    batch: int
    channels: int
    height: int
    width: int


def image_input(shape: Sequence[int], layout: DataLayout | str | None = None) -> ImageInput | None:
    """The image axes of an input ``shape``, or None when it is no image (the rule of the
    module docstring). ``layout`` (``--input-data-layout``) is tried first, then the other.

    >>> image_input((1, 3, 224, 224))
    ImageInput(layout=<InputDataLayout.NCHW: 'NCHW'>, batch=1, channels=3, height=224, width=224)
    >>> image_input((1, 240, 320, 3)).layout, image_input((1, 8)), image_input((1, 3, 8, 8))
    (<InputDataLayout.NHWC: 'NHWC'>, None, None)
    """
    if len(shape) != 4:
        return None
    first = DataLayout(str(layout).upper()) if layout else DataLayout.NCHW
    for lay in (first, *(x for x in DataLayout if x is not first)):
        n, c, h, w = shape if lay is DataLayout.NCHW else (shape[0], shape[3], shape[1], shape[2])
        if c in IMAGE_CHANNELS and min(h, w) >= MIN_IMAGE_SIDE:
            return ImageInput(lay, int(n), int(c), int(h), int(w))
    return None


def image_rule_text() -> str:
    """The image-input rule in words, for messages."""
    return (
        f"rank 4 with {' or '.join(map(str, IMAGE_CHANNELS))} channels, NCHW or NHWC, "
        f"height and width >= {MIN_IMAGE_SIDE}"
    )


@dataclass(frozen=True)
class Normalization:
    """Per-channel ``(x - mean) / std`` of the built-in preprocessing (x in [0, 1]); one
    value applies to every channel.

    >>> Normalization((0.5,), (0.25,)).per_channel(3)[1].tolist()
    [0.25, 0.25, 0.25]
    """

    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)

    def __post_init__(self) -> None:
        for flag, values in (("--image-mean", self.mean), ("--image-std", self.std)):
            if not values or not all(math.isfinite(v) for v in values):
                raise QuantizationError(f"{flag} must be finite numbers, not {list(values)}")
        if not all(v > 0 for v in self.std):
            raise QuantizationError(f"--image-std must be positive numbers, not {list(self.std)}")

    def per_channel(self, channels: int) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std) as float32 arrays of ``channels`` values."""
        out = []
        for flag, values in (("--image-mean", self.mean), ("--image-std", self.std)):
            if len(values) not in (1, channels):
                raise QuantizationError(
                    f"{flag} must have 1 or {channels} values (one per input channel), "
                    f"not {len(values)}"
                )
            out.append(np.broadcast_to(np.asarray(values, np.float32), (channels,)).copy())
        return out[0], out[1]

    def describe(self) -> dict[str, list[float]]:
        """For reports."""
        return {"mean": list(self.mean), "std": list(self.std)}


def parse_channel_values(text: str, flag: str) -> tuple[float, ...]:
    """``"0.485,0.456,0.406"`` -> a tuple of floats (``--image-mean``/``--image-std``).

    >>> parse_channel_values("0.229, 0.224,0.225", "--image-std")
    (0.229, 0.224, 0.225)
    """
    try:
        values = tuple(float(p) for p in text.split(","))
    except ValueError:
        raise QuantizationError(
            f"{flag} must be 1 or 3 numbers separated by commas, not {text!r}"
        ) from None
    if len(values) not in IMAGE_CHANNELS or not all(math.isfinite(v) for v in values):
        raise QuantizationError(f"{flag} must be 1 or 3 numbers separated by commas, not {text!r}")
    return values


def bundled_image_dir() -> Path:
    """The folder of the default images (inside the installed scikit-image; its package
    is located, not imported)."""
    spec = importlib.util.find_spec(IMAGE_PACKAGE)
    hint = "use --imageset DIR or --calibration random"
    if spec is None or not spec.submodule_search_locations:
        raise QuantizationError(
            f"the default calibration images come from scikit-image, which must be "
            f"installed (pip install scikit-image), not missing; or {hint}"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / IMAGE_FOLDER
    missing = [n for n in BUNDLED_IMAGES if not (folder / n).is_file()]
    if missing:
        raise QuantizationError(
            f"scikit-image's data folder {folder} must hold {', '.join(missing)}, which it "
            f"lacks; reinstall scikit-image or {hint}"
        )
    return folder


def default_image_split() -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """(calibration images, evaluation images) of the default set: the even and the odd
    positions of `BUNDLED_IMAGES`, always the same.

    >>> cal, held = default_image_split()
    >>> [p.name for p in cal][:2], [p.name for p in held][:2], len(cal), len(held)
    (['astronaut.png', 'coffee.png'], ['chelsea.png', 'rocket.jpg'], 6, 6)
    """
    folder = bundled_image_dir()
    files = [folder / name for name in BUNDLED_IMAGES]
    return tuple(files[0::2]), tuple(files[1::2])


def preprocess_image(image: Any, inp: ImageInput, norm: Normalization) -> np.ndarray:
    """The built-in preprocessing (module docstring) of a PIL image: a (C, H, W) float32
    array for ``inp``.

    >>> from PIL import Image
    >>> img = Image.new("RGB", (40, 20), (255, 0, 0))
    >>> a = preprocess_image(img, ImageInput(DataLayout.NCHW, 1, 3, 16, 16), Normalization())
    >>> a.shape, a[:, 0, 0].tolist()
    ((3, 16, 16), [1.0, 0.0, 0.0])
    """
    from PIL import Image

    h, w = inp.height, inp.width
    scale = max(h / image.height, w / image.width)
    size = (max(w, round(image.width * scale)), max(h, round(image.height * scale)))
    resized = image.resize(size, Image.Resampling.BILINEAR)
    left, top = (size[0] - w) // 2, (size[1] - h) // 2
    a = np.asarray(resized.crop((left, top, left + w, top + h)), np.float32) / np.float32(255)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.shape[2] != inp.channels:  # a grey picture for a colour input
        a = np.repeat(a[:, :, :1], inp.channels, axis=2)
    mean, std = norm.per_channel(inp.channels)
    return np.ascontiguousarray(((a - mean) / std).transpose(2, 0, 1), np.float32)


def _batches(images: Sequence[np.ndarray], inp: ImageInput) -> list[np.ndarray]:
    """(C, H, W) images -> samples of the input's shape: ``batch`` consecutive images each
    (the last sample wraps around to the first images), in the input's layout."""
    n = max(1, math.ceil(len(images) / inp.batch))
    out = []
    for i in range(n):
        group = np.stack([images[(i * inp.batch + k) % len(images)] for k in range(inp.batch)])
        if inp.layout is DataLayout.NHWC:
            group = np.ascontiguousarray(group.transpose(0, 2, 3, 1))
        out.append(group)
    return out


#: Image sets a process decoded lately, by the bytes of their files and the
#: preprocessing: a sweep worker calibrates (or looks up the cache key of) the same
#: images at every compile, and decoding them is most of that.
_decoded: dict[tuple[Any, ...], list[np.ndarray]] = {}
_DECODED_SETS = 4


def _builtin_arrays(
    files: Sequence[Path], inp: ImageInput, norm: Normalization, color: ColorFormat
) -> list[np.ndarray]:
    color = ColorFormat.GRAY if inp.channels == 1 else color
    try:
        contents = tuple(hashlib.sha256(Path(f).read_bytes()).digest() for f in files)
    except OSError:
        contents = None  # (read_image names the file that cannot be read)
    key = (contents, inp, norm, color)
    if contents is None or key not in _decoded:
        images = [
            preprocess_image(read_image(f, ImreaderBackend.PIL, color), inp, norm) for f in files
        ]
        _decoded[key] = _batches(images, inp)
        while len(_decoded) > _DECODED_SETS:
            del _decoded[next(iter(_decoded))]
    return [a.copy() for a in _decoded[key]]


def bundled_image_calibration(
    input_name: str,
    input_shape: tuple[int, ...],
    *,
    layout: DataLayout | str | None = None,
    color: ColorFormat | str = ColorFormat.RGB,
    normalization: Normalization | None = None,
    transform: str | Path | None = None,
    backend: ImreaderBackend | str = ImreaderBackend.PIL,
) -> CalibrationData:
    """The default images (`default_image_split`): the calibration half becomes the
    samples, the evaluation half the held-aside samples. Built-in preprocessing, or the
    ``transform`` script's.

    >>> data = bundled_image_calibration("x", (1, 3, 32, 32))
    >>> len(data.samples), len(data.held_aside), data.samples[0]["x"].shape
    (6, 6, (1, 3, 32, 32))
    """
    cal, held = default_image_split()
    (cal_arrays, held_arrays), extra = _image_arrays(
        (cal, held),
        transform,
        input_name,
        tuple(input_shape),
        DataLayout(str(layout).upper()) if layout else None,
        ColorFormat(color),
        ImreaderBackend(backend),
        normalization,
        "calibration images need an image input",
    )
    extra["images"] = len(cal) + len(held)
    return CalibrationData(
        samples=tuple({input_name: a} for a in cal_arrays),
        held_aside=tuple({input_name: a} for a in held_arrays),
        source=f"scikit-image sample images ({len(cal)} calibration, {len(held)} evaluation)",
        extra=extra,
    )


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
    transform: str | Path | None,
    input_name: str,
    input_shape: tuple[int, ...],
    *,
    layout: DataLayout | str = DataLayout.NCHW,
    color: ColorFormat | str = ColorFormat.RGB,
    backend: ImreaderBackend | str = ImreaderBackend.PIL,
    max_samples: int = 256,
    held_aside: int = DEFAULT_HELD_ASIDE,
    normalization: Normalization | None = None,
) -> CalibrationData:
    """Read a folder of images through the user's transform (or, with ``transform`` None,
    the built-in preprocessing and ``normalization``) into calibration samples.

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
    (arrays,), extra = _image_arrays(
        (files,),
        transform,
        input_name,
        tuple(input_shape),
        layout,
        color,
        backend,
        normalization,
        "--imageset without --transform needs an image input",
    )
    n_held = min(held_aside, len(arrays) // 5)
    cal = arrays[: len(arrays) - n_held] if n_held else arrays
    held = arrays[len(arrays) - n_held :] if n_held else arrays[: max(1, held_aside)]
    extra |= {"images": len(files), "backend": backend.value}
    return CalibrationData(
        samples=tuple({input_name: a} for a in cal),
        held_aside=tuple({input_name: a} for a in held),
        source=str(folder),
        held_aside_distinct=n_held > 0,
        extra=extra,
    )


def _image_arrays(
    file_sets: Sequence[Sequence[Path]],
    transform: str | Path | None,
    input_name: str,
    want: tuple[int, ...],
    layout: DataLayout | None,
    color: ColorFormat,
    backend: ImreaderBackend,
    normalization: Normalization | None,
    needs: str,
) -> tuple[list[list[np.ndarray]], dict[str, Any]]:
    """Each set of image files as input-shaped samples, through the ``transform`` script
    or (None) the built-in preprocessing; ``needs`` starts the error for a non-image input.
    Also the facts for the report (``extra``)."""
    extra: dict[str, Any] = {"color_format": color.value}
    if transform is not None:
        fn = load_transform(transform)
        lay = layout or DataLayout.NCHW
        extra["transform"] = str(transform)
        return [
            [_transformed(fn, transform, f, backend, color, want, lay) for f in files]
            for files in file_sets
        ], extra
    inp = image_input(want, layout)
    if inp is None:
        raise QuantizationError(
            f"{needs} ({image_rule_text()}), not {input_name} of shape {want}; "
            f"give a --transform script"
        )
    norm = normalization or Normalization()
    extra["normalization"] = norm.describe()
    return [_builtin_arrays(files, inp, norm, color) for files in file_sets], extra


def _transformed(
    fn: Callable[[Any], Any],
    transform: str | Path,
    path: Path,
    backend: ImreaderBackend,
    color: ColorFormat,
    want: tuple[int, ...],
    layout: DataLayout,
) -> np.ndarray:
    """One image through the user's transform, checked and laid out for the model."""
    image = read_image(path, backend, color)
    try:
        out = fn(image)
    except Exception as exc:  # user code
        raise QuantizationError(
            f"transform script {transform} failed on image {path}: {type(exc).__name__}: {exc}"
        ) from None
    return _fit_shape(_to_array(out, path), want, layout, path)


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
    "BUNDLED_IMAGES",
    "DEFAULT_HELD_ASIDE",
    "DEFAULT_SAMPLES",
    "MIN_IMAGE_SIDE",
    "CalibrationData",
    "ColorFormat",
    "DataLayout",
    "ImageInput",
    "ImreaderBackend",
    "Normalization",
    "bundled_image_calibration",
    "bundled_image_dir",
    "default_image_split",
    "image_input",
    "imageset_calibration",
    "list_images",
    "load_transform",
    "parse_channel_values",
    "preprocess_image",
    "random_calibration",
    "read_image",
]
