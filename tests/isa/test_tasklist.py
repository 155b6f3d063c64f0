"""Tasklist files: header, CRC, string table, streaming, size accounting, corruption."""

from __future__ import annotations

import re
import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from isa_strategies import tasklists

from aipusim.arch import load_arch
from aipusim.base.errors import TasklistError
from aipusim.isa.encoding import RECORD_BYTES
from aipusim.isa.tasklist import (
    FORMAT_VERSION,
    HEADER_BYTES,
    MAGIC,
    Tasklist,
    decode_tasklist,
    encode_tasklist,
    find_tasklists,
    fits_l2_window,
    iter_tasklist_chunks,
    locate_byte_error,
    read_tasklist,
    read_tasklist_header,
    tasklist_path,
    tasklist_size_bytes,
    write_tasklist,
)
from aipusim.isa.tasks import (
    Barrier,
    DmaCopy,
    Mvm,
    Phase,
    Pool,
    TokenRef,
    TokenScope,
    TokenSignal,
    Unit,
)

L0 = TokenRef(TokenScope.LOCAL, 0)


def sample(core: int = 1) -> Tasklist:
    """A small hand-written tasklist: load, compute, hand over, sync."""
    return Tasklist(
        core,
        [
            DmaCopy(
                unit=Unit.DMA0,
                layer="conv1",
                phase=Phase.INIT,
                src_pool=Pool.DDR,
                src_addr=0x1000,
                dst_pool=Pool.L1,
                dst_addr=0x3000000000,
                bytes=9408,
                signals=(L0,),
            ),
            Mvm(
                unit=Unit.MVM,
                layer="conv1",
                tile=2,
                weight_set=0,
                in_addr=0,
                out_addr=4096,
                vectors=3136,
                rows_used=147,
                cols_used=64,
                waits=(L0,),
            ),
            Barrier(unit=Unit.CTRL, layer="sync 1", barrier_id=1, core_mask=0b11),
        ],
    )


def test_header_fields() -> None:
    data = encode_tasklist(sample(3))
    magic, version, core, rec, hdr, count, str_at, body, crc = struct.unpack_from(
        "<8sHHHHIIII", data
    )
    assert (magic, version, core, rec, hdr, count) == (
        MAGIC,
        FORMAT_VERSION,
        3,
        RECORD_BYTES,
        32,
        3,
    )
    assert str_at == HEADER_BYTES + 3 * RECORD_BYTES
    assert body == len(data) - HEADER_BYTES
    assert crc == zlib.crc32(data[HEADER_BYTES:])
    # string table: count, then length-prefixed UTF-8, in order of first use
    assert data[str_at:] == struct.pack("<IH", 2, 5) + b"conv1" + struct.pack("<H", 6) + b"sync 1"


@given(tasklists())
@settings(max_examples=examples(60), deadline=None)
def test_roundtrip_bytes(tl: Tasklist) -> None:
    data = encode_tasklist(tl)
    assert len(data) == tasklist_size_bytes(tl)
    back = decode_tasklist(data)
    assert back == tl
    assert encode_tasklist(back) == data


def test_write_read_file(tmp_path: Path) -> None:
    path = tasklist_path(tmp_path, 1)
    assert path.name == "core1.tasklist"
    size = write_tasklist(path, sample())
    assert size == path.stat().st_size == tasklist_size_bytes(sample())
    assert read_tasklist(path) == sample()
    header = read_tasklist_header(path)
    assert (header.core_id, header.task_count, header.file_bytes) == (1, 3, size)


def test_tasks_given_as_list_become_a_tuple() -> None:
    tl = Tasklist(0, [TokenSignal(unit=Unit.DMA0, signals=(L0,))])
    assert isinstance(tl.tasks, tuple)
    assert hash(tl) == hash(Tasklist(0, tl.tasks))


def test_core_id_range_and_layer_names() -> None:
    with pytest.raises(TasklistError, match=r"core_id must be an integer 0-65535, not 70000"):
        encode_tasklist(Tasklist(70000, []))
    bad = Tasklist(0, [TokenSignal(unit=Unit.DMA0, layer="a\udc80", signals=(L0,))])
    with pytest.raises(TasklistError, match=r"layer name must be valid Unicode text"):
        encode_tasklist(bad)
    long_name = Tasklist(0, [TokenSignal(unit=Unit.DMA0, layer="x" * 70000, signals=(L0,))])
    with pytest.raises(TasklistError, match=r"layer name must be at most 65535 bytes of UTF-8"):
        encode_tasklist(long_name)


def test_file_name_must_match_core_id(tmp_path: Path) -> None:
    path = tmp_path / "core2.tasklist"
    path.write_bytes(encode_tasklist(sample(3)))
    with pytest.raises(TasklistError, match=r"^byte 10: core id must be 2 \(the file is core2"):
        read_tasklist(path)
    other = tmp_path / "anything.bin"
    other.write_bytes(encode_tasklist(sample(3)))
    assert read_tasklist(other).core_id == 3


def test_missing_file() -> None:
    with pytest.raises(TasklistError, match=r"cannot read tasklist '/nonexistent/core0.tasklist'"):
        read_tasklist("/nonexistent/core0.tasklist")


@pytest.mark.parametrize(
    ("offset", "value", "match"),
    [
        (0, b"X", r"^byte 0: magic must be b'AIPUTL\\x00\\x00', not b'XIPUTL"),
        (3, b"x", r"^byte 3: magic must be"),
        (8, b"\x09", rf"^byte 8: format version must be {FORMAT_VERSION}, not 9"),
        (12, b"\x61", rf"^byte 12: record size must be {RECORD_BYTES}, not 97"),
        (14, b"\x21", r"^byte 14: header size must be 32, not 33"),
        (16, b"\x04", r"^byte 16: task count \(byte 16\) and string table offset"),
        (20, b"\x01", r"^byte 20: task count \(byte 16\) and string table offset"),
        (25, b"\x00", r"^byte 25: body size \(byte 24\) must be"),
    ],
)
def test_bad_header(offset: int, value: bytes, match: str) -> None:
    data = bytearray(encode_tasklist(sample()))
    data[offset : offset + len(value)] = value
    with pytest.raises(TasklistError, match=match):
        decode_tasklist(bytes(data))


def test_crc_mismatch_names_the_corrupted_byte() -> None:
    data = bytearray(encode_tasklist(sample()))
    at = HEADER_BYTES + RECORD_BYTES + 20  # inside task 1
    data[at] ^= 0x10
    with pytest.raises(
        TasklistError,
        match=rf"^byte {at}: body CRC32 must be 0x[0-9a-f]{{8}} \(header byte 28\), not "
        rf".*byte {at} \(task 1, field `waits\[1\].index`\) has bits 0x10 flipped",
    ):
        decode_tasklist(bytes(data))


def test_crc_field_corruption_and_multi_byte_damage() -> None:
    data = bytearray(encode_tasklist(sample()))
    data[29] ^= 0xFF
    with pytest.raises(TasklistError, match=r"^byte 29: body CRC32 must be"):
        decode_tasklist(bytes(data))
    data = bytearray(encode_tasklist(sample()))
    data[40] ^= 1
    data[140] ^= 1
    with pytest.raises(TasklistError, match=r"^byte 32-\d+: body CRC32 .* corrupted"):
        decode_tasklist(bytes(data))


def test_every_flipped_bit_is_caught_with_its_offset(tmp_path: Path) -> None:
    data = encode_tasklist(sample())
    path = tmp_path / "core1.tasklist"
    for pos in range(len(data)):
        for bit in (0, 3, 7):  # low, middle and high bits of every byte
            bad = bytearray(data)
            bad[pos] ^= 1 << bit
            path.write_bytes(bytes(bad))
            with pytest.raises(TasklistError) as info:
                read_tasklist(path)
            offsets = [int(m) for m in re.findall(r"byte (\d+)", str(info.value))]
            assert pos in offsets, (pos, bit, str(info.value))


def test_locate_byte_error_finds_any_position() -> None:
    body = bytes(range(256)) * 8
    for pos, mask in [(0, 1), (17, 0xFF), (1000, 0x80), (len(body) - 1, 0x3C)]:
        bad = bytearray(body)
        bad[pos] ^= mask
        found = locate_byte_error(len(body), zlib.crc32(body), zlib.crc32(bytes(bad)))
        assert found == (pos, mask)
    assert locate_byte_error(10, 5, 5) is None


def test_every_truncation_raises() -> None:
    data = encode_tasklist(sample())
    for n in range(len(data)):
        with pytest.raises(TasklistError, match=r"^byte \d+"):
            decode_tasklist(data[:n])
    with pytest.raises(TasklistError, match=r"^byte 24: body size"):
        decode_tasklist(data + b"\0")


def test_truncated_file_names_its_end() -> None:
    data = encode_tasklist(sample())
    with pytest.raises(TasklistError, match=rf"^byte 200: file is truncated: .* {len(data)} bytes"):
        decode_tasklist(data[:200])
    with pytest.raises(TasklistError, match=r"^byte 10: file is truncated: expected a 32-byte"):
        decode_tasklist(data[:10])


def _rewrap(data: bytes, body: bytes) -> bytes:
    """The same header over a new body (CRC and sizes updated)."""
    head = bytearray(data[:HEADER_BYTES])
    struct.pack_into("<II", head, 24, len(body), zlib.crc32(body))
    return bytes(head) + body


def test_string_table_problems() -> None:
    data = encode_tasklist(sample())
    str_at = HEADER_BYTES + 3 * RECORD_BYTES
    records, table = data[HEADER_BYTES:str_at], data[str_at:]
    reordered = bytearray(records)
    struct.pack_into("<I", reordered, 9, 1)  # task 0 now uses "sync 1", stored second
    with pytest.raises(
        TasklistError, match=r"^byte 41: task 0 must use string 0 \('conv1', layer names are"
    ):
        decode_tasklist(_rewrap(data, bytes(reordered) + table))
    extra = struct.pack("<I", 3) + table[4:] + struct.pack("<H", 1) + b"z"
    with pytest.raises(TasklistError, match=r"string table must hold only used layer names"):
        decode_tasklist(_rewrap(data, records + extra))
    bad_utf8 = struct.pack("<IH", 2, 5) + b"conv\xff" + table[4 + 2 + 5 :]
    with pytest.raises(TasklistError, match=rf"^byte {str_at + 6 + 4}: string 0 must be UTF-8"):
        decode_tasklist(_rewrap(data, records + bad_utf8))
    too_long = struct.pack("<IH", 2, 500) + table[6:]
    with pytest.raises(TasklistError, match=r"string 0 must fit the file"):
        decode_tasklist(_rewrap(data, records + too_long))
    with pytest.raises(TasklistError, match=r"must end after the 2 strings"):
        decode_tasklist(_rewrap(data, records + table + b"\0"))


@given(st.binary(max_size=400))
@settings(max_examples=examples(300), deadline=None)
def test_random_bytes_raise_only_tasklist_error(raw: bytes) -> None:
    with pytest.raises(TasklistError):
        decode_tasklist(raw)


@given(st.binary(max_size=RECORD_BYTES * 3 + 40), st.integers(0, 3))
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_bodies_behind_a_valid_header(body: bytes, count: int) -> None:
    """Random bodies with a consistent header and CRC reach the record and string parsers."""
    head = struct.pack(
        "<8sHHHHIIII",
        MAGIC,
        1,
        0,
        RECORD_BYTES,
        HEADER_BYTES,
        count,
        HEADER_BYTES + count * RECORD_BYTES,
        len(body),
        zlib.crc32(body),
    )
    try:
        tl = decode_tasklist(head + body)
    except TasklistError:
        return
    assert encode_tasklist(tl) == head + body


def test_streaming_chunks(tmp_path: Path) -> None:
    sig = [TokenSignal(unit=Unit.DMA0, layer=f"l{i % 3}", signals=(L0,)) for i in range(25)]
    tl = Tasklist(0, sig)
    path = tasklist_path(tmp_path, 0)
    size = write_tasklist(path, tl)
    resident = size - 25 * RECORD_BYTES
    window = resident + 4 * RECORD_BYTES + 50
    chunks = list(iter_tasklist_chunks(path, window_bytes=window))
    assert [len(c.tasks) for c in chunks] == [4] * 6 + [1]
    assert [c.first_index for c in chunks] == list(range(0, 25, 4))
    assert all(c.size_bytes == len(c.tasks) * RECORD_BYTES for c in chunks)
    assert tuple(t for c in chunks for t in c.tasks) == tl.tasks
    # the default window is the arch's L2 tasklist window: one chunk here
    [whole] = list(iter_tasklist_chunks(path))
    assert whole.tasks == list(tl.tasks)


def test_streaming_errors(tmp_path: Path) -> None:
    path = tasklist_path(tmp_path, 1)
    write_tasklist(path, sample())
    with pytest.raises(TasklistError, match=r"window_bytes must hold the header and string table"):
        list(iter_tasklist_chunks(path, window_bytes=100))
    data = bytearray(path.read_bytes())
    data[HEADER_BYTES + 5] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(TasklistError, match=rf"^byte {HEADER_BYTES + 5}: body CRC32.*`tile`"):
        next(iter_tasklist_chunks(path, window_bytes=4096))
    data[HEADER_BYTES + 5] ^= 1
    data[HEADER_BYTES + 60] ^= 0xFF  # DmaCopy src_addr, a kind-specific field
    path.write_bytes(bytes(data))
    with pytest.raises(TasklistError, match=r"\(task 0, field `src_addr`\)"):
        next(iter_tasklist_chunks(path, window_bytes=4096))
    with pytest.raises(TasklistError, match=r"\(task 0, field `src_addr`\)"):
        read_tasklist(path)
    (tmp_path / "core2.tasklist").write_bytes(b"AIPU")
    with pytest.raises(TasklistError, match=r"^byte 4: file is truncated"):
        next(iter_tasklist_chunks(tmp_path / "core2.tasklist", window_bytes=4096))


def test_streaming_catches_bad_records_with_file_offsets(tmp_path: Path) -> None:
    tl = sample()
    data = bytearray(encode_tasklist(tl))
    at = HEADER_BYTES + 2 * RECORD_BYTES  # opcode of task 2
    data[at] = 200
    body = bytes(data[HEADER_BYTES:])
    struct.pack_into("<I", data, 28, zlib.crc32(body))
    path = tasklist_path(tmp_path, 1)
    path.write_bytes(bytes(data))
    window = len(data) - 3 * RECORD_BYTES + RECORD_BYTES
    chunks = iter_tasklist_chunks(path, window_bytes=window)
    assert len(next(chunks).tasks) == 1
    assert len(next(chunks).tasks) == 1
    with pytest.raises(TasklistError, match=rf"^byte {at}: task 2 opcode must be one of"):
        next(chunks)


def test_size_accounting_and_l2_window() -> None:
    arch = load_arch()
    window = arch.l2.tasklist_reserved_bytes_per_core
    small = sample()
    assert tasklist_size_bytes(small) == len(encode_tasklist(small))
    assert fits_l2_window(small, arch)
    n = window // RECORD_BYTES + 1
    big = Tasklist(0, [TokenSignal(unit=Unit.DMA0, signals=(L0,))] * n)
    assert tasklist_size_bytes(big) > window
    assert not fits_l2_window(big, arch)
    assert fits_l2_window(window) and not fits_l2_window(window + 1)
    assert fits_l2_window(big, arch, window_bytes=4 * window)
    assert not fits_l2_window(small, window_bytes=100)


def test_find_tasklists_orders_by_core(tmp_path: Path) -> None:
    for core in (10, 2, 0):
        write_tasklist(tasklist_path(tmp_path, core), Tasklist(core, []))
    (tmp_path / "model.json").write_text("{}")
    assert [p.name for p in find_tasklists(tmp_path)] == [
        "core0.tasklist",
        "core2.tasklist",
        "core10.tasklist",
    ]
