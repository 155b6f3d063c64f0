"""A core's L1 cycle by cycle: banks behind a crossbar, ports per direction, an arbiter.

The fast model (`aipusim.simulator.ports.PortGroup`) shares a direction's ports as a fluid:
requesters together get ``ports x port_bytes_per_cycle``, whatever addresses they touch.
Here each cycle is simulated:

- the SRAM is ``banks`` banks of ``bank_bytes`` each; consecutive ``bank_bytes`` of the
  address space sit in consecutive banks, and a bank serves one access per cycle;
- a requester (an `L1Access`: a unit's stream of ``nbytes`` from ``addr`` on, at most
  ``rate`` bytes per cycle) moves one port's width per cycle when it is granted: the
  ``port_bytes / bank_bytes`` banks its next bytes sit in, and one of its direction's
  ports; its stream then advances by that width;
- each cycle the arbiter grants requesters in its order (``round_robin``: the order turns
  by one every cycle; ``fixed``: by requester index), a requester getting its port only
  if every bank it needs is still free that cycle; a requester not granted waits and tries
  again the next cycle;
- a rate below a port's width is a credit that fills by ``rate`` bytes per cycle; what
  a cycle carries over to the next is at most one port's width (a requester buffers one
  access, so a stall is not made up later); a requester asks only once it holds a port's
  width of credit (the last access: what is left).

`serve` returns each stream's end cycle and the cycles it waited for a bank or a port, so
the fast model's fluid sharing can be checked against the banks (`compare_l1_with_ports`).
`L1Calendar` is the same L1 as the detailed simulation uses it (``detail="cycle"``),
where requests come stream by stream rather than all at once (its doc).

>>> l1 = BankedL1(banks=16, bank_bytes=16, read_ports=2, write_ports=2, port_bytes=64)
>>> a = L1Access(requester=0, start=0, nbytes=6400, addr=0, rate=64.0, write=False)
>>> b = L1Access(requester=1, start=0, nbytes=6400, addr=0, rate=64.0, write=False)
>>> out = l1.serve([a, b])  # same banks in the first cycle: one waits once, then they
>>> out.end.tolist(), out.bank_waits.tolist()  # run a port's width apart, never meeting
([100, 101], [0, 1])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numba
import numpy as np

from aipusim.arch.model import Arbitration
from aipusim.base.errors import ConfigError


@dataclass(frozen=True)
class L1Access:
    """One requester's stream through L1: ``nbytes`` from byte ``addr`` on, from cycle
    ``start``, at most ``rate`` bytes per cycle; ``write`` picks the ports' direction."""

    requester: int
    start: int
    nbytes: int
    addr: int
    rate: float
    write: bool


@dataclass(frozen=True)
class Served:
    """What `BankedL1.serve` found, per access in the order given: the cycle its last
    bytes moved (exclusive end), the cycles it waited for a bank held by another
    requester and those it waited for a port."""

    end: np.ndarray
    bank_waits: np.ndarray
    port_waits: np.ndarray


@dataclass(frozen=True)
class BankedL1:
    """One core's L1 (see the module doc). Example in the module doc."""

    banks: int
    bank_bytes: int
    read_ports: int
    write_ports: int
    port_bytes: int
    arbitration: Arbitration = Arbitration.ROUND_ROBIN

    def __post_init__(self) -> None:
        for name in ("banks", "bank_bytes", "read_ports", "write_ports", "port_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, not {value!r}")
        if self.arbitration not in set(Arbitration):
            raise ConfigError(
                f"arbitration must be one of {', '.join(Arbitration)}, not {self.arbitration!r}"
            )

    @classmethod
    def of(cls, arch: object) -> BankedL1:
        """The L1 of the arch file (``[l1]``)."""
        l1 = arch.l1  # type: ignore[attr-defined]
        return cls(l1.banks, l1.bank_bytes, l1.read_ports, l1.write_ports,
                   l1.port_bytes_per_cycle, Arbitration(l1.arbitration))  # fmt: skip

    def serve(self, accesses: Sequence[L1Access]) -> Served:
        """Run ``accesses`` together cycle by cycle; see `Served`."""
        n = len(accesses)
        for a in accesses:
            _check(a)
        if n == 0:
            empty = np.zeros(0, np.int64)
            return Served(empty, empty, empty)
        start = np.array([a.start for a in accesses], np.int64)
        nbytes = np.array([a.nbytes for a in accesses], np.int64)
        addr = np.array([a.addr for a in accesses], np.int64)
        rate = np.array([min(float(a.rate), self.port_bytes) for a in accesses], np.float64)
        write = np.array([a.write for a in accesses], np.bool_)
        end, bank_waits, port_waits = _serve(
            start, nbytes, addr, rate, write, self.banks, self.bank_bytes, self.port_bytes,
            self.read_ports, self.write_ports, self.arbitration is Arbitration.ROUND_ROBIN,
        )  # fmt: skip
        return Served(end, bank_waits, port_waits)


def _check(a: L1Access) -> None:
    if a.nbytes < 1 or a.start < 0 or a.addr < 0:
        raise ConfigError(
            f"an L1 access must move nbytes >= 1 from start >= 0 and addr >= 0, not "
            f"nbytes={a.nbytes}, start={a.start}, addr={a.addr}"
        )
    if not a.rate > 0:
        raise ConfigError(f"an L1 access's rate must be > 0 bytes per cycle, not {a.rate!r}")


@numba.njit(cache=True)
def _serve(
    start: np.ndarray,
    nbytes: np.ndarray,
    addr: np.ndarray,
    rate: np.ndarray,
    write: np.ndarray,
    banks: int,
    bank_bytes: int,
    port_bytes: int,
    read_ports: int,
    write_ports: int,
    round_robin: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = len(start)
    left = nbytes.copy()
    pos = addr.copy()
    credit = np.zeros(n, np.float64)
    end = np.full(n, -1, np.int64)
    bank_waits = np.zeros(n, np.int64)
    port_waits = np.zeros(n, np.int64)
    busy = np.full(banks, -1, np.int64)  # the cycle each bank was last granted in
    done = 0
    t = start.min()
    first = 0
    while done < n:
        reads = 0
        writes = 0
        for k in range(n):
            i = (first + k) % n if round_robin else k
            if end[i] >= 0 or start[i] > t:
                continue
            credit[i] = min(credit[i], float(port_bytes)) + rate[i]
            want = min(port_bytes, left[i])
            if credit[i] + 1e-9 < want:
                continue
            if write[i]:
                if writes >= write_ports:
                    port_waits[i] += 1
                    continue
            elif reads >= read_ports:
                port_waits[i] += 1
                continue
            # the banks the next `want` bytes sit in, starting where the stream is
            b0 = (pos[i] // bank_bytes) % banks
            span = min(banks, (pos[i] % bank_bytes + want + bank_bytes - 1) // bank_bytes)
            free = True
            for j in range(span):
                if busy[(b0 + j) % banks] == t:
                    free = False
                    break
            if not free:
                bank_waits[i] += 1
                continue
            for j in range(span):
                busy[(b0 + j) % banks] = t
            if write[i]:
                writes += 1
            else:
                reads += 1
            credit[i] -= want
            left[i] -= want
            pos[i] += want
            if left[i] <= 0:
                end[i] = t + 1
                done += 1
        first = (first + 1) % n
        t += 1
    return end, bank_waits, port_waits


class L1Calendar:
    """One core's banked L1 inside a detailed simulation (``simulate(detail="cycle")``):
    what every bank and port does in every cycle, booked stream by stream.

    The simulator's units run ahead of each other (`aipusim.simulator.core`), so requests
    do not arrive in time order and no arbiter can see every requester of one cycle at
    once. Each stream (`book`) is therefore walked cycle by cycle against what earlier
    bookings already hold: in each cycle it asks (as in `BankedL1.serve`: credit of up to
    one port's width at its rate, though here the stream's short access, its bytes past
    whole ports, comes first, so that a stream of ``d`` accesses over ``d`` cycles, a task
    bound by its port, is through in ``d``), it is granted when one of its direction's ports and
    every bank its access spans are still free in that cycle, else it waits a cycle and
    loses that cycle's credit beyond a port's width. Arbitration is thus by booking order
    (a unit running ahead books first; a DMA burst books when it happens), the order the
    fast model's fluid ports serve bookings in too. A stream of several address ranges
    (an `Mvm`'s inputs, partial sums and residual) spends each access on the range
    furthest behind its share, so they advance together.

    Cycles are kept from the earliest cycle a booking can still start at (the simulated
    present: nothing is booked in the past) to the last one booked.

    >>> cal = L1Calendar(BankedL1(banks=16, bank_bytes=16, read_ports=1, write_ports=1,
    ...                           port_bytes=64), requesters=2)
    >>> cal.book(0, 0, 100, (0,), (6400,), write=False)  # alone: its own 100 cycles
    100
    >>> cal.book(1, 0, 100, (0,), (6400,), write=False)  # the one read port is taken
    200
    >>> cal.waits.tolist()  # per requester: [bank waits, port waits, accesses]
    [[0, 0, 100], [0, 100, 100]]
    """

    def __init__(self, l1: BankedL1, requesters: int = 1) -> None:
        if l1.banks > 64:
            raise ConfigError(f"banks must be at most 64 in the detailed mode, not {l1.banks}")
        self.l1 = l1
        self.base = 0  # the cycle of index 0
        self.banks = np.zeros(1 << 16, np.uint64)  # bit b: bank b granted in that cycle
        self.ports = np.zeros((2, 1 << 16), np.uint8)  # read, write ports granted
        #: per requester: cycles it waited for a bank, for a port, and accesses it made
        self.waits = np.zeros((requesters, 3), np.int64)

    def book(
        self,
        who: int,
        s: int,
        d: int,
        addrs: Sequence[int],
        nbytes: Sequence[int],
        *,
        write: bool,
        now: int = 0,
    ) -> int:
        """Book requester ``who``'s stream of ``nbytes[k]`` bytes from ``addrs[k]`` (for each
        k) in one direction, from cycle ``s`` at up to ``sum(nbytes) / d`` bytes per cycle
        (capped at a port's width); returns the cycle its last bytes moved, ``s + d`` unless
        it waited. ``now``: no later booking starts before it (cycles before it are
        dropped when the calendar grows)."""
        total = sum(nbytes)
        if total <= 0:
            return s + d
        l1 = self.l1
        assert s >= self.base, (s, self.base)
        addr = np.asarray(addrs, np.int64)
        size = np.asarray(nbytes, np.int64)
        rate = min(total / max(d, 1), float(l1.port_bytes))
        nports = l1.write_ports if write else l1.read_ports
        args = (addr, size, rate, l1.banks, l1.bank_bytes, l1.port_bytes, nports)
        k = int(write)
        # a dry run finds the end (cycles not yet kept are free), the calendar grows to it,
        # then the same walk books (its own accesses never meet: one per cycle)
        end, _, _, _ = _book(self.banks, self.ports[k], self.base, s, *args, False)
        if end - self.base > len(self.banks):
            self._grow(min(now, s), end)
        end, bank_w, port_w, n = _book(self.banks, self.ports[k], self.base, s, *args, True)
        w = self.waits[who]
        w[0] += bank_w
        w[1] += port_w
        w[2] += n
        return max(end, s + d)

    def _grow(self, keep_from: int, end: int) -> None:
        """Drop the cycles before ``keep_from`` and make room up to ``end``."""
        drop = max(0, keep_from - self.base)
        kept = max(0, len(self.banks) - drop)  # cycles past the kept ones are all free
        need = end - self.base - drop
        size = len(self.banks)
        while size < 2 * need:
            size *= 2
        banks = np.zeros(size, np.uint64)
        ports = np.zeros((2, size), np.uint8)
        banks[:kept] = self.banks[drop:]
        ports[:, :kept] = self.ports[:, drop:]
        self.banks, self.ports = banks, ports
        self.base += drop


@numba.njit(cache=True)
def _book(
    busy: np.ndarray,
    ports: np.ndarray,
    base: int,
    s: int,
    addr: np.ndarray,
    size: np.ndarray,
    rate: float,
    banks: int,
    bank_bytes: int,
    port_bytes: int,
    nports: int,
    commit: bool,
) -> tuple[int, int, int, int]:
    """Walk one stream cycle by cycle (see `L1Calendar`); with ``commit`` hold what it is
    granted. Returns (end, bank waits, port waits, accesses)."""
    k = len(addr)
    total = size.sum()
    left = size.copy()
    pos = addr.copy()
    done = 0
    credit = 0.0
    t = s
    bank_waits = 0
    port_waits = 0
    accesses = 0
    cap = float(port_bytes)
    full = np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(64 - banks)
    while done < total:
        # the short access (a stream's bytes past whole ports) goes first, so that a stream
        # of d accesses at its rate is through in d cycles
        want = (total - done) % port_bytes or port_bytes
        credit = min(credit, cap) + rate
        if credit + 1e-6 < want:
            # skip the cycles it only gathers credit in (it asks for nothing)
            gap = math.ceil((want - credit) / rate - 1e-6)
            t += gap
            credit += gap * rate
        # the range furthest behind its share of what this access brings the stream to
        j = 0
        best = -1e300
        for r in range(k):
            if left[r] > 0:
                lag = size[r] * (done + want) / total - (size[r] - left[r])
                if lag > best:
                    best = lag
                    j = r
        n = min(want, left[j])
        b0 = (pos[j] // bank_bytes) % banks
        span = min(banks, (pos[j] % bank_bytes + n + bank_bytes - 1) // bank_bytes)
        mask = ((np.uint64(1) << np.uint64(span)) - np.uint64(1)) if span < 64 else full
        if b0:
            mask = ((mask << np.uint64(b0)) | (mask >> np.uint64(banks - b0))) & full
        i = t - base
        held = busy[i] if i < len(busy) else np.uint64(0)
        used = ports[i] if i < len(ports) else 0
        if used >= nports:
            port_waits += 1
        elif held & mask:
            bank_waits += 1
        else:
            if commit:
                busy[i] = held | mask
                ports[i] = used + 1
            credit -= n
            left[j] -= n
            pos[j] += n
            done += n
            accesses += 1
        t += 1
    return t, bank_waits, port_waits, accesses


def compare_l1_with_ports(l1: BankedL1, accesses: Sequence[L1Access]) -> list[dict[str, object]]:
    """Each access's end in the fast model's fluid ports (`PortGroup`, booked in the given
    order) and in the banks, with the difference."""
    from aipusim.simulator.ports import PortGroup

    groups = {
        False: PortGroup(l1.read_ports, float(l1.port_bytes), len(accesses)),
        True: PortGroup(l1.write_ports, float(l1.port_bytes), len(accesses)),
    }
    served = l1.serve(accesses)
    rows = []
    for k, a in enumerate(accesses):
        alone = -(-a.nbytes // min(a.rate, l1.port_bytes))
        fluid = groups[a.write].book(k, a.start, int(alone), a.nbytes)
        banked = int(served.end[k])
        rows.append(
            {
                "requester": a.requester,
                "cycles_fast": fluid - a.start,
                "cycles_detailed": banked - a.start,
                "bank_waits": int(served.bank_waits[k]),
                "port_waits": int(served.port_waits[k]),
            }
        )
    return rows


__all__ = ["Arbitration", "BankedL1", "L1Access", "L1Calendar", "Served", "compare_l1_with_ports"]
