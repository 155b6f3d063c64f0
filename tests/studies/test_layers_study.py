"""Study 3 (per-layer latency by unit) on tiny_cnn: per-model tables and plots, and the
dominant-unit conclusions computed from them."""

from __future__ import annotations

import pandas as pd
from study_helpers import assert_quoted_numbers_in_tables, readme_of

from aipusim.studies import StudyResult
from aipusim.studies.layers import PARTS, conclusions, default_models, summarise, top_layers


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
    assert {"layer", "mean_us", *PARTS} <= set(csv.columns)
    assert len(csv) == layers_study.table.loc[0, "layers"]


def test_conclusions_quote_table_cells(layers_study: StudyResult) -> None:
    assert_quoted_numbers_in_tables(layers_study)


def test_shares_add_up_and_the_dominant_unit_has_the_largest(layers_study: StudyResult) -> None:
    row = layers_study.table.iloc[0]
    shares = {p: row[f"{p} %"] for p in PARTS}
    assert abs(sum(shares.values()) - 100.0) < 1e-6
    units = {p: v for p, v in shares.items() if p != "waiting"}
    assert row["dominant unit"] == max(units, key=lambda p: units[p])
    assert f"**{row['dominant unit']}** (" in layers_study.conclusions[0]


def _profile(model: str, mvm: list[float], dma: list[float]) -> dict:
    parts = {p: [0.0] * len(mvm) for p in PARTS}
    parts["mvm"], parts["dma"] = mvm, dma
    table = pd.DataFrame(
        {
            "layer": [f"l{i}" for i in range(len(mvm))],
            "op": "mvm",
            "samples": 4,
            "mean_us": [a + b for a, b in zip(mvm, dma, strict=True)],
            "p50_us": 0.0,
            "p99_us": 0.0,
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
        "latency_ms_p50": 1.0,
    }


def test_summary_and_conclusions_of_known_profiles() -> None:
    profiles = [_profile("a", [30.0, 10.0], [0.0, 60.0]), _profile("b", [50.0], [0.0])]
    summary = summarise(profiles)
    assert summary["dominant unit"].tolist() == ["dma", "mvm"]
    assert summary.loc[0, "dma %"] == 60.0
    assert summary.loc[0, "slowest layer"] == "l1"
    tops = {p["model"]: top_layers(p["table"]) for p in profiles}
    assert tops["a"]["main unit"].tolist() == ["dma", "mvm"]
    assert tops["a"]["cumulative %"].tolist() == [70.0, 100.0]
    text = conclusions(summary, tops)
    assert text[0].startswith("`a`: the dominant unit is **dma** (60.0 % of the summed")
    assert "the slowest layer is `l1` (op mvm, 70.0 µs, 70.0 %" in text[1]
    assert "the 2 slowest layers take 100.0 % together" in text[1]
    assert "**dma** dominates 1 of the 2 models (`a`)." in text


def test_default_models_are_the_six_zoo_networks() -> None:
    assert default_models() == [
        "efficientnet_b0",
        "mobilenetv2",
        "resnet18",
        "resnet50",
        "yolov5s",
        "yolov8n",
    ]


def test_waiting_larger_than_every_unit_is_said_first() -> None:
    profile = _profile("w", [10.0], [5.0])
    profile["table"]["waiting"] = [85.0]
    profile["table"]["mean_us"] = [100.0]
    summary = summarise([profile])
    text = conclusions(summary, {"w": top_layers(profile["table"])})
    assert text[0] == (
        "`w`: most of the summed layer time is **waiting** (85.0 %: none of the layer's own "
        "tasks runs); the busiest unit is **mvm** (10.0 %)."
    )
