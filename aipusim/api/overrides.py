"""Overrides of a simulation (``aipusim simulate --set``, ``CompiledModel.simulate(**kw)``):
only what the runtime really applies; a compiler decision is refused with a hint to
recompile, naming the value it was compiled with.

The simulator knows its runtime knobs and the decisions recorded in ``model.json``; this
layer also knows every other compiler property (``tiling_depth``, ``enable_icr``, ...) and
reads what the folder was compiled with from its ``conf.json``.

>>> import tempfile, pathlib
>>> check_overrides({"frequency": 4e8}, pathlib.Path(tempfile.mkdtemp()))
{'frequency': 400000000.0}
>>> check_overrides({"tiling_depth": 3}, pathlib.Path(tempfile.mkdtemp()))
Traceback (most recent call last):
...
aipusim.base.errors.ConfigError: tiling_depth is fixed at compile time; recompile with \
--set tiling_depth=3
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aipusim.base.errors import ConfigError
from aipusim.compiler.config import canonical_name
from aipusim.isa.program import PROGRAM_FILE

#: The compile output's copy of the config (beside ``compiled_model/``).
CONFIG_FILE = "conf.json"


def compiled_value(compiled_dir: Path, name: str) -> Any:
    """What the program in ``compiled_dir`` was compiled with for property ``name``: from
    the compile output's ``conf.json``, else from ``model.json``; None if neither says."""
    for path in (compiled_dir.parent / CONFIG_FILE, compiled_dir / PROGRAM_FILE):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and name in data:
            return data[name]
    return None


def check_overrides(overrides: Mapping[str, Any], compiled_dir: Path) -> dict[str, Any]:
    """``overrides`` with compiler spellings of the runtime knobs resolved, after refusing
    any compiler property the runtime cannot change. Names that are no compiler property
    pass through: the simulator says what is valid."""
    # lazy: aipusim.simulator.api loads simpy, not otherwise loaded here
    from aipusim.simulator.api import ALIASES, FRAMES, PROFILING_LEVELS, RUNTIME_KNOBS
    from aipusim.simulator.api import fixed_at_compile_time as fixed

    runtime = {*RUNTIME_KNOBS, *ALIASES, PROFILING_LEVELS, FRAMES}
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        name = key
        if key not in runtime:
            try:
                name = canonical_name(key.replace("-", "_"))
            except ConfigError:
                name = key
            else:
                if name not in runtime:
                    raise fixed(name, compiled_value(compiled_dir, name), value)
        out[name] = value
    return out


__all__ = ["CONFIG_FILE", "check_overrides", "compiled_value"]
