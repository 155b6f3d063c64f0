"""The parts of a run its processes are given, instead of the whole `Simulation`.

The engine (`engine.Simulation`) wires a run; each helper receives only what it uses,
at construction: a core (`core.CoreRun`) and the host (`host`) get a `RunConfig` (the
run's constants), the `Fabric` (how a transfer is routed over the shared links and L1
ports) and the `Ledger` (where executed tasks and host transfers are logged); the result
(`result.build_result`) reduces a `result.RunRecord`. Every part of one run shares the
run's one SimPy environment.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from aipusim.isa.encoding import RECORD_BYTES

if TYPE_CHECKING:
    from aipusim.simulator.detail.l1 import L1Calendar
    from aipusim.simulator.links import Route
    from aipusim.simulator.ports import PortGroup
    from aipusim.simulator.prepare import CoreCode

#: The (read, write) L1 port groups of a core (None: never over-subscribed).
PortPair = tuple["PortGroup | None", "PortGroup | None"]


@dataclass(frozen=True)
class RunConfig:
    """The run's constants that the core, unit and host processes read (cycles at the
    run's clock).

    >>> cfg = RunConfig(starts=2, frames_per_start=1, burst_bytes=256, contention=True,
    ...     use_hw_tokens=True, token_latency_cycles=2, global_token_latency_cycles=9,
    ...     poll_interval_cycles=64, poll_cost_cycles=8, dispatch_cycles_per_task=4,
    ...     local_tokens=32, chunk_records=64, window_records=128, io_slots=2,
    ...     isolated=False, host_pre_cycles=0, host_post_cycles=0)
    >>> cfg.starts
    2
    """

    starts: int
    frames_per_start: int
    burst_bytes: int
    #: False: every data-moving engine has the shared links to itself (see `Simulation`).
    contention: bool
    use_hw_tokens: bool
    token_latency_cycles: int
    global_token_latency_cycles: int
    poll_interval_cycles: int
    poll_cost_cycles: int
    dispatch_cycles_per_task: int
    local_tokens: int
    #: Records of a tasklist chunk (half the core's L2 tasklist window) and of the window.
    chunk_records: int
    window_records: int
    #: Input (and output) buffers per replica: a start waits for the one ``io_slots`` back.
    io_slots: int
    #: The host sends each start only once the previous result is back.
    isolated: bool
    #: The host's own work on a start's frames before they are sent and once back.
    host_pre_cycles: int
    host_post_cycles: int

    def resident(self, code: CoreCode) -> bool:
        """Whether a core's whole tasklist fits its L2 window (else it streams)."""
        return code.n_records <= self.window_records

    def gp_base(self, code: CoreCode, phase: int) -> int:
        """Position of a frame's first task in the core's tasklist stream."""
        if self.resident(code):
            return len(code.init)  # resident: every frame reuses the same chunk(s)
        return len(code.init) + phase * len(code.frame)

    def tasklist_bytes(self, code: CoreCode, phase: int) -> int:
        """Tasklist bytes fetched from DDR (over the L2 port) for a phase of a core: INIT
        (-1) brings the whole tasklist when it fits its L2 window, else its INIT part; a
        frame's start brings its records only when the tasklist streams through the
        window."""
        resident = self.resident(code)
        if phase < 0:
            return (code.n_records if resident else len(code.init)) * RECORD_BYTES
        return 0 if resident else len(code.frame) * RECORD_BYTES


@dataclass(frozen=True)
class Fabric:
    """The shared memory system as the processes that move data see it."""

    #: ``route(transfer, engine, l1)``: the `Route` of a transfer as ``engine`` (a hashable
    #: name of whoever issues it) books it, through the L1 port groups ``l1``.
    route: Callable[..., Route]
    #: Each physical core's (read, write) L1 port groups that bookings go through.
    ports: Mapping[int, PortPair]
    #: Requesters of a core's L1 ports: each unit queue's index, and data multicast in
    #: from another core (``remote``).
    requester: Mapping[str, int]
    remote: int
    #: Numbers the transfers, so DDR can tell a burst that continues a stream.
    streams: Iterator[int]
    #: Detailed mode: each physical core's banked L1 (`detail.l1.L1Calendar`), which then
    #: replaces the port groups; empty in the fast mode.
    banks: Mapping[int, L1Calendar] = field(default_factory=dict)


@dataclass
class Ledger:
    """What the run executed, as it runs: the raw logs the result and the functional mode
    read."""

    #: One segment per (core, unit, phase): (physical core, phase, rids of the unit's
    #: records, start cycles, end cycles).
    segments: list[tuple[int, int, np.ndarray, array, array]] = field(default_factory=list)
    #: Host transfers: (rid, physical core, start index, begin, end).
    host_log: list[tuple[int, int, int, int, int]] = field(default_factory=list)
