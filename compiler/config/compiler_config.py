"""`CompilerConfig`: the compiler's settings, checked whenever they change.

Every property of the config reference is an attribute, with the reference's default. Values
are checked on construction and on each assignment (type, range, enum; then the cross-field
rules of `aipusim.compiler.config.rules`). Unknown names are errors that suggest the closest
property. The reference's short keyword form is accepted too.

>>> config = CompilerConfig(aipu_cores=4, resources=1.0, ptq_scheme="per_tensor_min_max")
>>> config.aipu_cores_used, config.quantization_scheme
(4, <QuantizationScheme.PER_TENSOR_MIN_MAX: 'per_tensor_min_max'>)
>>> config.multicore_mode = "batch"
>>> config.aipu_cores_used = 5
Traceback (most recent call last):
...
aipusim.base.errors.ConfigError: aipu_cores_used must be an integer 1-4, not 5
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from enum import StrEnum
from typing import Any

from aipusim.base.errors import ConfigError
from aipusim.compiler.config.rules import check_consistency
from aipusim.compiler.config.spec import ConfigValue, Prop, did_you_mean
from aipusim.compiler.config.table import ALIASES, PROPERTIES

#: A JSON-ready value: enums as strings, lists instead of tuples.
JsonValue = bool | int | float | str | list[str] | None


def unknown_property(name: str) -> ConfigError:
    """The error for a name that is no property: ``unknown compiler config property ...``."""
    hint = did_you_mean(name, [*PROPERTIES, *ALIASES])
    return ConfigError(f"unknown compiler config property `{name}`{hint}")


def canonical_name(name: str) -> str:
    """The property a key names (aliases resolved), or `ConfigError` with a suggestion.

    >>> canonical_name("resources")
    'resources_used'
    """
    if name in PROPERTIES:
        return name
    if name in ALIASES:
        return ALIASES[name]
    raise unknown_property(name)


def to_json_value(value: ConfigValue) -> JsonValue:
    """A property value as plain JSON/TOML data."""
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, tuple):
        return [to_json_value(v) for v in value]
    return value


class CompilerConfig:
    """The compiler's settings: the 93 properties of the config reference.

    Build one from keywords (full names or the short ``aipu_cores``/``resources``/
    ``ptq_scheme`` forms), from a mapping (`from_dict`) or from a file
    (`aipusim.compiler.config.load_config`; `save_config` writes one). Change
    several related properties at once with `update` (each assignment is checked on its own,
    so going from 1 to 4 cores at resources 0.25 needs both changed together).

    >>> CompilerConfig(aipu_cores_used=1, resources_used=0.25).update(
    ...     aipu_cores_used=4, resources_used=1.0).aipu_cores_used
    4
    """

    __slots__ = ("_values",)
    _values: dict[str, ConfigValue]

    def __init__(self, **values: Any) -> None:
        defaults = {name: prop.default for name, prop in PROPERTIES.items()}
        object.__setattr__(self, "_values", defaults)
        self._assign(values)

    # -- construction ------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompilerConfig:
        """A config from a mapping of property names (or aliases) to values."""
        if not isinstance(data, Mapping):
            raise ConfigError(
                f"a compiler config must be a mapping of property names to values, "
                f"not {type(data).__name__}"
            )
        return cls(**{str(k): v for k, v in data.items()})

    # -- reading -----------------------------------------------------------------------
    @staticmethod
    def properties() -> Mapping[str, Prop]:
        """Every property's description, in reference order."""
        return PROPERTIES

    @staticmethod
    def property(name: str) -> Prop:
        """The description of the property ``name`` names (aliases resolved), or
        `ConfigError` with a suggestion.

        >>> CompilerConfig.property("resources").name
        'resources_used'
        """
        return PROPERTIES[canonical_name(name)]

    def to_dict(self, *, only_changed: bool = False) -> dict[str, JsonValue]:
        """All properties (or only those differing from the default) as plain data."""
        return {
            name: to_json_value(value)
            for name, value in self._values.items()
            if not only_changed or value != PROPERTIES[name].default
        }

    def changed(self) -> dict[str, ConfigValue]:
        """The properties whose value differs from the default."""
        return {n: v for n, v in self._values.items() if v != PROPERTIES[n].default}

    def __iter__(self) -> Iterator[tuple[str, ConfigValue]]:
        return iter(self._values.items())

    def __getattr__(self, name: str) -> Any:
        # Reached only for names that are no property (those are class descriptors).
        hint = did_you_mean(name, PROPERTIES)
        raise AttributeError(f"CompilerConfig has no property `{name}`{hint}")

    # -- changing ------------------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        if name not in PROPERTIES:
            raise unknown_property(name)
        self._assign({name: value})

    def update(self, **values: Any) -> CompilerConfig:
        """Change several properties at once, checked together; returns ``self``."""
        self._assign(values)
        return self

    def replace(self, **values: Any) -> CompilerConfig:
        """A copy with some properties changed."""
        return self.copy().update(**values)

    def copy(self) -> CompilerConfig:
        """An independent copy."""
        clone = object.__new__(CompilerConfig)
        object.__setattr__(clone, "_values", dict(self._values))
        return clone

    def _assign(self, values: Mapping[str, Any]) -> None:
        """Check ``values`` one by one, then all rules on the result; commit only if valid."""
        new = dict(self._values)
        seen: dict[str, str] = {}
        for key, value in values.items():
            name = canonical_name(key)
            if name in seen:
                raise ConfigError(f"{name} is given twice (as `{seen[name]}` and `{key}`)")
            seen[name] = key
            new[name] = PROPERTIES[name].coerce(value)
        check_consistency(new)
        object.__setattr__(self, "_values", new)

    # -- pickling (sweeps send configs to worker processes) -------------------------------
    def __getstate__(self) -> dict[str, ConfigValue]:
        return dict(self._values)

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        # Re-checked: a pickle is data from outside like any file.
        object.__setattr__(self, "_values", {n: p.default for n, p in PROPERTIES.items()})
        self._assign(state)

    # -- comparison and display -------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CompilerConfig):
            return NotImplemented
        return self._values == other._values

    __hash__ = None  # type: ignore[assignment]  # mutable, so not hashable

    def __repr__(self) -> str:
        changed = ", ".join(f"{k}={to_json_value(v)!r}" for k, v in self.changed().items())
        return f"CompilerConfig({changed})"


def _property_descriptor(prop: Prop) -> property:
    def get(self: CompilerConfig) -> ConfigValue:
        return self._values[prop.name]

    def set_(self: CompilerConfig, value: Any) -> None:
        self._assign({prop.name: value})

    return property(get, set_, doc=f"{prop.doc} Valid: {prop.valid_text()}.")


# One attribute per property, generated from the table so it is declared only once.
for _prop in PROPERTIES.values():
    setattr(CompilerConfig, _prop.name, _property_descriptor(_prop))
del _prop

__all__ = ["CompilerConfig", "JsonValue", "canonical_name", "to_json_value", "unknown_property"]
