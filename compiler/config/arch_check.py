"""Checks of a `CompilerConfig` against the hardware it is compiled for.

The property table holds the reference's ranges; a given `Arch` may be smaller (fewer
cores, less memory, a narrower clock range). These checks run when both are known (the
compile command, the driver).

>>> from aipusim.arch import load_arch
>>> from aipusim.compiler.config import CompilerConfig
>>> check_against_arch(CompilerConfig(aipu_cores_used=4), load_arch())
"""

from __future__ import annotations

from aipusim.arch import Arch
from aipusim.base.errors import ConfigError
from aipusim.compiler.config.compiler_config import CompilerConfig


def check_against_arch(config: CompilerConfig, arch: Arch) -> None:
    """Raise `ConfigError` when ``config`` asks for more than ``arch`` has."""
    if config.aipu_cores_used > arch.chip.cores:
        raise ConfigError(
            f"aipu_cores_used must be at most the {arch.chip.cores} cores of "
            f"{arch.chip.name}, not {config.aipu_cores_used}"
        )
    lo, hi = arch.clock.min_hz, arch.clock.max_hz
    if not lo <= config.frequency <= hi:
        raise ConfigError(
            f"frequency must be {lo}-{hi} Hz on {arch.chip.name}, not {config.frequency}"
        )
    for prop, available in (
        ("l1_size_used", arch.l1.size_bytes),
        ("l2_size_used", arch.l2.size_bytes),
        ("ddr_size_used", arch.ddr.size_bytes),
        ("ddr_size_max", arch.ddr.size_bytes),
    ):
        value = getattr(config, prop)
        if value > available:
            raise ConfigError(
                f"{prop} must be at most the {available} bytes of {arch.chip.name}, not {value}"
            )


__all__ = ["check_against_arch"]
