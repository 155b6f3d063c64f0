"""Study 7 (the corpus): its tables and conclusions from synthetic records, the records'
JSON, and (slow, with the corpus fetched) a run on one model."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from study_helpers import numbers_in, readme_of, table_cells

from aipusim.corpus import DIR_ENV, default_dir, load_manifest
from aipusim.corpus.images import split_images
from aipusim.corpus.measure import COMPILE_ERROR, agreement
from aipusim.studies.corpus import (
    MODES,
    RECORD_KEYS,
    accuracy_table,
    conclusions,
    mode_table,
    records_of,
    run_corpus_study,
    write_study,
)

LABELS = [m.label for m in MODES]


def timed(fps: float, exact: bool = True) -> dict[str, Any]:
    return {
        "status": "ok",
        "fps": fps,
        "latency_us_unloaded": 1500.0,
        "energy_mj_per_frame": 0.25,
        "bit_exact": exact,
        "mismatches": 0 if exact else 3,
    }


ACCURATE = {
    "sqnr_db": 31.25,
    "top1_agreement": 1.0,
    "ort_sqnr_db": 28.0,
    "ort_top1_agreement": 0.9,
    "limiting_layer": "",
    "accuracy_error": "",
}
LOSSY = {
    "sqnr_db": 12.0,
    "top1_agreement": None,
    "ort_sqnr_db": 20.5,
    "ort_top1_agreement": None,
    "limiting_layer": "conv_7 (12.0 dB, -9.5 dB)",
    "accuracy_error": "",
}
BROKEN = dict.fromkeys(ACCURATE) | {
    "ort_sqnr_db": 7.5,
    "limiting_layer": "",
    "accuracy_error": "node p (PRelu) cannot be quantized",
}


def synthetic() -> list[dict[str, Any]]:
    good = dict(zip(LABELS, [timed(100.0), timed(250.0), timed(80.0), timed(120.0)], strict=True))
    partly = dict(
        zip(LABELS, [timed(10.0), timed(30.0, exact=False), timed(5.0), timed(7.0)], strict=True)
    )
    partly["pipeline"] = {"status": COMPILE_ERROR, "error": "bias must fit int32"}
    failed = {label: {"status": COMPILE_ERROR, "error": "PRelu"} for label in LABELS}
    return (
        records_of("good", ACCURATE, good)
        + records_of("partly", LOSSY, partly)
        + records_of("failed", BROKEN, failed)
    )


def test_records_carry_every_key_and_the_accuracy_on_each_mode() -> None:
    records = synthetic()
    assert len(records) == 3 * len(MODES)
    assert all(list(r) == list(RECORD_KEYS) for r in records)
    assert {r["sqnr_db"] for r in records if r["model"] == "good"} == {31.25}
    assert records[0]["latency_ms_unloaded"] == 1.5
    failed = [r for r in records if r["model"] == "failed"]
    assert {r["status"] for r in failed} == {COMPILE_ERROR}
    assert {r["fps"] for r in failed} == {None}


def test_tables() -> None:
    modes = mode_table(synthetic())
    assert list(modes["bit-exact"][:4]) == ["yes"] * 4
    assert modes.loc[5, "bit-exact"] == "no"
    assert modes.loc[7, "error"] == "bias must fit int32"
    acc = accuracy_table(synthetic())
    assert list(acc["model"]) == ["good", "partly", "failed"]
    assert math.isnan(acc.loc[2, "SQNR (dB)"]) and acc.loc[2, "ORT SQNR (dB)"] == 7.5


def test_conclusions_follow_from_the_tables() -> None:
    found = conclusions(synthetic())
    assert found[0] == "**1 of 3** models compile and run in all 4 modes (`good`)."
    assert found[1] == (
        "**6 of 12** (model, mode) cells are bit-exact on data against the int8 reference."
    )
    assert "`good`: **batch** gives the highest FPS (250.0 FPS, 0.2500 mJ per frame)." in found
    assert "`partly` in mode batch is not bit-exact." in found
    assert "`partly` in mode pipeline: compile error: bias must fit int32" in found
    assert "`failed` fails in every mode (compile error): PRelu" in found
    assert (
        "`good`: aipusim's int8 reaches 31.2 dB SQNR against fp32, onnxruntime's static "
        "int8 28.0 dB; top-1 agreement 1.00 vs 0.90." in found
    )
    assert (
        "`partly`: aipusim's int8 reaches 12.0 dB SQNR against fp32, onnxruntime's static "
        "int8 20.5 dB. **aipusim is below onnxruntime**; the layer that loses most is "
        "conv_7 (12.0 dB, -9.5 dB)." in found
    )
    assert "`failed`: no int8 accuracy from aipusim: node p (PRelu) cannot be quantized" in found


def test_the_study_files_quote_their_tables(tmp_path: Path) -> None:
    models = list(load_manifest().values())[:3]
    result = write_study(tmp_path, synthetic(), models, 8, "cmd", {"good": 3.0}, tmp_path)
    text = readme_of(result)
    cells = table_cells(text)
    for line in result.conclusions:
        for number in numbers_in(line.split("layer that loses most")[0]):
            assert number in cells, (number, line)
    records = json.loads((tmp_path / "corpus.json").read_text())
    assert len(records) == 12 and list(records[0]) == list(RECORD_KEYS)
    assert records[-1]["sqnr_db"] is None and records[-1]["ort_sqnr_db"] == 7.5
    for png in ("accuracy.png", "fps.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({png})" in text


def test_agreement_is_the_weakest_output_and_the_class_top1() -> None:
    ref = [{"a": np.array([[1.0, 0.0]]), "b": np.array([2.0])} for _ in range(2)]
    test = [{"a": np.array([[0.0, 1.0]]), "b": np.array([2.0])}, ref[1]]
    sqnr, top1 = agreement(ref, test, "a")
    assert top1 == 0.5
    assert sqnr == pytest.approx(10 * math.log10(2 / 2))
    assert agreement(ref, ref, None) == (math.inf, None)


def test_calibration_and_evaluation_images_never_overlap() -> None:
    cal, held = split_images(list(range(20)))
    assert len(cal) == len(held) == 10 and not set(cal) & set(held)


def corpus_folder() -> Path:
    return Path(os.environ.get(DIR_ENV) or default_dir())


@pytest.mark.slow
def test_the_study_on_one_corpus_model(tmp_path: Path) -> None:
    pytest.importorskip("skimage", reason="the corpus study's real images need scikit-image")
    folder = corpus_folder()
    if not (folder / "mtcnn_rnet.onnx").is_file():
        pytest.skip(f"corpus not fetched into {folder}: run `make corpus` (or set {DIR_ENV})")
    result = run_corpus_study(
        tmp_path / "corpus", models=["mtcnn_rnet"], frames=2, corpus_dir=folder, progress=False
    )
    records = json.loads((tmp_path / "corpus" / "corpus.json").read_text())
    assert [r["mode"] for r in records] == LABELS
    # onnxruntime's baseline does not depend on aipusim's compiler
    assert isinstance(records[0]["ort_sqnr_db"], float)
    assert 0.0 <= records[0]["ort_top1_agreement"] <= 1.0
    for record in records:
        if record["status"] == "ok":
            assert record["fps"] > 0 and record["bit_exact"] is not None
        else:
            assert record["error"]
    assert "## Per model and mode" in readme_of(result)


def test_classifier_settings_name_the_best_and_the_target() -> None:
    from aipusim.corpus.measure import SETTINGS_TRIED
    from aipusim.studies.corpus import settings_table

    labels = list(SETTINGS_TRIED)
    tried = dict.fromkeys(labels, 10.0) | {labels[4]: 26.5, labels[2]: None}
    low = dict.fromkeys(labels, 6.0) | {labels[3]: 9.5}
    good = dict(zip(LABELS, [timed(100.0)] * 4, strict=True))
    records = records_of("cls_a", ACCURATE | {"settings_sqnr_db": tried}, good)
    records += records_of("cls_b", LOSSY | {"settings_sqnr_db": low}, good)
    records += records_of("det", ACCURATE | {"settings_sqnr_db": None}, good)
    table = settings_table(records)
    assert table["model"].tolist() == ["cls_a", "cls_b"]  # detectors are not tried
    assert table["best setting"].tolist() == [labels[4], labels[3]]
    assert table[">= 25 dB"].tolist() == ["yes", "no"]
    assert math.isnan(table.loc[0, labels[2]])  # a setting that did not quantize
    found = conclusions(records)
    assert any(f"**{labels[4]}** at 26.5 dB, at or above the 25 dB target" in c for c in found)
    assert any(
        f"**{labels[3]}** at 9.5 dB, **below the 25 dB target**; the limiting layer is "
        "conv_7 (12.0 dB, -9.5 dB)" in c
        for c in found
    )
