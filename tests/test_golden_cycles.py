"""Golden cycle counts of the zoo models: any change to compiler or simulator that moves a
simulated figure shows here, and the golden file is then updated on purpose."""

from __future__ import annotations

import json

import pytest
from golden import CASES, GOLDEN_FILE, SIDE, figures
from zoo_compiles import ZooCompiles

from aipusim import zoo

GOLDEN = json.loads(GOLDEN_FILE.read_text())


#: ViT-B/16 carries 87 M weights at any input size: tens of seconds per case, so its cases
#: run with ``make test-slow`` (DeiT-Tiny, of the same encoder family, has its cases in the
#: fast suite).
SLOW = {"vit_b16"}


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(f"{n}/{c}", marks=[pytest.mark.slow] if n in SLOW else [])
        for n in zoo.names()
        for c in CASES
    ],
)
def test_simulated_figures_match_the_golden_ones(key: str, zoo_compiles: ZooCompiles) -> None:
    # the session's shared compile: the same model, size and config `golden.measure` uses
    name, case = key.split("/")
    mode, cores, resources = CASES[case]
    compiled = zoo_compiles.compiled(
        name, SIDE.get(name, 32), mode=mode, cores=cores, resources=resources
    )
    assert figures(compiled) == GOLDEN[key], (
        f"{key} moved; if on purpose, run `python tests/golden.py` and say why in the commit"
    )
