"""Throughput of task encoding and decoding (target: 1,000,000 tasks/s encode + decode).

Run: ``pytest tests/benchmarks/test_isa_bench.py --benchmark-only -s`` (on a shared
machine add ``--benchmark-timer time.process_time`` to count this process's CPU time
only; wall-clock figures swing with the load of other processes). Each benchmark
prints tasks per second for a 100,000-task mix shaped like a compiled convolution network
(DMA in, weight load, MVM, DPU op, token handshakes).

Two paths are measured: Task objects (`encode_tasks`/`decode_tasks`, bound by creating one
Python object per task) and columns (`encode_table`/`decode_table` of
`aipusim.isa.table`, vectorised with numpy; same bytes).
"""

from __future__ import annotations

import pytest

from aipusim.isa.encoding import decode_tasks, encode_tasks
from aipusim.isa.table import TaskTable, decode_table, encode_table
from aipusim.isa.tasklist import Tasklist, decode_tasklist, decode_tasklist_table, encode_tasklist
from aipusim.isa.tasks import (
    DmaCopy,
    DpuKind,
    DpuOp,
    Mvm,
    Pool,
    Task,
    TokenRef,
    TokenScope,
    TokenSignal,
    Unit,
    WeightLoad,
)

N_TASKS = 100_000


def _mix(n: int) -> list[Task]:
    tokens = [TokenRef(TokenScope.LOCAL, i) for i in range(8)]
    tasks: list[Task] = []
    tile = 0
    while len(tasks) < n:
        layer = f"/model/stage{tile % 7}/conv{tile % 23}/Conv"
        t_in, t_w, t_out = tokens[tile % 3], tokens[3 + tile % 2], tokens[5 + tile % 3]
        tasks += [
            DmaCopy(unit=Unit.DMA0, layer=layer, tile=tile, src_pool=Pool.DDR,
                    src_addr=0x4000_0000 + tile * 4096, dst_pool=Pool.L1,
                    dst_addr=0x30_0000_0000 + (tile % 4) * 65536, bytes=4096, rows=16,
                    src_stride=1024, dst_stride=256, signals=(t_in,)),
            WeightLoad(unit=Unit.WLOAD, layer=layer, tile=tile, weight_set=tile % 4,
                       src_addr=0x30_0010_0000, bytes=65536, rows_used=288, cols_used=64,
                       signals=(t_w,)),
            Mvm(unit=Unit.MVM, layer=layer, tile=tile, weight_set=tile % 4,
                in_addr=0x30_0000_0000, out_addr=0x30_0020_0000, vectors=784,
                rows_used=288, cols_used=64, waits=(t_in, t_w), signals=(t_out,)),
            DpuOp(unit=Unit.DPU, layer=layer, tile=tile, kind=DpuKind.ADD, in_addr0=0x100,
                  in_addr1=0x200, out_addr=0x300, elements=50176, operands=2,
                  waits=(t_out,)),
            TokenSignal(unit=Unit.CTRL, layer=layer, tile=tile, signals=(tokens[0],)),
        ]  # fmt: skip
        tile += 1
    return tasks[:n]


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return _mix(N_TASKS)


def _report(benchmark, what: str) -> None:
    rate = N_TASKS / benchmark.stats.stats.median
    benchmark.extra_info["tasks_per_s"] = round(rate)
    print(f"\n{what}: {rate:,.0f} tasks/s (median of {benchmark.stats.stats.rounds} rounds)")


def test_encode_throughput(benchmark, tasks: list[Task]) -> None:
    data = benchmark(lambda: encode_tasks(tasks, {}))
    assert len(data) > 0
    _report(benchmark, "encode_tasks")


def test_decode_throughput(benchmark, tasks: list[Task]) -> None:
    strings: dict[str, int] = {}
    data = encode_tasks(tasks, strings)
    names = list(strings)
    out = benchmark(lambda: decode_tasks(data, len(tasks), names))
    assert out == tasks
    _report(benchmark, "decode_tasks")


def test_encode_plus_decode_throughput(benchmark, tasks: list[Task]) -> None:
    def roundtrip() -> list[Task]:
        strings: dict[str, int] = {}
        data = encode_tasks(tasks, strings)
        return decode_tasks(data, len(tasks), list(strings))

    assert benchmark(roundtrip) == tasks
    _report(benchmark, "encode + decode")


def test_file_roundtrip_throughput(benchmark, tasks: list[Task]) -> None:
    tl = Tasklist(0, tasks)
    assert benchmark(lambda: decode_tasklist(encode_tasklist(tl))) == tl
    _report(benchmark, "encode_tasklist + decode_tasklist (CRC, string table)")


@pytest.fixture(scope="module")
def table(tasks: list[Task]) -> TaskTable:
    return TaskTable.from_tasks(tasks)


def test_table_encode_throughput(benchmark, tasks: list[Task], table: TaskTable) -> None:
    data = benchmark(lambda: encode_table(table, {}))
    assert data == encode_tasks(tasks, {})
    _report(benchmark, "encode_table")


def test_table_decode_throughput(benchmark, tasks: list[Task], table: TaskTable) -> None:
    strings: dict[str, int] = {}
    data = encode_tasks(tasks, strings)
    names = list(strings)
    out = benchmark(lambda: decode_table(data, len(tasks), names))
    assert out == table
    _report(benchmark, "decode_table")


def test_table_encode_plus_decode_throughput(
    benchmark, tasks: list[Task], table: TaskTable
) -> None:
    def roundtrip() -> TaskTable:
        strings: dict[str, int] = {}
        data = encode_table(table, strings)
        return decode_table(data, len(table), list(strings))

    assert benchmark(roundtrip) == table
    _report(benchmark, "encode_table + decode_table")


def test_file_decode_table_throughput(benchmark, tasks: list[Task], table: TaskTable) -> None:
    data = encode_tasklist(Tasklist(0, tasks))
    header, out = benchmark(lambda: decode_tasklist_table(data))
    assert out == table and header.task_count == len(tasks)
    _report(benchmark, "decode_tasklist_table (CRC, string table, checks; no encode)")
