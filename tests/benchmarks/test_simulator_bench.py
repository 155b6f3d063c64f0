"""Simulator speed: simulated tasks per second on large synthetic tasklists, and peak RSS.

Each synthetic case is written as a compiled folder and simulated from there, the way
`aipusim simulate` runs a compiled model, so the figure includes reading and decoding the
tasklists.

Run with ``pytest tests/benchmarks/test_simulator_bench.py --benchmark-only -s``. The figures
are printed; nothing here asserts on time.
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "simulator"))

from helpers import dma, mvm, program, tok

from aipusim.arch import load_arch
from aipusim.isa.program import MulticoreMode, save_program
from aipusim.isa.tasklist import Tasklist, write_tasklist
from aipusim.isa.tasks import DpuKind, DpuOp, Pool, Unit
from aipusim.simulator import simulate


def pipelined_layer(n_tasks: int, layer: str = "conv") -> list:
    """The shape a compiler emits: DMA-in tiles double-buffered against MVM + DPU, with
    buffer-free tokens back to the DMA, and DMA-out of results."""
    out: list = []
    i = 0
    while len(out) < n_tasks:
        buf = i % 2
        refill = (tok(4 + buf),) if i >= 2 else ()
        out.append(dma(Unit.DMA0, 16384, waits=refill, signals=(tok(buf),), layer=layer, tile=i))
        out.append(mvm(64, waits=(tok(buf),), signals=(tok(2 + buf),), layer=layer, tile=i))
        out.append(
            DpuOp(unit=Unit.DPU, kind=DpuKind.ADD, in_addr0=0, out_addr=0, elements=4096,
                  waits=(tok(2 + buf),), signals=(tok(6 + buf),), layer=layer, tile=i)
        )  # fmt: skip
        out.append(
            dma(Unit.DMA1, 4096, src=Pool.L1, dst=Pool.DDR, waits=(tok(6 + buf),),
                signals=(tok(4 + buf),), layer=layer, tile=i)
        )  # fmt: skip
        i += 1
    return out


def serial_chain(n_tasks: int) -> list:
    """Worst case: every task waits for the one before it on another unit."""
    out: list = []
    i = 0
    while len(out) < n_tasks:
        out.append(dma(Unit.DMA0, 8192, waits=(tok(2),) if i else (), signals=(tok(0),)))
        out.append(mvm(64, waits=(tok(0),), signals=(tok(1),)))
        out.append(
            DpuOp(unit=Unit.DPU, kind=DpuKind.ADD, in_addr0=0, out_addr=0, elements=4096,
                  waits=(tok(1),), signals=(tok(2),))
        )  # fmt: skip
        i += 1
    return out


def _write_folder(folder: Path, prog, lists) -> Path:  # type: ignore[no-untyped-def]
    """A compiled folder of ``lists``, as the compiler leaves one."""
    folder.mkdir(parents=True)
    save_program(prog, folder)
    for core, tasks in lists.items():
        write_tasklist(folder / f"core{core}.tasklist", Tasklist(core, tasks))
    return folder


def _timed(what, **kw) -> tuple:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    c0 = time.process_time()
    res = simulate(what, **kw)
    return res, time.perf_counter() - t0, time.process_time() - c0


def _measure(name: str, prog, lists, frames: int, tmp_path: Path) -> dict:  # type: ignore[no-untyped-def]
    """Simulated tasks per second of ``simulate`` on a compiled folder (what `aipusim
    simulate` does: read, check, decode, prepare, run, result), and on the same tasks given
    as `Task` objects (which adds their conversion to columns by the object codec)."""
    arch = load_arch()
    folder = _write_folder(tmp_path / "compiled_model", prog, lists)
    res, wall, cpu = _timed(folder, arch=arch, frames=frames)
    tasks = res.event_counts["tasks"]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"\n[sim-bench] {name}: {tasks:,} tasks simulated from the compiled folder in "
        f"{wall:.2f} s wall ({cpu:.2f} s CPU) = {tasks / wall:,.0f} tasks/s wall, "
        f"{tasks / cpu:,.0f} tasks/s CPU (target >= 300,000); {res.total_cycles:,} cycles; "
        f"peak RSS {rss:.0f} MiB"
    )
    res2, wall2, cpu2 = _timed(prog, tasklists=lists, arch=arch, frames=frames)
    assert res2.total_cycles == res.total_cycles  # the two paths run the same tasks
    print(
        f"[sim-bench] {name}: from Task objects {wall2:.2f} s wall ({cpu2:.2f} s CPU) = "
        f"{tasks / wall2:,.0f} tasks/s wall"
    )
    return {"tasks": tasks, "wall": wall, "cpu": cpu}


@pytest.mark.benchmark(group="simulator")
def test_bench_200k_pipelined_one_frame(benchmark, tmp_path: Path) -> None:
    lists = {0: pipelined_layer(200_000)}
    args = ("200k pipelined, 1 core, 1 frame", program(1), lists, 1, tmp_path)
    benchmark.pedantic(_measure, args=args, rounds=1)


@pytest.mark.benchmark(group="simulator")
def test_bench_4_cores_50k_each_8_frames(benchmark, tmp_path: Path) -> None:
    lists = {c: pipelined_layer(50_000, f"l{c}") for c in range(4)}
    prog = program(4, MulticoreMode.BATCH)
    args = ("4 cores x 50k, batch, 8 frames", prog, lists, 8, tmp_path)
    benchmark.pedantic(_measure, args=args, rounds=1)


@pytest.mark.benchmark(group="simulator")
def test_bench_200k_serial_chain(benchmark, tmp_path: Path) -> None:
    lists = {0: serial_chain(200_000)}
    args = ("200k serial chain (worst case), 1 frame", program(1), lists, 1, tmp_path)
    benchmark.pedantic(_measure, args=args, rounds=1)


@pytest.mark.benchmark(group="simulator")
def test_bench_resnet50_4_cores_8_frames(benchmark, tmp_path: Path) -> None:
    """Target: <= 20 s wall for ResNet-50 on 4 cores (cooperative), 8 frames."""
    from aipusim.cli.main import main

    onnx_path = tmp_path / "resnet50.onnx"
    assert main(["zoo", "export", "resnet50", "-o", str(onnx_path)]) == 0
    out = tmp_path / "r50"
    flags = ["--aipu-cores", "4", "--set", "multicore_mode=cooperative"]
    assert main(["compile", "-i", str(onnx_path), "-o", str(out), *flags]) == 0

    def run() -> None:
        t0 = time.perf_counter()
        c0 = time.process_time()
        res = simulate(out / "compiled_model", frames=8)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"\n[sim-bench] ResNet-50, 4 cores cooperative, 8 frames: {wall:.2f} s wall "
            f"({cpu:.2f} s CPU), {res.event_counts['tasks']:,} tasks, {res.fps:.1f} FPS, "
            f"p50 {res.latency_us_p50:.0f} us; peak RSS {rss:.0f} MiB (target <= 20 s)"
        )

    benchmark.pedantic(run, rounds=1)


#: Rounds of the zoo throughput benchmark: the machine is shared, so its median is quoted.
ZOO_ROUNDS = 5


@pytest.mark.benchmark(group="simulator")
def test_bench_zoo_resnet50_tasks_per_second(benchmark, tmp_path: Path) -> None:
    """Simulated tasks per second on a compiled zoo model (ResNet-50, 224 px, the default
    single core, 64 frames: about 31k tasks, most of them multi-burst DMA transfers), the
    median of several runs from the compiled folder, as `aipusim simulate` runs it."""
    from aipusim.cli.main import main

    onnx_path = tmp_path / "resnet50.onnx"
    assert main(["zoo", "export", "resnet50", "-o", str(onnx_path)]) == 0
    out = tmp_path / "r50"
    assert main(["compile", "-i", str(onnx_path), "-o", str(out)]) == 0
    folder = out / "compiled_model"
    simulate(folder, frames=1)  # imports and first-use caches outside the timing
    rates: list[float] = []

    def run() -> None:
        res, wall, cpu = _timed(folder, frames=64)
        rates.append(res.event_counts["tasks"] / wall)
        print(
            f"\n[sim-bench] ResNet-50 zoo, 1 core, 64 frames: {res.event_counts['tasks']:,} "
            f"tasks in {wall:.2f} s wall ({cpu:.2f} s CPU) = {rates[-1]:,.0f} tasks/s"
        )

    benchmark.pedantic(run, rounds=ZOO_ROUNDS)
    median = sorted(rates)[len(rates) // 2]
    print(f"[sim-bench] ResNet-50 zoo: median {median:,.0f} tasks/s of {len(rates)} runs")
    benchmark.extra_info["median_tasks_per_s"] = median
