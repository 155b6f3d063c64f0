"""Each study run once on the tiny zoo model (compiles take a second or two each)."""

from __future__ import annotations

import pytest

from aipusim.studies import (
    StudyResult,
    run_layers_study,
    run_multicore_study,
    run_power_study,
)


@pytest.fixture(scope="session")
def multicore_study(tmp_path_factory: pytest.TempPathFactory) -> StudyResult:
    out = tmp_path_factory.mktemp("studies") / "multicore"
    return run_multicore_study(out, models=["tiny_cnn"], frames=2, progress=False)


@pytest.fixture(scope="session")
def power_study(tmp_path_factory: pytest.TempPathFactory) -> StudyResult:
    out = tmp_path_factory.mktemp("studies") / "power"
    return run_power_study(
        out, models=["tiny_cnn"], limits=(0.25, 0.5, 1.0), frames=2, progress=False
    )


@pytest.fixture(scope="session")
def layers_study(tmp_path_factory: pytest.TempPathFactory) -> StudyResult:
    out = tmp_path_factory.mktemp("studies") / "layers"
    return run_layers_study(out, models=["tiny_cnn"], frames=2, workers=1, progress=False)
