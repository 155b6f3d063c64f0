"""Multicore modes: batch, cooperative, pipeline, the Batch-1 modes, cascades, bad combos."""

from __future__ import annotations

import dataclasses

import pytest
from backend_helpers import ARCH, check_ok, compile_backend, conv_chain

from aipusim.arch import Arch
from aipusim.base.errors import ConfigError
from aipusim.compiler import CompilerConfig
from aipusim.compiler.backend.common.layout import CoreLayout, Split
from aipusim.compiler.backend.common.target import Target
from aipusim.compiler.backend.imc.mapper import ImcOptions
from aipusim.compiler.backend.multicore.split import (
    _cooperative_split,
    check_cascade,
    check_resources,
)
from aipusim.compiler.backend.run import run_backend
from aipusim.isa.cost import Link, cost_model
from aipusim.isa.tasks import Barrier, DmaCopy, Mvm, Phase, Pool, TokenScope, Unit, WeightLoad

MODES = ("multiprocess", "multithread", "batch", "cooperative", "pipeline")
ZOO = ("tiny_cnn", "resnet18", "resnet50", "mobilenetv2", "efficientnet_b0", "yolov5s", "yolov8n")


def _compile(name: str, size: int | None, mode: str, cores: int, **kw):
    kw.setdefault("resources_used", 0.25 * cores)
    return compile_backend(name, size, multicore_mode=mode, aipu_cores_used=cores, **kw)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cores", [1, 4])
def test_every_mode_compiles_and_checks(mode: str, cores: int) -> None:
    r = _compile("resnet18", 64, mode, cores)
    check_ok(r)
    assert sorted(r.tasks) == list(range(cores))


@pytest.mark.slow
@pytest.mark.parametrize("name", ZOO)
def test_every_zoo_model_in_every_mode_at_full_size(name: str) -> None:
    for mode in MODES:
        for cores in (1, 4):
            check_ok(_compile(name, None, mode, cores))


def test_batch_multicasts_weights_from_one_fetch() -> None:
    r = _compile("resnet18", 224, "batch", 4, resources_used=1.0)
    check_ok(r)
    fetches = [t for t in r.tasks[0] if isinstance(t, DmaCopy) and t.dst_core_mask == 0b1111]
    assert fetches
    for core in (1, 2, 3):
        frame = [t for t in r.tasks[core] if t.phase is Phase.FRAME]
        assert not any(isinstance(t, DmaCopy) and t.dst_core_mask for t in frame)
        assert {t.frame_slot for t in frame} == {core}
        assert any(ref.scope is TokenScope.GLOBAL for t in frame for ref in t.waits)


def _batch_chain(side: int, arch: Arch) -> list[tuple[int, str, Phase]]:
    """(issuing core, layer, phase) of each multicast of five 512 x 512 1x1 convs on a
    ``side`` x ``side`` image in batch on 4 cores (each layer one weight set, from L2)."""
    cfg = CompilerConfig(multicore_mode="batch", aipu_cores_used=4, resources_used=1.0)
    r = run_backend(conv_chain([512] * 6, side), cfg, arch)
    check_ok(r)
    for core in range(4):  # c0, c1 resident (4 sets, 2 kept for streaming), c2..c4 stream
        loads = [(t.layer, t.phase) for t in r.tasks[core] if isinstance(t, WeightLoad)]
        assert loads == [("c0", INIT), ("c1", INIT), ("c2", FRAME), ("c3", FRAME), ("c4", FRAME)]
    return [
        (core, t.layer, t.phase)
        for core, tasks in r.tasks.items()
        for t in tasks
        if isinstance(t, DmaCopy) and t.dst_core_mask == 0b1111
    ]


INIT, FRAME = Phase.INIT, Phase.FRAME
THREE_WRITE_PORTS = dataclasses.replace(ARCH, l1=dataclasses.replace(ARCH.l1, write_ports=3))


def test_batch_cores_share_the_fetches_of_a_fetch_bound_model() -> None:
    # on a 1x1 image a 256 KiB weight set's fetch takes far longer than its one vector;
    # with a third L1 write port each streamed set is fetched once, by the core with the
    # fewest fetch cycles so far
    assert _batch_chain(1, THREE_WRITE_PORTS) == [
        (0, "c0", INIT),
        (0, "c1", INIT),
        (0, "c2", FRAME),
        (1, "c3", FRAME),
        (2, "c4", FRAME),
    ]


def test_batch_keeps_the_fetches_on_one_core_when_sharing_cannot_pay() -> None:
    # 64 x 64 pixels: 4096 vectors a layer outlast a set's fetch; Metis's two L1 write
    # ports: a second multicast would take the port the MVM's results need
    one_core = [(0, "c0", INIT), (0, "c1", INIT), (0, "c2", FRAME), (0, "c3", FRAME),
                (0, "c4", FRAME)]  # fmt: skip
    assert _batch_chain(64, THREE_WRITE_PORTS) == one_core
    assert _batch_chain(1, ARCH) == one_core


def test_cooperative_splits_layers_and_meets_at_barriers() -> None:
    single = compile_backend("resnet18", 224)
    coop = _compile("resnet18", 224, "cooperative", 4)
    check_ok(coop)
    barriers = [[t.barrier_id for t in ts if isinstance(t, Barrier)] for ts in coop.tasks.values()]
    assert barriers[0] and all(b == barriers[0] for b in barriers)
    vectors = lambda ts: sum(t.vectors * t.cols_used for t in ts if isinstance(t, Mvm))  # noqa: E731
    per_core = [vectors(coop.tasks[c]) for c in range(4)]
    assert max(per_core) < vectors(single.tasks[0])


def test_pipeline_cuts_balanced_stages() -> None:
    r = _compile("resnet50", 224, "pipeline", 4)
    check_ok(r)
    stages = r.layout.core_of_group
    assert sorted(set(stages.values())) == [0, 1, 2, 3]
    assert list(stages.values()) == sorted(stages.values())  # contiguous
    work = [0, 0, 0, 0]
    for t, e in zip(r.tilings, r.estimates, strict=True):
        work[stages[t.group]] += e.cycles
    assert max(work) < 0.6 * sum(work)
    local = [b for b in r.memory.buffers.values() if b.stage >= 0]
    assert local and all(b.stage == b.core for b in local)  # reused within their stage only
    assert any(ref.scope is TokenScope.GLOBAL for t in r.tasks[1] for ref in t.waits)


def test_pipeline_retiled_by_memplan_is_cut_again() -> None:
    """L1 too small for the first tiles: memplan tiles finer and the layers group anew;
    every new group gets a stage, in order (the stale cuts knew 30 of the 37 groups and
    the rest ran on core 0, after the last stage)."""
    r = _compile("resnet18", 32, "pipeline", 4, tiling_depth=6, l1_constraint=60_000)
    assert r.memory.attempts > 1
    stages = r.layout.core_of_group
    assert sorted(stages) == [g.index for g in r.groups]
    assert [stages[g.index] for g in r.groups] == sorted(stages.values())
    assert sorted(set(stages.values())) == [0, 1, 2, 3]
    check_ok(r)


def test_batch1_modes_with_several_cores_run_as_batch() -> None:
    cfg = CompilerConfig(aipu_cores_used=4, resources_used=1.0)
    four = Target.of(cfg, ARCH)
    assert (four.mode, four.effective_mode, four.frames_per_start) == ("multiprocess", "batch", 4)
    one = Target.of(CompilerConfig(), ARCH)
    assert (one.effective_mode, one.frames_per_start) == ("multiprocess", 1)


def test_cascade_resources_must_sum_to_one() -> None:
    a = CompilerConfig(aipu_cores_used=3, resources_used=0.75)
    b = CompilerConfig(aipu_cores_used=1, resources_used=0.25)
    check_cascade([a, b], chip_cores=ARCH.chip.cores)
    with pytest.raises(ConfigError, match=r"sum to at most 1.0, not 0.75 \+ 0.5"):
        check_cascade([a, CompilerConfig(resources_used=0.5)], chip_cores=ARCH.chip.cores)
    with pytest.raises(ConfigError, match=r"aipu_cores_used of a cascade must sum to at most"):
        check_cascade([b, b, b], chip_cores=2)


def test_impossible_resources_and_core_counts_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"resources_used must be a multiple of 0\.25"):
        check_resources(0.3, 1, ARCH)
    with pytest.raises(ConfigError, match="aipu_cores_used must be at most the 2 layer groups"):
        from aipusim.compiler.backend.run import run_backend
        from aipusim.compiler.ir import Graph, Node, Op, Tensor

        g = Graph(
            "two",
            (Node("a", Op.RELU, ("x",), ("y",)), Node("b", Op.SIGMOID, ("y",), ("z",))),
            {n: Tensor(n, (1, 8, 4, 4)) for n in "xyz"},
            {},
            ("x",),
            ("z",),
        )
        run_backend(
            g,
            CompilerConfig(aipu_cores_used=4, resources_used=1.0, multicore_mode="pipeline"),
            ARCH,
        )


def test_a_cascade_compiles_each_model_in_its_share() -> None:
    from aipusim.compiler.backend.multicore.split import plan_cascade

    configs = [
        CompilerConfig(aipu_cores_used=2, resources_used=0.5, multicore_mode="cooperative"),
        CompilerConfig(resources_used=0.25),
        CompilerConfig(resources_used=0.25),
    ]
    slots = plan_cascade(configs, chip_cores=ARCH.chip.cores)
    assert [s.first_core for s in slots] == [0, 2, 3]
    assert [s.resources_start for s in slots] == [0.0, 0.5, 0.75]
    for name, config in zip(("resnet18", "tiny_cnn", "mobilenetv2"), configs, strict=True):
        r = compile_backend(name, 64, **config.changed())
        check_ok(r)
        for st in r.memory.pools.values():
            assert st.high_water_bytes <= st.capacity


def test_cooperative_with_depth_first_fusion_unfuses_mixed_split_groups() -> None:
    # YOLOv8n's fusion groups (tiling_depth 6) mix channel- and row-split layers under the
    # cooperative layout; a fused consumer would need a tile from another core's L1. This
    # crashed the scheduler with a KeyError before the back end fell back to depth 1.
    result = compile_backend(
        "yolov8n",
        160,
        aipu_cores_used=4,
        resources_used=1.0,
        multicore_mode="cooperative",
        tiling_depth=6,
    )
    check_ok(result)
    assert result.target.knobs.tiling_depth == 1
    assert all(len(g.layers) == 1 for g in result.groups)


def test_a_row_split_is_charged_one_multicast_fetch_for_all_its_cores() -> None:
    # one 1x1 conv, 64 -> 64 channels on 8 x 8 pixels, no ICR, on 4 cores; a core's fetch
    # of its own weights gets 16 B/cycle (its share of the source), the one multicast of a
    # row split 64 B/cycle. Rows: every core loads the whole block, 64 rows x 64 columns =
    # 4096 bytes, fetched once at 64 B/cycle: 64 cycles (at 16 B/cycle each, as before,
    # 256). Channels: a core's 16 columns, 64 x 16 = 1024 bytes at 16 B/cycle: 64 cycles.
    r = run_backend(conv_chain([64, 64], 8), CompilerConfig(enable_icr=False), ARCH)
    opts = ImcOptions(enable_icr=False)
    layer, tiling = r.layers[0], r.tilings[0]
    assert r.mappings[0].whole.weight_bytes == 4096
    _, alone = _cooperative_split(layer, tiling, 4, r.target, opts, (None, None))
    _, streamed = _cooperative_split(layer, tiling, 4, r.target, opts, (16.0, 64.0))
    assert {s: streamed[s] - alone[s] for s in alone} == {"channels": 64, "rows": 64}


def test_the_multicast_fetch_rate_is_the_cost_models_multicast() -> None:
    # five 1x1 convs need 5 weight sets, the array has 4: the weights stream every frame
    def layout(**kw: object) -> CoreLayout:
        config = CompilerConfig(multicore_mode="cooperative", aipu_cores_used=4, **kw)
        graph = conv_chain([64, 64, 64, 512, 64, 64], 8)
        return run_backend(graph, config, ARCH).layout

    cost = cost_model(ARCH)
    # from L2 one channel (64 B/cycle) is the bound of a multicast: a 16 KiB burst of a
    # multicast DmaCopy into the 4 cores' L1 lasts 16384 / 64 = 256 cycles besides setup
    # and latency, as long as one core's own fetch at a quarter of L2's 256 B/cycle
    tr = cost.dma_transfer(Unit.DMA1, Pool.L2, Pool.L1, 16384, 0b1111)
    assert cost.transfer_cycles(tr) - tr.setup_cycles - tr.latency_cycles == 256
    default = layout()
    assert (default.weight_fetch_bw, default.multicast_fetch_bw) == (64.0, 64.0)
    # weights left in DDR: the multicast gets all of DDR, a core's own fetch a quarter
    ddr = layout(enable_buffer_promotion=False)
    assert ddr.multicast_fetch_bw == cost.link_bw(Link.DDR)
    assert ddr.weight_fetch_bw == cost.link_bw(Link.DDR) / 4
    assert ddr.fetch_bw(Split.ROWS) == ddr.multicast_fetch_bw
    assert ddr.fetch_bw(Split.CHANNELS) == ddr.fetch_bw(Split.NONE) == ddr.weight_fetch_bw
