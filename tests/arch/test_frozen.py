"""The inferred (I) numbers of the bundled arch file are those of the last recorded fit."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from aipusim.arch import load_arch
from aipusim.arch.frozen import inferred_values, unrecorded_changes

RECORD = Path(__file__).resolve().parents[2] / "docs" / "validation.json"


def test_the_arch_file_holds_the_recorded_fit() -> None:
    # A failure here means an (I) number moved outside a recorded fit: undo it, or re-fit with
    # `aipusim report validation -o docs --fit --reason "..."` (new data or a changed unit model).
    record = json.loads(RECORD.read_text())
    assert unrecorded_changes(load_arch(), record["inferred"]) == []


def test_the_record_says_what_was_fitted_to_and_why() -> None:
    record = json.loads(RECORD.read_text())
    assert record["reason"] and record["commit"] and record["objective"]
    assert record["data"] and all(d["source"] for d in record["data"])
    # the fitted numbers are (I) numbers, recorded at their fitted values
    assert all(record["inferred"][k] == v for k, v in record["fitted"].items())


def test_a_moved_number_is_named() -> None:
    arch = load_arch()
    recorded = inferred_values(arch)
    moved = replace(arch, dpu=replace(arch.dpu, lanes=arch.dpu.lanes * 2))
    assert unrecorded_changes(moved, recorded) == [
        f"`dpu.lanes` is {arch.dpu.lanes * 2} in the arch file, but the fit record says "
        f"{arch.dpu.lanes}"
    ]


def test_added_and_dropped_numbers_are_named() -> None:
    arch = load_arch()
    recorded = inferred_values(arch)
    del recorded["dpu.lanes"]
    recorded["dpu.gone_cycles"] = 3
    assert unrecorded_changes(arch, recorded) == [
        "`dpu.lanes` is an (I) number the fit record lacks",
        "`dpu.gone_cycles` is in the fit record but no longer an (I) number of the arch file",
    ]
