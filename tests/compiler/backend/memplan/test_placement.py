"""The placement report: per layer the bytes per pool, spills and refills with a reason."""

from __future__ import annotations

from backend_helpers import ARCH, conv_chain

from aipusim.compiler import CompilerConfig
from aipusim.compiler.backend.common.target import Knobs
from aipusim.compiler.backend.memplan.buffers import Buffer, BufKind, MemPlan, PoolState
from aipusim.compiler.backend.memplan.placement import (
    Spill,
    l1_free_bytes,
    layer_placement,
    placement_summary,
    spill_reason,
)
from aipusim.compiler.backend.run import run_backend
from aipusim.isa.tasks import Pool


def test_a_tensor_below_l1_names_the_fewest_free_bytes_of_its_steps() -> None:
    # L1 of 1000 bytes: a 600-byte tile at step 0, a 300-byte one at step 1; a 500-byte
    # activation live in steps 0..1 finds 400 free at step 0 and 700 at step 1
    l1 = PoolState(Pool.L1, 0, 1000, 1)
    for name, size, step in (("t0", 600, 0), ("t1", 300, 1)):
        tile = Buffer(name, BufKind.TILE_IN, size, step, step, Pool.L1, allowed=(Pool.L1,))
        l1.place(tile, 0)
    act = Buffer("act:a", BufKind.ACTIVATION, 500, 0, 1, Pool.DDR, tensor_bytes=500)
    l2 = PoolState(Pool.L2, 0, 10_000, 1)
    l2.place(act, 0)
    plan = MemPlan({b.name: b for b in (*l1.placed, act)}, {(Pool.L1, 0): l1, (Pool.L2, 0): l2},
                   2, {(-1, "a"): "act:a"})  # fmt: skip
    assert l1_free_bytes(plan, act) == 400
    on = Knobs.of(CompilerConfig())
    assert spill_reason(plan, act, on) == (
        "L1 has no room while it is live: 400 bytes free at its fullest step (steps 0..1)"
    )
    off = Knobs.of(CompilerConfig(enable_buffer_promotion=False))
    assert spill_reason(plan, act, off) == str(Spill.PROMOTION_OFF)


def test_each_layer_reports_its_bytes_per_pool_spills_and_refills() -> None:
    # two 1x1 convs over 16 x 16 x 64 (16,384-byte tensors), one core. Without promotion x1
    # stays in its home pool (DDR): c0 spills it, c1 refills it; x0 and x2 are the host's
    g = conv_chain([64, 64, 64], 16)
    r = run_backend(g, CompilerConfig(enable_buffer_promotion=False), ARCH)
    c0, c1 = r.layers
    off = str(Spill.PROMOTION_OFF)
    entry = {"tensor": "x1", "core": 0, "pool": "ddr", "bytes": 16_384, "reason": off}
    p0 = layer_placement(r.memory, c0, r.target.knobs)
    assert p0["written_bytes"] == {"l1": 0, "l2": 0, "ddr": 16_384}
    assert p0["spills"] == [entry]
    assert p0["refills"] == [
        {"tensor": "x0", "core": 0, "pool": "ddr", "bytes": 16_384, "reason": str(Spill.HOST_IO)}
    ]
    p1 = layer_placement(r.memory, c1, r.target.knobs)
    assert p1["refills"] == [entry]
    assert p1["written_bytes"] == {"l1": 0, "l2": 0, "ddr": 16_384}
    assert p1["spills"][0]["reason"] == str(Spill.HOST_IO)
    summary = placement_summary(r.memory, r.target.knobs)
    assert summary["summary"] == (
        "placement: activation buffers 0 in L1, 0 in L2, 1 in DDR (16,384 bytes); "
        f"spilled: 1 ({off})"
    )
    # with promotion x1 goes to L1: nothing spilled, nothing read back but the input
    on = run_backend(g, CompilerConfig(), ARCH)
    assert layer_placement(on.memory, on.layers[0], on.target.knobs)["spills"] == []
    assert layer_placement(on.memory, on.layers[1], on.target.knobs)["refills"] == []
    assert placement_summary(on.memory, on.target.knobs)["summary"] == (
        "placement: activation buffers 1 in L1 (16,384 bytes), 0 in L2, 0 in DDR"
    )
