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


#: The ``--set`` keys users reach for first, in the order ``--help`` lists them.
COMMON_SET_KEYS = (
    "aipu_cores_used",
    "multicore_mode",
    "resources_used",
    "mvm_utilization_limit",
    "quantization_scheme",
    "frequency",
    "double_buffer",
    "profiling_levels",
)

#: What each trace level records (``--levels``; the ``profiling_levels`` values).
LEVELS_HELP = (
    "Trace levels, comma-separated: B frames, PB/PE layer begin/end, K compute tasks, "
    "M memory transfers, T token waits and signals (each line costs control-core cycles)."
)

#: Where the config of each command starts (its "base"), for --help.
BASE_ZOO_OR_DEFAULTS = (
    "A zoo model starts from its built-in config (aipusim config list; aipusim config show "
    "NAME prints it), --defaults or a plain ONNX file from the defaults (1 core, "
    "multiprocess; aipusim compile --generate-config DIR writes them). --conf FILE sets its "
    "properties on that base; --set changes single keys on top. The output names the base "
    "and the effective config's changes from the defaults."
)


def common_keys_help() -> list[tuple[str, str]]:
    """(key, valid values) of `COMMON_SET_KEYS`, from the config's own definitions."""
    # lazy: aipusim.compiler.config loads numpy; kept off the CLI's start-up
    from aipusim.compiler.config import PROPERTIES

    return [(key, PROPERTIES[key].valid_text()) for key in COMMON_SET_KEYS]


class ConfigHelp(click.Command):
    """A command whose --help ends with where its config starts and the common --set keys
    with their valid values (read from the config definitions only when help is shown)."""

    base_help = BASE_ZOO_OR_DEFAULTS

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_epilog(ctx, formatter)
        with formatter.section("Base config"):
            formatter.write_text(self.base_help)
        with formatter.section("Common --set keys (aipusim config show --all lists every one)"):
            formatter.write_dl(common_keys_help())


def _check_sets(ctx: click.Context, param: click.Parameter, value: Sequence[str]) -> tuple:
    """Check every ``--set`` as soon as it is parsed, so a typo fails before any work."""
    # lazy: aipusim.compiler.config loads numpy; kept off the CLI's start-up
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


def defaults_option(func: F) -> F:
    """``--defaults``: a zoo model starts from the plain defaults, not its built-in config
    (parameter ``defaults``)."""
    return click.option(
        "--defaults",
        "defaults",
        is_flag=True,
        help="Start from the plain defaults, not the zoo model's built-in config.",
    )(func)


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


def uncertainty_option(func: F) -> F:
    """``--uncertainty N``: bands over N samples of the (I) numbers (parameter
    ``uncertainty``), checked before any work starts."""

    def check(_ctx: click.Context, _param: click.Parameter, value: int | None) -> int | None:
        if value is not None:
            # lazy: aipusim.calibrate.uncertainty loads numpy, onnx; kept off the CLI's start-up
            from aipusim.calibrate.uncertainty import check_samples

            check_samples(value)
        return value

    return click.option(
        "--uncertainty",
        type=int,
        default=None,
        metavar="N",
        callback=check,
        help="Also recompile and simulate N joint samples of the inferred (I) hardware "
        "numbers within their ranges, and give the p5-p95 band of FPS, energy per frame and "
        "average power (a back-end compile and a simulation per sample).",
    )(func)


def no_cache_option(func: F) -> F:
    """``--no-cache``: calibrate again, without the quantization cache (``no_cache``)."""
    return click.option(
        "--no-cache",
        "no_cache",
        is_flag=True,
        help="Calibrate again instead of reusing the quantized model of an earlier compile "
        "with the same model, calibration data and quantization options (see "
        "'aipusim cache info').",
    )(func)


def load_arch_option(arch_path: Path | None) -> Arch:
    """The `Arch` an ``--arch`` value names (the bundled one for None); `ArchError` if bad."""
    # lazy: kept off the command's start-up (aipusim.arch)
    from aipusim.arch import load_arch

    return load_arch(arch_path)


def build_config(
    conf_path: Path | None = None,
    overrides: Iterable[str] = (),
    base: CompilerConfig | None = None,
) -> CompilerConfig:
    """``base`` (default: defaults) < the ``--conf`` file < the ``--set`` overrides."""
    # lazy: aipusim.compiler.config loads numpy; kept off the CLI's start-up
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


def config_line(base: str, changes: dict[str, str], levels: Sequence[str] | None = None) -> str:
    """The header line of a printout: where the config started, the effective config's
    changes from the defaults (--conf and --set included) and, for a simulation, the trace
    levels it records (each trace line costs control-core cycles: a run traced at other
    levels than a sweep's point gives a slightly different FPS from the same config)."""
    # lazy: kept off the command's start-up (aipusim.run.config_text)
    from aipusim.run.config_text import changes_text

    line = f"config: starts from {base}; changes from the defaults: {changes_text(changes)}"
    if levels is not None:
        line += (
            f"; trace levels {','.join(levels) or 'none'} (trace lines cost control-core cycles)"
        )
    return line


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
    "COMMON_SET_KEYS",
    "LEVELS_HELP",
    "ConfigHelp",
    "StrictChoice",
    "arch_option",
    "build_config",
    "conf_option",
    "config_line",
    "defaults_option",
    "json_option",
    "load_arch_option",
    "no_cache_option",
    "require_dir",
    "require_file",
    "set_option",
    "uncertainty_option",
]
