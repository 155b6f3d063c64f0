"""Click options shared by the commands that take a compiler config or a hardware file.

Each helper is a decorator, so ``simulate``, ``run`` and ``sweep`` offer exactly the same
flags as ``compile``::

    @click.command()
    @conf_option
    @set_option
    @arch_option
    @json_option
    def run(conf_path, overrides, arch_path, as_json): ...
        config = build_config(conf_path, overrides)

Bad values raise `aipusim.base.errors.ConfigError` (one line, exit 2 via ``main``), never
click's multi-line usage errors: the option types here check values themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from aipusim.base.errors import ConfigError

if TYPE_CHECKING:
    from aipusim.arch import Arch
    from aipusim.compiler.config import CompilerConfig

F = TypeVar("F", bound=Callable[..., Any])


class StrictChoice(click.ParamType):
    """A choice among fixed strings (case-insensitive) that fails with a `ConfigError`.

    ``values`` may be a `StrEnum`; the converted value is then the member.
    """

    name = "choice"

    def __init__(self, values: Sequence[str] | type[StrEnum], flag: str) -> None:
        self.enum = values if isinstance(values, type) else None
        self.values = [str(v.value) if isinstance(v, StrEnum) else str(v) for v in values]
        self.flag = flag

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "[" + "|".join(self.values) + "]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if self.enum is not None and isinstance(value, self.enum):
            return value
        by_lower = {v.lower(): v for v in self.values}
        text = str(value)
        if text.lower() not in by_lower:
            raise ConfigError(f"{self.flag} must be one of {', '.join(self.values)}, not {text!r}")
        chosen = by_lower[text.lower()]
        return self.enum(chosen) if self.enum is not None else chosen


def _check_sets(ctx: click.Context, param: click.Parameter, value: Sequence[str]) -> tuple:
    """Check every ``--set`` as soon as it is parsed, so a typo fails before any work."""
    from aipusim.compiler.config import parse_assignments

    try:
        parse_assignments(value)
    except ConfigError as exc:
        raise _flagged(exc) from None
    return tuple(value)


def _flagged(exc: ConfigError) -> ConfigError:
    """``exc`` with the flag it came from in front, once (not ``--set: --set must ...``)."""
    text = str(exc)
    return ConfigError(text if text.startswith("--set") else f"--set: {text}")


def json_option(func: F) -> F:
    """``--json``: print one JSON object instead of text (parameter ``as_json``)."""
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")(func)


def conf_option(func: F) -> F:
    """``--conf FILE``: a compiler config file, JSON or TOML (parameter ``conf_path``)."""
    return click.option(
        "--conf",
        "conf_path",
        type=click.Path(path_type=Path),
        default=None,
        metavar="FILE",
        help="Compiler config file (.json or .toml), e.g. one made by --generate-config.",
    )(func)


def set_option(func: F) -> F:
    """``--set KEY=VALUE`` (repeatable): config overrides (parameter ``overrides``)."""
    return click.option(
        "--set",
        "overrides",
        multiple=True,
        metavar="KEY=VALUE",
        callback=_check_sets,
        help="Set one compiler config property; repeatable; wins over --conf. "
        "Example: --set aipu_cores_used=4 --set multicore_mode=batch",
    )(func)


def arch_option(func: F) -> F:
    """``--arch FILE``: a hardware description TOML (parameter ``arch_path``)."""
    return click.option(
        "--arch",
        "arch_path",
        type=click.Path(path_type=Path),
        default=None,
        metavar="FILE",
        help="Hardware description TOML (default: the bundled metis.toml).",
    )(func)


def load_arch_option(arch_path: Path | None) -> Arch:
    """The `Arch` an ``--arch`` value names (the bundled one for None); `ArchError` if bad."""
    from aipusim.arch import load_arch

    return load_arch(arch_path)


def build_config(
    conf_path: Path | None = None,
    overrides: Iterable[str] = (),
    base: CompilerConfig | None = None,
) -> CompilerConfig:
    """``base`` (default: defaults) < the ``--conf`` file < the ``--set`` overrides."""
    from aipusim.compiler.config import CompilerConfig, load_config, parse_assignments

    config = base.copy() if base is not None else CompilerConfig()
    if conf_path is not None:
        config = load_config(conf_path, base=config)
    sets = parse_assignments(overrides)
    if sets:
        try:
            config.update(**sets)
        except ConfigError as exc:
            raise _flagged(exc) from None
    return config


def require_file(path: Path, flag: str, suffixes: Sequence[str] = ()) -> Path:
    """``path`` if it is an existing file (with one of ``suffixes``), else `ConfigError`."""
    if not path.is_file():
        raise ConfigError(f"{flag} must be an existing file, not {str(path)!r}")
    if suffixes and path.suffix.lower() not in suffixes:
        raise ConfigError(f"{flag} must be a {' or '.join(suffixes)} file, not {str(path)!r}")
    return path


def require_dir(path: Path, flag: str) -> Path:
    """``path`` if it is an existing folder, else `ConfigError`."""
    if not path.is_dir():
        raise ConfigError(f"{flag} must be an existing folder, not {str(path)!r}")
    return path


__all__ = [
    "StrictChoice",
    "arch_option",
    "build_config",
    "conf_option",
    "json_option",
    "load_arch_option",
    "require_dir",
    "require_file",
    "set_option",
]
