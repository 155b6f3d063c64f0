"""A core's tasklist, ready to run: shared ops plus per-task columns, built without a Python
object per task.

The tiles of a layer repeat the same task at other addresses, so what a task *does* (its
`Op`: unit, duration, tokens, transfer, energy) is costed once per distinct combination of
the fields that decide it, and every task keeps only its position (``seq`` in its phase),
its op and its origin (layer, tile). Tasks are grouped by those fields with vectorised
hashing over the tasklist's columns (`aipusim.isa.table.TaskTable`), and each group is
costed through `TaskCoster` from its first task, so errors name the first offending task in
tasklist order, as costing task by task would.

>>> from aipusim.arch import load_arch
>>> from aipusim.isa.table import TaskTable
>>> from aipusim.isa.tasks import Mvm, Unit
>>> tasks = [Mvm(unit=Unit.MVM, weight_set=0, in_addr=64 * i, out_addr=0, vectors=10,
...              rows_used=512, cols_used=512, layer="conv", tile=i) for i in range(3)]
>>> ops: list = []
>>> code = prepare_core(0, TaskTable.from_tasks(tasks), TaskCoster(load_arch(), 800_000_000,
...                     1.0), ops, rid_base=0)
>>> len(ops), code.frame.by_unit["mvm"].seqs, code.frame.tiles.tolist()
(1, [0, 1, 2], [0, 1, 2])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aipusim.isa.table import COLUMN_DTYPES, TaskTable
from aipusim.isa.tasks import KINDS, Phase, Unit, where_fields
from aipusim.simulator.units import K_COMPUTE, K_DMA, Op, TaskCoster

#: Fixed order of unit processes inside a core (creation order breaks SimPy ties).
UNIT_ORDER: tuple[str, ...] = tuple(u.value for u in Unit)


#: Columns that never change what a task does: where it comes from and where its data
#: lies. Costing reads none of them (tests/simulator/test_prepare.py checks it on every
#: kind), so tasks that differ only here share one op.
def _not_costed() -> frozenset[str]:
    """The origin columns, and every field that says only where data lies (`isa.tasks.bits`
    ``where``) in every kind that has it."""
    where: set[str] = set()
    costed: set[str] = set()
    for kind in KINDS.values():
        marked = where_fields(kind)
        for f in kind.kind_fields():
            (where if f.name in marked else costed).add(f.name)
    return frozenset({"layer", "tile", "frame_slot", "phase"} | (where - costed))


NOT_COSTED: frozenset[str] = _not_costed()
assert set(COLUMN_DTYPES) >= NOT_COSTED, sorted(NOT_COSTED - set(COLUMN_DTYPES))
#: The columns that decide a task's op.
OP_COLUMNS: tuple[str, ...] = tuple(c for c in COLUMN_DTYPES if c not in NOT_COSTED)

_INIT = list(Phase).index(Phase.INIT)
_UNITS = list(Unit)
_MIX = np.uint64(0x100000001B3)  # an odd 64-bit multiplier (FNV's prime)


@dataclass(slots=True)
class UnitQueue:
    """The tasks of one unit queue in one phase, in queue order."""

    seqs: list[int]  # position of each task in its phase (its dispatch order)
    ops: list[Op]
    rids: np.ndarray  # row of each task in the run's task table


@dataclass(slots=True)
class PhaseCode:
    """One phase (INIT or FRAME) of a core, by ``seq`` (position in the phase)."""

    ops: list[Op]  # what the control core dispatches, in order
    op_index: np.ndarray  # ``ops[seq].index``
    layers: np.ndarray  # index into the core's ``strings``
    tiles: np.ndarray
    by_unit: dict[str, UnitQueue]
    has_ctrl: bool  # holds a ctrl task, which blocks dispatch while it runs
    #: Detailed mode only (`prepare_core(..., addresses=True)`): per seq, the L1 addresses
    #: its streams start at, a compute task's ``(reads, writes)`` (one per stream of
    #: `Op.l1_streams`), a DMA's ``(src_addr, dst_addr)``; None in the fast mode.
    l1_addr: list[tuple] | None = None

    def __len__(self) -> int:
        return len(self.ops)


@dataclass(slots=True)
class CoreCode:
    """The tasklist of one logical core, split by phase and by unit queue."""

    logical: int
    init: PhaseCode
    frame: PhaseCode
    strings: list[str]  # layer names
    unit_names: tuple[str, ...]  # unit queues with work, in `UNIT_ORDER`

    @property
    def n_records(self) -> int:
        return len(self.init) + len(self.frame)

    def phase(self, phase: int) -> PhaseCode:
        """INIT for ``phase`` < 0, else FRAME (every frame runs the same code)."""
        return self.init if phase < 0 else self.frame

    def layer(self, phase: int, seq: int) -> str:
        return self.strings[int(self.phase(phase).layers[seq])]


def _group(table: TaskTable) -> tuple[np.ndarray, np.ndarray]:
    """(group of each row, first row of each group), groups numbered in order of first
    occurrence; rows are in one group iff they agree on every `OP_COLUMNS` column."""
    n = len(table)
    h = np.zeros(n, np.uint64)
    for name in OP_COLUMNS:
        h ^= table[name].astype(np.uint64, copy=False)
        h *= _MIX
    _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    rep = first[inverse]
    if not all(np.array_equal(table[c], table[c][rep]) for c in OP_COLUMNS):
        # Two different keys hashed alike: group exactly (slower, and practically never).
        keys = np.stack([table[c].astype(np.uint64) for c in OP_COLUMNS], axis=1)
        _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[inverse], first[order]


def _l1_addresses(
    table: TaskTable, rows: np.ndarray, index: np.ndarray, ops: list[Op]
) -> list[tuple]:
    """Per task of a phase (``rows`` of ``table``, op ``index``), the L1 addresses its
    streams start at (see `PhaseCode.l1_addr`), gathered op by op."""
    out: list[tuple] = [()] * len(rows)
    for k in np.unique(index).tolist():
        op = ops[k]
        mine = np.flatnonzero(index == k)
        at = rows[mine]
        if op.kind == K_DMA:
            cols = [table["src_addr"][at].tolist(), table["dst_addr"][at].tolist()]
            values = list(zip(*cols, strict=True))
        elif op.kind == K_COMPUTE:
            reads, writes = op.l1_streams
            r = [table[f][at].tolist() for f, _ in reads]
            w = [table[f][at].tolist() for f, _ in writes]
            n = len(at)
            rs = list(zip(*r, strict=True)) if r else [()] * n
            ws = list(zip(*w, strict=True)) if w else [()] * n
            values = list(zip(rs, ws, strict=True))
        else:
            continue
        for i, v in zip(mine.tolist(), values, strict=True):
            out[i] = v
    return out


def prepare_core(
    logical: int,
    table: TaskTable,
    coster: TaskCoster,
    ops: list[Op],
    rid_base: int,
    *,
    addresses: bool = False,
) -> CoreCode:
    """The code of logical core ``logical`` from its tasklist ``table``.

    New ops are appended to the run's ``ops`` (their ``index`` is their position there).
    Task rows of the run's table are ``rid_base`` + INIT tasks in order, then FRAME tasks.
    ``addresses``: keep each task's L1 addresses (`PhaseCode.l1_addr`, the detailed mode).
    """
    n = len(table)
    label = f"core {logical}"
    is_init = table["phase"] == _INIT
    in_init = np.cumsum(is_init) - 1
    in_frame = np.cumsum(~is_init) - 1
    seq = np.where(is_init, in_init, in_frame)
    n_init = int(is_init.sum())

    group, first = _group(table) if n else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    reps = TaskTable({c: col[first] for c, col in table.columns.items()}, table.strings)
    base = len(ops)
    for row, task in zip(first.tolist(), reps.to_tasks(), strict=True):
        op = coster.op(task, label, int(seq[row]))
        op.index = len(ops)
        ops.append(op)
    op_index = group + base

    unit = table["unit"]
    phases: list[PhaseCode] = []
    for mask, rid0 in ((is_init, rid_base), (~is_init, rid_base + n_init)):
        rows = np.flatnonzero(mask)
        index = op_index[rows]
        phase_ops = list(map(ops.__getitem__, index.tolist()))
        units = unit[rows]
        by_unit: dict[str, UnitQueue] = {}
        for code in np.unique(units).tolist():
            mine = np.flatnonzero(units == code)  # positions in the phase = seqs
            by_unit[_UNITS[code].value] = UnitQueue(
                mine.tolist(), list(map(ops.__getitem__, index[mine].tolist())), mine + rid0
            )
        phases.append(
            PhaseCode(
                phase_ops,
                index,
                table["layer"][rows],
                table["tile"][rows],
                by_unit,
                Unit.CTRL.value in by_unit,
                _l1_addresses(table, rows, index, ops) if addresses else None,
            )
        )
    init, frame = phases
    names = tuple(u for u in UNIT_ORDER if u in init.by_unit or u in frame.by_unit)
    return CoreCode(logical, init, frame, list(table.strings), names)
