"""`CompileRequest`: everything one compilation needs, as the CLI hands it to the driver.

The CLI (``aipusim compile``) checks every flag, builds the final `CompilerConfig` and
passes one frozen `CompileRequest` to ``aipusim.compiler.driver.compile_model``.
``cli_args`` is what the driver writes to ``cli_args.json``; `load_cli_args` reads such a
file back for ``--cli-args``.

>>> parse_input_shape("1,3,224,224")
(1, 3, 224, 224)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from aipusim.base.errors import ConfigError
from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.config.spec import did_you_mean


class InputDataLayout(StrEnum):
    """Tensor layout of the model input (and of calibration tensors)."""

    NCHW = "NCHW"
    NHWC = "NHWC"


class ColorFormat(StrEnum):
    """Channel order of calibration images."""

    RGB = "RGB"
    BGR = "BGR"
    GRAY = "GRAY"


class CalibrationMode(StrEnum):
    """What the calibration data is (``--calibration``)."""

    AUTO = "auto"  # images for an image input (bundled ones unless --imageset), else random
    IMAGES = "images"  # images; an error for an input that is no image
    RANDOM = "random"  # seeded random tensors


class ImreaderBackend(StrEnum):
    """Library that decodes calibration images."""

    PIL = "PIL"
    OPENCV = "OPENCV"


#: Keys of ``cli_args.json`` (the long flag names with underscores) and their JSON types.
CLI_ARG_TYPES: Mapping[str, tuple[type, ...]] = {
    "input": (str,),
    "output": (str,),
    "conf": (str,),
    "quantize_only": (bool,),
    "input_shape": (str,),
    "imageset": (str,),
    "transform": (str,),
    "input_data_layout": (str,),
    "color_format": (str,),
    "imreader_backend": (str,),
    "calibration": (str,),
    "image_mean": (str,),
    "image_std": (str,),
    "aipu_cores": (int,),
    "set": (list,),
    "arch": (str,),
}

#: Dimensions an input shape may have (a scalar or a 7-D input is no model we compile).
_MAX_RANK = 6


@dataclass(frozen=True)
class CompileRequest:
    """One compilation: model, output folder, config and calibration/input settings.

    ``config`` is a private copy, so later changes to the caller's config do not leak in.
    """

    model_path: Path
    output_dir: Path
    config: CompilerConfig
    input_shape: tuple[int, ...] | None = None
    imageset: Path | None = None
    transform: Path | None = None
    input_data_layout: InputDataLayout | None = None
    color_format: ColorFormat = ColorFormat.RGB
    imreader_backend: ImreaderBackend = ImreaderBackend.PIL
    #: Calibration data: images where the input is one (auto), images, or random.
    calibration: CalibrationMode = CalibrationMode.AUTO
    #: Per-channel mean and std of the built-in image preprocessing (None: 0 and 1).
    image_mean: tuple[float, ...] | None = None
    image_std: tuple[float, ...] | None = None
    arch_path: Path | None = None
    cli_args: Mapping[str, Any] = field(default_factory=dict)
    #: Passes (or ``all``) whose output IR is written to ``ir/<NN>_<pass>.txt``.
    dump_after: tuple[str, ...] = ()
    #: End the compilation after this pass (status ``STOPPED``; no ``compiled_model/``).
    stop_after: str | None = None
    #: Copy the ONNX model into ``input_model/`` (the reference artifact tree); False:
    #: record only its path, size and SHA-256 in ``input_model/source.json`` (``run``,
    #: which need not keep a second copy of a 100 MB model).
    keep_input_model: bool = True
    #: Reuse (and store) the quantized model of an earlier compile with the same model,
    #: calibration data and quantization options (`aipusim.compiler.quant.cache`); False
    #: calibrates every time (``--no-cache``).
    quantization_cache: bool = True
    #: What the refusal of a compile too big for the machine's memory tells the user to
    #: change (None: `aipusim.compiler.memory_estimate.DEFAULT_REMEDY`, the flags of
    #: ``aipusim compile``); a command that compiles for the user names its own flags.
    memory_remedy: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "config", self.config.copy())
        object.__setattr__(self, "cli_args", dict(self.cli_args))


def parse_input_shape(text: str, flag: str = "--input-shape") -> tuple[int, ...]:
    """``"1,3,224,224"`` -> ``(1, 3, 224, 224)``; every dimension a positive integer."""
    parts = [p.strip() for p in text.replace("x", ",").split(",")]
    valid = f"{flag} must be 1-{_MAX_RANK} positive integers separated by commas (N,C,H,W)"
    if not 1 <= len(parts) <= _MAX_RANK or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ConfigError(f"{valid}, not {text!r}")
    return tuple(int(p) for p in parts)


def load_cli_args(path: Path) -> dict[str, Any]:
    """Read a ``cli_args.json`` (as the driver writes it); keys and value types checked."""
    from aipusim.compiler.config.files import read_data_file

    if path.suffix.lower() != ".json":
        raise ConfigError(f"--cli-args must be a .json file, not {str(path)!r}")
    data, _ = read_data_file(path, what="--cli-args file")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: cli args must be a JSON object, not {type(data).__name__}")
    for key, value in data.items():
        if key not in CLI_ARG_TYPES:
            raise ConfigError(
                f"{path}: unknown cli argument `{key}`{did_you_mean(key, CLI_ARG_TYPES)}"
            )
        kinds = CLI_ARG_TYPES[key]
        wrong_bool = isinstance(value, bool) and bool not in kinds
        if value is not None and (wrong_bool or not isinstance(value, kinds)):
            names = " or ".join(k.__name__ for k in kinds)
            raise ConfigError(f"{path}: {key} must be {names} or null, not {value!r}")
        if key == "set" and value is not None and not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{path}: set must be a list of 'key=value' strings")
    return {k: v for k, v in data.items() if v is not None}


__all__ = [
    "CLI_ARG_TYPES",
    "CalibrationMode",
    "ColorFormat",
    "CompileRequest",
    "ImreaderBackend",
    "InputDataLayout",
    "load_cli_args",
    "parse_input_shape",
]
