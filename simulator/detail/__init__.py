"""The detailed simulation mode (``simulate(detail="cycle")``): the same tasklists, with the
parts whose closed forms decide the answer modelled at the grain of their mechanism, as the
reference the fast model is checked against (``aipusim report fidelity``).

What the detailed mode changes, part by part, is listed in `DETAILED_PARTS`; everything
else runs as in the fast model. The cycle-level models themselves (L1: `l1`; LPDDR4x:
`lpddr4`, `ddr_link`, `lpddr4_simpy`) are described in this folder's README.md.
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
    "l1": (
        "each core's L1 is banked (`l1.L1Calendar`: banks of `l1.bank_bytes` behind a "
        "crossbar, `l1.read_ports`/`l1.write_ports` ports per direction): every stream "
        "(an Mvm's input vectors, partial sums, residual and results, the DPU's operands and "
        "results, the DWPU, the weight-load path, each DMA burst of both channels and data "
        "multicast in) walks its bytes cycle by cycle from the task's L1 address, one port's "
        "width per cycle, granted only when a port and every bank it spans are free in that "
        "cycle, in booking order; the fast model shares each direction's ports as a fluid "
        "and knows no banks"
    ),
    "pcie": (
        "the other direction's line carries the DLLPs (ACKs, credit updates) that a "
        "transfer's TLPs draw and, for a read of host memory, its request TLPs, competing "
        "with that direction's own data: their line time is added to what that line carries "
        "when the burst passes, as DLLPs slot in between TLPs "
        "(`aipusim.isa.cost.pcie_wire_bytes`); the fast model charges each direction its "
        "own TLP overhead only"
    ),
    "ddr": (
        "every DDR burst is timed by the cycle-level LPDDR4x model (`ddr_link`, `lpddr4`): "
        "channels and banks with open rows, an FR-FCFS controller with read and write "
        "queues and write-drain watermarks, read/write turnarounds, tFAW, and refresh as "
        "blackouts; the fast model's closed form (`aipusim.isa.cost.ddr_burst_ns`) tracks "
        "one open row and stretches everything by the refresh's share"
    ),
}

__all__ = ["DETAILED_PARTS", "Detail"]
