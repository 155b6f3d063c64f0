"""Pass 9, schedule: tasks with origins, tokens within the arch's limits, checker-clean."""

from __future__ import annotations

from pathlib import Path

import pytest
from backend_helpers import ARCH, chain_model, check_ok, compile_backend, conv_chain

import aipusim
from aipusim.api.functional_check import chip_inputs, compare
from aipusim.compiler import CompilerConfig
from aipusim.compiler.backend.emit.files import build_report
from aipusim.compiler.backend.run import run_backend
from aipusim.compiler.backend.schedule.steps import Residency, WeightResidency
from aipusim.compiler.backend.schedule.weight_plan import choose_resident
from aipusim.isa.program import load_program
from aipusim.isa.tasks import (
    MAX_TOKEN_REFS,
    DmaCopy,
    HostTransfer,
    Mvm,
    Phase,
    Pool,
    TokenScope,
    TokenWait,
    Unit,
    WeightLoad,
)
from aipusim.simulator import simulate


def test_zoo_schedules_pass_the_isa_checker() -> None:
    for name, size in (("tiny_cnn", None), ("resnet50", 224), ("yolov8n", 320)):
        r = compile_backend(name, size)
        check_ok(r)
        used = r.schedule.local_tokens_used[0]
        assert 0 < used <= ARCH.tokens.local_per_core


def test_tasks_carry_their_origin_and_token_slots_fit() -> None:
    r = compile_backend("resnet18", 224, force_h_tiling=2)
    layer_names = {p.name for p in r.layers} | {"input", "output"}
    tasks = r.tasks[0]
    assert {t.layer for t in tasks} <= layer_names | {t.layer for t in tasks if t.layer}
    assert all(t.layer for t in tasks)
    assert max(t.tile for t in tasks if isinstance(t, Mvm)) == 1
    assert all(len(t.waits) <= MAX_TOKEN_REFS and len(t.signals) <= MAX_TOKEN_REFS for t in tasks)
    assert all(r.scope is TokenScope.LOCAL for t in tasks for r in (*t.waits, *t.signals))


def test_frame_starts_with_the_input_and_ends_with_the_output() -> None:
    tasks = [t for t in compile_backend("tiny_cnn").tasks[0] if t.phase is Phase.FRAME]
    assert isinstance(tasks[0], HostTransfer) and tasks[0].direction.value == "h2d"
    assert isinstance(tasks[-1], HostTransfer) and tasks[-1].direction.value == "d2h"


def test_resnet50_streams_weights_every_frame_in_a_few_thousand_tasks() -> None:
    r = compile_backend("resnet50", 224)
    frame = [t for t in r.tasks[0] if t.phase is Phase.FRAME]
    assert 300 < len(frame) < 5000
    assert not r.schedule.resident_weights
    loads = [t for t in frame if isinstance(t, WeightLoad)]
    assert sum(t.bytes for t in loads) >= 20_000_000  # ~25 M int8 weights per frame


def test_a_model_whose_weights_fit_the_imc_loads_them_once() -> None:
    import numpy as np

    from aipusim.compiler import CompilerConfig
    from aipusim.compiler.backend.run import run_backend
    from aipusim.compiler.ir import Graph, Node, Op, Tensor

    w = np.zeros((64, 64, 1, 1), np.float32)
    g = Graph(
        "one",
        (Node("c", Op.CONV, ("x", "w"), ("y",), {"kernel_shape": [1, 1]}),),
        {
            "x": Tensor("x", (1, 64, 8, 8)),
            "w": Tensor("w", w.shape),
            "y": Tensor("y", (1, 64, 8, 8)),
        },
        {"w": w},
        ("x",),
        ("y",),
    )
    r = run_backend(g, CompilerConfig(), ARCH)
    check_ok(r)
    assert r.schedule.resident_weights
    assert r.schedule.weight_residency == {
        "c": WeightResidency(Residency.RESIDENT, "weight sets: 1 needed, 4 in the array")
    }
    layer = next(x for x in build_report(r)["layers"] if x["name"] == "c")
    assert layer["weights"] == "resident: weight sets: 1 needed, 4 in the array"
    tasks = r.tasks[0]
    assert [t.phase for t in tasks if isinstance(t, WeightLoad)] == [Phase.INIT]


def test_batch_units_follow_the_weight_multicast_through_their_own_load() -> None:
    # core 0's dma1 multicasts weights into every core's L1 staging; a core's buffers that
    # later reuse those bytes wait for the core's own load of them (local tokens), and the
    # multicast waits for another core's accesses of the bytes it overwrites through that
    # core's gate on its weight-load queue: global tokens only between weight loads and
    # the weight DMA, 3 pairs each way (a token per unit and core was 21 of 32), plus one
    # frame credit per follower core (the next frame's multicast waits for the follower to
    # finish the frame before, `tokens.frame_credits`)
    r = compile_backend("resnet18", 64, multicore_mode="batch", aipu_cores_used=4,
                        resources_used=1.0)  # fmt: skip
    check_ok(r)
    assert any(isinstance(t, DmaCopy) and t.dst_core_mask for t in r.tasks[0])
    for core in (1, 2, 3):
        waiting = {t.unit for t in r.tasks[core] for w in t.waits if w.scope is TokenScope.GLOBAL}
        assert waiting == {Unit.WLOAD}, core
        gates = [t for t in r.tasks[core] if isinstance(t, TokenWait) and t.unit is Unit.WLOAD]
        assert any(w.scope is TokenScope.LOCAL for t in gates for w in t.waits), core
        assert all(s.scope is TokenScope.GLOBAL for t in gates for s in t.signals), core
    multicast_waits = [
        w for t in r.tasks[0] if t.unit is Unit.DMA1 for w in t.waits
        if w.scope is TokenScope.GLOBAL
    ]  # fmt: skip
    assert multicast_waits
    assert r.schedule.global_tokens_used == 6 + 3


def test_resident_layers_are_the_most_bytes_per_set_that_fit() -> None:
    # b saves 600 bytes a set, a 500, c 300: b, then a does not fit the one set left, c does
    assert choose_resident({"a": (2, 1000), "b": (1, 600), "c": (1, 300)}, 2) == ["b", "c"]
    assert choose_resident({"a": (2, 1000)}, 1) == []


def test_the_sets_left_beside_streaming_keep_the_biggest_layers_resident() -> None:
    # five 1x1 convs, one weight set each (5 > 4 in the array): two sets stream, the other
    # two keep c2 (64 -> 512) and c3 (512 -> 64), twice the bytes per set of c0, c1, c4
    r = run_backend(conv_chain([64, 64, 64, 512, 64, 64], 8), CompilerConfig(), ARCH)
    check_ok(r)
    loads = [(t.layer, t.phase) for t in r.tasks[0] if isinstance(t, WeightLoad)]
    assert loads == [
        ("c2", Phase.INIT),
        ("c3", Phase.INIT),
        ("c0", Phase.FRAME),
        ("c1", Phase.FRAME),
        ("c4", Phase.FRAME),
    ]
    assert not r.schedule.resident_weights  # not every layer
    why = r.schedule.weight_residency
    left = "weight sets: 5 needed, 4 in the array, 2 kept for streaming"
    kept = f"the most bytes per set of the 2 sets left ({left})"
    assert {n: (w.residency, w.why) for n, w in why.items()} == {
        "c0": (Residency.STREAMED, left),
        "c1": (Residency.STREAMED, left),
        "c2": (Residency.RESIDENT, kept),
        "c3": (Residency.RESIDENT, kept),
        "c4": (Residency.STREAMED, left),
    }
    assert str(why["c2"]) == f"resident: {kept}"


@pytest.fixture(scope="module")
def chain_cooperative(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`chain_model` at 8 px compiled cooperatively on 4 cores: its four convs' weights
    fit the IMC, so they stay from INIT, and each layer's weights are kept in L2."""
    config = {"multicore_mode": "cooperative", "aipu_cores_used": 4, "resources_used": 1.0}
    out = tmp_path_factory.mktemp("chain_coop")
    return aipusim.compile(chain_model(8), config, output_dir=out).compiled_dir()


def test_cooperative_init_fetches_wait_for_core_0s_copy_into_l2(chain_cooperative) -> None:
    # core 0 copies each layer's weights DDR -> L2 in INIT, and every core fetches its part
    # L2 -> L1 staging in INIT too: cores 1-3 read those bytes only after the copy, through
    # one global token per core (core 0's weight DMA -> the core's weight DMA) that each
    # copy signals and each fetch waits for, in the same order
    _, tasklists = load_program(chain_cooperative)

    def init_dma(core: int) -> list[DmaCopy]:
        return [t for t in tasklists[core] if isinstance(t, DmaCopy) and t.phase is Phase.INIT]

    fetched = [t.src_addr for t in init_dma(1) if t.src_pool is Pool.L2]
    copies = [t for t in init_dma(0) if t.dst_pool is Pool.L2 and t.dst_addr in fetched]
    layers = ["Conv_0", "Conv_3", "Conv_10", "Conv_15"]
    assert [(t.layer, t.src_pool) for t in copies] == [(n, Pool.DDR) for n in layers]
    tokens = []
    for core in (1, 2, 3):
        fetches = [t for t in init_dma(core) if t.src_pool is Pool.L2]
        assert [(t.layer, t.src_addr) for t in fetches] == [(t.layer, t.dst_addr) for t in copies]
        (token,) = {w for t in fetches for w in t.waits if w.scope is TokenScope.GLOBAL}
        assert all(token in t.waits for t in fetches), core
        assert all(token in t.signals for t in copies), core
        tokens.append(token)
    assert len(set(tokens)) == 3


def test_cooperative_init_weights_run_bit_exact_without_a_hazard(chain_cooperative) -> None:
    # before, core 1's INIT fetch of Conv_0's weights read L2 with nothing ordering it
    # after core 0's copy: the functional run raised HazardError
    chip, how = chip_inputs(chain_cooperative)
    result = simulate(chain_cooperative, frames=2, functional=True, inputs=chip)
    check = compare(result, chain_cooperative, chip, how)
    assert check.bit_exact, check.text()
