"""Golden cycle counts of the zoo models: any change to compiler or simulator that moves a
simulated figure shows here, and the golden file is then updated on purpose."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from golden import CASES, GOLDEN_FILE, measure

from aipusim import zoo

GOLDEN = json.loads(GOLDEN_FILE.read_text())


#: ViT-B/16 carries 87 M weights at any input size: a minute or two per case.
SLOW = {"vit_b16"}


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(f"{n}/{c}", marks=[pytest.mark.slow] if n in SLOW else [])
        for n in zoo.names()
        for c in CASES
    ],
)
def test_simulated_figures_match_the_golden_ones(key: str, tmp_path: Path) -> None:
    name, case = key.split("/")
    assert measure(name, case, tmp_path) == GOLDEN[key], (
        f"{key} moved; if on purpose, run `python tests/golden.py` and say why in the commit"
    )
