"""Full-size ViT-B/16 (224x224, 87 M weights) with its built-in config: the weights fit
neither the IMC nor L2, so every frame streams them from DDR (``make test-slow``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import aipusim

pytestmark = pytest.mark.slow


def test_full_size_vit_b16_streams_its_weights_every_frame(tmp_path) -> None:
    out = tmp_path / "out"
    m = aipusim.compile("vit_b16", output_dir=out)
    result = m.simulate(frames=2)
    assert result.active_cores == 4 and result.multicore_mode == "batch"
    assert np.all(result.device_latency_cycles >= result.lower_bound_cycles)
    report = json.loads((out / "compiled_model" / "report.json").read_text())
    assert report["macs"] == pytest.approx(17.56e9, rel=0.01)
    assert not report["resident_weights"]
    weights = sum(layer["weight_bytes"] for layer in report["layers"] if layer["unit"] == "mvm")
    assert weights > report["memory"]["l2"]["capacity_bytes"]  # the point: no room on chip
    ddr_read = sum(layer["bytes"].get("ddr_read", 0) for layer in report["layers"])
    assert ddr_read > 80e6  # ~87 MB of int8 weights from DDR per frame
