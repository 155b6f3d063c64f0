"""The sensitivity study on tiny_cnn with three numbers: tables, tornado charts, and what the
conclusions say about them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from study_helpers import readme_of

from aipusim.arch import load_arch
from aipusim.base.errors import ConfigError
from aipusim.studies import StudyResult, run_sensitivity_study
from aipusim.studies.sensitivity import parameters

KEYS = ["l1.port_bytes_per_cycle", "energy.l1_read_pj_per_byte", "noc.sync_cycles"]


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> StudyResult:
    out = tmp_path_factory.mktemp("studies") / "sensitivity"
    return run_sensitivity_study(
        out, models=["tiny_cnn"], input_size=32, keys=KEYS, frames=2, workers=1, progress=False
    )


def test_every_number_is_measured_at_both_ends_of_its_range(study: StudyResult) -> None:
    variants = pd.read_csv(study.output_dir / "variants.csv")
    assert len(variants) == 1 + 2 * len(KEYS)
    ranges = {r.key: r for r in load_arch().ranges}
    for key in KEYS:
        ends = variants[variants["parameter"] == key].set_index("end")["value"]
        assert ends["low"] == ranges[key].low and ends["high"] == ranges[key].high
    assert (variants["status"] == "ok").all()


def test_an_energy_number_moves_energy_not_fps(study: StudyResult) -> None:
    row = study.table.set_index("parameter").loc["energy.l1_read_pj_per_byte"]
    assert row["fps low %"] == row["fps high %"] == 0.0
    assert row["energy low %"] < 0 < row["energy high %"]
    assert not row["recompiled"]


def test_the_port_width_is_a_compiler_input(study: StudyResult) -> None:
    row = study.table.set_index("parameter").loc["l1.port_bytes_per_cycle"]
    assert row["recompiled"]
    assert row["fps low %"] < 0  # a 32 B/cycle port starves the MVM's 64 B/cycle stream


def test_readme_states_what_moved_most_and_what_did_not(study: StudyResult) -> None:
    readme = readme_of(study)
    assert "`tiny_cnn`: FPS moves most with `l1.port_bytes_per_cycle`" in readme
    assert "`noc.sync_cycles`" in readme  # a one-core model has no global token
    assert "change no figure of any model" in readme
    for name in ("tornado_fps.png", "tornado_energy.png", "variants.csv"):
        assert (study.output_dir / name).stat().st_size > 0


def test_fixed_ranges_are_listed_not_moved() -> None:
    moved, fixed = parameters(load_arch())
    assert "mvm.utilization_step" in [r.key for r in fixed]
    assert all(r.low < r.high for r in moved)
    with pytest.raises(ConfigError, match="--keys must name inferred arch numbers with a range"):
        parameters(load_arch(), ["chip.cores"])


def test_a_folder_of_other_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="must be empty or an earlier `aipusim report` folder"):
        run_sensitivity_study(tmp_path, models=["tiny_cnn"], keys=KEYS[:1], progress=False)
