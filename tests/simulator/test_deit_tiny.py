"""Full-size DeiT-Tiny (224x224) compiled and simulated: the transformer path end to end, in
its built-in config and in every multicore mode (timed, and on data against the int8
reference), and its ``--quantize-only`` accuracy (``make test-slow``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from zoo_transformers import MODES, quantize_only_accuracy, simulate_in_mode

import aipusim
from aipusim.compiler.quant.advice import SQNR_TARGET_DB

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def deit(tmp_path_factory: pytest.TempPathFactory) -> tuple[aipusim.CompiledModel, Path]:
    out = tmp_path_factory.mktemp("deit") / "out"
    return aipusim.compile("deit_tiny", output_dir=out), out


def test_full_size_deit_tiny_simulates_with_attention_on_the_mvm(deit) -> None:
    m, out = deit
    result = m.simulate(frames=2)
    assert result.replicas == 4 and result.active_cores == 4  # 4 x Batch-1 (built-in)
    assert np.all(result.device_latency_cycles >= result.lower_bound_cycles)
    assert all(b <= result.total_cycles for b in result.busy_cycles.values())
    report = json.loads((out / "compiled_model" / "report.json").read_text())
    attention = [layer for layer in report["layers"] if "matmul_choice" in layer]
    assert len(attention) == 24  # Q.K^T and attention.V in 12 blocks
    for layer in attention:
        assert layer["matmul_choice"]["unit"] == "mvm"
        assert layer["scheduled_cycles_by_unit"]["wload"] > 0
    layernorms = [layer for layer in report["layers"] if layer["op"] == "LayerNormalization"]
    assert len(layernorms) == 25 and all(layer["unit"] == "dpu" for layer in layernorms)
    assert report["macs"] == pytest.approx(1.254e9, rel=0.01)


@pytest.mark.parametrize("mode", MODES)
def test_full_size_deit_tiny_in_every_multicore_mode(mode: str, tmp_path: Path) -> None:
    """Timed and on data (attention's run-time weights too, isa/README.md): 2 frames per
    replica bit-exact against the int8 reference, at the built-in tiling depth (1)."""
    result, report = simulate_in_mode("deit_tiny", mode, tmp_path / "out", check=True)
    assert result.replicas == (4 if MODES[mode][1] == 1 else 1)
    assert sum("matmul_choice" in layer for layer in report["layers"]) == 24
    model = json.loads((tmp_path / "out" / "compiled_model" / "model.json").read_text())
    assert model["extra"]["functional_gaps"] == {}


def test_quantize_only_reaches_the_sqnr_target_with_the_default_scheme(tmp_path: Path) -> None:
    accuracy, log = quantize_only_accuracy("deit_tiny", tmp_path)
    logits = accuracy["outputs"]["logits"]
    assert logits["sqnr_db"] >= SQNR_TARGET_DB  # measured 26.5 dB (held-aside random inputs)
    assert "advice" not in accuracy
    per_layer = accuracy["per_layer_sqnr_db"]
    assert "/blocks.11/attn/Softmax_output_0" in per_layer and len(per_layer) > 300
    assert "quantization: output `logits` reaches" in log
