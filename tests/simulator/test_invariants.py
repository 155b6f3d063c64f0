"""Invariants on random DAG tasklists (hypothesis) and on fixed programs."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from helpers import dma, mvm, program
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from aipusim.arch import load_arch
from aipusim.isa.tasks import (
    DpuKind,
    DpuOp,
    DwpuKind,
    DwpuOp,
    Pool,
    TokenRef,
    TokenScope,
    Unit,
    WeightLoad,
)
from aipusim.simulator import simulate

ARCH = load_arch()
KINDS = ("mvm", "dpu", "dwpu", "dma0", "dma1", "sysdma", "wload")


def make_task(kind: str, size: int, waits: tuple, signals: tuple):
    common = {"waits": waits, "signals": signals}
    if kind == "mvm":
        return mvm(size, cols=64 * (1 + size % 8), **common)
    if kind == "dpu":
        return DpuOp(unit=Unit.DPU, kind=DpuKind.ADD, in_addr0=0, out_addr=0,
                     elements=64 * size, **common)  # fmt: skip
    if kind == "dwpu":
        return DwpuOp(unit=Unit.DWPU, kind=DwpuKind.DWCONV, in_addr=0, out_addr=0,
                      channels=64, h=size, w=8, out_h=size, out_w=8, kh=3, kw=3, stride=1,
                      **common)  # fmt: skip
    if kind == "wload":
        return WeightLoad(unit=Unit.WLOAD, weight_set=1, src_addr=0, bytes=1024 * size,
                          rows_used=512, cols_used=64, **common)  # fmt: skip
    src = Pool.DDR if size % 2 else Pool.L2
    return dma(Unit(kind), 4096 * size, src=src, dst=Pool.L1 if kind != "sysdma" else Pool.L2,
               **common)  # fmt: skip


@st.composite
def dag_programs(draw):
    """Tasks in one global order over 1-2 cores; tokens only from earlier to later tasks, one
    token per edge, so the program can never deadlock."""
    cores = draw(st.integers(1, 2))
    n = draw(st.integers(1, 24))
    specs = [
        (draw(st.integers(0, cores - 1)), draw(st.sampled_from(KINDS)), draw(st.integers(1, 40)))
        for _ in range(n)
    ]
    waits: dict[int, list] = defaultdict(list)
    signals: dict[int, list] = defaultdict(list)
    edges = []
    next_local = defaultdict(int)
    next_global = 0
    for j in range(1, n):
        for i in draw(st.lists(st.integers(0, j - 1), max_size=3, unique=True)):
            if len(waits[j]) >= 4 or len(signals[i]) >= 4:
                continue
            ci, cj = specs[i][0], specs[j][0]
            if ci == cj:
                if next_local[ci] >= ARCH.tokens.local_per_core:
                    continue
                ref = TokenRef(TokenScope.LOCAL, next_local[ci])
                next_local[ci] += 1
            else:
                if next_global >= ARCH.tokens.global_count:
                    continue
                ref = TokenRef(TokenScope.GLOBAL, next_global)
                next_global += 1
            waits[j].append(ref)
            signals[i].append(ref)
            edges.append((i, j))
    lists: dict[int, list] = {c: [] for c in range(cores)}
    index_on_core = {}
    for k, (c, kind, size) in enumerate(specs):
        index_on_core[k] = (c, len(lists[c]))
        lists[c].append(make_task(kind, size, tuple(waits[k]), tuple(signals[k])))
    edges_by_core = [(index_on_core[i], index_on_core[j]) for i, j in edges]
    frames = draw(st.integers(1, 3))
    hw = draw(st.booleans())
    return cores, lists, edges_by_core, frames, hw


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dag_programs())
def test_random_dags_run_causally_and_deterministically(case) -> None:
    cores, lists, edges, frames, hw = case
    prog = program(cores, use_hw_tokens=hw)
    res = simulate(prog, lists, arch=ARCH, frames=frames)
    again = simulate(prog, lists, arch=ARCH, frames=frames)
    assert res.events() == again.events()
    assert res.energy_mj_per_frame == again.energy_mj_per_frame
    assert res.total_cycles == again.total_cycles

    log = res.task_log
    log = log[log["task"] >= 0]
    assert len(log) == sum(len(t) for t in lists.values()) * frames
    when = {(r.core, r.frame, r.task): (r.start, r.end) for r in log.itertuples()}
    lat = ARCH.control.token_signal_latency_cycles
    for f in range(frames):
        # No time travel: a waiter starts after its producer's signal became visible...
        for (ci, ti), (cj, tj) in edges:
            assert when[(cj, f, tj)][0] >= when[(ci, f, ti)][1] + (lat if hw else 0)
        # ...and after its queue predecessor ended.
        for c, tasks in lists.items():
            last_end: dict[str, int] = {}
            for k, task in enumerate(tasks):
                s, e = when[(c, f, k)]
                assert s <= e
                assert s >= last_end.get(task.unit, 0)
                last_end[task.unit] = e
    for key, busy in res.busy_cycles.items():
        assert 0 <= busy <= res.total_cycles, key
    assert all(0 <= u <= 1 for u in res.utilization.values())
    assert np.all(res.device_latency_cycles >= res.lower_bound_cycles)


def test_busy_never_exceeds_elapsed_and_latency_meets_bound() -> None:
    tl = []
    for i in range(20):
        tl.append(dma(Unit.DMA0 if i % 2 else Unit.DMA1, 32768,
                      signals=(TokenRef(TokenScope.LOCAL, i % 2),)))  # fmt: skip
        tl.append(mvm(256, waits=(TokenRef(TokenScope.LOCAL, i % 2),)))
    res = simulate(program(1), {0: tl}, arch=ARCH, frames=4)
    assert res.utilization["mvm"] <= 1 and res.utilization["dma0"] <= 1
    for busy in res.busy_cycles.values():
        assert busy <= res.total_cycles
    macs = sum(t.macs for t in tl if hasattr(t, "macs"))
    ddr_bytes = 20 * 32768
    bound = max(macs / ARCH.mvm.macs_per_cycle, ddr_bytes / ARCH.ddr_bw_bytes_per_cycle())
    assert res.lower_bound_cycles == int(np.ceil(bound))
    assert res.device_latency_cycles.min() >= bound


def test_same_inputs_same_cycles_and_energy_bit_for_bit() -> None:
    tl = [mvm(100 + i, signals=(TokenRef(TokenScope.LOCAL, 0),)) for i in range(10)]
    tl += [dma(Unit.DMA0, 10000 + i, waits=(TokenRef(TokenScope.LOCAL, 0),)) for i in range(10)]
    prog = program(1, input_bytes=150528, output_bytes=4000)
    runs = [simulate(prog, {0: tl}, arch=ARCH, frames=5, levels="B,K,M,T") for _ in range(2)]
    a, b = runs
    assert a.total_cycles == b.total_cycles
    assert a.events() == b.events()
    assert a.energy_mj_per_frame == b.energy_mj_per_frame
    assert a.peak_power_w == b.peak_power_w
    assert a.power_timeline.equals(b.power_timeline)
