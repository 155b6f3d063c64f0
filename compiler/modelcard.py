"""YAML model cards: where a model's compiler settings come from, and in which order.

A card names models and, per model, its compiler settings::

    models:
      my-model:
        class: AxONNXModel
        weight_path: my_model.onnx
        extra_kwargs:
          compiler_config_file: base.toml      # a TOML config (optional)
          compilation_config:                  # inline values (optional)
            aipu_cores_used: 4

Precedence, highest first: the inline ``compilation_config``, then the TOML
``compiler_config_file``, then the `CompilerConfig` defaults.

Where ``compiler_config_file`` is looked for:
- a bare file name (``yolov8n.toml``): the card's folder first, then the built-in configs
  (`BUILTIN_CONFIG_DIR`, listed by `builtin_configs`);
- a relative path (``configs/base.toml``): from the card's folder;
- an absolute path: as is.
``weight_path`` is relative to the card's folder unless absolute. YAML is read with
``yaml.safe_load`` rules (no object construction).

>>> from aipusim.compiler.modelcard import builtin_configs
>>> "resnet50" in builtin_configs()
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from aipusim.base.errors import ConfigError
from aipusim.compiler.config import CompilerConfig, canonical_name, load_config
from aipusim.compiler.config.compiler_config import to_json_value
from aipusim.compiler.config.files import config_from_mapping, parse_yaml, toml_text
from aipusim.compiler.config.spec import did_you_mean

#: Folder of the built-in TOML configs shipped with the package.
BUILTIN_CONFIG_DIR = Path(__file__).resolve().parent / "configs"


def builtin_configs() -> dict[str, Path]:
    """Built-in config name (file stem) -> TOML path, sorted by name."""
    return {p.stem: p for p in sorted(BUILTIN_CONFIG_DIR.glob("*.toml"))}


def builtin_config_path(name: str) -> Path:
    """The built-in TOML called ``name`` (with or without ``.toml``), or a `ConfigError`."""
    configs = builtin_configs()
    stem = name.removesuffix(".toml")
    if stem not in configs:
        hint = did_you_mean(stem, configs) or f"; built-in: {', '.join(configs)}"
        raise ConfigError(f"no built-in compiler config `{name}`{hint}")
    return configs[stem]


def resolve_config_file(reference: str | Path, card_dir: Path) -> Path:
    """Find the file a card's ``compiler_config_file`` names (rules in the module doc)."""
    ref = Path(reference)
    if ref.is_absolute():
        candidates = [ref]
    elif len(ref.parts) == 1:
        candidates = [card_dir / ref, BUILTIN_CONFIG_DIR / ref]
    else:
        candidates = [card_dir / ref]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    looked = ", ".join(str(c) for c in candidates)
    raise ConfigError(f"compiler_config_file `{reference}` does not exist (looked at {looked})")


def resolve_weight_path(reference: str | Path, card_dir: Path) -> Path:
    """A card's ``weight_path``: relative to the card's folder unless absolute."""
    ref = Path(reference)
    return ref if ref.is_absolute() else card_dir / ref


@dataclass(frozen=True)
class ModelEntry:
    """One model of a card with its resolved paths and its effective compiler config."""

    name: str
    class_name: str | None
    weight_path: Path | None
    config_file: Path | None
    #: The card's ``compilation_config`` exactly as written (aliases not yet resolved).
    inline_config: Mapping[str, Any]
    #: Defaults < ``config_file`` < ``inline_config``.
    config: CompilerConfig = field(compare=False)

    def inline_as_toml(self, header: str = "") -> str:
        """The inline values (only those) as TOML text, with canonical property names.

        Values come from the effective config, where the inline ones always win, so they
        are checked and in canonical form (aliases resolved, enums as strings).
        """
        names = [canonical_name(str(k)) for k in self.inline_config]
        data = {n: to_json_value(getattr(self.config, n)) for n in names}
        return toml_text({n: v for n, v in data.items() if v is not None}, header)


@dataclass(frozen=True)
class ModelCard:
    """A parsed YAML model card: its path and its models by name."""

    path: Path
    models: Mapping[str, ModelEntry]

    def model(self, name: str | None = None) -> ModelEntry:
        """The model called ``name``; without a name, the card's only model."""
        if name is None:
            if len(self.models) != 1:
                raise ConfigError(
                    f"{self.path}: the card has {len(self.models)} models "
                    f"({', '.join(self.models)}); choose one by name"
                )
            return next(iter(self.models.values()))
        if name not in self.models:
            hint = did_you_mean(name, self.models) or f"; models: {', '.join(self.models)}"
            raise ConfigError(f"{self.path}: no model `{name}`{hint}")
        return self.models[name]


def _key_lines(text: str, keys: tuple[str, ...]) -> dict[str, int]:
    """1-based line of every key of the mapping found by following ``keys`` from the root.

    Uses the YAML node tree (marks), so a key is located in the right model even when
    several models set it.
    """
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return {}
        node = next((v for k, v in node.value if k.value == key), None)
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {k.value: k.start_mark.line + 1 for k, _ in node.value}


def _expect(value: Any, kind: type | tuple[type, ...], where: str, what: str) -> Any:
    if value is not None and not isinstance(value, kind):
        raise ConfigError(f"{where} must be {what}, not {type(value).__name__}")
    return value


def load_model_card(path: str | Path) -> ModelCard:
    """Parse a YAML model card and build every model's effective `CompilerConfig`."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"model card {path} does not exist (or is not a file)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read model card: {exc}") from None
    data = parse_yaml(text, path)
    if not isinstance(data, Mapping) or not isinstance(data.get("models"), Mapping):
        raise ConfigError(
            f"{path}: a model card must have a `models:` table of NAME: "
            "{class, weight_path, extra_kwargs}"
        )
    card_dir = path.parent
    entries = {
        str(name): _load_entry(str(name), raw, path, card_dir, text)
        for name, raw in data["models"].items()
    }
    return ModelCard(path=path, models=MappingProxyType(entries))


def _load_entry(name: str, raw: Any, path: Path, card_dir: Path, text: str) -> ModelEntry:
    where = f"{path}: models.{name}"
    raw = _expect(raw, Mapping, where, "a table") or {}
    class_name = _expect(raw.get("class"), str, f"{where}.class", "a string")
    weight = _expect(raw.get("weight_path"), str, f"{where}.weight_path", "a path string")
    extra = _expect(raw.get("extra_kwargs"), Mapping, f"{where}.extra_kwargs", "a table") or {}
    config_ref = _expect(
        extra.get("compiler_config_file"),
        str,
        f"{where}.extra_kwargs.compiler_config_file",
        "a path string",
    )
    inline = _expect(
        extra.get("compilation_config"),
        Mapping,
        f"{where}.extra_kwargs.compilation_config",
        "a table of property: value",
    )
    inline = dict(inline or {})
    config_file = resolve_config_file(config_ref, card_dir) if config_ref else None
    base = load_config(config_file) if config_file else CompilerConfig()
    lines = _key_lines(text, ("models", name, "extra_kwargs", "compilation_config"))
    config = config_from_mapping(inline, path, base=base, lines=lines, label=f"model {name}: ")
    return ModelEntry(
        name=name,
        class_name=class_name,
        weight_path=resolve_weight_path(weight, card_dir) if weight else None,
        config_file=config_file,
        inline_config=MappingProxyType(inline),
        config=config,
    )


__all__ = [
    "BUILTIN_CONFIG_DIR",
    "ModelCard",
    "ModelEntry",
    "builtin_config_path",
    "builtin_configs",
    "load_model_card",
    "resolve_config_file",
    "resolve_weight_path",
]
