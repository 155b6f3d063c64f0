"""Preparation: tasks become shared ops plus per-task columns (simulator/prepare.py)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import dma, mvm, program, tok
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from aipusim.arch import load_arch
from aipusim.base.errors import TasklistError
from aipusim.isa.encoding import COMMON_FIELDS, kind_field_layouts
from aipusim.isa.table import TaskTable
from aipusim.isa.tasks import (
    KINDS,
    DmaCopy,
    Mvm,
    Phase,
    Task,
    TokenRef,
    TokenScope,
    Unit,
)
from aipusim.simulator import prepare, simulate
from aipusim.simulator.prepare import NOT_COSTED, OP_COLUMNS, prepare_core
from aipusim.simulator.units import Op, TaskCoster

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "isa"))
from isa_strategies import any_task

ARCH = load_arch()
_COMMON_MAX = {f.name: f.max_value for f in COMMON_FIELDS}


def _op_fields(op: Op) -> tuple:
    return tuple(getattr(op, f.name) for f in dataclasses.fields(op) if f.name != "index")


def _outcome(task: Task) -> tuple | str:
    """The op's fields, or the error message, of ``task`` costed as task 0 of core 0."""
    try:
        return _op_fields(TaskCoster(ARCH, 800_000_000, 0.5).op(task, "core 0", 0))
    except TasklistError as exc:
        return str(exc)


@st.composite
def _moved(draw: st.DrawFn, task: Task) -> Task:
    """``task`` with every not-costed field but the layer (named in errors) redrawn."""
    layouts = kind_field_layouts(type(task))
    changes: dict[str, Any] = {}
    for name in sorted(NOT_COSTED - {"layer"}):
        if name == "phase":
            changes[name] = draw(st.sampled_from(list(Phase)))
        elif name in _COMMON_MAX:
            changes[name] = draw(st.integers(0, _COMMON_MAX[name]))
        elif name in layouts:
            changes[name] = draw(st.integers(0, layouts[name].max_value))
    return dataclasses.replace(task, **changes)


def _valid(task: Task) -> Task:
    """``task`` with its values folded into the ranges costing accepts."""
    tokens = ARCH.tokens

    def ref(r: TokenRef) -> TokenRef:
        limit = tokens.global_count if r.scope == TokenScope.GLOBAL else tokens.local_per_core
        return TokenRef(r.scope, r.index % limit, max(1, r.count))

    changes: dict[str, Any] = {
        "waits": tuple(map(ref, task.waits)),
        "signals": tuple(map(ref, task.signals)),
    }
    if isinstance(task, Mvm):
        changes["rows_used"] = 1 + task.rows_used % ARCH.mvm.rows
        changes["cols_used"] = 1 + task.cols_used % ARCH.mvm.cols
        changes["weight_set"] = task.weight_set % ARCH.mvm.weight_sets
    if isinstance(task, DmaCopy):
        changes["bytes"] = max(1, task.bytes)
    return dataclasses.replace(task, **changes)


@settings(max_examples=examples(300), deadline=None)
@given(st.data())
def test_costing_never_reads_a_not_costed_column(data: st.DataObject) -> None:
    # The premise of sharing ops: moving a task's addresses or origin changes nothing.
    task = _valid(data.draw(any_task()))
    op = _outcome(task)
    assert isinstance(op, tuple), op
    assert _outcome(data.draw(_moved(task))) == op


@st.composite
def _tables(draw: st.DrawFn) -> TaskTable:
    """Tasklists built from a few distinct tasks, each repeated at other addresses."""
    bases = draw(st.lists(any_task(), min_size=1, max_size=4))
    picks = draw(st.lists(st.integers(0, len(bases) - 1), min_size=1, max_size=24))
    return TaskTable.from_tasks([draw(_moved(bases[i])) for i in picks])


def _reference_groups(table: TaskTable) -> list[int]:
    """Group of each row by its op columns, groups numbered by first occurrence."""
    keys = list(zip(*(table[c].tolist() for c in OP_COLUMNS), strict=True))
    ids: dict[tuple, int] = {}
    return [ids.setdefault(k, len(ids)) for k in keys]


@settings(max_examples=examples(150), deadline=None)
@given(_tables())
def test_rows_share_a_group_exactly_when_their_op_columns_agree(table: TaskTable) -> None:
    group, first = prepare._group(table)
    expected = _reference_groups(table)
    assert group.tolist() == expected
    assert first.tolist() == [expected.index(g) for g in range(len(first))]


@settings(max_examples=examples(60), deadline=None)
@given(_tables())
def test_hash_collisions_fall_back_to_exact_grouping(table: TaskTable) -> None:
    # A zero multiplier hashes every row alike: the check must notice and group exactly.
    saved = prepare._MIX
    prepare._MIX = np.uint64(0)
    try:
        group, _ = prepare._group(table)
    finally:
        prepare._MIX = saved
    assert group.tolist() == _reference_groups(table)


def test_tiles_of_a_layer_share_one_op_and_keep_their_origin() -> None:
    tasks = [
        dma(Unit.DMA0, 4096, phase=Phase.INIT, layer="consts"),
        *(dataclasses.replace(mvm(64, layer="conv", tile=i), in_addr=64 * i) for i in range(5)),
        mvm(65, layer="conv", tile=5),
    ]
    ops: list[Op] = []
    coster = TaskCoster(ARCH, 800_000_000, 1.0)
    code = prepare_core(0, TaskTable.from_tasks(tasks), coster, ops, rid_base=10)
    assert len(ops) == 3  # the DMA, the 64-vector MVM, the 65-vector MVM
    assert [op.index for op in ops] == [0, 1, 2]
    assert code.init.op_index.tolist() == [0] and code.frame.op_index.tolist() == [1] * 5 + [2]
    queue = code.frame.by_unit["mvm"]
    assert queue.seqs == [0, 1, 2, 3, 4, 5] and queue.rids.tolist() == list(range(11, 17))
    assert code.frame.tiles.tolist() == [0, 1, 2, 3, 4, 5]
    assert code.layer(-1, 0) == "consts" and code.layer(0, 5) == "conv"
    assert code.unit_names == ("mvm", "dma0") and not code.frame.has_ctrl


def test_an_error_names_the_first_bad_task_in_tasklist_order() -> None:
    tasks = [
        mvm(10),
        mvm(10, signals=(tok(99),), layer="late_kind_first_seen"),  # bad token
        mvm(10, cols=600, layer="other"),  # bad columns, a different op
    ]
    prog = program(1)
    with pytest.raises(TasklistError, match=r"^core 0 task 1 \(Mvm, layer 'late_kind_first_seen'"):
        simulate(prog, {0: tasks}, frames=1)
    with pytest.raises(TasklistError, match=r"^core 0 task 0 \(Mvm, layer 'other'\): rows_used"):
        simulate(prog, {0: tasks[2:] + tasks[:2]}, frames=1)


def test_task_lists_and_tables_simulate_alike() -> None:
    tasks = [
        dma(Unit.DMA0, 8192, signals=(tok(0),), layer="a"),
        mvm(100, waits=(tok(0),), signals=(tok(1),), layer="a"),
        dma(Unit.DMA1, 2048, waits=(tok(1),), layer="b"),
    ]
    prog = program(1)
    from_list = simulate(prog, {0: tasks}, frames=3)
    from_table = simulate(prog, {0: TaskTable.from_tasks(tasks)}, frames=3)
    assert from_list.events() == from_table.events()
    assert from_list.energy_mj_per_frame == from_table.energy_mj_per_frame
    assert list(from_list.task_log["layer"]) == list(from_table.task_log["layer"])


def test_every_kind_is_covered_by_the_op_columns() -> None:
    # Each kind-specific field is either costed or deliberately listed as not costed.
    fields = {name for kind in KINDS.values() for name in kind_field_layouts(kind)}
    assert fields <= set(OP_COLUMNS) | NOT_COSTED
