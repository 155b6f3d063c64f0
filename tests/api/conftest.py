"""Compiled models shared by the API tests (each compile takes a second or more)."""

from __future__ import annotations

import pytest

import aipusim


@pytest.fixture(scope="module")
def tiny() -> aipusim.CompiledModel:
    """tiny_cnn with a batch range 1..4 (compiled for 2) and height/width 32 or 64."""
    info = aipusim.InputInfo(((1, 2, 4), 3, (32, 32, 64), (32, 32, 64)))
    return aipusim.compile("tiny_cnn", inputs={"input": info})


@pytest.fixture(scope="module")
def tiny_sim(tiny: aipusim.CompiledModel) -> aipusim.SimResult:
    return tiny.simulate(frames=3)
