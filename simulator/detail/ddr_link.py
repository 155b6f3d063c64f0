"""The cycle-level LPDDR4 model behind the simulator's DDR link (``--detail cycle``).

The simulator's links are serial servers booked burst by burst (`aipusim.simulator.links`):
a DMA burst (``dma.burst_bytes``) holds every link of its path for the cycles the cost
model gives it. With ``detail="cycle"`` the DDR link asks `DdrBurstTimer` instead: the
burst's bytes go to the LPDDR4 channel controllers (`lpddr4.ChannelController`) at the
cycle the burst starts, and the DDR link is held until its last data beat, as the
controllers' banks, open rows, queues, turnarounds and refresh blackouts make it. The
controllers keep their state from burst to burst: a row another transfer left open, a
refresh that comes due, the direction of the last burst.

Transfers carry no DDR address in the simulator (a tasklist's DDR addresses are not kept
per burst), so each transfer (stream) is laid out as one sequential run of its own: stream
``k`` starts in its own region of the memory, its bursts follow one another.

>>> from aipusim.arch import load_arch
>>> from aipusim.simulator.detail.lpddr4 import Lpddr4Config
>>> timer = DdrBurstTimer(Lpddr4Config.from_arch(load_arch()), core_hz=800_000_000)
>>> first = timer.burst_cycles(0, 16384, write=False, stream=0)
>>> again = timer.burst_cycles(first, 16384, write=False, stream=0)  # the next 16 KiB
>>> first, again
(413, 419)
"""

from __future__ import annotations

import math

from aipusim.simulator.detail.lpddr4 import ChannelController, Lpddr4Config, bursts_of

#: Streams laid out in this many regions of the memory (a stream's bytes wrap in its own).
REGIONS = 64


class DdrBurstTimer:
    """Times DMA bursts on the cycle-level LPDDR4 model, in core cycles."""

    def __init__(self, cfg: Lpddr4Config, core_hz: int) -> None:
        cfg.check()
        self.cfg = cfg
        self._tck_per_cycle = 1e9 / core_hz / cfg.tck_ns
        self._controllers = [ChannelController(cfg) for _ in range(cfg.channels)]
        self._clock = [0] * cfg.channels  # the next DRAM clock each controller looks at
        self._offset: dict[int, int] = {}  # stream -> bytes it has moved
        self._region = cfg.size_bytes // REGIONS
        self._next_id = 0

    def _address(self, stream: int, nbytes: int) -> int:
        """Where the next ``nbytes`` of ``stream`` lie: its region, shifted by a bank per
        stream so that streams do not all start in bank 0, then its bytes in order."""
        cfg = self.cfg
        offset = self._offset.get(stream, 0)
        self._offset[stream] = offset + nbytes
        skew = (stream % cfg.banks) * cfg.page_bytes * cfg.channels
        start = (stream % REGIONS) * self._region + (skew + offset) % (self._region - nbytes)
        return start - start % cfg.burst_bytes

    def burst_cycles(self, start_cycle: int, nbytes: int, write: bool, stream: int) -> int:
        """Core cycles DDR is busy with a burst of ``nbytes`` of ``stream`` starting at core
        cycle ``start_cycle`` (starts must not decrease: the DDR link is a serial server)."""
        start = math.floor(start_cycle * self._tck_per_cycle)
        rid = self._next_id
        self._next_id += 1
        per_channel = bursts_of(self.cfg, rid, self._address(stream, nbytes), nbytes, write, start)
        done = start
        for ch, bursts in enumerate(per_channel):
            if not bursts:
                continue
            ctl = self._controllers[ch]
            t = max(self._clock[ch], start)
            ctl.catch_up(t)
            for b in bursts:
                ctl.offer(b)
            while ctl.busy:
                issued, nxt = ctl.step(t)
                t = t + 1 if issued else nxt
            self._clock[ch] = t
            done = max(done, *(b.done for b in ctl.finished))
            ctl.finished.clear()
        return max(1, math.ceil((done - start) / self._tck_per_cycle - 1e-9))


__all__ = ["DdrBurstTimer"]
