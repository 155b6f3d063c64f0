"""The one cost model of the hardware: what a task costs on an `Arch` (docs/architecture.md §3.4).

`CostModel` answers one question, "what does this task cost?", with a `TaskCost`: the
cycles it holds its unit when nothing else competes, the multiply-accumulates it performs,
the bytes it moves over each memory and link (`Traffic`) and its dynamic energy by
`Component` at the nominal voltage, all from the numbers of ``arch/*.toml``. A transfer
also carries its `Transfer`: the shared links it crosses, which the simulator books burst
by burst against other transfers.

The compiler's estimates, its tiling, IMC and multicore choices and its scheduler call this
model; so does the simulator, which adds only what one task cannot know: contention on
shared links, tokens, barriers and dispatch by the control core. Static power and the
voltage scaling of dynamic energy live here too, so that nothing else turns arch numbers
into durations or energy.

Timing rules (first order, docs/architecture.md §3.4):

- A compute task moves its L1 bytes (`Traffic`) through one read and one write port of
  ``l1.port_bytes_per_cycle`` (each requester holds one port per direction at a time), so
  it lasts at least ``read / port`` and ``write / port`` cycles; the ports' sharing between
  concurrent tasks is the simulator's business.
- ``Mvm``: ``vectors * cycles_per_vector * passes``, where ``passes`` is how many times the
  ``cols_used`` columns must be cut to fit the banks that ``mvm_utilization_limit`` keeps
  active; the outputs drain at ``outputs_per_cycle``; the input stream (and the partial
  sums of ``accumulate``) through a read port, the outputs (int32 partial sums for
  ``post=none``) through a write port; the slowest of these counts; plus the pipeline
  fill/drain latency. A residual-add post-op (``requant_add``) reads its int8 operand,
  one byte per output, through the read port too, and the DPU charges one lane operation
  per output for the add (as a DPU ``add`` would) besides the requantize. Inputs or
  outputs ``in_chan_pitch``/``out_chan_pitch`` bytes apart (attention's interleaved heads)
  move their whole span through the port: the bytes times the pitch.
- ``WeightLoad``: ``bytes / weight_load_bw`` on the IMC write port, its L1 bytes
  (`WeightLoad.read_bytes`: a strided source's span) through a read port; ``col_sums``
  charges one column-sum add per weight written.
- ``DpuOp``: its lane operations (`aipusim.isa.dpu_work`) over the lanes (or its L1 bytes
  over the ports), plus the pipeline. An element-wise kind with a table after it (an
  activation fused, `aipusim.isa.tasks.table_after`) is one pass: one more lane operation
  per element and the energy of a ``lut`` element, its L1 bytes those of the op alone.
  A second element-wise step after the op (``then``: two element-wise layers fused) is
  one pass too: the lane operations and energy of both steps, the reads of the first
  step's operands and of the second step's other operand, one output write; the first
  step's result stays in the lane (its L1 write and read, and a second pipeline fill,
  vanish).
- ``DwpuOp``: channel groups of ``dwpu.channels`` x output pixels x windows of
  ``macs_per_channel_per_cycle`` MACs (or its L1 bytes over the ports), plus the pipeline.
- ``DmaCopy``: setup, then bursts of ``dma.burst_bytes``, each as long as its slowest link
  (`Link`: DDR, the NoC, L2's ports, the system DMA, PCIe) or its own
  limit (the channel, one L1 port, the L2 banks a small burst touches), then the access
  latency of the far memory. A burst on DDR is a closed form of LPDDR4x timing
  (`ddr_burst_ns`): its bytes spread over the channels, a page opened per page crossed
  (hidden behind the previous page by bank interleaving), the first page of a burst that
  does not continue the previous burst a row miss, a read/write turnaround when the
  direction changes, all stretched by the refresh's share of the time.
- Local tokens are seen ``token_signal_latency_cycles`` after the signal; global tokens
  and barriers cross the NoC to the hub that holds them and back (`token_latency_cycles`,
  `barrier_cycles`). Host handshakes take no unit time (the control core's dispatch is the
  simulator's business).

>>> from aipusim.arch import load_arch
>>> from aipusim.isa.tasks import Mvm, PostOp, Unit
>>> model = CostModel(load_arch())
>>> cost = model.task(Mvm(unit=Unit.MVM, weight_set=0, in_addr=0, out_addr=0, vectors=100,
...                       rows_used=512, cols_used=512))
>>> cost.cycles, cost.macs, cost.traffic.l1_read
(816, 26214400, 51200)
>>> psums = model.task(Mvm(unit=Unit.MVM, weight_set=0, in_addr=0, out_addr=0, vectors=100,
...                        rows_used=512, cols_used=512, post=PostOp.NONE))
>>> psums.cycles  # 204,800 bytes of int32 partial sums through a 64 B/cycle write port
3216
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aipusim.arch.model import Arch, HostLinkSpec
from aipusim.base.errors import ArchError, TasklistError
from aipusim.isa.dpu_work import PSUM_BYTES, dpu_charged_ops, dpu_lane_ops, dpu_read_bytes
from aipusim.isa.tasks import (
    ADD_POSTS,
    Barrier,
    DmaCopy,
    DpuKind,
    DpuOp,
    DpuThen,
    DwpuOp,
    HostTransfer,
    Mvm,
    Pool,
    PostOp,
    Task,
    TokenSignal,
    TokenWait,
    Unit,
    WeightLoad,
    table_after,
)
from aipusim.isa.trace_schema import Component

#: Energy components, in the column order of every energy vector.
COMPONENTS: tuple[Component, ...] = tuple(Component)
#: Column of each component in an energy vector.
C: dict[Component, int] = {c: i for i, c in enumerate(COMPONENTS)}
#: Components that draw from the chip's core supply (their energy scales with V^2); DDR
#: and PCIe have their own supplies, static power is costed apart.
ON_CHIP: frozenset[Component] = frozenset(COMPONENTS) - {
    Component.DDR,
    Component.PCIE,
    Component.STATIC,
}
#: Most task shapes one `CostModel` remembers the cycles of (`CostModel.task_cycles`);
#: past it the memo starts again empty, so a long-lived sweep worker's memory stays bounded.
TASK_CYCLES_MEMO_ENTRIES = 1 << 16


class Link(enum.StrEnum):
    """The shared links a transfer can cross (each a serial server with a bandwidth)."""

    DDR = "ddr"  # the LPDDR4x channels (every burst spreads over all of them)
    NOC = "noc"  # the NoC fabric: everything to or from L2, DDR and PCIe crosses it
    L2 = "l2"  # the L2's ports (and banks), together
    SYSDMA = "sysdma"  # the chip's system DMA engine
    PCIE_H2D = "pcie_h2d"  # host link, host to device
    PCIE_D2H = "pcie_d2h"  # host link, device to host


@dataclass(frozen=True, slots=True)
class Traffic:
    """Bytes a task moves through each memory and link (one frame of it, one task)."""

    ddr: int = 0
    l2: int = 0  # the NoC (DDR and PCIe traffic crosses it too)
    l1_read: int = 0
    l1_write: int = 0
    imc_write: int = 0  # IMC weight-set writes
    pcie_h2d: int = 0
    pcie_d2h: int = 0

    def __add__(self, other: Traffic) -> Traffic:
        return Traffic(*(getattr(self, f) + getattr(other, f) for f in self.__dataclass_fields__))

    def as_dict(self) -> dict[str, int]:
        """Non-zero counters by name."""
        return {f: getattr(self, f) for f in self.__dataclass_fields__ if getattr(self, f)}


@dataclass(frozen=True, slots=True)
class Transfer:
    """What a transfer books on shared links: ``nbytes`` over ``links`` (in path order), the
    issuing engine's own bandwidth (0: none: the channel, one L1 port), setup before the
    first burst and the access latency after the last one. ``dst_cores`` is the multicast
    mask (0: the issuing core); ``ddr_write`` the direction on DDR when it is on the
    path."""

    nbytes: int
    links: tuple[Link, ...]
    channel_bw: float
    setup_cycles: int
    latency_cycles: int
    src: Pool
    dst: Pool
    dst_cores: int = 0
    ddr_write: bool = False


@dataclass(frozen=True, slots=True)
class Burst:
    """What one burst of ``nbytes`` of a transfer holds: ``cycles`` on each link of the path
    (on DDR: a burst that opens a fresh row, without turnaround), ``own`` cycles on the
    issuing engine (never shared), and on DDR the cycles of the four cases ``ddr[2 * fresh
    + turnaround]`` (None without DDR on the path)."""

    nbytes: int
    cycles: tuple[int, ...]
    own: int
    ddr: tuple[int, int, int, int] | None


@dataclass(frozen=True, slots=True)
class TaskCost:
    """What one task costs: ``cycles`` on its unit when nothing else competes (a transfer:
    over idle links), its MACs, bytes moved and dynamic energy (pJ per `COMPONENTS`
    column, at the nominal voltage)."""

    cycles: int
    macs: int
    traffic: Traffic
    energy_pj: tuple[float, ...]
    transfer: Transfer | None = None

    @property
    def energy_total_pj(self) -> float:
        return float(sum(self.energy_pj))


def pcie_wire_bytes(link: HostLinkSpec, nbytes: int, h2d: bool) -> tuple[int, int]:
    """Line bytes that moving ``nbytes`` of data over PCIe takes: (on the data's own
    direction, on the other one). A write to host memory (``h2d`` false) is posted TLPs of
    at most ``max_payload_bytes``; a read of host memory (``h2d``) sends a request TLP per
    ``max_read_request_bytes`` the other way and comes back as completions of
    ``read_completion_bytes`` (at most the payload limit). Every TLP adds
    ``tlp_overhead_bytes``; the receiver of TLPs answers on the opposite line with an ACK
    DLLP per ``tlps_per_ack`` and a credit update per ``tlps_per_fc_update``.

    >>> from aipusim.arch import load_arch
    >>> link = load_arch().host_link
    >>> pcie_wire_bytes(link, 4096, h2d=False)  # 16 TLPs of 256 B; 4 ACKs + 2 updates back
    (4480, 48)
    >>> pcie_wire_bytes(link, 4096, h2d=True)  # 32 completions of 128 B; 8 requests up
    (4888, 288)
    """
    if nbytes <= 0:
        return 0, 0

    def dllps(tlps: int) -> int:
        acks = -(-tlps // link.tlps_per_ack)
        updates = -(-tlps // link.tlps_per_fc_update)
        return (acks + updates) * link.dllp_bytes

    oh = link.tlp_overhead_bytes
    if not h2d:
        tlps = -(-nbytes // link.max_payload_bytes)
        return nbytes + tlps * oh, dllps(tlps)
    completions = -(-nbytes // min(link.read_completion_bytes, link.max_payload_bytes))
    requests = -(-nbytes // link.max_read_request_bytes)
    return nbytes + completions * oh + dllps(requests), requests * oh + dllps(completions)


def mvm_data_rows(t: Mvm) -> int:
    """How many of the rows ``row0 .. row0 + rows_used - 1`` of ``t`` hold input channels
    rather than PWORD channel padding (`Mvm`'s row index: ``cpad`` rows per tap, the first
    ``cin`` of them data; with ``swicr`` the taps of a window row are packed and only its
    tail is padding). A task without its geometry (``cin`` or ``cpad`` 0, or with ``swicr``
    no window row: ``kw + (icr - 1) * stride_w`` not positive) counts every row.

    >>> from aipusim.isa.tasks import Mvm
    >>> base = dict(unit="mvm", weight_set=0, in_addr=0, out_addr=0, vectors=1, cols_used=1)
    >>> mvm_data_rows(Mvm(**base, rows_used=192, cin=3, cpad=64))  # 3 taps of 64 rows
    9
    >>> mvm_data_rows(Mvm(**base, rows_used=64, cin=3, cpad=64, kw=7, swicr=1))
    21
    """
    if t.cin <= 0 or t.cpad <= 0:
        return t.rows_used
    if t.swicr:
        width = t.kw + (t.icr - 1) * t.stride_w
        if width <= 0:
            return t.rows_used
        period = math.ceil(width * t.cin / t.cpad) * t.cpad
        data = width * t.cin
    else:
        period, data = t.cpad, min(t.cin, t.cpad)

    def upto(n: int) -> int:  # data rows among rows 0 .. n - 1
        return (n // period) * data + min(n % period, data)

    return upto(t.row0 + t.rows_used) - upto(t.row0)


def burst_cycles(nbytes: int, bw_bytes_per_cycle: float) -> int:
    """Whole cycles ``nbytes`` hold a link of ``bw_bytes_per_cycle`` (0 for no link).

    >>> burst_cycles(16_384, 30.0), burst_cycles(64, 0.0)
    (547, 0)
    """
    return int(-(-nbytes // bw_bytes_per_cycle)) if bw_bytes_per_cycle else 0


class CostModel:
    """The cost of tasks on ``arch`` at ``freq_hz`` with ``mvm_utilization_limit`` banks.

    Link bandwidths in GB/s (DDR, PCIe) keep their GB/s at any core clock, so their bytes
    per cycle follow ``freq_hz``; on-chip links are fixed in bytes per cycle.
    """

    def __init__(
        self, arch: Arch, freq_hz: int | None = None, mvm_utilization_limit: float = 1.0
    ) -> None:
        self.arch = arch
        self.freq_hz = int(freq_hz or arch.clock.default_hz)
        self.mvm_utilization_limit = mvm_utilization_limit
        self.active_cols = arch.mvm.active_cols(mvm_utilization_limit)
        self.ddr_latency_cycles = arch.ns_to_cycles(arch.ddr.latency_ns, self.freq_hz)
        host = arch.host_link
        self.pcie_setup_cycles = arch.ns_to_cycles(host.setup_us * 1000.0, self.freq_hz)
        #: The host's processing of one frame before it is sent and after it is back.
        self.host_pre_cycles = arch.ns_to_cycles(host.pre_frame_us * 1000.0, self.freq_hz)
        self.host_post_cycles = arch.ns_to_cycles(host.post_frame_us * 1000.0, self.freq_hz)
        #: One L1 port (a requester's own limit per direction), bytes per cycle.
        self.l1_port = float(arch.l1.port_bytes_per_cycle)
        self.mvm_clock_pj_per_mac = mvm_clock_pj_per_mac(arch)
        self._bw = {
            Link.DDR: arch.ddr_bw_bytes_per_cycle(self.freq_hz),
            Link.NOC: float(arch.noc.bw_bytes_per_cycle),
            Link.L2: float(arch.l2.bw_bytes_per_cycle),
            Link.SYSDMA: float(arch.sysdma.bw_bytes_per_cycle),
            Link.PCIE_H2D: arch.host_bw_bytes_per_cycle(self.freq_hz),
            Link.PCIE_D2H: arch.host_bw_bytes_per_cycle(self.freq_hz),
        }
        self._bursts: dict[tuple[Transfer, int], Burst] = {}
        self._task_cycles: dict[tuple[Any, ...], int] = {}

    # -- links ---------------------------------------------------------------------------
    def link_bw(self, link: Link) -> float:
        """Bytes per cycle of a shared link at this clock (DDR: its peak, every channel
        streaming; `stream_bw` gives what a long transfer sustains)."""
        return self._bw[link]

    @property
    def channel_bw(self) -> float:
        """Bytes per cycle of one core DMA channel (its own, never shared)."""
        return float(self.arch.dma.channel_bw_bytes_per_cycle)

    def weight_fetch_bw(self, links: tuple[Link, ...], sharers: int = 1) -> float:
        """Bytes per cycle a per-frame weight fetch into L1 gets over ``links`` (the weights'
        path from their home) when ``sharers`` cores fetch at once over them: the slowest
        link's share, at most one DMA channel, at least a byte per cycle (the compiler's
        multicore planning figure; a multicast is one fetch).

        >>> from aipusim.arch import load_arch
        >>> m = cost_model(load_arch())
        >>> m.weight_fetch_bw((Link.L2,)) == min(m.channel_bw, m.link_bw(Link.L2))
        True
        """
        source = min(self.link_bw(link) for link in links) / sharers
        return max(1.0, min(self.channel_bw, source))

    def weight_fetch_cycles(self, nbytes: int, fetch_bw: float) -> int:
        """Whole cycles a per-frame weight fetch of ``nbytes`` takes at ``fetch_bw`` bytes per
        cycle (`weight_fetch_bw`), the IMC mapper's planning figure.

        >>> from aipusim.arch import load_arch
        >>> cost_model(load_arch()).weight_fetch_cycles(1000, 64.0)
        16
        """
        return math.ceil(nbytes / fetch_bw)

    def stream_bw(self, pool: Pool) -> float:
        """Bytes per cycle a long transfer from ``pool`` into a core's L1 sustains on idle
        links (the planning figure of the compiler's multicore split).

        >>> from aipusim.arch import load_arch
        >>> round(cost_model(load_arch()).stream_bw(Pool.DDR), 2)
        39.57
        """
        tr = self.dma_transfer(Unit.DMA0, pool, Pool.L1, 1 << 24)
        return tr.nbytes / max(1, self.transfer_cycles(tr) - tr.setup_cycles - tr.latency_cycles)

    # -- DDR -----------------------------------------------------------------------------
    def ddr_burst_ns(self, nbytes: int, *, fresh: bool, turnaround: bool, write: bool) -> float:
        """Nanoseconds the LPDDR4x channels are busy with one burst of ``nbytes``.

        The bytes spread over the channels in ``interleave_bytes`` pieces; each channel
        streams its share at its data rate, one page (row) after the other. A fresh burst
        (not the continuation of the previous one on DDR) first closes the row another
        stream left open and opens its own (tRP + tRCD); each further page is opened in the
        next bank while the current one streams, so only what the streaming does not cover
        shows. A change of direction first waits tWTR (write to read) or tRTW (read to
        write). All-bank refresh takes tRFC of every tREFI, stretching the whole.

        >>> from aipusim.arch import load_arch
        >>> m = cost_model(load_arch())
        >>> round(m.ddr_burst_ns(16384, fresh=False, turnaround=False, write=False), 1)
        517.2
        >>> round(m.ddr_burst_ns(16384, fresh=True, turnaround=True, write=True), 1)
        573.2
        """
        d = self.arch.ddr
        used = max(1, min(d.channels, math.ceil(nbytes / d.interleave_bytes)))
        per_channel = math.ceil(nbytes / used)
        page_ns = d.page_bytes / d.channel_bytes_per_ns
        ns = per_channel / d.channel_bytes_per_ns
        open_ns = d.t_rp_ns + d.t_rcd_ns
        pages = math.ceil(per_channel / d.page_bytes)
        ns += (pages - 1) * max(0.0, open_ns - page_ns)
        if fresh:
            ns += open_ns
        if turnaround:
            ns += d.t_rtw_ns if write else d.t_wtr_ns
        return ns / (1.0 - d.refresh_share)

    def ddr_burst_cycles(self, nbytes: int, *, fresh: bool, turnaround: bool, write: bool) -> int:
        """`ddr_burst_ns` in whole cycles of the core clock."""
        ns = self.ddr_burst_ns(nbytes, fresh=fresh, turnaround=turnaround, write=write)
        return max(1, math.ceil(ns * self.freq_hz / 1e9 - 1e-9))

    # -- bursts --------------------------------------------------------------------------
    def burst(self, tr: Transfer, nbytes: int) -> Burst:
        """The cycles one burst of ``nbytes`` of ``tr`` holds each link and its engine."""
        key = (tr, nbytes)
        found = self._bursts.get(key)
        if found is not None:
            return found
        ddr: tuple[int, int, int, int] | None = None
        cycles = []
        for link in tr.links:
            if link is Link.DDR:
                ddr = tuple(  # type: ignore[assignment]
                    self.ddr_burst_cycles(nbytes, fresh=f, turnaround=t, write=tr.ddr_write)
                    for f in (False, True)
                    for t in (False, True)
                )
                assert ddr is not None
                cycles.append(ddr[2])
            elif link in (Link.PCIE_H2D, Link.PCIE_D2H):
                # the line carries the TLP and DLLP overhead with the data
                wire, _ = pcie_wire_bytes(self.arch.host_link, nbytes, link is Link.PCIE_H2D)
                cycles.append(burst_cycles(wire, self._bw[link]))
            else:
                cycles.append(burst_cycles(nbytes, self._bw[link]))
        own = burst_cycles(nbytes, tr.channel_bw)
        if Link.L2 in tr.links:
            # a small burst reaches only the banks its bytes rotate over
            l2 = self.arch.l2
            banks = max(1, min(l2.banks, math.ceil(nbytes / l2.interleave_bytes)))
            own = max(own, burst_cycles(nbytes, banks * l2.bank_bytes_per_cycle))
        found = self._bursts[key] = Burst(nbytes, tuple(cycles), own, ddr)
        return found

    def burst_alone_cycles(self, tr: Transfer, nbytes: int, *, fresh: bool) -> int:
        """Cycles one burst of ``tr`` lasts on idle links: its slowest link or own limit
        (on DDR opening a row if ``fresh``, else continuing the previous burst's)."""
        b = self.burst(tr, nbytes)
        cycles = list(b.cycles)
        if b.ddr is not None:
            cycles[tr.links.index(Link.DDR)] = b.ddr[2 if fresh else 0]
        return max([b.own, *cycles])

    def transfer_cycles(self, tr: Transfer) -> int:
        """Cycles of a transfer over idle links: setup, its bursts one after the other (each
        as long as its slowest link or its own limit; on DDR the first opens a row, the
        others continue it) and the access latency."""
        size = self.arch.dma.burst_bytes
        n_full = (tr.nbytes - 1) // size if tr.nbytes > 0 else 0
        last = tr.nbytes - n_full * size
        total = tr.setup_cycles + tr.latency_cycles
        if n_full:
            total += self.burst_alone_cycles(tr, size, fresh=True)
            total += (n_full - 1) * self.burst_alone_cycles(tr, size, fresh=False)
            return total + self.burst_alone_cycles(tr, last, fresh=False)
        return total + self.burst_alone_cycles(tr, last, fresh=True)

    # -- tokens and barriers -------------------------------------------------------------
    def token_latency_cycles(self, is_global: bool) -> int:
        """Cycles from the end of a signalling task until a waiter sees the token: a local
        token's register, or for a global one the NoC to the hub, its update, and the NoC
        to the waiting core."""
        local = self.arch.control.token_signal_latency_cycles
        if not is_global:
            return local
        noc = self.arch.noc
        return local + 2 * noc.hops_to_hub * noc.hop_latency_cycles + noc.sync_cycles

    def barrier_cycles(self) -> int:
        """Cycles a barrier adds after the last core arrived: the arrival crosses the NoC
        to the hub, the hub counts it, the release crosses back."""
        noc = self.arch.noc
        return 2 * noc.hops_to_hub * noc.hop_latency_cycles + noc.sync_cycles

    # -- kind-level costs (the compiler plans with these) ---------------------------------
    def l1_port_cycles(self, read_bytes: int, write_bytes: int) -> int:
        """Cycles a requester needs for its L1 bytes through one read and one write port."""
        port = self.arch.l1.port_bytes_per_cycle
        return max(-(-read_bytes // port), -(-write_bytes // port))

    def mvm_cycles(
        self,
        vectors: int,
        cols_used: int,
        rows_used: int | None = None,
        *,
        accumulate: bool = False,
        post: PostOp = PostOp.REQUANT,
        pitches: tuple[int, int] = (1, 1),
    ) -> int:
        """One `Mvm` task of ``vectors`` input vectors over ``rows_used`` (default: all)
        rows and ``cols_used`` columns, adding to int32 partial sums if ``accumulate``,
        writing int32 partial sums if ``post`` is ``none``; ``pitches``: its input and
        output channel pitches."""
        mvm = self.arch.mvm
        passes = math.ceil(cols_used / self.active_cols)
        compute = vectors * mvm.cycles_per_vector * passes
        drain = math.ceil(vectors * cols_used / mvm.outputs_per_cycle)
        read, write = self._mvm_bytes(
            vectors, rows_used or mvm.rows, cols_used, accumulate, post, pitches
        )
        port = self.l1_port_cycles(read, write)
        return max(compute, drain, port) + mvm.pipeline_latency_cycles

    def _mvm_bytes(
        self,
        vectors: int,
        rows_used: int,
        cols_used: int,
        accumulate: bool,
        post: PostOp,
        pitches: tuple[int, int] = (1, 1),
    ) -> tuple[int, int]:
        """(L1 bytes read, written) of an `Mvm`: every pass streams the input vectors again;
        ``accumulate`` reads the int32 partial sums; ``post`` none writes them. Channels
        ``pitches`` (input, output) bytes apart move their span."""
        passes = math.ceil(cols_used / self.active_cols)
        out_elems = vectors * cols_used
        read = vectors * rows_used * passes * pitches[0]
        read += out_elems * PSUM_BYTES if accumulate else 0
        if post in ADD_POSTS:
            read += out_elems  # the residual operand, int8
        write = out_elems * (PSUM_BYTES if post == PostOp.NONE else pitches[1])
        return read, write

    def l1_streams(self, task: Task) -> tuple[tuple[tuple[str, int], ...], ...]:
        """A compute task's L1 bytes (`TaskCost.traffic`) by the address field each stream
        starts at: ``(reads, writes)``, each ``((field, bytes), ...)``, summing to
        ``l1_read``/``l1_write``. The detailed mode's banked L1 walks each stream from its
        address (`aipusim.simulator.detail.l1`). An `Mvm` reads its input vectors, its
        partial sums (``accumulate``) and its residual (an add post) and writes its results
        (partial sums at ``psum_addr`` for post none); a `DpuOp`'s operands are read in
        equal shares; DMA kinds and the rest move no L1 bytes of their own here.

        >>> from aipusim.arch import load_arch
        >>> m = CostModel(load_arch(), 800_000_000)
        >>> m.l1_streams(Mvm(unit=Unit.MVM, weight_set=0, in_addr=0, out_addr=0, vectors=10,
        ...                  rows_used=512, cols_used=512))
        ((('in_addr', 5120),), (('out_addr', 5120),))
        """
        if isinstance(task, Mvm):
            passes = math.ceil(task.cols_used / self.active_cols)
            out_elems = task.vectors * task.cols_used
            reads = [("in_addr", task.vectors * task.rows_used * passes * task.in_chan_pitch)]
            if task.accumulate:
                reads.append(("psum_addr", out_elems * PSUM_BYTES))
            if task.post in ADD_POSTS:
                reads.append(("add_addr", out_elems))
            _, write = self._mvm_bytes(
                task.vectors, task.rows_used, task.cols_used, bool(task.accumulate), task.post,
                (task.in_chan_pitch, task.out_chan_pitch),
            )  # fmt: skip
            out = "psum_addr" if task.post == PostOp.NONE else "out_addr"
            return tuple(reads), ((out, write),)
        if isinstance(task, WeightLoad):
            return (("src_addr", task.read_bytes),), ()
        if isinstance(task, DwpuOp):
            read = task.channels * task.h * task.w
            return (("in_addr", read),), (("out_addr", task.channels * task.out_h * task.out_w),)
        if isinstance(task, DpuOp):
            then = task.then is not DpuThen.NONE
            read = dpu_read_bytes(task.kind, task.elements, task.operands, self.arch, then=then)
            # (a psum task's operands are the planes of one partial-sum block)
            k = 1 if task.kind is DpuKind.PSUM else max(1, min(3, task.operands))
            share = [read // k] * k
            share[0] += read - sum(share)
            reads = tuple((f"in_addr{i}", n) for i, n in enumerate(share) if n)
            return reads, (("out_addr", task.elements),)
        return (), ()

    def weight_load_cycles(self, nbytes: int, read_bytes: int | None = None) -> int:
        """One `WeightLoad` of ``nbytes`` into an IMC weight set (``read_bytes``, default
        ``nbytes``, read from L1 through a port, written through the IMC write port)."""
        wl = math.ceil(nbytes / self.arch.mvm.weight_load_bw_bytes_per_cycle)
        return max(wl, self.l1_port_cycles(nbytes if read_bytes is None else read_bytes, 0))

    def dpu_cycles(
        self,
        kind: DpuKind,
        elements: int,
        operands: int,
        *,
        table: bool = False,
        then: bool = False,
    ) -> int:
        """One `DpuOp`: its lane operations over the lanes (or its L1 bytes over the
        ports), plus the pipeline. ``table``: an element-wise kind with an activation's
        table after it (one pass: the intermediate is neither written nor read again);
        ``then``: a second element-wise step after it (`DpuOp.then`, the same)."""
        dpu = self.arch.dpu
        ops = dpu_lane_ops(kind, elements, operands, self.arch, table=table, then=then)
        # why: the first step's result feeds the second step inside the lane, so the
        # port sees only the operands of both steps and the one result of the second
        read = dpu_read_bytes(kind, elements, operands, self.arch, then=then)
        port = self.l1_port_cycles(read, elements)
        return max(math.ceil(ops / dpu.lanes), port) + dpu.pipeline_latency_cycles

    def dwpu_cycles(
        self, channels: int, out_h: int, out_w: int, kh: int, kw: int, in_h: int = 0, in_w: int = 0
    ) -> int:
        """One `DwpuOp` producing ``channels`` x ``out_h`` x ``out_w`` from kh x kw windows
        of a ``channels`` x ``in_h`` x ``in_w`` input (0: as large as the output)."""
        dw = self.arch.dwpu
        groups = math.ceil(channels / dw.channels)
        windows = math.ceil(kh * kw / dw.macs_per_channel_per_cycle)
        read = channels * (in_h or out_h) * (in_w or out_w)
        port = self.l1_port_cycles(read, channels * out_h * out_w)
        return max(groups * out_h * out_w * windows, port) + dw.pipeline_latency_cycles

    def dma_transfer(
        self,
        unit: Unit,
        src: Pool,
        dst: Pool,
        nbytes: int,
        dst_cores: int = 0,
    ) -> Transfer:
        """The path of a `DmaCopy` of ``nbytes`` from ``src`` to ``dst`` issued on ``unit``
        (``dst_cores``: the multicast mask)."""
        arch = self.arch
        links: list[Link] = []
        if unit == Unit.SYSDMA:
            links.append(Link.SYSDMA)
            setup, channel_bw = arch.sysdma.setup_cycles, 0.0
        else:
            setup, channel_bw = arch.dma.setup_cycles, self.channel_bw
        if Pool.L1 in (src, dst):
            # the L1 side goes through one port of the core(s)
            channel_bw = min(channel_bw, self.l1_port) if channel_bw else self.l1_port
        latency = 0
        if src == Pool.HOST:
            links.append(Link.PCIE_H2D)
            setup += self.pcie_setup_cycles
        if Pool.DDR in (src, dst):
            links.append(Link.DDR)
            latency += self.ddr_latency_cycles
        if {src, dst} != {Pool.L1} or dst_cores:
            # everything else hangs off the NoC, and so do the other cores' L1s (a
            # cooperative core's multicast of its part)
            links.append(Link.NOC)
        if Pool.L2 in (src, dst):
            links.append(Link.L2)
            latency += arch.l2.latency_cycles
        if dst == Pool.HOST:
            links.append(Link.PCIE_D2H)
            setup += self.pcie_setup_cycles
        if src == dst == Pool.L1:
            latency += arch.l1.latency_cycles
        return Transfer(
            nbytes,
            tuple(links),
            channel_bw,
            setup,
            latency,
            src,
            dst,
            dst_cores,
            dst == Pool.DDR,
        )

    def dma_cycles(self, unit: Unit, src: Pool, dst: Pool, nbytes: int) -> int:
        """Cycles of a `DmaCopy` over idle links."""
        return self.transfer_cycles(self.dma_transfer(unit, src, dst, nbytes))

    def shared_dma_cycles(self, unit: Unit, src: Pool, dst: Pool, nbytes: int, parts: int) -> int:
        """Cycles of one of ``parts`` equal `DmaCopy` parts of ``nbytes`` in all that as many
        cores move at once over the same path (the compiler's planning figure for sharing
        a copy): each its setup and latency, then its bytes at its own channel or its share
        of the slowest link of the path (DDR: what a long transfer sustains, `stream_bw`).

        >>> from aipusim.arch import load_arch
        >>> m = cost_model(load_arch())
        >>> whole = m.dma_cycles(Unit.DMA0, Pool.DDR, Pool.L2, 1 << 17)
        >>> m.shared_dma_cycles(Unit.DMA0, Pool.DDR, Pool.L2, 1 << 17, 4) >= whole * 0.9
        True
        """
        tr = self.dma_transfer(unit, src, dst, nbytes)
        slowest = min(
            self.stream_bw(Pool.DDR) if link is Link.DDR else self.link_bw(link)
            for link in tr.links
        )
        bw = min(self.channel_bw, slowest / parts)
        return tr.setup_cycles + tr.latency_cycles + math.ceil(nbytes / parts / bw)

    # -- whole tasks ---------------------------------------------------------------------
    def task(self, task: Task, where: str = "") -> TaskCost:
        """The cost of one task. ``where`` names it in the `TasklistError` raised for a task
        this arch cannot run (a weight set or array size out of range, no bytes)."""
        where = where or f"{type(task).__name__} task of layer {task.layer!r}"
        energy = [0.0] * len(COMPONENTS)
        energy[C[Component.CONTROL]] = self.arch.energy.control_task_pj
        if isinstance(task, Mvm):
            return self._mvm(task, energy, where)
        if isinstance(task, WeightLoad):
            return self._weight_load(task, energy)
        if isinstance(task, DpuOp):
            return self._dpu(task, energy)
        if isinstance(task, DwpuOp):
            return self._dwpu(task, energy)
        if isinstance(task, DmaCopy):
            return self._dma(task, energy, where)
        if isinstance(task, Barrier):
            return TaskCost(self.barrier_cycles(), 0, Traffic(), tuple(energy))
        if isinstance(task, HostTransfer | TokenWait | TokenSignal):
            return TaskCost(0, 0, Traffic(), tuple(energy))
        raise TasklistError(f"{where}: task kind must be a known kind, not {type(task)}")

    def mvm_mac_energy_pj(self, t: Mvm) -> float:
        """The MAC energy of ``t`` at the nominal voltage, pJ: a row that carries data costs
        ``mvm_mac_pj`` per MAC, a channel-padding row (PWORD padding, `mvm_data_rows`) only
        the zero-product cost of the value-aware fit (``a`` of
        `aipusim.arch.model.EnergySpec.mvm_activity_fit`: clock, broadcast, adder tree),
        each less the array's clock per MAC (`mvm_clock_pj_per_mac`), which the simulator
        charges per busy cycle instead (`aipusim.simulator.power`).

        >>> from aipusim.arch import load_arch
        >>> from aipusim.isa.tasks import Mvm
        >>> m = cost_model(load_arch())
        >>> t = Mvm(unit="mvm", weight_set=0, in_addr=0, out_addr=0, vectors=10, rows_used=64,
        ...         cols_used=8, cin=3, cpad=64)
        >>> round(m.mvm_mac_energy_pj(t) / (10 * 64 * 8 * 0.185), 4)  # 3 of 64 rows
        0.1462
        """
        e = self.arch.energy
        data = mvm_data_rows(t)
        zero = e.mvm_activity_fit[0]
        per_col = (data + zero * (t.rows_used - data)) * e.mvm_mac_pj
        return t.vectors * t.cols_used * (per_col - t.rows_used * self.mvm_clock_pj_per_mac)

    def task_cycles(
        self, kind: type[Task], unit: Unit, fields: Mapping[str, Any], layer: str = ""
    ) -> int:
        """`task`'s ``cycles`` of a ``kind`` task on ``unit`` with ``fields`` (``layer``
        names it in an error), memoised by kind, unit and fields: they depend on neither
        the layer nor the tokens, and the schedule asks for the same shapes again and
        again (every tile of a layer, every build of a cooperative schedule, and every
        compile in a warm sweep worker, which `cost_model` hands the same model).

        >>> from aipusim.arch import load_arch
        >>> m = CostModel(load_arch())
        >>> f = dict(src_pool=Pool.DDR, src_addr=0, dst_pool=Pool.L1, dst_addr=0, bytes=4096)
        >>> m.task_cycles(DmaCopy, Unit.DMA0, f) == m.task(DmaCopy(unit=Unit.DMA0, **f)).cycles
        True
        """
        key = (kind, unit, *fields.items())
        cycles = self._task_cycles.get(key)
        if cycles is None:
            cycles = self.task(kind(unit=unit, layer=layer, **fields)).cycles
            if len(self._task_cycles) >= TASK_CYCLES_MEMO_ENTRIES:
                self._task_cycles.clear()
            self._task_cycles[key] = cycles
        return cycles

    def _mvm(self, t: Mvm, energy: list[float], where: str) -> TaskCost:
        mvm, e = self.arch.mvm, self.arch.energy
        if not (0 < t.rows_used <= mvm.rows and 0 < t.cols_used <= mvm.cols):
            raise TasklistError(
                f"{where}: rows_used/cols_used must be 1-{mvm.rows}/1-{mvm.cols}, "
                f"not {t.rows_used}/{t.cols_used}"
            )
        if not 0 <= t.weight_set < mvm.weight_sets:
            raise TasklistError(
                f"{where}: weight_set must be 0-{mvm.weight_sets - 1}, not {t.weight_set}"
            )
        macs = t.macs
        out_elems = t.vectors * t.cols_used
        accumulate, post = bool(t.accumulate), t.post
        pitches = (t.in_chan_pitch, t.out_chan_pitch)
        read, write = self._mvm_bytes(
            t.vectors, t.rows_used, t.cols_used, accumulate, post, pitches
        )
        energy[C[Component.MVM]] += self.mvm_mac_energy_pj(t)
        energy[C[Component.L1]] += read * e.l1_read_pj_per_byte + write * e.l1_write_pj_per_byte
        if t.post != PostOp.NONE:
            energy[C[Component.DPU]] += out_elems * e.dpu_requant_act_pj
        if t.post in ADD_POSTS:
            add_ops = dpu_charged_ops(DpuKind.ADD, out_elems, 2, self.arch)
            energy[C[Component.DPU]] += add_ops * e.dpu_lane_op_pj
        traffic = Traffic(l1_read=read, l1_write=write)
        cycles = self.mvm_cycles(
            t.vectors, t.cols_used, t.rows_used, accumulate=accumulate, post=post, pitches=pitches
        )
        return TaskCost(cycles, macs, traffic, tuple(energy))

    def _weight_load(self, t: WeightLoad, energy: list[float]) -> TaskCost:
        e = self.arch.energy
        read = t.read_bytes
        energy[C[Component.WLOAD]] += t.bytes * e.imc_weight_write_pj_per_byte
        if t.col_sums:
            energy[C[Component.WLOAD]] += t.bytes * e.imc_col_sum_pj_per_byte
        energy[C[Component.L1]] += read * e.l1_read_pj_per_byte
        traffic = Traffic(l1_read=read, imc_write=t.bytes)
        return TaskCost(self.weight_load_cycles(t.bytes, read), 0, traffic, tuple(energy))

    def _dpu(self, t: DpuOp, energy: list[float]) -> TaskCost:
        e = self.arch.energy
        per = e.dpu_requant_act_pj if t.kind in (DpuKind.REQUANT, DpuKind.LUT) else e.dpu_lane_op_pj
        then = t.then is not DpuThen.NONE
        ops = dpu_charged_ops(t.kind, t.elements, t.operands, self.arch, then=then)
        energy[C[Component.DPU]] += ops * per
        table = table_after(t.kind, t.lut)
        if table:  # the fused activation: what a stand-alone lut task charges per element
            energy[C[Component.DPU]] += t.elements * e.dpu_requant_act_pj
        read = dpu_read_bytes(t.kind, t.elements, t.operands, self.arch, then=then)
        write = t.elements  # the second step's result only: the first is never stored
        energy[C[Component.L1]] += read * e.l1_read_pj_per_byte + write * e.l1_write_pj_per_byte
        cycles = self.dpu_cycles(t.kind, t.elements, t.operands, table=table, then=then)
        return TaskCost(cycles, 0, Traffic(l1_read=read, l1_write=write), tuple(energy))

    def _dwpu(self, t: DwpuOp, energy: list[float]) -> TaskCost:
        e = self.arch.energy
        macs = t.macs
        read = t.channels * t.h * t.w
        write = t.channels * t.out_h * t.out_w
        energy[C[Component.DWPU]] += macs * e.dwpu_mac_pj
        energy[C[Component.L1]] += read * e.l1_read_pj_per_byte + write * e.l1_write_pj_per_byte
        cycles = self.dwpu_cycles(t.channels, t.out_h, t.out_w, t.kh, t.kw, t.h, t.w)
        return TaskCost(cycles, macs, Traffic(l1_read=read, l1_write=write), tuple(energy))

    def _dma(self, t: DmaCopy, energy: list[float], where: str) -> TaskCost:
        if t.bytes <= 0:
            raise TasklistError(f"{where}: bytes must be > 0, not {t.bytes}")
        tr = self.dma_transfer(t.unit, t.src_pool, t.dst_pool, t.bytes, t.dst_core_mask)
        dests = max(1, bin(t.dst_core_mask).count("1"))
        n = t.bytes
        e = self.arch.energy
        row_bytes = n / max(1, t.rows * t.planes)  # contiguous run length
        ddr_pj = e.ddr_seq_pj_per_byte if row_bytes >= 64 else e.ddr_random_pj_per_byte
        side = {
            Pool.DDR: (Component.DDR, ddr_pj, ddr_pj),
            Pool.L2: (Component.L2, e.l2_read_pj_per_byte, e.l2_write_pj_per_byte),
            Pool.L1: (Component.L1, e.l1_read_pj_per_byte, e.l1_write_pj_per_byte),
            Pool.HOST: (Component.PCIE, e.pcie_pj_per_byte, e.pcie_pj_per_byte),
        }
        read_c, read_pj, _ = side[t.src_pool]
        write_c, _, write_pj = side[t.dst_pool]
        energy[C[read_c]] += n * read_pj
        energy[C[write_c]] += n * dests * write_pj
        energy[C[Component.DMA]] += n * e.dma_pj_per_byte
        # NoC wires: DDR<->L1 crosses the NoC without an L2 bank (whose energy includes its
        # own wires); a multicast crosses it once more per extra destination core.
        noc_bytes = n if {t.src_pool, t.dst_pool} == {Pool.DDR, Pool.L1} else 0
        noc_bytes += n * (dests - 1)
        energy[C[Component.L2]] += noc_bytes * e.noc_hop_pj_per_byte
        traffic = Traffic(
            ddr=n if Pool.DDR in (t.src_pool, t.dst_pool) else 0,
            l2=n if Link.NOC in tr.links and {t.src_pool, t.dst_pool} != {Pool.L1} else 0,
            l1_read=n if t.src_pool == Pool.L1 else 0,
            l1_write=n * dests if t.dst_pool == Pool.L1 else 0,
            pcie_h2d=n if t.src_pool == Pool.HOST else 0,
            pcie_d2h=n if t.dst_pool == Pool.HOST else 0,
        )
        return TaskCost(self.transfer_cycles(tr), 0, traffic, tuple(energy), tr)

    def host_transfer(self, direction: str, pool: Pool, nbytes: int) -> TaskCost:
        """The host's side of moving one input (``h2d``) or output (``d2h``) of ``nbytes``
        between host memory and the instance's I/O buffer in ``pool``. ``cycles`` counts
        the driver's setup on the host dispatcher, then the bursts and the latency."""
        e = self.arch.energy
        energy = [0.0] * len(COMPONENTS)
        energy[C[Component.PCIE]] = nbytes * e.pcie_pj_per_byte
        h2d = direction == "h2d"
        traffic = Traffic(pcie_h2d=nbytes) if h2d else Traffic(pcie_d2h=nbytes)
        if pool == Pool.DDR:
            energy[C[Component.DDR]] = nbytes * e.ddr_seq_pj_per_byte
            traffic = traffic + Traffic(ddr=nbytes, l2=nbytes)
        elif pool == Pool.L2:
            energy[C[Component.L2]] = nbytes * (
                e.l2_write_pj_per_byte if h2d else e.l2_read_pj_per_byte
            )
            traffic = traffic + Traffic(l2=nbytes)
        src, dst = (Pool.HOST, pool) if h2d else (pool, Pool.HOST)
        path = self.dma_transfer(Unit.SYSDMA, src, dst, nbytes)
        # the host's DMA engine: no system DMA, no engine limit; the driver's setup only
        links = tuple(link for link in path.links if link is not Link.SYSDMA)
        tr = Transfer(
            nbytes, links, 0.0, self.pcie_setup_cycles, path.latency_cycles, src, dst, 0, h2d
        )
        return TaskCost(self.transfer_cycles(tr), 0, traffic, tuple(energy), tr)

    def tasklist_fetch(self, nbytes: int) -> Transfer:
        """The control core's fetch of ``nbytes`` of its tasklist from DDR into its L2
        window (before the run, or chunk by chunk when streaming)."""
        path = self.dma_transfer(Unit.SYSDMA, Pool.DDR, Pool.L2, nbytes)
        links = tuple(link for link in path.links if link is not Link.SYSDMA)
        return Transfer(nbytes, links, 0.0, 0, path.latency_cycles, Pool.DDR, Pool.L2)

    # -- power ---------------------------------------------------------------------------
    def control_pj(self, actions: int) -> float:
        """Energy of ``actions`` control-core actions (trace lines written, polls)."""
        return actions * self.arch.energy.control_task_pj

    def lower_bound_cycles(self, macs: int, ddr_bytes: int, cores: int) -> float:
        """The analytic floor of a run: its MACs at the arrays' peak rate, or its DDR bytes
        at what a long DDR stream sustains, whichever is longer."""
        size = self.arch.dma.burst_bytes
        ddr_bw = size / self.ddr_burst_cycles(size, fresh=False, turnaround=False, write=False)
        return max(macs / (self.arch.mvm.macs_per_cycle * max(1, cores)), ddr_bytes / ddr_bw)


@functools.lru_cache(maxsize=64)
def cost_model(
    arch: Arch, freq_hz: int | None = None, mvm_utilization_limit: float = 1.0
) -> CostModel:
    """A shared `CostModel` for these settings (the compiler asks for one per decision)."""
    return CostModel(arch, freq_hz, mvm_utilization_limit)


def dynamic_scale(arch: Arch, voltage_v: float) -> tuple[float, ...]:
    """Per-component factor applied to nominal-voltage energies at ``voltage_v``
    (``(V / V_nom)^2`` on chip, 1 off chip), in `COMPONENTS` order."""
    v = voltage_v / arch.clock.nominal_voltage_v
    return tuple(v * v if c in ON_CHIP else 1.0 for c in COMPONENTS)


def static_power_w(
    arch: Arch, freq_hz: int, active_cores: int, voltage_v: float | None = None
) -> dict[str, float]:
    """Static and always-on power by source, in W, at ``voltage_v`` (default: the lowest
    operating point that reaches ``freq_hz``): SRAM and logic leakage scaling with
    ``(V / V_nom)^leakage_voltage_exponent``, the PCIe link in L0, the LPDDR PHY and the
    DRAM devices' standby power per channel (constant: off-chip or on their own supply),
    the chip's clock distribution network and a clocked-idle overhead per active core, both
    scaling with ``f * V^2`` (the network feeds the uncore as well, so it does not follow
    the number of active cores).

    >>> from aipusim.arch import load_arch
    >>> round(sum(static_power_w(load_arch(), 800_000_000, 4).values()), 3)
    3.098
    """
    sp = arch.static_power
    volts = arch.clock.voltage_at(freq_hz) if voltage_v is None else voltage_v
    v = volts / arch.clock.nominal_voltage_v
    leak = v**sp.leakage_voltage_exponent
    return {
        "sram_leakage": sp.sram_leakage_w_per_mib * arch.sram_mib * leak,
        "logic_leakage": sp.logic_leakage_w * leak,
        "pcie_l0": sp.pcie_l0_w,
        "ddr_phy": sp.ddr_phy_w,
        "dram_background": sp.dram_background_w_per_channel * arch.ddr.channels,
        "clock_network": sp.clock_network_w * _clock_scale(arch, freq_hz, volts),
        "clock_always_on": _core_clock_w(arch, freq_hz, volts)
        * arch.clock_gating.always_on_fraction
        * active_cores,
    }


def _core_clock_w(arch: Arch, freq_hz: int, voltage_v: float) -> float:
    """A core's clocked-idle power with nothing gated at ``freq_hz`` and ``voltage_v``
    (``core_clocked_idle_w`` scaled by ``f * V^2``)."""
    return arch.static_power.core_clocked_idle_w * _clock_scale(arch, freq_hz, voltage_v)


def _clock_scale(arch: Arch, freq_hz: int, voltage_v: float) -> float:
    """How clock power given at the nominal clock and supply scales: ``f * V^2``."""
    v = voltage_v / arch.clock.nominal_voltage_v
    return (freq_hz / arch.clock.default_hz) * v * v


def unit_clock_w(arch: Arch, freq_hz: int, voltage_v: float) -> dict[str, float]:
    """Unit queue name -> the clock power it burns while idle and not yet gated, W: its
    share of the gateable part of a core's clocked-idle power (``[clock_gating]``). Gated,
    it burns ``gated_residual_fraction`` of that.

    >>> from aipusim.arch import load_arch
    >>> round(unit_clock_w(load_arch(), 800_000_000, 0.8)["mvm"], 4)
    0.165
    """
    cg = arch.clock_gating
    gateable = _core_clock_w(arch, freq_hz, voltage_v) * (1.0 - cg.always_on_fraction)
    return {unit: gateable * share for unit, share in cg.unit_shares().items()}


def mvm_clock_pj_per_mac(arch: Arch) -> float:
    """The array's clock energy in one MAC of a fully used array, pJ at the nominal voltage:
    the MVM's clock (`unit_clock_w`) per cycle over `MvmSpec.macs_per_cycle`. The 15 TOPS/W
    behind ``mvm_mac_pj`` is measured on a fully used array, its clock included; the
    simulator charges that clock per busy cycle instead (a task that uses part of the array
    or waits for its input stream clocks the whole array all the same), so a MAC costs
    ``mvm_mac_pj`` less this, and a fully used array still costs exactly ``mvm_mac_pj`` a MAC.

    >>> from aipusim.arch import load_arch
    >>> round(mvm_clock_pj_per_mac(load_arch()), 5)  # 0.165 W / 800 MHz / 32768 MACs
    0.00629
    """
    clock = unit_clock_w(arch, arch.clock.default_hz, arch.clock.nominal_voltage_v)["mvm"]
    per_mac = clock * 1e12 / arch.clock.default_hz / arch.mvm.macs_per_cycle
    zero = arch.energy.mvm_activity_fit[0] * arch.energy.mvm_mac_pj
    if per_mac >= zero:
        raise ArchError(
            f"the MVM's clock per MAC ({per_mac:.4g} pJ, from static_power.core_clocked_idle_w "
            f"and [clock_gating]) must be below the zero-product MAC energy ({zero:.4g} pJ), "
            "not above it"
        )
    return per_mac


def unit_leakage_w(arch: Arch, voltage_v: float) -> dict[str, float]:
    """Where the chip's leakage (`static_power_w`'s two leakage terms) sits, W: logic
    leakage per unit kind in the ``[clock_gating]`` shares (the always-on part to
    ``control``), SRAM leakage to ``l1`` (with the IMC weight arrays, to ``mvm``) and
    ``l2`` by size. The values sum to the two terms.

    >>> from aipusim.arch import load_arch
    >>> arch = load_arch()
    >>> s = static_power_w(arch, 800_000_000, 4, voltage_v=0.8)
    >>> round(sum(unit_leakage_w(arch, 0.8).values()) - s["sram_leakage"] - s["logic_leakage"], 12)
    0.0
    """
    sp, cg = arch.static_power, arch.clock_gating
    leak = (voltage_v / arch.clock.nominal_voltage_v) ** sp.leakage_voltage_exponent
    logic = sp.logic_leakage_w * leak
    out = {"control": logic * cg.always_on_fraction}
    for unit, share in cg.unit_shares().items():
        out[unit] = logic * (1.0 - cg.always_on_fraction) * share
    per_mib = sp.sram_leakage_w_per_mib * leak
    cores = arch.chip.cores
    out["l1"] = per_mib * arch.l1.size_bytes * cores / 2**20
    out["mvm"] += per_mib * arch.mvm.weight_bytes * cores / 2**20
    out["l2"] = per_mib * arch.l2.size_bytes / 2**20
    return out


__all__ = [
    "COMPONENTS",
    "ON_CHIP",
    "PSUM_BYTES",
    "Burst",
    "C",
    "CostModel",
    "Link",
    "TaskCost",
    "Traffic",
    "Transfer",
    "burst_cycles",
    "cost_model",
    "dynamic_scale",
    "mvm_clock_pj_per_mac",
    "mvm_data_rows",
    "static_power_w",
    "unit_clock_w",
    "unit_leakage_w",
]
