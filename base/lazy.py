"""Names a package loads on first use, so that importing it stays cheap.

A package lists ``{name: module}`` and sets its module-level ``__getattr__`` (PEP 562) to
`lazy_names`; the first ``package.name`` imports the module and keeps the value, so later
reads are ordinary attribute reads.

>>> table = {"sqrt": "math"}
>>> space: dict[str, object] = {}
>>> get = lazy_names("pkg", table, space)
>>> get("sqrt")(9.0), "sqrt" in space
(3.0, True)
>>> get("cbrt")
Traceback (most recent call last):
AttributeError: module 'pkg' has no attribute 'cbrt'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, table: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``table[name]``'s module on
    first use and stores the value in ``namespace`` (the package's ``globals()``)."""

    def __getattr__(name: str) -> Any:
        source = table.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    return __getattr__
