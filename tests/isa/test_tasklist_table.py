"""Tasklist files read as columns: same checks and errors as the object reader."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from isa_strategies import tasklists

from aipusim.base.errors import TasklistError
from aipusim.isa.encoding import RECORD_BYTES, decode_tasks
from aipusim.isa.table import TaskTable
from aipusim.isa.tasklist import (
    HEADER_BYTES,
    Tasklist,
    decode_tasklist,
    decode_tasklist_table,
    encode_tasklist,
    iter_tasklist_chunks,
    read_tasklist,
    read_tasklist_table,
    write_tasklist,
)
from aipusim.isa.tasks import TokenWait, Unit

_LAYER_AT = 9  # byte of the layer index inside a record


def _first_use_problem(tasks: Sequence, strings: Sequence[str]) -> str | None:
    """The string-table rule on layer names, one task at a time (the reference)."""
    seen: set[str] = set()
    for i, task in enumerate(tasks):
        if task.layer not in seen:
            if task.layer != strings[len(seen)]:
                return f"task {i} must use string {len(seen)}"
            seen.add(task.layer)
    if len(seen) != len(strings):
        return "string table must hold only used layer names"
    return None


def _file(layers: list[int], strings: list[str]) -> bytes:
    """A tasklist file whose tasks use the given string indices (any order, any table)."""
    names = [f"n{i}" for i in range(max(layers, default=0) + 1)]
    tl = Tasklist(0, [TokenWait(unit=Unit.DPU, layer=names[i]) for i in layers])
    data = bytearray(encode_tasklist(tl))
    for row, idx in enumerate(layers):
        struct.pack_into("<I", data, HEADER_BYTES + row * RECORD_BYTES + _LAYER_AT, idx)
    records = bytes(data[HEADER_BYTES : HEADER_BYTES + len(layers) * RECORD_BYTES])
    table = struct.pack("<I", len(strings)) + b"".join(
        struct.pack("<H", len(s)) + s.encode() for s in strings
    )
    body = records + table
    head = bytearray(data[:HEADER_BYTES])
    struct.pack_into("<II", head, 24, len(body), zlib.crc32(body))
    return bytes(head) + body


@given(
    st.lists(st.integers(0, 3), max_size=8),
    st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=5),
)
@settings(max_examples=examples(300), deadline=None)
def test_string_order_rule_matches_the_per_task_reference(
    layers: list[int], strings: list[str]
) -> None:
    data = _file(layers, strings)
    tasks = (
        decode_tasks(data, len(layers), strings, offset=HEADER_BYTES)
        if all(i < len(strings) for i in layers)
        else None
    )
    try:
        got = decode_tasklist(data)
    except TasklistError as exc:
        with pytest.raises(TasklistError) as table_exc:
            decode_tasklist_table(data)
        assert str(table_exc.value) == str(exc)
        if tasks is not None:
            expected = _first_use_problem(tasks, strings)
            assert expected is not None and expected in str(exc)
        return
    assert tasks is not None and _first_use_problem(tasks, strings) is None
    header, table = decode_tasklist_table(data)
    assert table.to_tasks() == list(got.tasks) and header.task_count == len(got.tasks)


@given(tasklists(), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3))
@settings(max_examples=examples(80), deadline=None)  # a whole random tasklist an example
def test_table_reader_matches_object_reader(tl: Tasklist, flips: list[tuple[int, int]]) -> None:
    data = bytearray(encode_tasklist(tl))
    for pos, value in flips:
        data[pos % len(data)] = value
    if flips:
        # Fix the CRC half of the time so record checks are reached, not just the CRC.
        body = bytes(data[HEADER_BYTES:])
        if flips[0][0] % 2:
            struct.pack_into("<I", data, 28, zlib.crc32(body))
    try:
        expected = decode_tasklist(bytes(data))
    except TasklistError as exc:
        with pytest.raises(TasklistError) as got:
            decode_tasklist_table(bytes(data))
        assert str(got.value) == str(exc)
        return
    header, table = decode_tasklist_table(bytes(data))
    assert header.core_id == expected.core_id
    assert table.to_tasks() == list(expected.tasks)
    assert table == TaskTable.from_tasks(expected.tasks)


def test_read_tasklist_table_checks_the_file_name(tmp_path: Path) -> None:
    tl = Tasklist(1, [TokenWait(unit=Unit.DPU, layer="a"), TokenWait(unit=Unit.CTRL)])
    path = tmp_path / "core1.tasklist"
    write_tasklist(path, tl)
    header, table = read_tasklist_table(path)
    assert (header.core_id, table.to_tasks()) == (1, list(read_tasklist(path).tasks))
    wrong = tmp_path / "core2.tasklist"
    wrong.write_bytes(path.read_bytes())
    with pytest.raises(TasklistError, match=r"core id must be 2 \(the file is core2.tasklist\)"):
        read_tasklist_table(wrong)
    with pytest.raises(TasklistError, match=r"cannot read tasklist"):
        read_tasklist_table(tmp_path / "missing.tasklist")


def test_streaming_checks_string_order_across_chunks(tmp_path: Path) -> None:
    # Layer 1 first appears in chunk 2, after layer 0 in chunk 1: fine. Task 3 using
    # string 2 before string 1 was ever used breaks the order of first use.
    path = tmp_path / "core0.tasklist"
    path.write_bytes(_file([0, 0, 0, 1, 1], ["x", "y"]))
    chunks = list(iter_tasklist_chunks(path, window_bytes=HEADER_BYTES + 3 * RECORD_BYTES))
    assert [len(c.tasks) for c in chunks] == [2, 2, 1]
    path.write_bytes(_file([0, 0, 0, 2, 1], ["x", "y", "z"]))
    with pytest.raises(
        TasklistError,
        match=rf"^byte {HEADER_BYTES + 3 * RECORD_BYTES + 9}: task 3 must use string 1 \('y'",
    ):
        list(iter_tasklist_chunks(path, window_bytes=4096))
