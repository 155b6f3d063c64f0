"""`aipusim.profiler` loads matplotlib on first use of a plot name only."""

from __future__ import annotations

import subprocess
import sys


def test_profiler_import_leaves_matplotlib_until_a_plot_is_asked_for() -> None:
    code = (
        "import sys, aipusim.profiler as p\n"
        "assert 'matplotlib' not in sys.modules, 'imported eagerly'\n"
        "assert callable(p.plot_all) and callable(p.write_chrome_trace)\n"
        "assert 'matplotlib' in sys.modules\n"
        "from aipusim.profiler import save_figure\n"
        "try:\n"
        "    p.no_such_name\n"
        "except AttributeError as exc:\n"
        "    assert 'no_such_name' in str(exc)\n"
        "else:\n"
        "    raise SystemExit('no AttributeError')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_lazy_names_are_the_public_names() -> None:
    import aipusim.profiler as prof
    from aipusim.profiler import chrome, plots

    assert set([*plots.__all__, "write_chrome_trace"]) <= set(prof._LAZY)
    assert callable(chrome.write_chrome_trace)
    assert prof.__all__ == [*prof._LAZY]
    for name in prof.__all__:  # each resolves (an AttributeError otherwise)
        getattr(prof, name)


def test_reading_a_trace_loads_no_numba(tmp_path) -> None:
    """The text reader is numpy only: numba's import and cached-code load cost about a
    second of every ``aipusim profile`` process."""
    from aipusim.profiler import write_synthetic_trace

    path = tmp_path / "s.trace"
    write_synthetic_trace(path, frames=2, cores=2)
    code = (
        "import sys\n"
        "from aipusim.profiler import layer_table, load_trace\n"
        f"layer_table(load_trace({str(path)!r}))\n"
        "assert 'numba' not in sys.modules, 'numba imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
