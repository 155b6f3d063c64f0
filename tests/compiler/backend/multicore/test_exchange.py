"""Cooperative activations in L1: a copy per core, the rows a neighbour reads multicast
core to core, the fallback to L2, and one weight fetch multicast to a row split's cores."""

from __future__ import annotations

import pytest
from backend_helpers import ARCH, check_ok, compile_backend, halo_graph

from aipusim.compiler import CompilerConfig
from aipusim.compiler.backend.common.layout import Split
from aipusim.compiler.backend.lower.layer import LayerPlan, LayerUnit
from aipusim.compiler.backend.multicore.exchange import l1_exchange_tensors, part_destinations
from aipusim.compiler.backend.run import run_backend
from aipusim.compiler.backend.schedule.steps import Residency
from aipusim.compiler.ir import Graph
from aipusim.isa.tasks import DmaCopy, Phase, Pool


def _coop(graph: Graph, cores: int, **kw: object):
    cfg = CompilerConfig(
        multicore_mode="cooperative",
        aipu_cores_used=cores,
        resources_used=0.25 * cores,
        tiling_depth=1,
        **kw,
    )
    r = run_backend(graph, cfg, ARCH)
    check_ok(r)
    return r


def _exchanges(r) -> list[tuple[int, int, int, int]]:
    """(issuing core, L1 address, bytes, destination mask) of every L1 -> L1 multicast."""
    return [
        (core, t.src_addr, t.bytes, t.dst_core_mask)
        for core, tasks in r.tasks.items()
        for t in tasks
        if isinstance(t, DmaCopy) and t.src_pool is Pool.L1 and t.dst_pool is Pool.L1
        and t.dst_core_mask and t.phase is Phase.FRAME
    ]  # fmt: skip


def test_a_row_part_goes_to_a_neighbour_only_where_its_window_reaches() -> None:
    # 8 rows on 2 cores: core 0 computes rows 0-3, core 1 rows 4-7; a 3x3 window (pad 1)
    # over rows 4-7 reads rows 3-8 (clipped: 3-7), over rows 0-3 reads rows 0-4
    needs = [[(0, 5), (3, 8)]]
    assert part_destinations(needs, 0, (0, 4)) == {1: (3, 4)}
    assert part_destinations(needs, 1, (4, 8)) == {0: (4, 5)}
    # a 1x1 reader (each core its own rows) needs nothing from the other core
    assert part_destinations([[(0, 4), (4, 8)]], 0, (0, 4)) == {}
    # a channel split reads every row: each core's slice goes to all the others
    assert part_destinations([[(0, 8)] * 3], 1, (0, 8)) == {0: (0, 8), 2: (0, 8)}


def test_two_cores_of_a_row_split_swap_one_halo_row_each() -> None:
    r = _coop(halo_graph(8, 8), 2)
    assert r.layout.splits == {0: Split.ROWS, 1: Split.ROWS}
    buf = r.memory.buffer_of("x1", -1)
    assert buf.pool is Pool.L1 and buf.l1_cores == (0, 1)
    row = 8 * 8  # 8 pixels of 8 int8 channels
    # core 0 sends its last row (3) to core 1, core 1 its first (4) to core 0: 64 bytes
    # each, from and to the same offset of the two copies
    assert _exchanges(r) == [(0, buf.addr + 3 * row, row, 0b10), (1, buf.addr + 4 * row, row, 0b01)]
    # nothing of x1 goes through L2: c1's tasks read no input DMA
    assert not [
        t
        for tasks in r.tasks.values()
        for t in tasks
        if isinstance(t, DmaCopy) and t.layer == "c1" and t.dst_pool is Pool.L1
        and t.src_pool is not Pool.L1 and t.bytes == 8 * row // 2
    ]  # fmt: skip


def test_an_activation_l1_cannot_hold_falls_back_to_l2() -> None:
    # 64 x 64 x 32 int8 = 128 KiB, more than the 60 000 bytes of L1 allowed
    r = _coop(halo_graph(64, 32), 2, l1_constraint=60_000)
    buf = r.memory.buffer_of("x1", -1)
    assert "x1" in r.layout.l1_exchange and buf.pool is Pool.L2
    assert _exchanges(r) == []


def _plan(name: str, unit: LayerUnit, inputs: tuple[str, ...], out: str) -> LayerPlan:
    return LayerPlan(name, name, unit, inputs, (out,), (1,) * len(inputs), (1,))


def test_only_tensors_between_compute_layers_are_exchanged() -> None:
    conv = _plan("a", LayerUnit.MVM, ("x",), "t")
    copy = _plan("b", LayerUnit.DMA, ("t", "u"), "v")
    relu = _plan("c", LayerUnit.DPU, ("x",), "u")
    out = _plan("d", LayerUnit.DPU, ("v",), "y")
    # t and u feed a copy (one core runs it), y is read by the host, x is the input
    assert l1_exchange_tensors([conv, copy, relu, out], {"y"}) == frozenset()
    relu2 = _plan("e", LayerUnit.DPU, ("y",), "z")
    assert l1_exchange_tensors([out, relu2], {"z"}) == frozenset({"y"})


# ResNet-18 at 64 px already row-splits layers whose weights stream (layer1, layer2's
# downsample); ResNet-50 (more such layers, 4x the compile) is in the slow set.
@pytest.mark.parametrize("name", ["resnet18", pytest.param("resnet50", marks=pytest.mark.slow)])
def test_a_row_split_fetches_streamed_weights_once_for_every_core(name: str) -> None:
    r = compile_backend(
        name, 64, multicore_mode="cooperative", aipu_cores_used=4, resources_used=1.0
    )
    check_ok(r)
    rows = {r.layers[i].name for i, s in r.layout.splits.items() if s is Split.ROWS}
    streamed = {
        n for n, w in r.schedule.weight_residency.items() if w.residency is Residency.STREAMED
    }
    shared = rows & streamed
    assert shared

    def fetches(core: int, mask: int) -> set[str]:
        """Layers of ``shared`` whose weight staging ``core`` fills from L2 with ``mask``."""
        out = set()
        for t in r.tasks[core]:
            if not (isinstance(t, DmaCopy) and t.phase is Phase.FRAME and t.layer in shared):
                continue
            stage = r.memory.buffers[f"wstage:{t.layer}@{core}"]
            if (
                t.src_pool is Pool.L2
                and t.dst_core_mask == mask
                and (stage.addr <= t.dst_addr < stage.addr + stage.size_bytes)
            ):
                out.add(t.layer)
        return out

    assert fetches(0, 0b1111) == shared  # one multicast per block, from the first core
    assert all(not fetches(c, 0) and not fetches(c, 0b1111) for c in (1, 2, 3))
