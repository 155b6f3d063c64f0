"""Hazards: two tasks that touch the same bytes, one of them writing, with nothing between
them that orders them.

Happens-before (`HappensBefore`) is the relation `order` builds (queue order, dispatch,
phases, host transfers, tokens, barriers), as vector clocks: one component per thread, set
in the run order. ``a`` happens before ``b`` iff ``b``'s clock has seen ``a``'s position.

The check sweeps the accesses in run order with a shadow of every address space (the
last writer of each byte, numba; held once per 64-byte block while the block's bytes
agree, `Shadow`), which costs one pass over the blocks touched instead of all pairs:
forward, every read and every write must be ordered after the last write of its bytes (a
read of data not yet written, two unordered writes); backward (from the end, the
*next* writer of each byte), every read must be ordered before the next write of its bytes
(an overwrite of data an unfinished reader still needs). Any pair of conflicting unordered
accesses shows up as one of these. The IMC weight sets are a space of their own (a
`WeightLoad` writes a set an `Mvm` reads).

A `HazardError` names both tasks (core, index, layer), the pool, the address range and
the buffer. Token units still unconsumed at the end of the run are a hazard too: a wait is
missing (`check_tokens`).
"""

from __future__ import annotations

import numba
import numpy as np

from aipusim.base.errors import HazardError
from aipusim.simulator.functional.footprint import Access
from aipusim.simulator.functional.memory import Memory
from aipusim.simulator.functional.order import Schedule

#: Distinct writers one access reports before it falls back to numpy.
_MAX_DISTINCT = 64

#: A shadow block is ``2**BLOCK_SHIFT`` bytes; most runs are kilobytes long, so a run costs
#: one step per block it covers instead of one per byte.
BLOCK_SHIFT = 6
#: A block whose bytes do not all hold one node: its bytes are in the per-byte array.
MIXED = -1


class HappensBefore:
    """Vector clocks of every node of a `Schedule`.

    >>> # see tests/simulator/functional/test_hazards.py
    """

    def __init__(self, sched: Schedule) -> None:
        n, t = len(sched), max(len(sched.threads), 1)
        self.thread = np.asarray(sched.thread, np.int64)
        self.pos = np.asarray(sched.pos, np.int64)
        vc = np.zeros((n, t), np.int32)
        thread, pos, deps = sched.thread, sched.pos, sched.deps
        for node in sched.order:
            d = deps[node]
            if len(d) == 1:
                vc[node] = vc[d[0]]
            elif d:
                vc[node] = vc[d].max(axis=0)
            if thread[node] >= 0:
                vc[node, thread[node]] = pos[node]
        self.vc = vc

    def __call__(self, a: int, b: int) -> bool:
        """Does node ``a`` happen before node ``b``?"""
        if a == b:
            return False
        ta = self.thread[a]
        if ta < 0:
            return False
        if ta == self.thread[b]:
            return bool(self.pos[a] < self.pos[b])
        return bool(self.vc[b, ta] >= self.pos[a])


@numba.njit(cache=True)
def _distinct(shadow, blocks, starts, ends, vals, where):  # pragma: no cover - jitted
    """Distinct nonzero values over the runs and the first address of each, into
    ``vals``/``where``; returns their count, or -1 when there are more. A block that is
    not `MIXED` holds its value at every byte, so it counts once, at the first of its
    bytes a run covers."""
    count = 0
    last = 0
    for i in range(len(starts)):
        s, e = starts[i], ends[i]
        while s < e:
            b = s >> BLOCK_SHIFT
            stop = min(e, (b + 1) << BLOCK_SHIFT)
            held = blocks[b]
            first = s
            if held == MIXED:
                held = shadow[s]
            elif held == last:
                s = stop
                continue
            a = first
            while True:
                if held != last and held != 0:
                    found = False
                    for k in range(count):
                        if vals[k] == held:
                            found = True
                            break
                    if not found:
                        if count == len(vals):
                            return -1
                        vals[count] = held
                        where[count] = a
                        count += 1
                last = held
                if blocks[b] != MIXED:
                    break
                a += 1
                if a >= stop:
                    break
                held = shadow[a]
            s = stop
    return count


@numba.njit(cache=True)
def _fill(shadow, blocks, starts, ends, value):  # pragma: no cover - jitted
    """Set the runs to ``value``: whole blocks in ``blocks`` alone; a block written in
    part first spells its value out into ``shadow`` and becomes `MIXED`."""
    for i in range(len(starts)):
        s, e = starts[i], ends[i]
        while s < e:
            b = s >> BLOCK_SHIFT
            lo = b << BLOCK_SHIFT
            hi = lo + (1 << BLOCK_SHIFT)
            if s == lo and e >= hi:
                n = (e - s) >> BLOCK_SHIFT
                blocks[b : b + n] = value
                s += n << BLOCK_SHIFT
                continue
            stop = min(e, hi)
            held = blocks[b]
            if held != value:
                if held != MIXED:
                    shadow[lo:hi] = held
                    blocks[b] = MIXED
                shadow[s:stop] = value
            s = stop


@numba.njit(cache=True)
def _values(shadow, blocks, lo, hi, out):  # pragma: no cover - jitted
    """The value of every byte of ``[lo, hi)`` into ``out``."""
    for a in range(lo, hi):
        held = blocks[a >> BLOCK_SHIFT]
        out[a - lo] = shadow[a] if held == MIXED else held


class Shadow:
    """A node per byte of every address space, stored as node + 1 (0: nobody yet), kept
    per block where a block's bytes agree (`BLOCK_SHIFT`, `MIXED`) and per byte only in
    blocks written in part; untouched stretches stay unmapped zero pages.

    >>> from types import SimpleNamespace
    >>> mem = SimpleNamespace(spaces=SimpleNamespace(count=1), data=[np.zeros(256, np.uint8)])
    >>> sh = Shadow(mem)
    >>> sh.fill(Access(0, np.array([0]), np.array([200]), True), 4)
    >>> sh.fill(Access(0, np.array([70]), np.array([72]), True), 9)
    >>> sh.distinct(Access(0, np.array([60]), np.array([256]), False))
    [(4, 60), (9, 70)]
    >>> sh.values(0, 68, 74).tolist(), sh.values(0, 250, 251).tolist()
    ([4, 4, 9, 9, 4, 4], [-1])
    """

    def __init__(self, mem: Memory) -> None:
        self.mem = mem
        self.arrays = [np.zeros(0, np.int32) for _ in range(mem.spaces.count)]
        self.blocks = [np.zeros(0, np.int32) for _ in range(mem.spaces.count)]
        self._vals = np.zeros(_MAX_DISTINCT, np.int64)
        self._where = np.zeros(_MAX_DISTINCT, np.int64)

    def array(self, space: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """The per-byte and per-block arrays of ``space``, grown to hold byte ``end - 1``."""
        arr = self.arrays[space]
        if end > len(arr):
            size = max(end, len(self.mem.data[space]), 2 * len(arr))
            size = -(-size >> BLOCK_SHIFT) << BLOCK_SHIFT
            grown = np.zeros(size, np.int32)
            grown[: len(arr)] = arr
            self.arrays[space] = arr = grown
            blocks = np.zeros(size >> BLOCK_SHIFT, np.int32)
            blocks[: len(self.blocks[space])] = self.blocks[space]
            self.blocks[space] = blocks
        return arr, self.blocks[space]

    def distinct(self, acc: Access) -> list[tuple[int, int]]:
        """(node, first address) of every node the shadow holds over ``acc``'s runs."""
        if not len(acc.starts):
            return []
        arr, blocks = self.array(acc.space, acc.hi)
        n = _distinct(arr, blocks, acc.starts, acc.ends, self._vals, self._where)
        if n == 0:
            return []
        if n > 0:
            return list(zip((self._vals[:n] - 1).tolist(), self._where[:n].tolist(), strict=True))
        seen: dict[int, int] = {}
        for s, e in zip(acc.starts.tolist(), acc.ends.tolist(), strict=True):
            vals, first = np.unique(self.values(acc.space, s, e) + 1, return_index=True)
            for v, f in zip(vals.tolist(), first.tolist(), strict=True):
                if v:
                    seen.setdefault(v - 1, s + f)
        return list(seen.items())

    def fill(self, acc: Access, node: int) -> None:
        if len(acc.starts):
            arr, blocks = self.array(acc.space, acc.hi)
            _fill(arr, blocks, acc.starts, acc.ends, node + 1)

    def values(self, space: int, lo: int, hi: int) -> np.ndarray:
        """The node of every byte of ``[lo, hi)`` (-1: nobody)."""
        out = np.empty(max(hi - lo, 0), np.int64)
        _values(*self.array(space, hi), lo, hi, out)
        return out - 1


class HazardCheck:
    """The forward and backward sweeps over the accesses of a run (module docstring)."""

    def __init__(
        self, sched: Schedule, hb: HappensBefore, mem: Memory, cores_per_replica: int
    ) -> None:
        self.sched, self.hb, self.mem, self.spaces = sched, hb, mem, mem.spaces
        self.memory, self.per = mem.map, cores_per_replica
        self.last = Shadow(mem)
        self.accesses: dict[int, list[Access]] = {}
        self.checked_bytes = 0

    def forward(self, node: int, accesses: list[Access]) -> None:
        """Check a node's accesses against the last writers, then record its writes."""
        self.accesses[node] = accesses
        hb = self.hb
        for acc in accesses:
            self.checked_bytes += acc.nbytes
            for w, addr in self.last.distinct(acc):
                if w != node and not hb(w, node):
                    verb = "writes" if acc.write else "reads"
                    raise self._error(node, w, acc, addr, self.last, w, f"{verb} what", "wrote")
        for acc in accesses:
            if acc.write:
                self.last.fill(acc, node)

    def backward(self) -> None:
        """From the end: every read must be ordered before the next write of its bytes.
        Of several such reads, the first in run order is reported."""
        nxt = Shadow(self.mem)
        hb = self.hb
        found: HazardError | None = None
        for node in reversed(self.sched.order):
            accesses = self.accesses.get(node)
            if not accesses:
                continue
            for acc in accesses:
                if acc.write:
                    continue
                for w, addr in nxt.distinct(acc):
                    if w != node and not hb(node, w):
                        found = self._error(w, node, acc, addr, nxt, w, "overwrites what",
                                            "still reads")  # fmt: skip
                        break
            for acc in accesses:
                if acc.write:
                    nxt.fill(acc, node)
        if found is not None:
            raise found

    def writer_of(self, space: int, lo: int, hi: int) -> np.ndarray:
        """The last writer of each byte of ``[lo, hi)`` (-1: the constants image or nobody)."""
        return self.last.values(space, lo, hi)

    # -- messages ------------------------------------------------------------------------
    def _error(
        self, node: int, other: int, acc: Access, addr: int, shadow: Shadow, held: int,
        verb: str, did: str,
    ) -> HazardError:  # fmt: skip
        """``node`` ``verb`` ``other`` ``did`` at the bytes from ``addr`` where ``shadow``
        holds ``held``, within the run of ``acc`` that contains ``addr``."""
        run_end = int(acc.ends[np.searchsorted(acc.starts, addr, side="right") - 1])
        other_at = np.flatnonzero(shadow.values(acc.space, addr, run_end) != held)
        end = addr + int(other_at[0]) if len(other_at) else run_end
        sched = self.sched
        where = f"{self.spaces.name(acc.space)} {addr:#x}..{end:#x}{self._buffer(acc, addr)}"
        return HazardError(
            f"{sched.label(node)} {verb} {sched.label(other)} {did} at {where}, and nothing "
            "orders the two (no queue order, token, barrier or phase between them)"
        )

    def _buffer(self, acc: Access, addr: int) -> str:
        """`` (buffer NAME)`` of a physical address, if the memory map names it."""
        pool = self.spaces.pool(acc.space)
        if pool == "imc":
            return " (IMC weight set)"
        core = self.spaces.core(acc.space)
        prog = addr  # a space holds the program's addresses (plus the I/O slot)
        lcore = core % self.per if core >= 0 else -1
        for buf in self.memory.io:
            top = buf.addr + buf.bytes * buf.slots
            if buf.pool == pool and buf.addr <= prog < top and (core < 0 or buf.core == lcore):
                return f" (I/O buffer {buf.name}, slot {(prog - buf.addr) // buf.bytes})"
        for b in self.memory.buffers:
            mine = core < 0 or b.core in (-1, lcore)
            if b.pool == pool and b.addr <= prog < b.addr + b.bytes and mine:
                return f" (buffer {b.name})"
        return ""


def check_tokens(sched: Schedule) -> None:
    """Token units the frames signalled and nobody waited for by the end of the run
    (beyond INIT's credits): a missing wait."""
    if sched.leftovers:
        left = sched.leftovers[0]
        more = len(sched.leftovers) - 1
        also = f" (and {more} more tokens)" if more else ""
        raise HazardError(
            f"token {left.token} still holds {left.units} unit(s) the frames signalled at the "
            f"end of the run, the last by {sched.label(left.last_signal)}: a wait on it is "
            f"missing{also}"
        )


__all__ = ["HappensBefore", "HazardCheck", "Shadow", "check_tokens"]
