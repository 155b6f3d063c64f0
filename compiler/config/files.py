"""Reading and writing config files: JSON and TOML configs, and safe parsing with locations.

Every malformed file becomes a `ConfigError` that names the file and line
(``bad.toml:3: malformed TOML: ...``); a bad value names the file, the line of its key when
it can be found, the property and what is valid.

>>> text = dumps_toml(CompilerConfig(aipu_cores_used=2))
>>> text
'aipu_cores_used = 2\\n'
>>> config_from_mapping(parse_toml(text, Path("c.toml")), "c.toml").aipu_cores_used
2
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomli_w

from aipusim.base.errors import ConfigError
from aipusim.base.fileio import write_text
from aipusim.compiler.config.compiler_config import CompilerConfig, canonical_name

#: File suffixes a config can be read from / written to.
CONFIG_SUFFIXES = (".json", ".toml")

_TOML_LOCATION = re.compile(r"\(at line (\d+), column (\d+)\)")


def _read_text(path: Path, what: str) -> str:
    if not path.is_file():
        raise ConfigError(f"{what} {path} does not exist (or is not a file)")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc}") from None


def parse_toml(text: str, path: Path) -> dict[str, Any]:
    """Parse TOML text; errors carry ``path:line``."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # Python 3.11 puts the location only in the message: "... (at line 3, column 9)".
        message = str(exc)
        found = _TOML_LOCATION.search(message)
        if found:
            line = found.group(1)
        elif "end of document" in message:
            line = str(max(1, len(text.splitlines())))
        else:
            line = "?"
        reason = _TOML_LOCATION.sub("", message).strip()
        raise ConfigError(f"{path}:{line}: malformed TOML: {reason}") from None


def parse_json(text: str, path: Path) -> Any:
    """Parse JSON text; errors carry ``path:line``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: malformed JSON: {exc.msg}") from None


def parse_yaml(text: str, path: Path) -> Any:
    """Parse YAML text with the safe loader (no object construction); errors carry the line."""
    # imported here: every command that builds a config loads this module, few read YAML
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else "?"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}:{line}: malformed YAML: {problem}") from None


def read_data_file(path: str | Path, what: str = "config file") -> tuple[Any, str]:
    """Parse a ``.json``, ``.toml``, ``.yaml`` or ``.yml`` file; returns (data, text)."""
    path = Path(path)
    suffix = path.suffix.lower()
    parsers = {".json": parse_json, ".toml": parse_toml, ".yaml": parse_yaml, ".yml": parse_yaml}
    if suffix not in parsers:
        raise ConfigError(
            f"{what} {path} must end in .json, .toml, .yaml or .yml, not {suffix or 'nothing'}"
        )
    text = _read_text(path, what)
    return parsers[suffix](text, path), text


def key_line(text: str, key: str) -> int | None:
    """1-based line where ``key`` is assigned in JSON/TOML/YAML text, if it can be found."""
    name = re.escape(key)
    # "key =" (TOML), "key:" / "\"key\":" (YAML/JSON), or a TOML table header "[key]".
    pattern = re.compile(
        rf"""^[ \t]*(["']?{name}["']?[ \t]*[=:]|\[[ \t]*{name}[ \t]*\])""", re.MULTILINE
    )
    # Fallback for one-line JSON ({"key": 1, ...}): a quoted key anywhere.
    found = pattern.search(text) or re.search(rf"""["']{name}["'][ \t]*[=:]""", text)
    return text.count("\n", 0, found.start()) + 1 if found else None


def config_from_mapping(
    data: Any,
    source: str | Path,
    text: str = "",
    base: CompilerConfig | None = None,
    lines: Mapping[str, int] | None = None,
    label: str = "",
) -> CompilerConfig:
    """``base`` (default: defaults) updated with ``data``; errors are prefixed by the source.

    Each key is checked on its own first so that an error points at the key's line: taken
    from ``lines`` (key -> line) when given, else searched for in ``text``. ``label``
    goes between location and message (``card.yaml:7: model m: ...``).
    """
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{source}: a compiler config must be a table of property = value, "
            f"not {type(data).__name__}"
        )
    config = base.copy() if base is not None else CompilerConfig()
    for key, value in data.items():
        try:
            prop = CompilerConfig.properties()[canonical_name(str(key))]
            prop.coerce(value)
        except ConfigError as exc:
            line = lines.get(str(key)) if lines is not None else key_line(text, str(key))
            where = f"{source}:{line}" if line else str(source)
            raise ConfigError(f"{where}: {label}{exc}") from None
    try:
        config.update(**{str(k): v for k, v in data.items()})
    except ConfigError as exc:
        raise ConfigError(f"{source}: {label}{exc}") from None
    return config


def load_config(path: str | Path, base: CompilerConfig | None = None) -> CompilerConfig:
    """Read a JSON or TOML config file on top of ``base`` (default: the defaults).

    The file holds ``property = value`` pairs at top level; any subset of the properties.
    """
    path = Path(path)
    if path.suffix.lower() not in CONFIG_SUFFIXES:
        raise ConfigError(
            f"config file {path} must end in .json or .toml, not {path.suffix or 'nothing'}"
        )
    data, text = read_data_file(path)
    return config_from_mapping(data, path, text, base)


def toml_text(data: Mapping[str, Any], header: str = "") -> str:
    """TOML text of a flat mapping, after ``header`` written as ``#`` comment lines."""
    comment = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    return comment + tomli_w.dumps(dict(data))


def dumps_toml(config: CompilerConfig, *, only_changed: bool = True, header: str = "") -> str:
    """TOML text of ``config``; null values are left out (TOML has no null, and every
    nullable property defaults to null, so leaving them out loses nothing)."""
    data = config.to_dict(only_changed=only_changed)
    return toml_text({k: v for k, v in data.items() if v is not None}, header)


def dumps_json(config: CompilerConfig, *, only_changed: bool = False) -> str:
    """JSON text of ``config`` (all properties by default, nulls included)."""
    return json.dumps(config.to_dict(only_changed=only_changed), indent=2) + "\n"


def save_config(config: CompilerConfig, path: str | Path, *, only_changed: bool = False) -> None:
    """Write ``config`` as JSON or TOML, chosen by the suffix of ``path``."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".json":
        text = dumps_json(config, only_changed=only_changed)
    elif suffix == ".toml":
        text = dumps_toml(config, only_changed=only_changed)
    else:
        raise ConfigError(f"config file {path} must end in .json or .toml, not {suffix}")
    write_text(path, text)


__all__ = [
    "CONFIG_SUFFIXES",
    "config_from_mapping",
    "dumps_json",
    "dumps_toml",
    "key_line",
    "load_config",
    "parse_json",
    "parse_toml",
    "parse_yaml",
    "read_data_file",
    "save_config",
    "toml_text",
]
