"""The uncertainty study: bands and drivers on tiny_cnn with few samples, the ranking on
rows whose answer is known, and failed samples reported."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from study_helpers import readme_of

from aipusim.base.errors import ConfigError
from aipusim.studies import StudyResult, run_uncertainty_study
from aipusim.studies.uncertainty import band_table, conclusions, drivers

SAMPLES = 8


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> StudyResult:
    out = tmp_path_factory.mktemp("studies") / "uncertainty"
    return run_uncertainty_study(
        out, models=["tiny_cnn"], samples=SAMPLES, input_size=32, frames=2, workers=1,
        progress=False,
    )  # fmt: skip


def test_bands_surround_the_median_and_rest_on_every_sample(study: StudyResult) -> None:
    table = study.table
    assert list(table["figure"]) == ["fps", "energy", "power"]
    assert (table["p5"] <= table["p50"]).all() and (table["p50"] <= table["p95"]).all()
    assert (table["ok"] + table["failed"] == SAMPLES).all()
    record = json.loads((study.output_dir / "study.json").read_text())
    assert len(record["rows"]) == 1 + SAMPLES
    ok = [r["fps"] for r in record["rows"] if r["sample"] != "file" and not r["error"]]
    assert table.set_index("figure").loc["fps", "p50"] == pytest.approx(np.median(ok))


def test_the_conclusions_quote_the_widest_band_of_the_table(study: StudyResult) -> None:
    widest = study.table.sort_values("width %").iloc[-1]
    line = next(c for c in study.conclusions if c.startswith("Widest band"))
    assert f"({widest['width %']:.1f} % of its p50)" in line
    readme = readme_of(study)
    assert line in readme and "| figure" in readme and "Top drivers (S1)" in readme
    for name in ("bands.png", "drivers.png", "study.json"):
        assert (study.output_dir / name).stat().st_size > 0


def _rows(n: int, errors: int = 0) -> pd.DataFrame:
    """Synthetic samples: fps follows x:a only, energy x:b only, power is constant."""
    rng = np.random.default_rng(0)
    a, b, c = (rng.permutation(n) / n for _ in range(3))
    rows = [{"model": "m", "sample": "file", "fps": 1.5, "energy": 1.5, "power": 1.0,
             "error": "", "x:a": np.nan, "x:b": np.nan, "x:c": np.nan}]  # fmt: skip
    for i in range(n):
        err = "CompileError: boom" if i < errors else ""
        figures = {"fps": 1 + a[i] ** 2, "energy": 1 + b[i], "power": 1.0}
        rows.append({"model": "m", "sample": str(i), **figures, "error": err,
                     "x:a": a[i], "x:b": b[i], "x:c": c[i]})  # fmt: skip
    return pd.DataFrame(rows)


def test_the_number_a_figure_follows_ranks_first() -> None:
    ranked = drivers(_rows(64)).set_index(["figure", "parameter"])["S1"]
    assert ranked["fps"].idxmax() == "a" and ranked["fps", "a"] > 0.8 > ranked["fps", "c"]
    assert ranked["energy"].idxmax() == "b"
    assert (ranked["power"] == 0).all()  # a figure that never moves has no driver


def test_failed_samples_are_counted_and_named() -> None:
    rows = _rows(32, errors=3)
    table = band_table(rows)
    assert (table["failed"] == 3).all() and (table["ok"] == 29).all()
    found = conclusions(table, drivers(rows), rows)
    assert "`m`: 3 of 32 samples failed to compile or run: 3 x CompileError: boom" in found


def test_a_bad_sample_count_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--samples must be an integer 2-4096"):
        run_uncertainty_study(tmp_path / "u", models=["tiny_cnn"], samples=1, progress=False)


def test_the_validation_page_quotes_the_bands_and_drivers() -> None:
    from aipusim.studies.validation import uncertainty_section

    rows = _rows(32)
    study = {
        "samples": 32,
        "bands": band_table(rows).to_dict(orient="records"),
        "drivers": drivers(rows).to_dict(orient="records"),
    }
    text = "\n".join(uncertainty_section(study))
    width = band_table(rows).set_index("figure").loc["fps", "width %"]
    assert f"- FPS: {width:.0f}-{width:.0f} % (widest `m`); measuring `a` (S1" in text
    assert uncertainty_section(None) == []


def test_too_few_samples_to_rank_drivers_still_give_bands(tmp_path: Path) -> None:
    """Four samples: RBD-FAST's bias correction divides by zero on so few (a traceback
    once); the bands stand and the README says why no drivers are ranked."""
    study = run_uncertainty_study(
        tmp_path / "u", models=["tiny_cnn"], samples=4, input_size=16, frames=2, workers=1,
        progress=False,
    )  # fmt: skip
    assert (study.table["ok"] == 4).all()
    assert "No drivers: too few samples ran to rank the numbers" in readme_of(study)
