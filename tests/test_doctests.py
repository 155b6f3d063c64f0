"""Run the docstring examples of every aipusim module (they are the API's documentation)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import aipusim


def _modules() -> list[str]:
    names = ["aipusim"]
    for info in pkgutil.walk_packages(aipusim.__path__, prefix="aipusim."):
        names.append(info.name)
    for sub in ("base", "arch", "isa", "compiler", "simulator", "profiler"):
        package = importlib.import_module(f"aipusim.{sub}")
        names.append(package.__name__)
        names += [
            i.name for i in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}.")
        ]
    return sorted(set(names))


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
