"""Pass 10, emit: compiled_model files, model.json contract, CRCs, report.json."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from backend_helpers import ARCH, compile_backend, front_graph, quantized_program

from aipusim.base.errors import TasklistError
from aipusim.compiler import CompilerConfig
from aipusim.compiler.backend.emit.files import emit, verify_crcs
from aipusim.compiler.backend.run import run_backend
from aipusim.isa.check import check_paths
from aipusim.isa.program import load_program


def test_compiled_model_folder_round_trips(tmp_path: Path) -> None:
    r = run_backend(
        front_graph("resnet18", 64),
        CompilerConfig(aipu_cores_used=4, resources_used=1.0, multicore_mode="cooperative"),
        ARCH,
        tmp_path,
    )
    folder = tmp_path / "compiled_model"
    names = sorted(p.name for p in folder.iterdir())
    assert names == [
        "constants.bin",
        "core0.tasklist",
        "core1.tasklist",
        "core2.tasklist",
        "core3.tasklist",
        "manifest.json",
        "model.json",
        "pool_l2_const.bin",
        "report.json",
    ]
    program, tasks = load_program(folder)
    assert program.aipu_cores_used == 4 and str(program.multicore_mode) == "cooperative"
    assert {c: len(t) for c, t in tasks.items()} == {c: len(t) for c, t in r.tasks.items()}
    assert check_paths([folder], ARCH).ok
    uuid.UUID(program.extra["model_id"])


def test_model_id_is_kept_when_given(tmp_path: Path) -> None:
    emit(compile_backend("tiny_cnn"), tmp_path, model_id="my-model-7")
    assert verify_crcs(tmp_path / "compiled_model").extra["model_id"] == "my-model-7"


def test_crc_check_catches_a_changed_file(tmp_path: Path) -> None:
    emit(compile_backend("tiny_cnn"), tmp_path)
    folder = tmp_path / "compiled_model"
    verify_crcs(folder)
    data = bytearray((folder / "core0.tasklist").read_bytes())
    data[-1] ^= 0xFF
    (folder / "core0.tasklist").write_bytes(bytes(data))
    with pytest.raises(TasklistError, match=r"core0.tasklist must have CRC32 .* recorded"):
        verify_crcs(folder)


def test_report_has_per_layer_estimates_and_high_water_marks(tmp_path: Path) -> None:
    emit(compile_backend("resnet18", 224), tmp_path)
    report = json.loads((tmp_path / "compiled_model" / "report.json").read_text())
    conv = next(layer for layer in report["layers"] if layer["unit"] == "mvm")
    for key in ("tiles", "weight_sets", "icr", "estimated_cycles", "bytes", "macs"):
        assert key in conv
    assert conv["weight_sets"] >= 1 and conv["estimated_cycles"] > 0
    assert set(report["memory"]) == {"ddr", "l2", "l1.core0"}
    for pool in report["memory"].values():
        assert pool["high_water_bytes"] <= pool["capacity_bytes"]
    assert report["macs"] > 1_000_000_000


def test_manifest_lists_io_and_constant_sizes(tmp_path: Path) -> None:
    emit(compile_backend("tiny_cnn"), tmp_path)
    manifest = json.loads((tmp_path / "compiled_model" / "manifest.json").read_text())
    assert manifest["inputs"][0]["shape"][1] == 3
    assert manifest["constants"] and all(c["bytes"] > 0 for c in manifest["constants"].values())


def test_l2_constant_image_holds_quantized_constants_at_their_offsets(tmp_path: Path) -> None:
    import numpy as np

    from aipusim.isa.image import CONSTANTS_FILE

    config = CompilerConfig(enable_buffer_promotion=False, constant_memory_pool="global.l2")
    r = run_backend(quantized_program("tiny_cnn", 32), config, ARCH, tmp_path)
    folder = tmp_path / "compiled_model"
    l2 = (folder / "pool_l2_const.bin").read_bytes()
    image = (folder / CONSTANTS_FILE).read_bytes()
    program, _ = load_program(folder)
    base = program.memory.constants.addr
    weights = [b for b in r.memory.buffers.values() if b.name.startswith("weights:")]
    assert weights and all(b.pool.value == "l2" for b in weights)
    for buf in weights:
        # what INIT copies: the image's bytes at the buffer's DDR source, to its L2 address
        src = r.memory.source_addr(buf.name) - base
        assert l2[buf.addr : buf.addr + buf.size_bytes] == image[src : src + buf.size_bytes]
        assert np.any(np.frombuffer(image[src : src + buf.size_bytes], np.int8))
    verify_crcs(folder)
