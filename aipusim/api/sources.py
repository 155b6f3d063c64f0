"""Where a compile starts: the model (path, ModelProto or zoo name), its config, and the
binding of its graph inputs to `InputInfo` s or baked-in constants.

>>> import numpy as np
>>> from aipusim import zoo
>>> proto, sig = bind_inputs(zoo.build("tiny_cnn"), {"input": InputInfo(((1, 1, 4), 3, 32, 32))})
>>> sig["input"].shape_bounds.max
(4, 3, 32, 32)
>>> proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param
'input_dim0'
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from aipusim import zoo
from aipusim.api.inputs import InputInfo
from aipusim.base.errors import ConfigError, InvalidArgument
from aipusim.compiler.config import CompilerConfig, load_config, parse_assignments
from aipusim.compiler.importer import load_model
from aipusim.compiler.quant.cache import cache_root


def load_source(model: Any) -> tuple[Any, str, Path | None]:
    """(ModelProto, name, built-in config path or None) of a path, ModelProto or zoo name."""
    if isinstance(model, onnx.ModelProto):
        return model, model.graph.name or "model", None
    if not isinstance(model, str | os.PathLike):
        raise ConfigError(
            f"model must be an ONNX path, an onnx.ModelProto or a zoo name, not "
            f"{type(model).__name__}"
        )
    # lazy: loads pandas, yaml, not otherwise loaded here
    from aipusim.compiler.modelcard import builtin_configs
    from aipusim.run.job import resolve_model

    source = resolve_model(model)
    if source.path is not None:
        return load_model(source.path), source.name, None
    return zoo.build(source.name), source.name, builtin_configs().get(source.name)


def model_file(model: Any) -> Path | None:
    """The ONNX file ``model`` names, or None (a ModelProto or a zoo name).

    >>> model_file("resnet50") is None
    True
    """
    if not isinstance(model, str | os.PathLike):
        return None
    path = Path(model)
    return path if path.is_file() else None


def resolve_config(config: Any, builtin: Path | None) -> Any:
    """The `CompilerConfig` to compile with: ``config`` itself (a `CompilerConfig` or a
    file) or, for None or a mapping of properties, the model's starting config (the
    built-in one of a zoo model, else the defaults) with the mapping applied."""
    if config is None or isinstance(config, Mapping):
        base = load_config(builtin) if builtin is not None else CompilerConfig()
        return base.update(**{str(k): v for k, v in (config or {}).items()})
    if isinstance(config, CompilerConfig):
        return config.copy()
    if isinstance(config, str | os.PathLike):
        return load_config(Path(config))
    raise ConfigError(
        f"config must be a CompilerConfig, a mapping of properties or a config file path, "
        f"not {type(config).__name__}"
    )


def config_for(model: str | os.PathLike[str]) -> Any:
    """The `CompilerConfig` `compile` starts ``model`` from: a zoo model's built-in config,
    else (an ONNX file) the defaults.

    >>> config_for("resnet50").multicore_mode
    <MulticoreMode.BATCH: 'batch'>
    """
    # lazy: aipusim.run.job loads pandas, not otherwise loaded here
    from aipusim.run.job import resolve_model

    source = resolve_model(model)
    if source.path is not None:
        return resolve_config(None, None)
    # lazy: aipusim.compiler.modelcard loads yaml, not otherwise loaded here
    from aipusim.compiler.modelcard import builtin_configs

    return resolve_config(None, builtin_configs().get(source.name))


def starting_config(model: str | os.PathLike[str], defaults: bool = False) -> Any:
    """The config every command starts ``model`` from: `config_for` (a zoo model's built-in
    config), or with ``defaults`` (``--defaults``) the plain defaults.

    >>> starting_config("resnet50", defaults=True).aipu_cores_used
    1
    """
    if defaults:
        return resolve_config(None, None)
    return config_for(model)


def cache_folder() -> Path:
    """aipusim's cache folder: the quantization cache and the zoo models sweeps keep
    (``$AIPUSIM_CACHE_DIR``, else the user cache folder)."""
    return cache_root()


def with_sets(config: Any, sets: Iterable[str]) -> Any:
    """A copy of ``config`` with ``key=value`` texts (``--set``) set on it.

    >>> with_sets(config_for("tiny_cnn"), ["frequency=400000000"]).frequency
    400000000
    """
    out = config.copy()
    out.update(**parse_assignments(sets))
    return out


def base_label(model: str | os.PathLike[str], defaults: bool = False) -> str:
    """Where `starting_config` starts ``model``, as outputs name it.

    >>> base_label("resnet50"), base_label("resnet50", defaults=True)
    ('the built-in config of resnet50', 'the defaults (--defaults)')
    """
    # lazy: aipusim.run.job loads pandas, not otherwise loaded here
    from aipusim.run.job import resolve_model

    if defaults:
        return "the defaults (--defaults)"
    source = resolve_model(model)
    if source.path is not None:
        return "the defaults (an ONNX file has no built-in config)"
    return f"the built-in config of {source.name}"


def _model_dtype(vi: Any) -> np.dtype:
    return np.dtype(helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))


def _model_dims(vi: Any) -> list[int | None]:
    return [
        d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
        for d in vi.type.tensor_type.shape.dim
    ]


def apply_layout(proto: Any, layout: str) -> Any:
    """``proto`` taking its 4-D inputs in ``layout``: for NHWC, a copy with a Transpose to
    the model's NCHW in front of each (the graph cleaner moves it to the host
    pre-processing); NCHW, the layout of ONNX models, leaves it as it is."""
    if layout == "NCHW":
        return proto
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    g = out.graph
    inits = {t.name for t in g.initializer}
    transposes = []
    for vi in g.input:
        dims = vi.type.tensor_type.shape.dim
        if vi.name in inits or len(dims) != 4:
            continue
        inner = f"{vi.name}__nchw"
        for node in g.node:
            for i, name in enumerate(node.input):
                if name == vi.name:
                    node.input[i] = inner
        transposes.append(
            helper.make_node(
                "Transpose", [vi.name], [inner], perm=[0, 3, 1, 2], name=f"{vi.name}/to_nchw"
            )
        )
        n, c, h, w = (onnx.TensorShapeProto.Dimension() for _ in range(4))
        for target, source in zip((n, c, h, w), dims, strict=True):
            target.CopyFrom(source)
        del dims[:]
        dims.extend([n, h, w, c])
    for i, node in enumerate(transposes):
        g.node.insert(i, node)
    return out


def bind_inputs(proto: Any, inputs: Mapping[str, Any] | None) -> tuple[Any, dict[str, InputInfo]]:
    """A copy of ``proto`` with numpy inputs baked in as constants and ranged dims made
    dynamic, and the signature: runtime input name -> `InputInfo`, in graph order."""
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    g = out.graph
    inits = {t.name for t in g.initializer}
    real = [vi for vi in g.input if vi.name not in inits]
    names = [vi.name for vi in real]
    if inputs is not None and not isinstance(inputs, Mapping):
        raise InvalidArgument(
            "inputs must be a mapping of input name to an InputInfo or a numpy array, not "
            f"{type(inputs).__name__} {inputs!r:.60}"
        )
    given = dict(inputs or {})
    for key in given:
        if key not in names:
            raise ConfigError(
                f"inputs names `{key}`, which is not an input of the model; "
                f"inputs are {', '.join(names)}"
            )
    signature: dict[str, InputInfo] = {}
    for vi in real:
        value = given.get(vi.name)
        dims = _model_dims(vi)
        dtype = _model_dtype(vi)
        if value is None:
            if not dims or any(d is None for d in dims):
                raise ConfigError(
                    f"input `{vi.name}` has dynamic dims {dims}; give its shape with "
                    f"inputs={{'{vi.name}': InputInfo(...)}}"
                )
            signature[vi.name] = InputInfo(dims, dtype)
        elif isinstance(value, InputInfo):
            _bind_info(vi, value, dims, dtype)
            signature[vi.name] = value
        elif isinstance(value, np.ndarray | np.generic | int | float):
            array = np.asarray(value, dtype=dtype)
            if dims and (
                len(dims) != array.ndim
                or any(d is not None and d != s for d, s in zip(dims, array.shape, strict=True))
            ):
                raise ConfigError(
                    f"constant for input `{vi.name}` must have the model's shape {dims}, "
                    f"not {list(array.shape)}"
                )
            g.initializer.append(numpy_helper.from_array(array, vi.name))
        else:
            raise ConfigError(
                f"inputs[`{vi.name}`] must be an InputInfo (a runtime input) or a numpy array "
                f"(baked in as a constant), not {type(value).__name__}"
            )
    constants = [n for n in names if n not in signature]
    kept = [vi for vi in g.input if vi.name not in constants]
    del g.input[:]
    g.input.extend(kept)
    return out, signature


def _bind_info(vi: Any, info: InputInfo, dims: list[int | None], dtype: np.dtype) -> None:
    bounds = info.shape_bounds
    if dims and len(dims) != len(bounds.opt):
        raise ConfigError(
            f"InputInfo of `{vi.name}` must have {len(dims)} dims like the model "
            f"({dims}), not {len(bounds.opt)}"
        )
    if info.dtype != dtype:
        raise ConfigError(
            f"InputInfo dtype of `{vi.name}` must be {dtype.name} (the model's input type), "
            f"not {info.dtype.name}"
        )
    shape = vi.type.tensor_type.shape
    if not dims:
        for _ in bounds.opt:
            shape.dim.add()
    # A dim that may change between calls must be symbolic, or compiling another size
    # would clash with the model's fixed value.
    for i in bounds.dynamic_dims():
        dim = shape.dim[i]
        dim.Clear()
        dim.dim_param = f"{vi.name}_dim{i}"


def real_inputs(proto: Any) -> list[str]:
    """Graph inputs that are no initializer (the inputs a caller feeds)."""
    inits = {t.name for t in proto.graph.initializer}
    return [vi.name for vi in proto.graph.input if vi.name not in inits]


__all__ = [
    "apply_layout",
    "base_label",
    "bind_inputs",
    "cache_folder",
    "config_for",
    "load_source",
    "model_file",
    "real_inputs",
    "resolve_config",
    "starting_config",
    "with_sets",
]
