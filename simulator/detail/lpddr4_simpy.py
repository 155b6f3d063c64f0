"""The LPDDR4 model as SimPy processes: DMA transfers to DDR served cycle by cycle.

`Lpddr4Device` puts one controller process per channel (`lpddr4.ChannelController`) on a
SimPy environment whose time is in core cycles. ``device.transfer(address, nbytes, write)``
is a process that ends when the transfer's last burst is off the bus; its value is that core
cycle. The controllers run in DRAM clocks; a transfer arrives at the DRAM clock of the core
cycle it is asked in, and finishes at the first core cycle at or after its last data beat.

The simulator's links are booked arithmetically rather than as SimPy processes, so
``--detail cycle`` uses the same controllers through `ddr_link.DdrBurstTimer`; this form is
for models that are SimPy processes (a DMA engine, a host) and want DDR as one.

>>> import simpy
>>> from aipusim.arch import load_arch
>>> from aipusim.simulator.detail.lpddr4 import Lpddr4Config
>>> env = simpy.Environment()
>>> dev = Lpddr4Device(env, Lpddr4Config.from_arch(load_arch()), core_hz=800_000_000)
>>> done = dev.transfer(0, 4096, write=False)
>>> env.run()
>>> done.value
125
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import simpy

from aipusim.base.errors import InvalidArgument
from aipusim.simulator.detail.lpddr4 import (
    ChannelController,
    Lpddr4Config,
    bursts_of,
)


@dataclass
class _Pending:
    left: int
    done_tck: int
    event: simpy.Event


class Lpddr4Device:
    """A cycle-level LPDDR4 memory on a SimPy environment timed in core cycles."""

    def __init__(self, env: simpy.Environment, cfg: Lpddr4Config, core_hz: int) -> None:
        cfg.check()
        if isinstance(core_hz, bool) or not isinstance(core_hz, int) or core_hz <= 0:
            raise InvalidArgument(f"`core_hz` must be a positive integer, not {core_hz!r}")
        self.env = env
        self.cfg = cfg
        self._ns_per_cycle = 1e9 / core_hz
        self._controllers = [ChannelController(cfg) for _ in range(cfg.channels)]
        self._wake: list[simpy.Event | None] = [None] * cfg.channels
        self._pending: dict[int, _Pending] = {}
        self._next_id = 0
        for ch in range(cfg.channels):
            env.process(self._channel(ch))

    # -- clocks -------------------------------------------------------------------------
    def _tck_now(self) -> int:
        return math.floor(self.env.now * self._ns_per_cycle / self.cfg.tck_ns + 1e-9)

    def _cycle_of(self, tck: int) -> int:
        return math.ceil(tck * self.cfg.tck_ns / self._ns_per_cycle - 1e-9)

    # -- the public process -------------------------------------------------------------
    def transfer(self, address: int, nbytes: int, write: bool) -> simpy.Process:
        """A process that moves ``nbytes`` at byte ``address`` (written if ``write``) and
        ends, with the core cycle as its value, when the last burst is through."""
        rid = self._next_id
        self._next_id += 1
        now = self._tck_now()
        per_channel = bursts_of(self.cfg, rid, address, nbytes, write, now)
        event = self.env.event()
        self._pending[rid] = _Pending(sum(len(b) for b in per_channel), 0, event)
        for ch, bursts in enumerate(per_channel):
            self._controllers[ch].catch_up(now)  # idle until now: refreshed meanwhile
            for b in bursts:
                self._controllers[ch].offer(b)
            wake = self._wake[ch]
            if bursts and wake is not None and not wake.triggered:
                wake.succeed()
        return self.env.process(self._wait(event))

    def _wait(self, event: simpy.Event) -> Generator[Any, Any, int]:
        done_tck = yield event
        at = self._cycle_of(done_tck)
        if at > self.env.now:
            yield self.env.timeout(at - self.env.now)
        return int(self.env.now)

    # -- one controller per channel -----------------------------------------------------
    def _channel(self, ch: int) -> Generator[Any, Any, None]:
        ctl = self._controllers[ch]
        t = 0  # the next DRAM clock the controller looks at
        while True:
            if not ctl.busy:
                self._wake[ch] = self.env.event()
                yield self._wake[ch]
                t = max(t, self._tck_now())
                continue
            limit = self._tck_now()
            while ctl.busy and t <= limit:
                issued, nxt = ctl.step(t)
                t = t + 1 if issued else nxt
            self._finish(ctl)
            if ctl.busy:
                self._wake[ch] = self.env.event()
                wait = max(1, self._cycle_of(t) - int(self.env.now))
                yield self.env.timeout(wait) | self._wake[ch]

    def _finish(self, ctl: ChannelController) -> None:
        for b in ctl.finished:
            p = self._pending[b.request]
            p.left -= 1
            p.done_tck = max(p.done_tck, b.done)
            if p.left == 0:
                del self._pending[b.request]
                p.event.succeed(p.done_tck)
        ctl.finished.clear()


__all__ = ["Lpddr4Device"]
