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
- a rate below a port's width is a credit that fills by ``rate`` bytes per cycle up to
  one port's width (a requester buffers one access, so a stall is not made up later); a
  requester asks only once it holds a port's width of credit (the last access: what is
  left).

`serve` returns each stream's end cycle and the cycles it waited for a bank or a port, so
the fast model's fluid sharing can be checked against the banks (`compare_l1_with_ports`).

>>> l1 = BankedL1(banks=16, bank_bytes=16, read_ports=2, write_ports=2, port_bytes=64)
>>> a = L1Access(requester=0, start=0, nbytes=6400, addr=0, rate=64.0, write=False)
>>> b = L1Access(requester=1, start=0, nbytes=6400, addr=0, rate=64.0, write=False)
>>> out = l1.serve([a, b])  # same banks in the first cycle: one waits once, then they
>>> out.end.tolist(), out.bank_waits.tolist()  # run a port's width apart, never meeting
([100, 101], [0, 1])
"""

from __future__ import annotations

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
            credit[i] = min(credit[i] + rate[i], float(port_bytes))
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


__all__ = ["Arbitration", "BankedL1", "L1Access", "Served", "compare_l1_with_ports"]
