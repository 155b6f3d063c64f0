"""The design space of a sweep: swept keys, their typed values, and the points they span.

``--param KEY=V1,V2`` names a `CompilerConfig` property (aliases and dashes allowed) and
``--arch-param KEY=V1,V2`` a dotted key of the arch TOML. Every value of every key is parsed
and checked on its own before anything runs, so a typo fails in a second rather than after
an hour of sweeping. Combinations (e.g. ``aipu_cores_used=4`` with ``resources_used=0.25``)
are checked when the point runs and, when invalid, recorded as failed points.

A list-valued property (``profiling_levels``) joins the members of one value with ``+``,
because the comma already separates values: ``--param profiling_levels=B+PB,B``.

>>> space = build_space(["tiny_cnn"], ["multicore_mode=batch,cooperative",
...                     "mvm_utilization_limit=0.5,1"], frames=2)
>>> [p.label() for p in space.points]  # doctest: +NORMALIZE_WHITESPACE
['tiny_cnn multicore_mode=batch mvm_utilization_limit=0.5',
 'tiny_cnn multicore_mode=batch mvm_utilization_limit=1.0',
 'tiny_cnn multicore_mode=cooperative mvm_utilization_limit=0.5',
 'tiny_cnn multicore_mode=cooperative mvm_utilization_limit=1.0']
>>> space.points[0].point_id == build_space(["tiny_cnn"], ["mvm_utilization_limit=0.5",
...     "multicore_mode=batch"], frames=2).points[0].point_id  # key order does not matter
True
"""

from __future__ import annotations

import hashlib
import itertools
import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aipusim import CompilerConfig, zoo
from aipusim.arch import DEFAULT_ARCH_PATH, load_arch
from aipusim.base.errors import ArchError, ConfigError
from aipusim.run.config_text import LIST_JOIN, value_text

#: A checked config value (bool, int, float, str, enum member, tuple of members or None).
ConfigValue = Any

#: Prefix of the result columns of arch keys (config keys are plain names).
ARCH_COLUMN_PREFIX = "arch."


@dataclass(frozen=True)
class SweepPoint:
    """One design point: a model, config values, arch values and a frame count.

    ``base_config_json`` (the ``--conf``/``--set`` properties every point starts from) and
    ``arch_path`` are the same for all points of a sweep. Plain picklable data, so a point
    travels to local or Dask workers as is.
    """

    model: str
    params: tuple[tuple[str, ConfigValue], ...]
    arch_params: tuple[tuple[str, Any], ...]
    frames: int
    input_size: int | None = None
    base_config_json: str = "{}"
    arch_path: str | None = None
    #: Digest of the base config and the arch file; part of the id.
    context_digest: str = ""
    #: Also execute the point on data and compare with the int8 reference (``--check``).
    check: bool = False
    #: Reuse calibrations through the quantization cache (False: ``--no-cache``). Not part
    #: of the id: the cache never changes a result.
    quantization_cache: bool = True

    @property
    def point_id(self) -> str:
        """A stable id: the same model, values, frames and context give the same id."""
        identity = {
            "model": self.model,
            "input_size": self.input_size,
            "params": sorted((k, value_text(v)) for k, v in self.params),
            "arch": sorted((k, value_text(v)) for k, v in self.arch_params),
            "frames": self.frames,
            "context": self.context_digest,
        }
        if self.check:  # (unchecked points keep the ids they had before checks existed)
            identity["check"] = True
        text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    def config(self) -> CompilerConfig:
        """The base config with this point's values (`ConfigError` if they clash)."""
        return CompilerConfig.from_dict(json.loads(self.base_config_json)).update(
            **dict(self.params)
        )

    def arch_overrides(self) -> dict[str, Any]:
        """This point's arch values as `load_arch` overrides."""
        return dict(self.arch_params)

    def columns(self) -> dict[str, str]:
        """The string column of every swept key: ``{column: text}``."""
        cols = {k: value_text(v) for k, v in self.params}
        cols.update({ARCH_COLUMN_PREFIX + k: value_text(v) for k, v in self.arch_params})
        return cols

    def label(self) -> str:
        """A one-line description (model then ``key=value`` pairs)."""
        pairs = [f"{k}={v}" for k, v in self.columns().items()]
        return " ".join([self.model, *pairs])


@dataclass(frozen=True)
class SweepSpace:
    """The swept keys with their values, and all points in a stable order."""

    models: tuple[str, ...]
    params: tuple[tuple[str, tuple[ConfigValue, ...]], ...]
    arch_params: tuple[tuple[str, tuple[Any, ...]], ...]
    points: tuple[SweepPoint, ...]
    #: Base config and arch file of every point (stored in the result folder).
    context: Mapping[str, Any]

    def typed_columns(self) -> dict[str, str]:
        """``{column: "bool"|"int"|"float"|"string"}`` for the keys whose values share a type."""
        out: dict[str, str] = {}
        keyed = [(k, v) for k, v in self.params]
        keyed += [(ARCH_COLUMN_PREFIX + k, v) for k, v in self.arch_params]
        for column, values in keyed:
            kind = uniform_type(values)
            if kind is not None:
                out[column] = kind
        return out


def uniform_type(values: Sequence[Any]) -> str | None:
    """The one scalar type of ``values`` (``None`` entries allowed), or None if mixed.

    >>> uniform_type([1, 2]), uniform_type([0.5, 1]), uniform_type(["a", None])
    ('int', 'float', 'string')
    >>> uniform_type([1, "a"]) is None
    True
    """
    kinds = set()
    for v in values:
        if v is None:
            continue
        if isinstance(v, bool):
            kinds.add("bool")
        elif isinstance(v, int):
            kinds.add("int")
        elif isinstance(v, float):
            kinds.add("float")
        elif isinstance(v, str):
            kinds.add("string")
        else:
            return None
    if kinds == {"int", "float"}:
        return "float"
    return kinds.pop() if len(kinds) == 1 else None


def _split(text: str, flag: str) -> tuple[str, list[str]]:
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"{flag} must be given as KEY=V1,V2,..., not {text!r}")
    values = [v.strip() for v in raw.split(",")]
    if not all(values):
        raise ConfigError(
            f"{flag} {key} must list non-empty values separated by commas, not {raw!r}"
        )
    return key, values


def _no_repeats(key: str, texts: list[str], flag: str) -> None:
    seen: set[str] = set()
    for text in texts:
        if text in seen:
            raise ConfigError(f"{flag} {key} must list each value once, not {text!r} twice")
        seen.add(text)


def parse_param(text: str) -> tuple[str, tuple[ConfigValue, ...]]:
    """``"KEY=V1,V2"`` -> (property name, typed values), each value checked by the property.

    >>> parse_param("mvm-utilization-limit=0.5,1")
    ('mvm_utilization_limit', (0.5, 1.0))
    >>> parse_param("mvm_utilization_limit=0.5,2")
    Traceback (most recent call last):
    ...
    aipusim.base.errors.ConfigError: --param mvm_utilization_limit=2: mvm_utilization_limit ...
    """
    key, raws = _split(text, "--param")
    try:
        prop = CompilerConfig.property(key.replace("-", "_"))
    except ConfigError as exc:
        raise ConfigError(f"--param {key}: {exc}") from None
    name = prop.name
    values = []
    for raw in raws:
        member_text = raw.replace(LIST_JOIN, ",") if prop.is_list else raw
        try:
            values.append(prop.parse(member_text))
        except ConfigError as exc:
            raise ConfigError(f"--param {name}={raw}: {exc}") from None
    _no_repeats(name, [value_text(v) for v in values], "--param")
    return name, tuple(values)


def parse_arch_value(raw: str) -> Any:
    """An arch value as TOML would read it; text that is no TOML value stays a string.

    >>> parse_arch_value("12"), parse_arch_value("12.5"), parse_arch_value("true")
    (12, 12.5, True)
    >>> parse_arch_value("lpddr4x")
    'lpddr4x'
    """
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def parse_arch_param(text: str, arch_path: str | Path | None = None) -> tuple[str, tuple[Any, ...]]:
    """``"ddr.data_rate_mt_s=3200,4266"`` -> (key, values), each value loaded into the arch.

    >>> parse_arch_param("ddr.data_rate_mt_s=3200,4266")
    ('ddr.data_rate_mt_s', (3200, 4266))
    """
    key, raws = _split(text, "--arch-param")
    _no_repeats(key, raws, "--arch-param")
    values = tuple(parse_arch_value(raw) for raw in raws)
    for raw, value in zip(raws, values, strict=True):
        try:
            load_arch(arch_path, {key: value})
        except ArchError as exc:
            raise ArchError(f"--arch-param {key}={raw}: {exc}") from None
    return key, values


def check_models(models: Sequence[str]) -> None:
    """Each of ``models`` a zoo name or an existing .onnx file, each once."""
    if not models:
        raise ConfigError("sweep MODEL must name at least one zoo model or .onnx file, not none")
    known = zoo.names()
    for model in models:
        if model in known:
            continue
        if model.lower().endswith(".onnx"):
            if not Path(model).is_file():
                raise ConfigError(f"MODEL {model!r} must be an existing .onnx file")
            continue
        raise ConfigError(
            f"MODEL must be a zoo model ({', '.join(known)}) or an .onnx file, not {model!r}"
        )
    if len(set(models)) != len(models):
        raise ConfigError(f"MODEL must name each model once, not {list(models)}")


def _digest_file(path: str | Path | None) -> str:
    source = Path(path) if path is not None else DEFAULT_ARCH_PATH
    return hashlib.sha256(source.read_bytes()).hexdigest()


def build_space(
    models: Sequence[str],
    params: Sequence[str] = (),
    arch_params: Sequence[str] = (),
    *,
    frames: int = 8,
    input_size: int | None = None,
    base: CompilerConfig | Mapping[str, CompilerConfig] | None = None,
    arch_path: str | Path | None = None,
    check: bool = False,
    quantization_cache: bool = True,
) -> SweepSpace:
    """Parse and check the swept keys, then list the Cartesian product of the points.

    ``base``: the config every point starts from (default: the defaults), or one per model
    (``aipusim sweep`` starts each zoo model from its built-in config).

    Order: models outermost, then the keys in the order given, values in the order given.
    ``check``: every point also runs on data against the int8 reference.
    ``quantization_cache=False``: every point calibrates again (``--no-cache``).
    """
    if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
        raise ConfigError(f"--frames must be a positive integer, not {frames!r}")
    if input_size is not None and (isinstance(input_size, bool) or input_size < 1):
        raise ConfigError(f"--input-size must be a positive integer, not {input_size!r}")
    check_models(models)

    load_arch(arch_path)  # a bad --arch fails here, before any per-key message
    parsed = [parse_param(p) for p in params]
    parsed_arch = [parse_arch_param(p, arch_path) for p in arch_params]
    for what, items in (("--param", parsed), ("--arch-param", parsed_arch)):
        names = [k for k, _ in items]
        for name in names:
            if names.count(name) > 1:
                raise ConfigError(f"{what} must name each key once, not {name!r} twice")

    bases = base if isinstance(base, Mapping) else dict.fromkeys(models, base)
    base_json = {
        m: json.dumps((bases.get(m) or CompilerConfig()).to_dict(only_changed=True), sort_keys=True)
        for m in models
    }
    context: dict[str, Any] = {}
    if len(set(base_json.values())) == 1:
        # one base for every model, as before (earlier sweep folders keep their context)
        context["base_config"] = json.loads(base_json[models[0]])
    else:
        context["base_configs"] = {m: json.loads(j) for m, j in base_json.items()}
    context |= {
        "arch_path": str(arch_path) if arch_path is not None else None,
        "arch_sha256": _digest_file(arch_path),
    }
    if check:  # one folder holds checked or unchecked points, never both
        context["check"] = True
    context_digest = hashlib.sha256(json.dumps(context, sort_keys=True).encode()).hexdigest()[:16]

    points = []
    keys = [k for k, _ in parsed]
    arch_keys = [k for k, _ in parsed_arch]
    grids = [vals for _, vals in parsed] + [vals for _, vals in parsed_arch]
    for model in models:
        for combo in itertools.product(*grids):
            points.append(
                SweepPoint(
                    model=model,
                    params=tuple(zip(keys, combo[: len(keys)], strict=True)),
                    arch_params=tuple(zip(arch_keys, combo[len(keys) :], strict=True)),
                    frames=frames,
                    input_size=input_size,
                    base_config_json=base_json[model],
                    arch_path=str(arch_path) if arch_path is not None else None,
                    context_digest=context_digest,
                    check=check,
                    quantization_cache=quantization_cache,
                )
            )
    return SweepSpace(
        models=tuple(models),
        params=tuple(parsed),
        arch_params=tuple(parsed_arch),
        points=tuple(points),
        context=context,
    )


__all__ = [
    "ARCH_COLUMN_PREFIX",
    "LIST_JOIN",
    "SweepPoint",
    "SweepSpace",
    "build_space",
    "check_models",
    "parse_arch_param",
    "parse_arch_value",
    "parse_param",
    "uniform_type",
    "value_text",
]
