"""The ground floor every package stands on: the root exception, atomic folder writes and
the version. It imports nothing of aipusim, so `arch`, `isa`, `compiler`, `simulator` and
`profiler` can use it without loading the wiring layer (`aipusim/`: API, CLI, zoo).

>>> from aipusim.base import __version__
>>> __version__.count(".")
2
"""

from __future__ import annotations

from aipusim.base.version import __version__

__all__ = ["__version__"]
