"""The detailed simulation mode (``simulate(detail="cycle")``): the same tasklists, with the
parts whose closed forms decide the answer modelled at the grain of their mechanism, as the
reference the fast model is checked against (``aipusim report fidelity``).

What the detailed mode changes, part by part, is listed in `DETAILED_PARTS`; everything
else runs as in the fast model.
"""

from __future__ import annotations

from enum import StrEnum


class Detail(StrEnum):
    """How finely the simulator models the links: the fast task-level model, or the
    detailed reference."""

    FAST = "fast"
    CYCLE = "cycle"


#: Part -> what the detailed mode models there that the fast model does not.
DETAILED_PARTS: dict[str, str] = {
    "pcie": (
        "the other direction's line carries the DLLPs (ACKs, credit updates) that a "
        "transfer's TLPs draw and, for a read of host memory, its request TLPs, competing "
        "with that direction's own data: their line time is added to what that line carries "
        "when the burst passes, as DLLPs slot in between TLPs "
        "(`aipusim.isa.cost.pcie_wire_bytes`); the fast model charges each direction its "
        "own TLP overhead only"
    ),
}

__all__ = ["DETAILED_PARTS", "Detail"]
