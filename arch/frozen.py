"""Frozen hardware: the inferred (I) numbers of the arch file change only through a recorded fit.

The calibration (`aipusim report validation --fit`) records, besides the numbers it moved,
the value of every (I) number of the arch file after the fit (``"inferred"`` of
``docs/validation.json``). Between fits the arch file must hold exactly those values: a
compiler change never moves a hardware number, so when the compiler improves, the residuals
of the validation page move instead, which is the truth about the compiler.

>>> from aipusim.arch import load_arch
>>> arch = load_arch()
>>> record = inferred_values(arch)
>>> unrecorded_changes(arch, record)
[]
>>> unrecorded_changes(arch, {**record, "dpu.lanes": 64})
['`dpu.lanes` is 96 in the arch file, but the fit record says 64']
"""

from __future__ import annotations

from typing import Any

from aipusim.arch.loader import arch_value
from aipusim.arch.model import Arch


def inferred_values(arch: Arch) -> dict[str, Any]:
    """Every inferred (I) number of ``arch`` (the keys of its ``[ranges]``) -> its value."""
    return {r.key: arch_value(arch, r.key) for r in arch.ranges}


def unrecorded_changes(arch: Arch, recorded: dict[str, Any]) -> list[str]:
    """How the (I) numbers of ``arch`` differ from ``recorded`` (a fit record's
    ``"inferred"``): one sentence per number changed, added or dropped."""
    current = inferred_values(arch)
    found = [
        f"`{key}` is {current[key]} in the arch file, but the fit record says {recorded[key]}"
        for key in current
        if key in recorded and current[key] != recorded[key]
    ]
    found += [
        f"`{key}` is an (I) number the fit record lacks"
        for key in sorted(current.keys() - recorded)
    ]
    found += [
        f"`{key}` is in the fit record but no longer an (I) number of the arch file"
        for key in sorted(recorded.keys() - current)
    ]
    return found


__all__ = ["inferred_values", "unrecorded_changes"]
