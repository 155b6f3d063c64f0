"""The estimate pass: the planned per-frame cost of a layer (`estimate.plan_cost`)."""

from __future__ import annotations

from backend_helpers import ARCH, compile_backend

from aipusim.compiler.backend.lower.layer import LayerUnit
from aipusim.compiler.backend.schedule.steps import Residency
from aipusim.isa.cost import cost_model


def test_resident_weights_cost_no_load_per_frame() -> None:
    # batch on 4 cores: ResNet-18 needs more weight sets than the array's 4, so the 2 sets
    # beside the streaming ones hold the layers saving the most bytes per set, loaded once
    # in INIT; those load nothing per frame, the streamed ones load every block each frame
    r = compile_backend("resnet18", 64, multicore_mode="batch", aipu_cores_used=4)
    residency = r.schedule.weight_residency
    resident = {n for n, w in residency.items() if w.residency is Residency.RESIDENT}
    assert resident and len(resident) < len(residency)
    cost = cost_model(ARCH)
    for layer, planned, m in zip(r.layers, r.planned, r.mappings, strict=True):
        if layer.unit is not LayerUnit.MVM:
            continue
        if layer.name in resident:
            assert (planned.weight_load_cycles, planned.exposed_weight_cycles) == (0, 0)
        else:
            loads = sum(cost.weight_load_cycles(b.weight_bytes) for b in m.whole.blocks)
            assert planned.weight_load_cycles == loads > 0
        assert planned.cycles >= planned.compute_cycles > 0
