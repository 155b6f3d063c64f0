"""The one-way house (docs/architecture.md §1), checked on the source: no import circles, packages
import only downwards, and the profiler loads none of the layers above it."""

from __future__ import annotations

import subprocess
import sys

from import_graph import cycles, graph, layer

#: What each package may import (its own modules included). The wiring layer
#: (``aipusim/``: API, CLI, zoo, studies, sweep) may import anything.
ALLOWED = {
    "base": {"base"},
    "arch": {"base", "arch"},
    "isa": {"base", "arch", "isa"},
    "compiler": {"base", "arch", "isa", "compiler"},
    "simulator": {"base", "arch", "isa", "simulator"},
    "profiler": {"base", "isa", "profiler"},
}
#: Annotation-only back-references: the simulator's engine hands its `Replica` to the
#: helper modules it imports (core, host, trace), which name that type in annotations under
#: TYPE_CHECKING. None of them runs an import of the engine; the result reads plain records.
ANNOTATION_CYCLES = [
    [
        "aipusim.simulator.core",
        "aipusim.simulator.engine",
        "aipusim.simulator.host",
        "aipusim.simulator.trace",
    ]
]


def test_no_import_circle_runs() -> None:
    # Lazy imports inside functions count: they run too, only later.
    assert cycles(typing=False) == []


def test_no_new_circle_even_in_annotations() -> None:
    assert cycles(typing=True) == ANNOTATION_CYCLES


def test_packages_import_only_downwards() -> None:
    wrong = [
        f"{e.source}:{e.line} imports {e.target}"
        for module, edges in graph().items()
        if layer(module) in ALLOWED
        for e in edges
        if layer(e.target) not in ALLOWED[layer(module)]
    ]
    assert wrong == []


def test_studies_and_sweeps_use_the_public_api() -> None:
    # Config objects, compile and simulate come from `aipusim`; not from the compiler's or
    # the simulator's insides.
    wrong = [
        f"{e.source}:{e.line} imports {e.target}"
        for module, edges in graph().items()
        if module.startswith(("aipusim.studies", "aipusim.sweep"))
        for e in edges
        if layer(e.target) in ("compiler", "simulator")
    ]
    assert wrong == []


def _loaded(statement: str) -> set[str]:
    """The aipusim modules a fresh interpreter loads for ``statement`` (-X importtime)."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement],
        capture_output=True,
        text=True,
        check=True,
    )
    names = set()
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name.startswith("aipusim"):
                names.add(name)
    return names


def test_importing_the_profiler_loads_only_what_it_stands_on() -> None:
    loaded = _loaded("import aipusim.profiler")
    assert "aipusim.profiler" in loaded
    above = sorted(m for m in loaded if m != "aipusim" and layer(m) not in ALLOWED["profiler"])
    assert above == []
