"""Per-layer busy, span, wait and critical unit on hand-written traces, hand-computed; and
their invariants on a simulated run."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from aipusim.profiler import layer_table, load_trace, slowest_layers
from aipusim.profiler.critical import critical_resources, predecessors, resource_of
from aipusim.profiler.exclusive import exclusive_cycles
from aipusim.profiler.grouping import last_rows, sort_rows
from aipusim.profiler.layers import layer_samples

# Two cores of one instance, token latency 2 cycles (1 MHz: a cycle is a µs).
HEADER = (
    "# aipusim-trace 1 freq_hz=1000000 cores=2 model=two levels=B,PB,PE,K,M "
    "instance_cores=2 token_latency_cycles=2"
)


def test_several_layers_at_once_the_earliest_issued_holds_the_instant(write_trace) -> None:
    # core 0: layer a's mvm [0, 10) (task 1) and layer b's dma [4, 20) (task 2) overlap on
    # [4, 10): those instants go to a (issued first); b is busy [10, 20) and waits [4, 10).
    text = (
        f"{HEADER}\n"
        "[PB] t=0 core=0 frame=0 layer=a op=Conv macs=500\n"
        "[K]  core=0 unit=mvm frame=0 layer=a task=1 tile=0 start=0 end=10 macs=800\n"
        "[PB] t=4 core=0 frame=0 layer=b op=Add macs=0\n"
        "[M]  core=0 unit=dma0 frame=0 layer=b task=2 src=l1 dst=l2 bytes=64 start=4 end=20\n"
    )
    t = layer_table(load_trace(write_trace(text))).set_index("layer")
    assert list(t.index) == ["a", "b"]  # tasklist order
    assert (t.loc["a", "busy_us"], t.loc["a", "span_us"], t.loc["a", "wait_us"]) == (10, 10, 0)
    assert (t.loc["b", "busy_us"], t.loc["b", "span_us"], t.loc["b", "wait_us"]) == (10, 16, 6)
    assert t.loc["b", "dma_us"] == 10.0 and t.loc["a", "mvm_us"] == 10.0
    # network MACs from [PB], array (padded) MACs from [K]
    assert (t.loc["a", "macs"], t.loc["a", "array_macs"]) == (500, 800)
    # the core's busy time is its busy cycles, counted once
    assert t["busy_us"].sum() == 20.0


def test_the_critical_path_crosses_cores_and_links(write_trace) -> None:
    # core 0: a DDR -> L2 transfer [0, 30) (layer load). core 1, layer c: a weight load
    # [32, 40), released by that transfer over a global token (30 + 2), then the MVM
    # [42, 56), released by the weight load (40 + 2).
    text = (
        f"{HEADER}\n"
        "[M]  core=0 unit=dma0 frame=0 layer=load task=1 src=ddr dst=l2 bytes=900 start=0 end=30\n"
        "[K]  core=1 unit=wload frame=0 layer=c task=1 tile=0 start=32 end=40 macs=0\n"
        "[K]  core=1 unit=mvm frame=0 layer=c task=2 tile=0 start=42 end=56 macs=100\n"
    )
    t = layer_table(load_trace(write_trace(text))).set_index("layer")
    c = t.loc["c"]
    # span [32, 56): wload 8 + the 2-cycle hand-over, mvm 14; busy 22, waiting 2
    assert (c["span_us"], c["busy_us"], c["wait_us"]) == (24, 22, 2)
    assert (c["critical_unit"], c["critical_pct"]) == ("mvm", pytest.approx(100 * 14 / 24))
    # the transfer's own layer waited on DDR
    assert t.loc["load", "critical_unit"] == "ddr"
    samples = layer_samples(load_trace(write_trace(text))).set_index("layer")
    assert samples.loc["c", "critical"] == {"mvm": 14.0, "wload": 10.0}


def test_a_chain_back_across_cores_finds_the_link() -> None:
    # tasks: 0 ddr transfer on core 0 [0, 100); 1 mvm on core 1 [102, 110) released by it
    start, end = np.array([0, 102]), np.array([100, 110])
    pred = predecessors(
        core=np.array([0, 1]),
        unit=np.array([0, 1]),
        start=start,
        end=end,
        instance=np.array([0, 0]),
        token_latency=2,
    )
    assert pred.tolist() == [-1, 0]
    resource = np.array(["ddr", "mvm"], dtype=object)
    # a sample spanning [0, 110) ending with the mvm: 100 ddr + 2 hand-over + 8 mvm
    assert critical_resources(pred, resource, start, end, 1, 0) == {"ddr": 102.0, "mvm": 8.0}
    # other instances' tasks never release a task
    apart = predecessors(np.array([0, 1]), np.array([0, 1]), start, end, np.array([0, 1]), 2)
    assert apart.tolist() == [-1, -1]


def test_a_task_nothing_released_waited_on_dispatch() -> None:
    pred = np.array([-1])
    found = critical_resources(pred, np.array(["dpu"]), np.array([30]), np.array([40]), 0, 20)
    assert found == {"dpu": 10.0, "dispatch": 10.0}


def test_resources() -> None:
    assert [resource_of("pcie_h2d", "host", "ddr"), resource_of("dma1", "l1", "l1")] == [
        "pcie",
        "dma1",
    ]


def test_one_core_instances_skip_the_instance_search_with_the_same_result() -> None:
    """With one core per instance the instance search is skipped; labelling the same
    instances differently (so that it runs) finds the same predecessors."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 30))
        core, unit = rng.integers(0, 3, n), rng.integers(0, 3, n)
        start = rng.integers(0, 25, n)
        end = start + rng.integers(0, 6, n)
        latency = int(rng.integers(0, 3))
        skipped = predecessors(core, unit, start, end, core, latency)
        searched = predecessors(core, unit, start, end, core + 100, latency)
        assert skipped.tolist() == searched.tolist()


def test_a_samples_last_task_is_the_latest_end_then_task_then_row() -> None:
    # sample 0: rows 10 and 11 both end at 9 -> the higher task (11, task 5); sample 1:
    # rows 12 and 13 tie on end and task -> the later row (13)
    mine = pd.DataFrame(
        {"task": [1, 5, 3, 2, 2], "end": [4, 9, 9, 7, 7]}, index=[9, 11, 10, 12, 13]
    )
    group = np.array([0, 0, 0, 1, 1])
    task, end, rows = mine["task"].to_numpy(), mine["end"].to_numpy(), mine.index.to_numpy()
    assert last_rows(group, task, end, rows, 2).tolist() == [11, 13]
    empty = np.zeros(0, np.int64)
    assert last_rows(empty, empty, empty, empty, 0).tolist() == []


def test_exclusive_cycles_count_each_instant_of_a_core_once() -> None:
    core = np.array([0, 0, 0, 1])
    unit = np.array([0, 1, 2, 0])
    prio = np.array([5, 1, 3, 0])  # task 1 issued first on core 0
    start, end = np.array([0, 5, 5, 0]), np.array([10, 8, 20, 4])
    got = exclusive_cycles(core, unit, prio, start, end)
    # [0, 5) task 0; [5, 8) task 1 (first issued); [8, 20): task 2 (3 before 5); core 1 alone
    assert got.tolist() == [5.0, 3.0, 12.0, 4.0]
    assert got[:3].sum() == 20  # core 0 busy [0, 20)


def _exclusive_by_queue(core, unit, priority, start, end) -> np.ndarray:
    """The rule of `exclusive_cycles` spelled out: per core, per elementary segment, each
    queue's latest-started task that started by then and has not ended is a candidate;
    the lowest priority (then unit) wins."""
    out = np.zeros(len(start))
    for c in np.unique(core):
        on_core = np.flatnonzero(core == c)
        cuts = np.unique(np.concatenate([start[on_core], end[on_core]]))
        for lo, hi in itertools.pairwise(cuts):
            best = None
            for u in np.unique(unit[on_core]):
                mine = on_core[unit[on_core] == u]
                mine = mine[np.argsort(start[mine], kind="stable")]
                began = mine[start[mine] <= lo]
                if len(began) and end[began[-1]] > lo:
                    key = (priority[began[-1]], u)
                    if best is None or key < best[0]:
                        best = (key, began[-1])
            if best is not None:
                out[best[1]] += hi - lo
    return out


def test_exclusive_cycles_follow_the_queue_rule_on_random_tasks() -> None:
    """Overlaps within a queue, zero-length and backwards tasks, equal priorities."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(1, 25))
        core, unit = rng.integers(0, 3, n), rng.integers(0, 4, n) * 5 - 2
        prio = rng.integers(-3, 6, n)
        start = rng.integers(-2, 30, n)
        end = start + rng.integers(-2, 12, n)
        expected = _exclusive_by_queue(core, unit, prio, start, end)
        assert exclusive_cycles(core, unit, prio, start, end).tolist() == expected.tolist()


def test_exclusive_cycles_of_times_too_wide_to_key_together() -> None:
    core, unit = np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])
    prio = np.array([2**62, -(2**62), 5, 1])
    start = np.array([0, 5, 10**18, 10**18 + 3])
    end = np.array([10, 8, 10**18 + 10, 10**18 + 4])
    assert exclusive_cycles(core, unit, prio, start, end).tolist() == [7.0, 3.0, 9.0, 1.0]


def test_slowest_layers_rank_by_busy(write_trace) -> None:
    text = (
        f"{HEADER}\n"
        "[K]  core=0 unit=mvm frame=0 layer=a task=1 tile=0 start=0 end=10 macs=8\n"
        "[K]  core=0 unit=dpu frame=0 layer=b task=2 tile=0 start=10 end=40 macs=0\n"
    )
    top = slowest_layers(layer_table(load_trace(write_trace(text))))
    assert top["layer"].tolist() == ["b", "a"] and top["unit"].tolist() == ["dpu", "mvm"]


@pytest.mark.parametrize("mode", ["batch", "cooperative", "pipeline"])
def test_busy_of_a_cores_layers_fits_its_frame_time(tmp_path: Path, mode: str) -> None:
    """On a simulated run of hand-written tasklists: for each core and frame the layers'
    busy time adds up to at most the frame's time on the core, and busy <= span."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "simulator"))
    from helpers import dma, mvm, program, tok

    from aipusim.isa.program import MulticoreMode
    from aipusim.isa.tasks import Pool, Unit
    from aipusim.simulator import simulate

    tasks = []
    for i, layer in enumerate(("l0", "l1", "l2")):
        tasks += [
            dma(Unit.DMA0, 65536, signals=(tok(0),), layer=layer, tile=i),
            mvm(300, waits=(tok(0),), signals=(tok(1),), layer=layer, tile=i),
            dma(Unit.DMA1, 8192, Pool.L1, Pool.L2, waits=(tok(1),), layer=layer, tile=i),
        ]
    prog = program(2, MulticoreMode(mode))
    trace = tmp_path / "run.trace"
    simulate(prog, {0: tasks, 1: tasks}, frames=4, levels="B,PB,PE,K,M", trace_path=trace)
    tr = load_trace(trace)
    samples = layer_samples(tr)
    spans = samples.groupby(["core", "frame"]).agg(lo=("start", "min"), hi=("end", "max"))
    busy = samples.groupby(["core", "frame"])["busy"].sum()
    assert (busy <= spans["hi"] - spans["lo"]).all()
    assert (samples["busy"] <= samples["end"] - samples["start"]).all()
    # every layer waited on something the walk could name
    assert set(layer_table(tr)["critical_unit"]) <= {"ddr", "l2", "mvm", "dispatch"}


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(-3, 3), st.integers(-(2**40), 2**40), st.integers(0, 2)),
        max_size=30,
    ),
    st.booleans(),
)
def test_sort_rows_is_lexsort(rows: list[tuple[int, int, int]], wide: bool) -> None:
    keys = [np.array(k, dtype=np.int64) for k in zip(*rows, strict=True)] or [np.zeros(0)] * 3
    if wide and rows:  # ranges too wide to combine: lexsort itself
        keys[0] = keys[0] << 40
    assert sort_rows(*keys).tolist() == np.lexsort(keys[::-1]).tolist()
