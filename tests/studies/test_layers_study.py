"""Study 3 (per-layer busy time by unit) on tiny_cnn: per-model tables and plots, and the
dominant-unit conclusions computed from them."""

from __future__ import annotations

import pandas as pd
import pytest
from study_helpers import assert_quoted_numbers_in_tables, readme_of

from aipusim.studies import StudyResult
from aipusim.studies.layers import (
    PARTS,
    UNITS,
    conclusions,
    default_models,
    summarise,
    top_layers,
)


def test_readme_has_summary_per_model_table_and_figures(layers_study: StudyResult) -> None:
    out = layers_study.output_dir
    text = readme_of(layers_study)
    assert "## What was run" in text
    assert "## tiny_cnn (32x32)" in text
    assert "| tiny_cnn |" in text
    for name in ("overview.png", "tiny_cnn_layers.png", "tiny_cnn_top_layers.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({name})" in text
    csv = pd.read_csv(out / "tiny_cnn_layers.csv")
    assert {"layer", "busy_us", "span_us", "critical_unit", *PARTS} <= set(csv.columns)
    # busy by unit and the wait add up to the span
    assert (csv[list(PARTS)].sum(axis=1) - csv["span_us"]).abs().max() < 1e-6
    assert len(csv) == layers_study.table.loc[0, "layers"]


def test_conclusions_quote_table_cells(layers_study: StudyResult) -> None:
    assert_quoted_numbers_in_tables(layers_study)


def test_shares_add_up_and_the_dominant_unit_has_the_largest(layers_study: StudyResult) -> None:
    row = layers_study.table.iloc[0]
    shares = {u: row[f"{u} %"] for u in UNITS}
    assert abs(sum(shares.values()) - 100.0) < 1e-6
    assert row["dominant unit"] == max(shares, key=lambda u: shares[u])
    assert f"**{row['dominant unit']}** (" in layers_study.conclusions[0]


def _profile(model: str, mvm: list[float], dma: list[float], wait: float = 0.0) -> dict:
    parts = {p: [0.0] * len(mvm) for p in PARTS}
    parts["mvm"], parts["dma"] = mvm, dma
    parts["wait"] = [wait] * len(mvm)
    busy = [a + b for a, b in zip(mvm, dma, strict=True)]
    table = pd.DataFrame(
        {
            "layer": [f"l{i}" for i in range(len(mvm))],
            "op": "mvm",
            "samples": 4,
            "busy_us": busy,
            "span_us": [b + wait for b in busy],
            "wait_us": wait,
            "critical_unit": "ddr",
            "macs": 0,
            **parts,
        }
    )
    return {
        "model": model,
        "table": table,
        "mode": "batch",
        "replicas": 1,
        "active_cores": 4,
        "latency_ms_unloaded": 1.0,
    }


def test_summary_and_conclusions_of_known_profiles() -> None:
    profiles = [_profile("a", [30.0, 10.0], [0.0, 60.0], 25.0), _profile("b", [50.0], [0.0])]
    summary = summarise(profiles)
    assert summary["dominant unit"].tolist() == ["dma", "mvm"]
    assert summary.loc[0, "dma %"] == 60.0
    # 50 µs of wait in 150 µs of summed span
    assert summary.loc[0, "wait % of span"] == pytest.approx(100 / 3)
    assert summary.loc[0, "slowest layer"] == "l1"
    tops = {p["model"]: top_layers(p["table"]) for p in profiles}
    assert tops["a"]["main unit"].tolist() == ["dma", "mvm"]
    assert tops["a"]["cumulative %"].tolist() == [70.0, 100.0]
    text = conclusions(summary, tops)
    assert text[0] == (
        "`a`: the cores' busy time goes mostly to **dma** (60.0 % of the summed layer busy "
        "time); the layers wait (span not busy) 33.3 % of their summed span."
    )
    assert text[1] == (
        "`a`: the busiest layer is `l1` (op mvm, 70.0 µs busy, 70.0 % of the summed busy "
        "time, mostly dma; it waits on ddr); the 2 busiest layers take 100.0 % together."
    )
    assert "**dma** takes most busy time in 1 of the 2 models (`a`)." in text


def test_default_models_are_the_zoo_networks_transformers_included() -> None:
    assert default_models() == [
        "deit_tiny",
        "efficientnet_b0",
        "mobilenetv2",
        "resnet18",
        "resnet50",
        "vit_b16",
        "yolov5s",
        "yolov8n",
    ]
