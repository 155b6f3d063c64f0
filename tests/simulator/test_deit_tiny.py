"""Full-size DeiT-Tiny (224x224) compiled with its built-in config and simulated: the
transformer path end to end (CI's slow set, ``make test``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import aipusim

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
