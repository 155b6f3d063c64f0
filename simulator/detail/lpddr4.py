"""A cycle-level LPDDR4(x) model: channels, ranks and banks with open rows, an FR-FCFS
controller with read and write queues, and refresh as an event.

Time is counted in clocks of the DRAM command clock (``tCK``, half the data rate). Every
request is cut into BL16 bursts (``bus_bytes * burst_length`` bytes, aligned); each burst
goes to one channel (`Lpddr4Config.decode`) and waits in that channel's read or write
queue. The channels are independent: each has its own command bus, data bus and
controller.

The controller, per channel, once per command:

- **Refresh first.** Per-bank (REFpb, every tREFI / banks, one bank after the other) or
  all-bank (REFab, every tREFI per rank, ranks staggered). A due refresh blocks new
  commands to its bank (or rank), precharges what is open there (PRE, or PREab taking
  tRPab), and issues the refresh once the precharges are done; the bank (rank) is then
  blocked for tRFCpb (tRFCab).
- **Reads or writes.** Reads are served until the write queue reaches its high watermark,
  or no read waits while more than the low watermark of writes (or nothing else) does;
  writes are then drained down to the low watermark (or until none is left)
  (``write_drain="watermark"``). With ``write_drain="batch"`` a drain starts at the high
  watermark, or above the low one when nothing is scheduled, and serves the writes queued
  when it started, then reads again.
- **Queue structure** (``command_queues``). ``"none"``: the scheduler picks straight from
  the read or write queue (FR-FCFS: of the requests in the queue being served, the oldest
  whose column command, a row hit, can issue now goes first; else the oldest whose next
  command, ACT or PRE of a conflicting row that no queued request still hits, can issue
  now). ``"per_bank"`` / ``"per_rank"``: the read and write queues are transaction queues;
  once a clock the oldest transaction of the one being served whose bank's (rank's)
  command queue has room (``command_queue_depth``) moves into it, reads and writes
  together. The scheduler visits the command queues round-robin (from the one after the
  last that issued) and issues the first ready command of the first queue that has one:
  in a queue, the oldest ready row hit or ACT goes first; a PRE only for the oldest entry
  of its bank, and only if no younger entry there hits the open row.
- **Row-hit limit** (``row_hit_limit``, 0 for none): after that many column commands to
  an open row, a PRE may close it even though queued requests still hit it.

Commands hold the command bus for `act_tck` / `cas_tck` / `pre_tck` clocks and obey tRCD,
tRP, tRAS, tRC, tRRD, tFAW, tCCD, tWR, tRTP, tWTR, tRTW (read to write command gap) and a
rank switch gap tRTRS. A read's data ends CL + BL/2 after its READ, a write's CWL + BL/2
after its WRITE: that is when the burst completes.

>>> from aipusim.arch import load_arch
>>> cfg = Lpddr4Config.from_arch(load_arch())
>>> res = simulate_requests(cfg, addresses=[0, 64], sizes=[64, 64], writes=[False, False],
...                         arrivals=[0, 0])
>>> res.done_tck.tolist()
[91, 107]
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aipusim.arch.model import Arch
from aipusim.base.errors import InvalidArgument

#: Refresh schemes: per-bank (REFpb), all-bank (REFab), or none (for hand-computed tests).
REFRESH_MODES = ("per_bank", "all_bank", "none")
#: Command queues between the transaction queues and the scheduler: none, one per bank or
#: one per rank (holding reads and writes together).
COMMAND_QUEUES = ("none", "per_bank", "per_rank")
#: Write drains: down to the low watermark (``watermark``), or the writes queued when the
#: drain started (``batch``).
WRITE_DRAINS = ("watermark", "batch")

_FAR = 1 << 62  # a time later than any event


@dataclass(frozen=True)
class Lpddr4Config:
    """Geometry, JEDEC timing (in tCK) and controller policy of the modelled LPDDR4 memory.

    `from_arch` builds it from the ``[ddr]`` table; tests and the fidelity comparison build
    one directly (``Lpddr4Config(**fields)`` or ``replace(cfg, t_faw=...)``).
    """

    tck_ns: float
    channels: int
    ranks: int
    banks: int
    rows: int
    page_bytes: int  # one row of one channel (all the chips of a rank together)
    bus_bytes: int  # data bus width of a channel
    burst_length: int
    interleave_bytes: int  # consecutive bytes on one channel before the next
    cl: int
    cwl: int
    t_ccd: int
    t_rcd: int
    t_rp: int
    t_rp_ab: int
    t_ras: int
    t_rc: int
    t_rrd: int
    t_faw: int
    t_wr: int
    t_rtp: int
    t_wtr: int
    t_rtw: int
    t_rtrs: int
    t_rfc_ab: int
    t_rfc_pb: int
    t_refi: int
    act_tck: int
    cas_tck: int
    pre_tck: int
    refresh_mode: str
    read_queue_depth: int
    write_queue_depth: int
    drain_high: int  # writes queued that start a drain
    drain_low: int  # writes queued at which a drain stops
    # The controller's structure (module docstring). The defaults are the arch file's
    # controller: no command queues, watermark drains, no row-hit limit.
    command_queues: str = "none"
    command_queue_depth: int = 0  # entries of each command queue (0 with no queues)
    write_drain: str = "watermark"
    row_hit_limit: int = 0

    @classmethod
    def from_arch(cls, arch: Arch) -> Lpddr4Config:
        """The arch file's LPDDR4x: ns timings rounded up to whole clocks at its data rate.

        >>> from aipusim.arch import load_arch
        >>> c = Lpddr4Config.from_arch(load_arch())
        >>> c.channels, c.burst_bytes, c.t_rcd, c.t_faw, c.t_refi
        (4, 32, 39, 64, 8328)
        """
        d = arch.ddr
        tck = d.tck_ns

        def ck(ns: float) -> int:
            return max(1, math.ceil(ns / tck - 1e-9))

        t_rp = ck(d.t_rp_ns)
        t_ras = ck(d.t_ras_ns)
        bus_bytes = d.channel_width_bits // 8
        per_bank = d.size_bytes // (d.channels * d.ranks_per_channel * d.banks_per_channel)
        return cls(
            tck_ns=tck,
            channels=d.channels,
            ranks=d.ranks_per_channel,
            banks=d.banks_per_channel,
            rows=max(1, per_bank // d.page_bytes),
            page_bytes=d.page_bytes,
            bus_bytes=bus_bytes,
            burst_length=d.burst_length,
            interleave_bytes=d.interleave_bytes,
            cl=d.read_latency_tck,
            cwl=d.write_latency_tck,
            t_ccd=d.t_ccd_tck,
            t_rcd=ck(d.t_rcd_ns),
            t_rp=t_rp,
            t_rp_ab=ck(d.t_rp_ab_ns),
            t_ras=t_ras,
            t_rc=t_ras + t_rp,
            t_rrd=ck(d.t_rrd_ns),
            t_faw=ck(d.t_faw_ns),
            t_wr=ck(d.t_wr_ns),
            t_rtp=ck(d.t_rtp_ns),
            t_wtr=ck(d.t_wtr_ns),
            t_rtw=ck(d.t_rtw_ns),
            # LPDDR4 has one rank per channel here; a rank switch would cost a bus turn.
            t_rtrs=2,
            t_rfc_ab=ck(d.t_rfc_ns),
            t_rfc_pb=ck(d.t_rfc_pb_ns),
            t_refi=ck(d.t_refi_ns),
            act_tck=d.act_command_tck,
            cas_tck=d.cas_command_tck,
            pre_tck=d.pre_command_tck,
            refresh_mode=d.refresh_mode,
            read_queue_depth=d.read_queue_depth,
            write_queue_depth=d.write_queue_depth,
            drain_high=max(1, round(d.write_queue_depth * d.write_drain_high_fraction)),
            drain_low=round(d.write_queue_depth * d.write_drain_low_fraction),
        )

    @property
    def burst_bytes(self) -> int:
        """Bytes one column access (one burst) moves on one channel."""
        return self.bus_bytes * self.burst_length

    @property
    def size_bytes(self) -> int:
        """Capacity addressed by the model."""
        return self.channels * self.ranks * self.banks * self.rows * self.page_bytes

    @property
    def peak_gb_s(self) -> float:
        """All channels streaming data on every clock edge."""
        return self.channels * self.bus_bytes * 2 / self.tck_ns

    def decode(self, address: int) -> tuple[int, int, int, int]:
        """(channel, rank, bank, row) of the byte ``address``: channels interleaved every
        ``interleave_bytes``, then within a channel column, bank, rank, row (low to high).

        >>> from aipusim.arch import load_arch
        >>> c = Lpddr4Config.from_arch(load_arch())
        >>> c.decode(0), c.decode(256), c.decode(4 * 2048), c.decode(4 * 2048 * 8)
        ((0, 0, 0, 0), (1, 0, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1))
        """
        chunk, offset = divmod(address, self.interleave_bytes)
        chunk, channel = divmod(chunk, self.channels)
        local = chunk * self.interleave_bytes + offset
        page = local // self.page_bytes
        page, bank = divmod(page, self.banks)
        row, rank = divmod(page, self.ranks)
        return channel, rank, bank, row

    def check(self) -> None:
        """An `InvalidArgument` naming the first field that cannot describe a memory."""
        for name, value in self.__dict__.items():
            if name in ("tck_ns", "refresh_mode", "command_queues", "write_drain"):
                continue
            lowest = (
                0 if name in ("drain_low", "t_rtrs", "command_queue_depth", "row_hit_limit") else 1
            )
            if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
                raise InvalidArgument(f"`{name}` must be an integer >= {lowest}, not {value!r}")
        if not (isinstance(self.tck_ns, (int, float)) and self.tck_ns > 0):
            raise InvalidArgument(f"`tck_ns` must be a positive number, not {self.tck_ns!r}")
        for name, valid in (
            ("refresh_mode", REFRESH_MODES),
            ("command_queues", COMMAND_QUEUES),
            ("write_drain", WRITE_DRAINS),
        ):
            if getattr(self, name) not in valid:
                raise InvalidArgument(
                    f"`{name}` must be one of {', '.join(valid)}, not {getattr(self, name)!r}"
                )
        if (self.command_queues == "none") != (self.command_queue_depth == 0):
            raise InvalidArgument(
                "`command_queue_depth` must be 0 with no command queues and >= 1 with "
                f"{self.command_queues!r} ones, not {self.command_queue_depth}"
            )
        if self.interleave_bytes % self.burst_bytes or self.page_bytes % self.interleave_bytes:
            raise InvalidArgument(
                f"`interleave_bytes` must be a multiple of the burst ({self.burst_bytes}) "
                f"dividing the page ({self.page_bytes}), not {self.interleave_bytes}"
            )
        if not self.drain_low <= self.drain_high <= self.write_queue_depth:
            raise InvalidArgument(
                f"`drain_high` must lie in [drain_low, write_queue_depth] = "
                f"[{self.drain_low}, {self.write_queue_depth}], not {self.drain_high}"
            )


@dataclass(frozen=True)
class DdrResult:
    """Per-request times (tCK) of a `simulate_requests` run and its totals.

    ``accept_tck``: when the request's first burst entered a controller queue (queues full
    hold requests back); ``done_tck``: when its last data beat left the bus.
    """

    arrival_tck: np.ndarray
    accept_tck: np.ndarray
    done_tck: np.ndarray
    nbytes: int
    tck_ns: float
    commands: dict[str, int]

    @property
    def latency_tck(self) -> np.ndarray:
        """Arrival to completion, per request."""
        return self.done_tck - self.arrival_tck

    @property
    def span_tck(self) -> int:
        """First arrival to last completion."""
        return int(self.done_tck.max() - self.arrival_tck.min()) if len(self.done_tck) else 0

    @property
    def bandwidth_gb_s(self) -> float:
        """Bytes moved over the span, in GB/s."""
        return self.nbytes / max(1, self.span_tck) / self.tck_ns

    @property
    def avg_latency_ns(self) -> float:
        return float(self.latency_tck.mean()) * self.tck_ns if len(self.done_tck) else 0.0

    @property
    def p99_latency_ns(self) -> float:
        if not len(self.done_tck):
            return 0.0
        return float(np.percentile(self.latency_tck, 99)) * self.tck_ns


@dataclass
class _Burst:
    """One BL16 column access waiting in (or on its way into) a channel's queue."""

    request: int
    rank: int
    bank: int  # rank * banks + bank, the index of the bank's state
    row: int
    write: bool
    arrival: int
    accept: int = -1
    done: int = -1


class ChannelController:
    """One channel: its banks, command and data buses, queues and refresh.

    Feed bursts with `offer` (in arrival order) and call `step` at non-decreasing times: it
    issues at most one command at ``now`` and returns (issued, the next time something can
    happen). `simulate_requests` drives it in a loop; `Lpddr4Device` from a SimPy process.
    """

    def __init__(self, cfg: Lpddr4Config) -> None:
        self.cfg = cfg
        nb = cfg.ranks * cfg.banks
        self.open_row = [-1] * nb
        self.act_ready = [0] * nb  # earliest ACT: tRP after PRE, tRC after ACT, refresh
        self.col_ready = [0] * nb  # earliest READ/WRITE: tRCD after ACT
        self.pre_ready = [0] * nb  # earliest PRE: tRAS, tRTP, write recovery
        self.rank_act = [0] * cfg.ranks  # tRRD
        self.faw: list[deque[int]] = [deque(maxlen=4) for _ in range(cfg.ranks)]
        self.cmd_free = 0  # command bus
        self.last_rd = (-_FAR, -1)  # (time, rank) of the last READ
        self.last_wr = (-_FAR, -1)
        self.pending: deque[_Burst] = deque()  # offered, not yet accepted
        self.reads: list[_Burst] = []
        self.writes: list[_Burst] = []
        self.last_accept = -1
        self.room_at = {False: 0, True: 0}  # when a full queue last got room
        self.draining = False
        self.drain_left = 0  # writes a batch drain still serves
        self.row_hits = [0] * nb  # column commands since the bank's row opened
        # the command queues (none: the scheduler reads the transaction queues directly)
        nq = {"none": 0, "per_bank": nb, "per_rank": cfg.ranks}[cfg.command_queues]
        self.cmd_queues: list[list[_Burst]] = [[] for _ in range(nq)]
        self.queued = 0  # bursts in the command queues
        self.last_queue = nq - 1  # the queue that issued last (round-robin)
        self._no_room: tuple[int, bool, int] | None = None
        # refresh: the next due time and target per rank (target bank for per-bank refresh)
        self.refresh_due = [0] * cfg.ranks
        self.refresh_bank = [0] * cfg.ranks
        self.refresh_interval = (
            cfg.t_refi // cfg.banks if cfg.refresh_mode == "per_bank" else cfg.t_refi
        )
        for r in range(cfg.ranks):
            stagger = r * self.refresh_interval // cfg.ranks
            self.refresh_due[r] = self.refresh_interval + stagger
        self.commands = {"ACT": 0, "PRE": 0, "RD": 0, "WR": 0, "REF": 0}
        self.finished: list[_Burst] = []

    # -- queues ---------------------------------------------------------------------------
    def offer(self, burst: _Burst) -> None:
        self.pending.append(burst)

    @property
    def busy(self) -> bool:
        return bool(self.pending or self.reads or self.writes or self.queued)

    def _left(self, burst: _Burst, now: int) -> None:
        """``burst`` left its transaction queue at ``now``: a full queue has room again."""
        queue = self.writes if burst.write else self.reads
        queue.remove(burst)
        depth = self.cfg.write_queue_depth if burst.write else self.cfg.read_queue_depth
        if len(queue) == depth - 1:
            self.room_at[burst.write] = now
        if burst.write and self.drain_left:
            self.drain_left -= 1

    def _accept(self, now: int) -> int:
        """Move pending bursts into their queue (one per clock, in order, while there is
        room); the time the next one could enter (``_FAR`` if none or its queue is full)."""
        cfg = self.cfg
        while self.pending:
            b = self.pending[0]
            queue, depth = (
                (self.writes, cfg.write_queue_depth)
                if b.write
                else (self.reads, cfg.read_queue_depth)
            )
            if len(queue) >= depth:
                return _FAR  # room comes with a column command, itself an event
            at = max(b.arrival, self.last_accept + 1, self.room_at[b.write])
            if at > now:
                return at
            self.pending.popleft()
            b.accept = at
            self.last_accept = at
            queue.append(b)
        return _FAR

    # -- refresh --------------------------------------------------------------------------
    def _refresh_targets(self, rank: int) -> range:
        if self.cfg.refresh_mode == "per_bank":
            bank = rank * self.cfg.banks + self.refresh_bank[rank]
            return range(bank, bank + 1)
        return range(rank * self.cfg.banks, (rank + 1) * self.cfg.banks)

    def _refresh_step(self, now: int) -> tuple[bool, int]:
        """Issue the next command of a due refresh if it can go now; else when it can."""
        cfg = self.cfg
        if cfg.refresh_mode == "none":
            return False, _FAR
        nxt = _FAR
        for r in range(cfg.ranks):
            due = self.refresh_due[r]
            if due > now:
                nxt = min(nxt, due)
                continue
            targets = self._refresh_targets(r)
            open_banks = [b for b in targets if self.open_row[b] >= 0]
            if open_banks:
                # one PRE (REFpb) or one PREab closing every open bank (REFab), once the
                # last of them may close; PREab takes tRPab
                t = max(max(self.pre_ready[b] for b in open_banks), self.cmd_free)
                if t <= now:
                    t_rp = cfg.t_rp if len(targets) == 1 else cfg.t_rp_ab
                    for b in open_banks:
                        self._precharge(b, now, t_rp)
                    return True, now
                nxt = min(nxt, t)
                continue
            t = max(max(self.act_ready[b] for b in targets), self.cmd_free)
            per_bank = cfg.refresh_mode == "per_bank"
            if per_bank:
                t = max(t, self.rank_act[r])
            if t > now:
                nxt = min(nxt, t)
                continue
            blocked = now + (cfg.t_rfc_pb if per_bank else cfg.t_rfc_ab)
            for b in targets:
                self.act_ready[b] = blocked
            if per_bank:
                self.rank_act[r] = now + cfg.t_rrd
                self.refresh_bank[r] = (self.refresh_bank[r] + 1) % cfg.banks
            self.refresh_due[r] = due + self.refresh_interval
            self.cmd_free = now + cfg.pre_tck
            self.commands["REF"] += 1
            return True, now
        return False, nxt

    def catch_up(self, now: int) -> None:
        """The controller had nothing to do until ``now``: the refreshes that came due and
        could finish before it were done then (their banks are closed, none is owed)."""
        cfg = self.cfg
        if cfg.refresh_mode == "none" or self.busy:
            return
        per_bank = cfg.refresh_mode == "per_bank"
        took = (cfg.t_rp if per_bank else cfg.t_rp_ab) + (
            cfg.t_rfc_pb if per_bank else cfg.t_rfc_ab
        )
        for r in range(cfg.ranks):
            due = self.refresh_due[r]
            if due + took > now:
                continue
            k = (now - took - due) // self.refresh_interval + 1
            for _ in range(min(k, cfg.banks) if per_bank else 1):
                for b in self._refresh_targets(r):
                    self.open_row[b] = -1
                if per_bank:
                    self.refresh_bank[r] = (self.refresh_bank[r] + 1) % cfg.banks
            if per_bank and k > cfg.banks:
                self.refresh_bank[r] = (self.refresh_bank[r] + k - cfg.banks) % cfg.banks
            self.refresh_due[r] = due + k * self.refresh_interval
            self.commands["REF"] += k

    def _refreshing(self, now: int) -> set[int]:
        """Banks closed to normal commands: a refresh of theirs is due."""
        out: set[int] = set()
        if self.cfg.refresh_mode == "none":
            return out
        for r in range(self.cfg.ranks):
            if self.refresh_due[r] <= now:
                out.update(self._refresh_targets(r))
        return out

    # -- commands -------------------------------------------------------------------------
    def _precharge(self, b: int, now: int, t_rp: int | None = None) -> None:
        self.open_row[b] = -1
        self.act_ready[b] = max(self.act_ready[b], now + (t_rp or self.cfg.t_rp))
        self.cmd_free = now + self.cfg.pre_tck
        self.commands["PRE"] += 1

    def _column_ready(self, burst: _Burst) -> int:
        """Earliest READ/WRITE of ``burst`` on the buses (its bank's tRCD apart)."""
        cfg = self.cfg
        rd_t, rd_rank = self.last_rd
        wr_t, wr_rank = self.last_wr
        gap_same = cfg.t_ccd
        gap_other = max(cfg.t_ccd, cfg.burst_length // 2 + cfg.t_rtrs)
        if burst.write:
            t = wr_t + (gap_same if wr_rank == burst.rank else gap_other)
            if rd_rank == burst.rank:
                t = max(t, rd_t + cfg.t_rtw)
            else:  # the other rank's read data must be off the bus first
                t = max(t, rd_t + cfg.cl + cfg.burst_length // 2 + cfg.t_rtrs - cfg.cwl)
        else:
            t = rd_t + (gap_same if rd_rank == burst.rank else gap_other)
            if wr_rank == burst.rank:
                t = max(t, wr_t + cfg.cwl + cfg.burst_length // 2 + cfg.t_wtr)
            else:
                t = max(t, wr_t + cfg.cwl + cfg.burst_length // 2 + cfg.t_rtrs - cfg.cl)
        return t

    def _act_ready(self, b: int, rank: int) -> int:
        faw = self.faw[rank]
        t = max(self.act_ready[b], self.rank_act[rank])
        if len(faw) == 4:
            t = max(t, faw[0] + self.cfg.t_faw)
        return t

    def _issue(self, burst: _Burst, kind: str, now: int) -> None:
        cfg = self.cfg
        b = burst.bank
        if kind == "PRE":
            self._precharge(b, now)
        elif kind == "ACT":
            self.open_row[b] = burst.row
            self.row_hits[b] = 0
            self.col_ready[b] = now + cfg.t_rcd
            self.pre_ready[b] = now + cfg.t_ras
            self.act_ready[b] = now + cfg.t_rc
            self.rank_act[burst.rank] = now + cfg.t_rrd
            self.faw[burst.rank].append(now)
            self.cmd_free = now + cfg.act_tck
            self.commands["ACT"] += 1
        else:
            half = cfg.burst_length // 2
            if burst.write:
                self.pre_ready[b] = max(self.pre_ready[b], now + cfg.cwl + half + cfg.t_wr)
                self.last_wr = (now, burst.rank)
                burst.done = now + cfg.cwl + half
                self.commands["WR"] += 1
            else:
                self.pre_ready[b] = max(self.pre_ready[b], now + cfg.t_rtp)
                self.last_rd = (now, burst.rank)
                burst.done = now + cfg.cl + half
                self.commands["RD"] += 1
            if self.cmd_queues:
                self.cmd_queues[self._queue_of(burst)].remove(burst)
                self.queued -= 1
            else:
                self._left(burst, now)
            self.row_hits[b] += 1
            self.cmd_free = now + cfg.cas_tck
            self.finished.append(burst)

    def _serve_writes(self, now: int) -> bool:
        """Whether writes are served now.

        Watermark drains start at the high watermark, or when no read waits and either
        more than the low watermark of writes wait or no request that has arrived waits to
        enter (the controller is idle); they stop at the low watermark once a read waits,
        or when the write queue is empty. Batch drains start at the high watermark, or
        above the low one when nothing is scheduled (no read queued, or every command
        queue empty), or when nothing but writes is left; they serve the writes queued
        when they started."""
        cfg = self.cfg
        n = len(self.writes)
        if cfg.write_drain == "batch":
            if not n:
                self.drain_left = 0
            elif not self.drain_left:
                quiet = not self.queued if self.cmd_queues else not self.reads
                flush = not self.pending and not self.reads
                if n >= cfg.drain_high or (n > cfg.drain_low and quiet) or flush:
                    self.drain_left = n
            return self.drain_left > 0
        if self.draining and (n == 0 or (n <= cfg.drain_low and self.reads)):
            self.draining = False
        elif not self.draining and n:
            waiting = self.pending and self.pending[0].arrival <= now
            idle = not self.reads and (n > cfg.drain_low or not waiting)
            self.draining = n >= cfg.drain_high or idle
        return self.draining

    def step(self, now: int) -> tuple[bool, int]:
        """Issue at most one command at ``now``; (issued, next time worth a look)."""
        next_accept = self._accept(now)
        issued, next_refresh = self._refresh_step(now)
        if self.cmd_queues:
            earliest = _FAR
            if not issued:
                issued, earliest = self._issue_queued(now)
            # a transaction moves into the command queues in the same clock
            moved = self._move_one(now)
            if issued or moved:
                return issued, now + 1
            return False, max(min(earliest, next_accept, next_refresh), now + 1)
        if issued:
            return True, now + 1
        return self._issue_direct(now, next_accept, next_refresh)

    # -- with command queues ---------------------------------------------------------------
    def _queue_of(self, burst: _Burst) -> int:
        return burst.bank if self.cfg.command_queues == "per_bank" else burst.rank

    def _move_one(self, now: int) -> bool:
        """Move the oldest transaction of the queue being served whose command queue has
        room into it; whether one moved."""
        queue = self.writes if self._serve_writes(now) else self.reads
        # a scan that found no room finds none until a column command leaves a command
        # queue or a transaction joins this one
        state = (self.commands["RD"] + self.commands["WR"], queue is self.writes, len(queue))
        if state == self._no_room:
            return False
        depth = self.cfg.command_queue_depth
        per_bank = self.cfg.command_queues == "per_bank"
        for q in queue:
            target = self.cmd_queues[q.bank if per_bank else q.rank]
            if len(target) < depth:
                self._left(q, now)
                target.append(q)
                self.queued += 1
                return True
        self._no_room = state
        return False

    def _issue_queued(self, now: int) -> tuple[bool, int]:
        """Issue the first ready command of the command queues, visited round-robin from
        the one after the last that issued; else (False, when one may be ready)."""
        cfg = self.cfg
        blocked = self._refreshing(now)
        per_rank = cfg.command_queues == "per_rank"
        limit = cfg.row_hit_limit
        open_row, cmd_free = self.open_row, self.cmd_free
        col_at: dict[tuple[int, bool], int] = {}
        earliest = _FAR
        nq = len(self.cmd_queues)
        for i in range(1, nq + 1):
            idx = (self.last_queue + i) % nq
            queue = self.cmd_queues[idx]
            if not queue:
                continue
            if blocked and (
                any(b // cfg.banks == idx for b in blocked) if per_rank else idx in blocked
            ):
                continue  # a refresh of its bank (rank) is due
            seen: set[int] = set()  # banks with an older entry in this queue
            for pos, q in enumerate(queue):
                b = q.bank
                row = open_row[b]
                older = b in seen
                seen.add(b)
                if row == q.row:
                    c = col_at.get((q.rank, q.write))
                    if c is None:
                        c = col_at[q.rank, q.write] = self._column_ready(q)
                    t, kind = max(self.col_ready[b], c, cmd_free), "COL"
                elif older:
                    # an ACT would be the older entry's (same time, it goes first); only
                    # the bank's oldest entry may close its row
                    continue
                elif row < 0:
                    t, kind = max(self._act_ready(b, q.rank), cmd_free), "ACT"
                else:
                    if not (limit and self.row_hits[b] >= limit) and any(
                        x.bank == b and x.row == row for x in queue[pos + 1 :]
                    ):
                        continue  # a younger entry still hits the open row
                    t, kind = max(self.pre_ready[b], cmd_free), "PRE"
                if t <= now:
                    self._issue(q, kind, now)
                    self.last_queue = idx
                    return True, now + 1
                earliest = min(earliest, t)
        return False, earliest

    # -- without command queues ------------------------------------------------------------
    def _issue_direct(self, now: int, next_accept: int, next_refresh: int) -> tuple[bool, int]:
        """FR-FCFS straight from the read or write queue."""
        cfg = self.cfg
        queue = self.writes if self._serve_writes(now) else self.reads
        blocked = self._refreshing(now)
        open_row, cmd_free = self.open_row, self.cmd_free
        hits_open: set[int] | None = None  # banks whose open row a queued request hits
        col_at: dict[int, int] = {}  # per rank: the buses' earliest column command
        act_at: dict[int, int] = {}  # per bank: its earliest ACT
        best_hit: _Burst | None = None
        best_other: tuple[_Burst, str] | None = None
        earliest = _FAR
        for q in queue:  # oldest first
            b = q.bank
            if b in blocked:
                continue
            row = open_row[b]
            if row == q.row:
                c = col_at.get(q.rank)
                if c is None:
                    c = col_at[q.rank] = self._column_ready(q)
                t = max(self.col_ready[b], c, cmd_free)
                if t <= now:
                    best_hit = q
                    break
            elif row < 0:
                t = act_at.get(b, -1)
                if t < 0:
                    t = act_at[b] = max(self._act_ready(b, q.rank), cmd_free)
                if t <= now and best_other is None:
                    best_other = (q, "ACT")
            else:
                if hits_open is None:
                    hits_open = {
                        x.bank for x in queue if open_row[x.bank] == x.row and x.bank not in blocked
                    }
                if b in hits_open and not (
                    cfg.row_hit_limit and self.row_hits[b] >= cfg.row_hit_limit
                ):
                    continue  # a queued request still hits the open row: keep it
                t = max(self.pre_ready[b], cmd_free)
                if t <= now and best_other is None:
                    best_other = (q, "PRE")
            if t < earliest:
                earliest = t
        if best_hit is not None:
            self._issue(best_hit, "COL", now)
            return True, now + 1
        if best_other is not None:
            self._issue(*best_other, now)
            return True, now + 1
        nxt = min(earliest, next_accept, next_refresh)
        if not queue and (self.reads or self.writes):
            nxt = min(nxt, now + 1)  # the other queue is served from the next clock
        return False, max(nxt, now + 1)


def bursts_of(
    cfg: Lpddr4Config, request: int, address: Any, nbytes: Any, write: Any, arrival: Any
) -> list[list[_Burst]]:
    """Check one request and cut it into its bursts, per channel (`InvalidArgument` naming
    the request and the field when it cannot be served)."""
    size = cfg.size_bytes
    for name, v in (("address", address), ("size", nbytes), ("arrival", arrival)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise InvalidArgument(f"request {request}: `{name}` must be an integer, not {v!r}")
    if not 0 <= address < size:
        raise InvalidArgument(
            f"request {request}: `address` must lie in [0, {size}) bytes, not {address}"
        )
    if not 0 < nbytes <= size - address:
        raise InvalidArgument(
            f"request {request}: `size` must be 1-{size - address} bytes (to the end of the "
            f"memory), not {nbytes}"
        )
    if arrival < 0:
        raise InvalidArgument(f"request {request}: `arrival` must be >= 0 clocks, not {arrival}")
    if not isinstance(write, (bool, np.bool_)):
        raise InvalidArgument(f"request {request}: `write` must be True or False, not {write!r}")
    per_channel: list[list[_Burst]] = [[] for _ in range(cfg.channels)]
    bb = cfg.burst_bytes
    for start in range(address - address % bb, address + nbytes, bb):
        ch, rank, bank, row = cfg.decode(start)
        per_channel[ch].append(
            _Burst(request, rank, rank * cfg.banks + bank, row, bool(write), int(arrival))
        )
    return per_channel


def _bursts(
    cfg: Lpddr4Config,
    addresses: Sequence[int],
    sizes: Sequence[int],
    writes: Sequence[bool],
    arrivals: Sequence[int],
) -> list[list[_Burst]]:
    """Check the request stream and cut it into per-channel bursts, in arrival order."""
    n = len(addresses)
    for name, seq in (("sizes", sizes), ("writes", writes), ("arrivals", arrivals)):
        if len(seq) != n:
            raise InvalidArgument(f"`{name}` must have one entry per address ({n}), not {len(seq)}")
    per_channel: list[list[_Burst]] = [[] for _ in range(cfg.channels)]
    for i in sorted(range(n), key=lambda i: arrivals[i]):
        for ch, bursts in enumerate(
            bursts_of(cfg, i, addresses[i], sizes[i], writes[i], arrivals[i])
        ):
            per_channel[ch].extend(bursts)
    return per_channel


def simulate_requests(
    cfg: Lpddr4Config,
    addresses: Sequence[int],
    sizes: Sequence[int],
    writes: Sequence[bool],
    arrivals: Sequence[int],
) -> DdrResult:
    """Run a request stream (byte address, bytes, write?, arrival clock) through the model.

    Returns each request's acceptance and completion clock and the totals. A request of
    several bursts completes with its last one; requests are accepted in arrival order.

    >>> from aipusim.arch import load_arch
    >>> cfg = Lpddr4Config.from_arch(load_arch())
    >>> r = simulate_requests(cfg, [0], [4096], [False], [0])
    >>> int(r.done_tck[0]), round(r.bandwidth_gb_s, 1)
    (331, 26.4)
    """
    cfg.check()
    n = len(addresses)
    per_channel = _bursts(cfg, addresses, sizes, writes, arrivals)
    accept = np.full(n, _FAR, dtype=np.int64)
    done = np.zeros(n, dtype=np.int64)
    commands = dict.fromkeys(("ACT", "PRE", "RD", "WR", "REF"), 0)
    for bursts in per_channel:
        if not bursts:
            continue
        ctl = ChannelController(cfg)
        for b in bursts:
            ctl.offer(b)
        now = 0
        while ctl.busy:
            issued, nxt = ctl.step(now)
            now = now + 1 if issued else nxt
        for b in ctl.finished:
            accept[b.request] = min(accept[b.request], b.accept)
            done[b.request] = max(done[b.request], b.done)
        for k, v in ctl.commands.items():
            commands[k] += v
    nbytes = int(sum(int(s) for s in sizes))
    return DdrResult(
        np.asarray(arrivals, dtype=np.int64), accept, done, nbytes, cfg.tck_ns, commands
    )


__all__ = [
    "REFRESH_MODES",
    "ChannelController",
    "DdrResult",
    "Lpddr4Config",
    "bursts_of",
    "simulate_requests",
]
