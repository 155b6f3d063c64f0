"""aipusim: a performance, power and profiling model of a 4-core Metis-class AIPU.

Example:
    >>> import aipusim
    >>> aipusim.load_arch().peak_tops
    209.7152
"""

from __future__ import annotations

__version__ = "0.1.0"

from aipusim.arch import Arch, load_arch
from aipusim.errors import AipuSimError

__all__ = ["AipuSimError", "Arch", "__version__", "load_arch"]
