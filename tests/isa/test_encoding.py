"""Task records: round trips for every kind, range checks, corrupt records."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from isa_strategies import any_task, tasks_of

from aipusim.base.errors import TasklistError
from aipusim.isa.encoding import (
    COMMON_BYTES,
    COMMON_FIELDS,
    LAYOUTS,
    RECORD_BYTES,
    check_task,
    decode_tasks,
    encode_tasks,
    kind_field_layouts,
    layout_of,
    task_problem,
)
from aipusim.isa.tasks import (
    KINDS,
    Barrier,
    DmaCopy,
    Mvm,
    Pool,
    PostOp,
    TokenRef,
    TokenScope,
    Unit,
)

ALL_KINDS = sorted(KINDS.values(), key=lambda k: k.OPCODE)


def _mvm(**kw: object) -> Mvm:
    base = dict(
        unit=Unit.MVM,
        layer="conv1",
        weight_set=1,
        in_addr=0x1000,
        out_addr=0x2000,
        vectors=100,
        rows_used=147,
        cols_used=64,
    )
    base.update(kw)
    return Mvm(**base)  # type: ignore[arg-type]


def _roundtrip(tasks: list) -> list:
    strings: dict[str, int] = {}
    data = encode_tasks(tasks, strings)
    assert len(data) == len(tasks) * RECORD_BYTES
    return decode_tasks(data, len(tasks), list(strings))


@pytest.mark.parametrize("kind", ALL_KINDS, ids=lambda k: k.__name__)
@given(data=st.data())
@settings(max_examples=examples(60), deadline=None)
def test_roundtrip_every_kind(kind: type, data: st.DataObject) -> None:
    task = data.draw(tasks_of(kind))
    [back] = _roundtrip([task])
    assert back == task
    assert type(back) is kind
    # Decoded values have the declared types, not just equal ones.
    for f in dataclasses.fields(back):
        value = getattr(back, f.name)
        enum_type = f.metadata.get("enum")
        if enum_type is not None:
            assert type(value) is enum_type


@given(st.lists(any_task(), max_size=30))
@settings(max_examples=examples(80), deadline=None)
def test_roundtrip_mixed_lists_and_reencode(tasks: list) -> None:
    strings: dict[str, int] = {}
    data = encode_tasks(tasks, strings)
    back = decode_tasks(data, len(tasks), list(strings))
    assert back == tasks
    assert encode_tasks(back, {}) == data


def test_record_size_is_shared_and_aligned() -> None:
    assert RECORD_BYTES % 8 == 0
    for layout in LAYOUTS.values():
        assert layout.detail.size == RECORD_BYTES
        used = COMMON_BYTES + sum(f.size_bytes for f in layout.fields)
        assert used + layout.pad_bytes == RECORD_BYTES
    # One kind fills the record up to the alignment: the size is as small as it can be.
    assert min(layout.pad_bytes for layout in LAYOUTS.values()) < 8


def test_layout_follows_declaration_order() -> None:
    fields = layout_of(DmaCopy).fields
    assert [f.name for f in fields] == [f.name for f in DmaCopy.kind_fields()]
    offsets = [f.offset for f in fields]
    assert offsets == sorted(offsets) and offsets[0] == COMMON_BYTES
    assert kind_field_layouts(DmaCopy)["src_addr"].code == "Q"
    assert COMMON_FIELDS[0].name == "opcode" and COMMON_FIELDS[0].offset == 0


def test_known_bytes_of_a_record() -> None:
    t = _mvm(tile=3, frame_slot=1, waits=(TokenRef(TokenScope.GLOBAL, 5, 2),))
    data = encode_tasks([t], {})
    opcode, unit, phase, slot, tile, layer = struct.unpack_from("<BBBHII", data)
    assert (opcode, unit, phase, slot, tile, layer) == (Mvm.OPCODE, 0, 1, 1, 3, 0)
    n, scope, index, count = struct.unpack_from("<BBHH", data, 13)
    assert (n, scope, index, count) == (1, 1, 5, 2)
    assert data[-layout_of(Mvm).pad_bytes :] == bytes(layout_of(Mvm).pad_bytes)


def test_strings_are_indexed_in_order_of_first_use() -> None:
    strings: dict[str, int] = {}
    encode_tasks([_mvm(layer="b"), _mvm(layer="a"), _mvm(layer="b")], strings)
    assert strings == {"b": 0, "a": 1}


@pytest.mark.parametrize(
    ("task", "match"),
    [
        (_mvm(vectors=-1), r"task 0: Mvm field `vectors` must be an integer 0-4294967295, not -1"),
        (_mvm(weight_set=256), r"field `weight_set` must be an integer 0-255, not 256"),
        (_mvm(in_addr=1 << 64), r"field `in_addr` must be an integer 0-18446744073709551615"),
        (_mvm(vectors=1.5), r"field `vectors` must be an integer .*, not 1.5"),
        (_mvm(post="sigmoid"), r"field `post` must be one of none, requant, requant_lut"),
        (_mvm(tile=1 << 32), r"field `tile` must be an integer 0-4294967295"),
        (_mvm(frame_slot=70000), r"field `frame_slot` must be an integer 0-65535"),
        (_mvm(layer=7), r"field `layer` must be a string, not 7"),
        (_mvm(waits=(TokenRef(TokenScope.LOCAL, 70000),)), r"`waits` slot 0 index must be"),
        (_mvm(signals=(TokenRef(TokenScope.LOCAL, 1, -2),)), r"`signals` slot 0 count must be"),
        (_mvm(waits=((1, 2),)), r"`waits` slot 0 must be a TokenRef"),
    ],
)
def test_encode_rejects_out_of_range(task: Mvm, match: str) -> None:
    with pytest.raises(TasklistError, match=match):
        encode_tasks([task])


def test_encode_error_names_the_task_index() -> None:
    with pytest.raises(TasklistError, match=r"^task 2: Barrier field `core_mask`"):
        encode_tasks([_mvm(), _mvm(), Barrier(unit=Unit.CTRL, barrier_id=1, core_mask=256)])
    with pytest.raises(TasklistError, match=r"^task 12: "):
        encode_tasks([Barrier(unit=Unit.CTRL, barrier_id=1, core_mask=-1)], first_index=12)


def test_encode_rejects_wrong_unit_and_non_tasks() -> None:
    # A task built with a unit its kind cannot use (the dataclass check skipped).
    bad = _mvm()
    object.__setattr__(bad, "unit", Unit.DPU)
    with pytest.raises(TasklistError, match=r"Mvm unit must be one of mvm, not"):
        encode_tasks([bad])
    with pytest.raises(TasklistError, match=r"task must be one of the kinds"):
        encode_tasks(["not a task"])  # type: ignore[list-item]


def test_check_task_and_task_problem() -> None:
    assert task_problem(_mvm()) is None
    check_task(_mvm())
    with pytest.raises(TasklistError, match=r"^task 4: "):
        check_task(_mvm(icr=300), 4)


def _record(task: object) -> bytearray:
    return bytearray(encode_tasks([task], {}))


def test_decode_unknown_opcode() -> None:
    data = _record(_mvm())
    data[0] = 77
    with pytest.raises(
        TasklistError, match=r"^byte 0: task 0 opcode must be one of 1, 2, .*not 77"
    ):
        decode_tasks(bytes(data), 1, ["conv1"])


def test_decode_reports_file_offsets_and_indices() -> None:
    data = _record(_mvm()) * 3
    data[2 * RECORD_BYTES + 1] = 99  # unit of task 2
    at = 1000 + 2 * RECORD_BYTES + 1
    with pytest.raises(TasklistError, match=rf"^byte {at}: task 7 \(Mvm\) unit must be one of 0 "):
        decode_tasks(bytes(data), 3, ["conv1"], first_index=5, base_offset=1000)


def test_decode_bad_enum_layer_token_and_padding() -> None:
    post_at = kind_field_layouts(Mvm)["post"].offset
    data = _record(_mvm())
    data[post_at] = len(PostOp)
    with pytest.raises(
        TasklistError, match=rf"^byte {post_at}: .*`post` must be an index 0-{len(PostOp) - 1}"
    ):
        decode_tasks(bytes(data), 1, ["conv1"])

    two = encode_tasks([_mvm(layer="x"), _mvm(layer="y")], {})
    with pytest.raises(
        TasklistError,
        match=rf"^byte {RECORD_BYTES + 9}: task 1 .*layer must be a string index 0-0, not 1",
    ):
        decode_tasks(two, 2, ["x"])

    data = _record(_mvm())
    data[13] = 5  # waits.count beyond MAX_TOKEN_REFS
    with pytest.raises(TasklistError, match=r"^byte 13: .*`waits.count` must be 0-4, not 5"):
        decode_tasks(bytes(data), 1, ["conv1"])

    data = _record(_mvm())
    data[16] = 3  # a slot beyond waits.count must stay zero
    with pytest.raises(TasklistError, match=r"unused token slot `waits\[0\].index` must be 0"):
        decode_tasks(bytes(data), 1, ["conv1"])

    data = _record(_mvm())
    data[-1] = 1
    with pytest.raises(TasklistError, match=rf"^byte {RECORD_BYTES - 1}: .*padding must be 0"):
        decode_tasks(bytes(data), 1, ["conv1"])


def test_decode_truncated_records() -> None:
    data = bytes(_record(_mvm())) * 2
    with pytest.raises(
        TasklistError,
        match=rf"^byte 150: task {150 // RECORD_BYTES} is truncated: expected {RECORD_BYTES} bytes",
    ):
        decode_tasks(data[:150], 2, ["conv1"])


@given(st.binary(min_size=RECORD_BYTES, max_size=4 * RECORD_BYTES))
@settings(max_examples=examples(300), deadline=None)
def test_random_records_decode_or_raise_tasklist_error(raw: bytes) -> None:
    count = len(raw) // RECORD_BYTES
    try:
        tasks = decode_tasks(raw, count, ["a", "b"])
    except TasklistError:
        return
    # Whatever decodes is canonical: it re-encodes to the same bytes.
    assert encode_tasks(tasks, {"a": 0, "b": 1}) == raw[: count * RECORD_BYTES]


def test_decode_accepts_memoryview_and_offset() -> None:
    tasks = [
        _mvm(),
        DmaCopy(
            unit=Unit.DMA1, src_pool=Pool.DDR, src_addr=0, dst_pool=Pool.L1, dst_addr=64, bytes=4096
        ),
    ]
    strings: dict[str, int] = {}
    data = b"\xff" * 8 + encode_tasks(tasks, strings)
    assert decode_tasks(memoryview(data), 2, list(strings), offset=8) == tasks
