"""The fidelity study: micro-benchmarks that build, per-layer cycles of both models, and a
report whose conclusions come from its table."""

from __future__ import annotations

from pathlib import Path

import onnx
import pandas as pd
import pytest

from aipusim.base.errors import ConfigError
from aipusim.studies import fidelity as f


@pytest.mark.parametrize("bench", f.MICROBENCHMARKS, ids=lambda b: b.name)
def test_every_micro_benchmark_is_a_valid_model_of_its_shape(bench: f.MicroBench) -> None:
    model = bench.build()
    onnx.checker.check_model(model)
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert tuple(dims) == bench.input_shape
    assert len(model.graph.node) <= 4  # one mechanism each, not a network


def test_layer_cycles_spans_each_layer_of_the_last_frame_and_the_host_transfers() -> None:
    class Result:
        task_log = pd.DataFrame(
            {
                "unit": ["mvm", "dma0", "mvm", "pcie_h2d", "pcie_d2h", "mvm"],
                "layer": ["a", "a", "b", "", "", "a"],
                "frame": [1, 1, 1, 1, 1, 0],
                "start": [10, 5, 30, 0, 50, 0],
                "end": [20, 12, 45, 4, 58, 999],
            }
        )

    table = f.layer_cycles(Result())
    assert dict(zip(table["layer"], table["cycles"], strict=True)) == {
        "a": 15,  # 5 .. 20: the DMA and the MVM of frame 1, not frame 0's
        "b": 15,
        "host h2d": 4,
        "host d2h": 8,
    }


def test_the_report_compares_both_models_and_concludes_from_its_table(tmp_path: Path) -> None:
    out = tmp_path / "fid"
    result = f.run_fidelity(out, models=["tiny_cnn"], benchmarks=["concat"], progress=False)
    table = result.table
    assert list(table["model"]) == ["concat", "tiny_cnn"]
    # what each run really exercises, named with its share of the device's busy time
    assert all(b and b.endswith("%") for b in table["busiest"])
    layers = pd.read_csv(out / "layers.csv")
    assert {"/a/Conv", "/b/Conv", "host h2d", "host d2h"} <= set(layers["layer"])
    assert (layers["cycles_detailed"] > 0).any()
    agree = int((table[table["kind"] == "micro-benchmark"]["verdict"] == "agrees").sum())
    assert result.conclusions[0].startswith(f"{agree} of 1 micro-benchmarks agree")
    # the L1 alone: each pattern's streams in the fluid ports and the banks
    l1 = pd.read_csv(out / "l1.csv")
    assert set(l1["pattern"]) == set(f.L1_PATTERNS)
    assert any(c.startswith("L1 alone: ") for c in result.conclusions)
    text = (out / "README.md").read_text()
    assert "## What the detailed mode models" in text and "**pcie**" in text
    assert (out / "fidelity.png").stat().st_size > 0


def test_an_unknown_micro_benchmark_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"benchmarks must be among wide_1x1, .*not \['x'\]"):
        f.run_fidelity(tmp_path / "o", models=[], benchmarks=["x"], progress=False)
