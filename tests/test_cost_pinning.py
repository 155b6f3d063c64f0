"""The compiler's estimate and the simulator agree: one cost model (`aipusim.isa.cost`).

For every zoo model on one core, the per-layer busy cycles of each unit in
``compiled_model/report.json`` equal, cycle for cycle, what the simulator measures for
that layer's tasks of a frame when nothing is shared (``contention=False``: every
engine has the links to itself, DDR serves each transfer as if alone, and the core's L1
ports never squeeze a task). With the sharing on (the normal run) they differ by design,
and only so: a transfer that competes for DDR, the NoC or L2 takes longer, never shorter,
and the extra time of all of a frame's transfers is bounded by the time the shared links
spent serving the other engines' bursts in that frame; a compute task is stretched only
by the L1 ports the core's other units keep busy, by at most the cycles the ports need
for the bytes all units move in the frame (dispatch and tokens delay when a task starts,
never how long it runs).
"""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from zoo_compiles import ZooCompiles

from aipusim import zoo
from aipusim.arch import load_arch
from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.driver import compile_model
from aipusim.compiler.request import CompileRequest
from aipusim.isa.units import UNITS, UnitRole, spec
from aipusim.simulator import simulate

#: Small inputs keep the fast suite fast (the full-size models run in the slow set).
SIDE = {"yolov5s": 64, "yolov8n": 64}
FAST = [n for n in zoo.names() if n != "vit_b16"]
#: The frame the figures are read from: the second (the first also waits for INIT).
FRAME = 1
#: Layer names of the host handshakes (control-core tasks of no layer).
HOST = ("input", "output")
ARCH = load_arch()


def _compile(name: str, tmp_path: Path, size: int | None) -> Path:
    model = tmp_path / f"{name}.onnx"
    onnx.save(zoo.build(name, input_size=size) if size else zoo.build(name), model)
    out = tmp_path / name
    config = CompilerConfig(aipu_cores_used=1, resources_used=1.0)
    compile_model(CompileRequest(model_path=model, output_dir=out, config=config))
    return out / "compiled_model"


def _estimated(compiled: Path) -> dict[tuple[str, str], int]:
    report = json.loads((compiled / "report.json").read_text())
    return {
        (layer["name"], unit): cycles
        for layer in report["layers"]
        for unit, cycles in layer["scheduled_cycles_by_unit"].items()
    }


def _simulated(compiled: Path, *, contention: bool) -> tuple[dict[tuple[str, str], int], object]:
    result = simulate(compiled, frames=2, contention=contention)
    log = result.task_log
    # the frame's tasks (not the host's transfers, not the input/output handshakes)
    tasks = log["unit"].isin([s.unit.value for s in UNITS]) & ~log["layer"].isin(HOST)
    frame = log[tasks & (log["frame"] == FRAME)]
    busy = (frame["end"] - frame["start"]).groupby([frame["layer"], frame["unit"]]).sum()
    return {k: int(v) for k, v in busy.items()}, result


def _check(compiled: Path) -> None:
    estimated = _estimated(compiled)
    estimated = {k: v for k, v in estimated.items() if k[0] not in HOST}
    ideal, _ = _simulated(compiled, contention=False)
    assert ideal == estimated, "with idle links every task takes its cost-model time"

    shared, result = _simulated(compiled, contention=True)
    assert set(shared) == set(estimated)
    extra = squeezed = 0
    for key, cycles in estimated.items():
        assert shared[key] >= cycles, key  # sharing only ever stretches a task
        if spec(key[1]).role is UnitRole.TRANSFER:
            extra += shared[key] - cycles
        else:
            squeezed += shared[key] - cycles
    # A squeezed compute task waits for L1 bytes the others move through the ports.
    report = json.loads((compiled / "report.json").read_text())
    l1_bytes = sum(
        layer["traffic"].get("l1_read", 0) + layer["traffic"].get("l1_write", 0)
        for layer in report["layers"]
    )
    assert squeezed <= l1_bytes / ARCH.l1.port_bytes_per_cycle
    # Each cycle a transfer waits, a shared link is serving another engine's burst; on one
    # core at most the two DMA channels, the host link and the tasklist fetch compete.
    frame_cycles = int(result.total_cycles)
    served = sum(result.link_utilization.values()) * frame_cycles
    assert extra <= 3 * served


@pytest.mark.parametrize("name", FAST)
def test_estimate_equals_simulated_busy_time_per_layer(
    name: str, zoo_compiles: ZooCompiles
) -> None:
    # one core, all of its resources: the session's shared compile `_compile` would make
    size = SIDE.get(name, 32)
    _check(zoo_compiles.compiled(name, size, mode="multiprocess", cores=1, resources=1.0))


@pytest.mark.slow
@pytest.mark.parametrize("name", zoo.names())
def test_estimate_equals_simulated_busy_time_per_layer_full_size(name: str, tmp_path: Path) -> None:
    _check(_compile(name, tmp_path, None))
