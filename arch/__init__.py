"""The hardware description: one TOML file -> frozen dataclasses (docs/architecture.md §3).

>>> from aipusim.arch import load_arch
>>> round(load_arch().peak_tops, 1)
209.7
"""

from aipusim.arch.loader import DEFAULT_ARCH_PATH, load_arch
from aipusim.arch.model import Arch
from aipusim.arch.summary import arch_summary

__all__ = ["DEFAULT_ARCH_PATH", "Arch", "arch_summary", "load_arch"]
