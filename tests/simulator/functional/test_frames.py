"""Several frames through a compiled multicore program: frames are ordered within a core
only, so whatever one core writes that another core used for the previous frame needs a
credit (`tokens.frame_credits`), and the host may feed as many frames ahead as the
I/O buffers have slots (`memplan.io_slots`). Each case below raised `HazardError` before
those existed."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from zoo_compiles import ZooCompiles

from aipusim import zoo
from aipusim.api.functional_check import attach_check, chip_inputs
from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.driver import compile_model
from aipusim.compiler.request import CompileRequest
from aipusim.isa.program import load_program, load_program_tables
from aipusim.isa.tasks import Phase, TokenScope, WeightLoad
from aipusim.simulator import simulate


def _compile(root: Path, model: str, size: int, mode: str, **knobs: int) -> Path:
    onnx.save(zoo.build(model, input_size=size), root / "m.onnx")
    config = CompilerConfig(aipu_cores_used=4, multicore_mode=mode, resources_used=1.0, **knobs)
    compile_model(
        CompileRequest(model_path=root / "m.onnx", output_dir=root / "out", config=config)
    )
    return root / "out" / "compiled_model"


def _bit_exact(folder: Path, frames: int) -> bool:
    inputs, how = chip_inputs(folder)
    result = simulate(folder, frames=frames, functional=True, inputs=inputs)
    return attach_check(result, folder, inputs, how).bit_exact


@pytest.mark.parametrize(
    ("mode", "frames"),
    [
        # a batch start is 4 frames: 8 frames are two starts; 4 cores in a Batch-1 mode
        # run as a batch
        ("batch", 8),
        ("multithread", 8),
        # the host feeds a pipeline a frame per stage ahead: start 2 needs a third slot
        ("pipeline", 3),
    ],
)
def test_frames_on_4_cores_are_bit_exact(zoo_compiles: ZooCompiles, mode: str, frames: int) -> None:
    # the session's shared compile (the same config `_compile` makes), read only
    folder = zoo_compiles.compiled("tiny_cnn", 32, mode=mode, cores=4, resources=1.0)
    assert _bit_exact(folder, frames)


def test_io_buffers_have_a_slot_per_frame_in_flight(zoo_compiles: ZooCompiles) -> None:
    folder = zoo_compiles.compiled("tiny_cnn", 32, mode="pipeline", cores=4, resources=1.0)
    program, _ = load_program_tables(folder)
    # double_buffer (the default) x 4 stages
    assert {buf.slots for buf in program.memory.io} == {8}


def _credit_uses(folder: Path) -> dict[int, tuple[int, int, int]]:
    """Global token -> (INIT signals, FRAME signals, FRAME waits) of the tokens INIT grants."""
    _, tasklists = load_program(folder)
    uses: dict[int, list[int]] = {}
    granted = set()
    for tasks in tasklists.values():
        for t in tasks:
            for ref in t.signals:
                if ref.scope is TokenScope.GLOBAL:
                    row = uses.setdefault(ref.index, [0, 0, 0])
                    row[0 if t.phase is Phase.INIT else 1] += 1
                    if t.phase is Phase.INIT:
                        granted.add(ref.index)
            for ref in t.waits:
                if ref.scope is TokenScope.GLOBAL:
                    uses.setdefault(ref.index, [0, 0, 0])[2] += 1
    return {i: tuple(uses[i]) for i in sorted(granted)}


@pytest.mark.slow
def test_a_pipeline_retiled_by_memplan_is_bit_exact(tmp_path: Path) -> None:
    """The memory plan tiles finer and the layers group anew; the stage cuts must follow
    (YOLOv8n at 640 px, tiling_depth 6, differed in an output without a hazard)."""
    folder = _compile(tmp_path, "resnet18", 32, "pipeline", tiling_depth=6, l1_constraint=60_000)
    assert _bit_exact(folder, 2)


@pytest.mark.slow
def test_a_credit_has_a_token_of_its_own(tmp_path: Path) -> None:
    """ResNet-18's second stage reads two tensors of the first in the other order than the
    first writes them; on one shared token a wait took the unit meant for the other."""
    uses = _credit_uses(_compile(tmp_path, "resnet18", 32, "pipeline"))
    assert uses
    assert set(uses.values()) == {(1, 1, 1)}


def test_init_fetches_wait_for_the_loads_of_a_shared_staging_slot(tmp_path: Path) -> None:
    # YOLOv5s keeps two layers' weights in the IMC from INIT whose staging slots share L1
    # bytes (they live at different frame steps): the second multicast fetch overwrote the
    # slot while every core's load of the first still read it (HazardError in INIT)
    folder = _compile(tmp_path, "yolov5s", 64, "batch")
    init_loads = [
        t for t in load_program(folder)[1][0] if t.phase is Phase.INIT and isinstance(t, WeightLoad)
    ]
    assert len({t.layer for t in init_loads}) >= 2
    assert _bit_exact(folder, 4)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["multithread", "pipeline"])
@pytest.mark.parametrize(
    "model", ["resnet18", "mobilenetv2", "efficientnet_b0", "yolov8n", "deit_tiny"]
)
def test_zoo_frames_on_4_cores_are_bit_exact(tmp_path: Path, model: str, mode: str) -> None:
    # two starts at least: a start of the multithread batch is 4 frames
    assert _bit_exact(_compile(tmp_path, model, 64, mode), 8 if mode == "multithread" else 3)
