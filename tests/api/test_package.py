from __future__ import annotations

import subprocess
import sys

import aipusim


def test_every_public_name_resolves() -> None:
    for name in aipusim.__all__:
        assert getattr(aipusim, name) is not None, name
    assert set(aipusim.__all__) <= set(dir(aipusim))


def test_unknown_names_raise_attribute_error() -> None:
    try:
        _ = aipusim.no_such_thing
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("aipusim.no_such_thing resolved")


def test_import_aipusim_loads_no_compiler_simulator_or_profiler() -> None:
    code = (
        "import sys, aipusim; "
        "print(sorted(m for m in sys.modules if m.split('.')[:2] in "
        "(['aipusim', 'compiler'], ['aipusim', 'simulator'], ['aipusim', 'profiler'], "
        "['aipusim', 'compiled'])))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_package_docstring_example() -> None:
    import doctest

    result = doctest.testmod(aipusim, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
