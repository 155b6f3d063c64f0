"""The profiler's compiled kernels, `profiler/_native.c` (the project's one C module), when
they were built: `NATIVE` is the extension module, or None.

The build is optional (``setup.py``): without a C compiler the install still succeeds and
each caller runs the numpy twin of its kernel, with the same results, only slower
(``tests/profiler/test_native.py`` compares each kernel with its twin):

- ``NATIVE.scan``: `aipusim.profiler.scan.classify_lines` (twin: `numpy_classify_lines`);
- ``NATIVE.exclusive``: `aipusim.profiler.exclusive.exclusive_cycles`' painting.

>>> NATIVE is None or callable(NATIVE.scan)
True
"""

from __future__ import annotations

from types import ModuleType


def _load() -> ModuleType | None:
    try:
        from aipusim.profiler import _native
    except ImportError:  # built without a C compiler: the numpy twins do the same
        return None
    return _native


#: The compiled kernels, or None when they were not built.
NATIVE = _load()

__all__ = ["NATIVE"]
