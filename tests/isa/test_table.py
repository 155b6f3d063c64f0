"""Columnar tasks: the table path gives the object path's bytes, tasks and errors."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from isa_strategies import any_task, tasks_of

from aipusim.base.errors import TasklistError
from aipusim.isa.encoding import COMMON_FIELDS, RECORD_BYTES, decode_tasks, encode_tasks
from aipusim.isa.table import COLUMN_DTYPES, TaskTable, decode_table, empty_table, encode_table
from aipusim.isa.tasks import (
    KINDS,
    Barrier,
    Mvm,
    Phase,
    Task,
    TokenScope,
    TokenSignal,
    Unit,
)

ALL_KINDS = sorted(KINDS.values(), key=lambda k: k.OPCODE)
_LAYERS = st.sampled_from(["a", "b", "layer c", ""])


def _raw(value: object) -> int:
    """What a record stores for a task attribute (an enum stores its position)."""
    if isinstance(value, str) and type(value) is not str:
        return list(type(value)).index(value)
    assert isinstance(value, int)
    return value


def _expected_row(task: Task, strings: list[str]) -> dict[str, int]:
    """The table row of ``task``, worked out from its attributes (independent of the codec)."""
    row = dict.fromkeys(COLUMN_DTYPES, 0)
    row.update(
        opcode=task.OPCODE,
        unit=list(Unit).index(task.unit),
        phase=list(Phase).index(task.phase),
        frame_slot=task.frame_slot,
        tile=task.tile,
        layer=strings.index(task.layer),
    )
    for side in ("waits", "signals"):
        refs = getattr(task, side)
        row[f"{side}.count"] = len(refs)
        for slot, ref in enumerate(refs):
            row[f"{side}[{slot}].scope"] = list(TokenScope).index(ref.scope)
            row[f"{side}[{slot}].index"] = ref.index
            row[f"{side}[{slot}].count"] = ref.count
    for f in type(task).kind_fields():
        row[f.name] = _raw(getattr(task, f.name))
    return row


@pytest.mark.parametrize("kind", ALL_KINDS, ids=lambda k: k.__name__)
@given(data=st.data())
@settings(max_examples=examples(40), deadline=None)
def test_columns_hold_the_task_fields(kind: type, data: st.DataObject) -> None:
    tasks = data.draw(st.lists(tasks_of(kind, _LAYERS), min_size=1, max_size=5))
    table = TaskTable.from_tasks(tasks)
    assert table.strings == list(dict.fromkeys(t.layer for t in tasks))
    for i, task in enumerate(tasks):
        got = {name: int(table[name][i]) for name in COLUMN_DTYPES}
        assert got == _expected_row(task, table.strings)


@given(st.lists(any_task(_LAYERS), max_size=40))
@settings(max_examples=examples(60), deadline=None)  # up to 40 tasks an example: ~1200 tasks in all
def test_table_path_matches_object_path(tasks: list[Task]) -> None:
    strings: dict[str, int] = {}
    data = encode_tasks(tasks, strings)
    table = TaskTable.from_tasks(tasks)
    assert encode_table(table) == data
    decoded = decode_table(data, len(tasks), list(strings))
    assert decoded == table
    assert decoded.to_tasks() == decode_tasks(data, len(tasks), list(strings)) == tasks


@given(st.lists(any_task(_LAYERS), min_size=1, max_size=20), st.randoms(use_true_random=False))
@settings(max_examples=examples(50), deadline=None)
def test_encode_table_renumbers_layers_like_encode_tasks(tasks: list[Task], rnd) -> None:
    # A table whose string table is not in order of first use (or holds unused names)
    # still encodes to the bytes and string order of the object path.
    table = TaskTable.from_tasks(tasks)
    perm = list(range(len(table.strings) + 1))
    rnd.shuffle(perm)
    names = [*table.strings, "unused"]
    shuffled = [names[p] for p in perm]
    cols = dict(table.columns)
    cols["layer"] = np.array([perm.index(i) for i in table["layer"]], dtype=np.uint32)
    other = TaskTable(cols, shuffled)
    assert other.to_tasks() == tasks
    s1: dict[str, int] = {"pre": 0}
    s2: dict[str, int] = {"pre": 0}
    assert encode_table(other, s1) == encode_tasks(tasks, s2)
    assert s1 == s2


def _valid_records(tasks: list[Task]) -> tuple[bytes, list[str]]:
    strings: dict[str, int] = {}
    return encode_tasks(tasks, strings), list(strings)


@given(
    st.lists(any_task(_LAYERS), min_size=1, max_size=6),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4),
    st.integers(-RECORD_BYTES, RECORD_BYTES),
    st.sampled_from([0, 1, 2, 3]),
)
@settings(max_examples=examples(120), deadline=None)
def test_corrupt_records_fail_like_the_object_decoder(
    tasks: list[Task], flips: list[tuple[int, int]], cut: int, first: int
) -> None:
    data, strings = _valid_records(tasks)
    raw = bytearray(data)
    for pos, value in flips:
        raw[pos % len(raw)] = value
    if cut < 0:
        raw = raw[:cut]
    names = strings[: len(strings) - first % 2]  # sometimes one string short
    try:
        expected = decode_tasks(bytes(raw), len(tasks), names, first_index=first, base_offset=32)
    except TasklistError as exc:
        with pytest.raises(TasklistError) as got:
            decode_table(bytes(raw), len(tasks), names, first_index=first, base_offset=32)
        assert str(got.value) == str(exc)
        return
    table = decode_table(bytes(raw), len(tasks), names, first_index=first, base_offset=32)
    assert table.to_tasks() == expected


@given(
    st.lists(any_task(_LAYERS), min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=6),
)
@settings(max_examples=examples(60), deadline=None)
def test_repeated_records_fail_like_the_object_decoder(
    tasks: list[Task], flips: list[tuple[int, int]]
) -> None:
    """A long tasklist of a few repeated records (the decoder then checks its rules once per
    group of records that agree on the bytes they read): the same verdict, record by
    record, as the object decoder."""
    data, strings = _valid_records(tasks * 16)
    raw = bytearray(data)
    for pos, value in flips:
        raw[pos % len(raw)] = value
    n = len(tasks) * 16
    try:
        expected = decode_tasks(bytes(raw), n, strings)
    except TasklistError as exc:
        with pytest.raises(TasklistError) as got:
            decode_table(bytes(raw), n, strings)
        assert str(got.value) == str(exc)
        return
    assert decode_table(bytes(raw), n, strings).to_tasks() == expected


@given(st.binary(max_size=4 * RECORD_BYTES), st.integers(-2, 5), st.integers(0, 200))
@settings(max_examples=examples(300), deadline=None)
def test_garbage_raises_only_tasklist_error(raw: bytes, count: int, offset: int) -> None:
    try:
        table = decode_table(raw, count, ["a", "b"], offset=offset)
    except TasklistError as exc:
        with pytest.raises(TasklistError) as ref:
            decode_tasks(raw, count, ["a", "b"], offset=offset)
        assert str(ref.value) == str(exc)
        return
    assert len(table) == max(count, 0)
    assert table.to_tasks() == decode_tasks(raw, count, ["a", "b"], offset=offset)


def test_decode_error_names_byte_and_task_like_the_object_path() -> None:
    mvm = Mvm(
        unit=Unit.MVM, weight_set=1, in_addr=0, out_addr=64, vectors=4, rows_used=8, cols_used=8
    )
    data = bytearray(encode_tasks([mvm] * 3, {}))
    data[2 * RECORD_BYTES + 1] = 99  # unit of task 2
    with pytest.raises(
        TasklistError,
        match=rf"^byte {1000 + 2 * RECORD_BYTES + 1}: task 7 \(Mvm\) unit must be one of 0 ",
    ):
        decode_table(bytes(data), 3, [""], first_index=5, base_offset=1000)
    data[RECORD_BYTES - 1] = 1  # padding of task 0 comes first
    with pytest.raises(
        TasklistError, match=rf"^byte {RECORD_BYTES - 1}: task 0 \(Mvm\) padding must be 0"
    ):
        decode_table(bytes(data), 3, [""])
    with pytest.raises(TasklistError, match=rf"^byte 150: task {150 // RECORD_BYTES} is truncated"):
        decode_table(bytes(data[:150]), 2, [""])


def test_encode_table_rejects_bad_rows() -> None:
    table = TaskTable.from_tasks([Barrier(unit=Unit.CTRL, barrier_id=3, core_mask=1)] * 2)
    cols = dict(table.columns)
    cols["phase"] = np.array([0, 7], dtype=np.uint8)
    with pytest.raises(
        TasklistError, match=rf"^byte {RECORD_BYTES + 2}: task 1 \(Barrier\) `phase` must be an"
    ):
        encode_table(TaskTable(cols, table.strings))
    cols = dict(table.columns)
    cols["vectors"] = np.array([0, 5], dtype=np.uint32)
    with pytest.raises(TasklistError, match=r"^task 1: column `vectors` must be 0 where the kind"):
        encode_table(TaskTable(cols, table.strings))
    with pytest.raises(TasklistError, match=r"column `vectors` must be 0"):
        TaskTable(cols, table.strings).to_tasks()
    cols = dict(table.columns)
    cols["layer"] = np.array([0, 1], dtype=np.uint32)
    with pytest.raises(TasklistError, match=r"task 1 \(Barrier\) layer must be a string index 0-0"):
        encode_table(TaskTable(cols, table.strings))


def test_table_construction_checks_columns() -> None:
    table = TaskTable.from_tasks([TokenSignal(unit=Unit.DPU)])
    cols = dict(table.columns)
    del cols["tile"]
    with pytest.raises(TasklistError, match=r"columns must be exactly .* missing \['tile'\]"):
        TaskTable(cols, [""])
    cols = dict(table.columns, tile=[-1])
    with pytest.raises(
        TasklistError, match=r"column `tile` must hold integers 0-4294967295, not -1"
    ):
        TaskTable(cols, [""])
    cols = dict(table.columns, tile=[1, 2])
    with pytest.raises(TasklistError, match=r"columns must have one length"):
        TaskTable(cols, [""])
    assert TaskTable(dict(table.columns, tile=[5]), [""])["tile"].dtype == np.uint32
    with pytest.raises(TasklistError, match=r"strings must be str, not 3"):
        TaskTable(dict(table.columns), [3])  # type: ignore[list-item]


def test_empty_and_counts() -> None:
    assert len(empty_table()) == 0 and encode_table(empty_table()) == b""
    assert decode_table(b"", 0, ["x"]) == empty_table(["x"])
    tasks = [TokenSignal(unit=Unit.DPU), TokenSignal(unit=Unit.CTRL), TokenSignal(unit=Unit.DPU)]
    table = TaskTable.from_tasks(tasks)
    dpu, ctrl = list(Unit).index(Unit.DPU), list(Unit).index(Unit.CTRL)
    assert table.counts("unit") == {dpu: 2, ctrl: 1}
    assert [f.name for f in COMMON_FIELDS] == list(COLUMN_DTYPES)[: len(COMMON_FIELDS)]


@given(st.lists(any_task(_LAYERS), max_size=30))
@settings(max_examples=examples(60), deadline=None)
def test_count_by_matches_counting_tasks(tasks: list[Task]) -> None:
    table = TaskTable.from_tasks(tasks)
    assert table.count_by("unit") == dict(sorted(Counter(t.unit.value for t in tasks).items()))
    assert table.count_by("phase") == dict(sorted(Counter(t.phase.value for t in tasks).items()))
    kinds = Counter(type(t).__name__ for t in tasks)
    assert table.count_by("opcode") == dict(sorted(kinds.items()))


def test_count_by_names_its_columns() -> None:
    with pytest.raises(TasklistError, match=r"count_by column must be one of unit, phase, opcode"):
        empty_table().count_by("tile")
