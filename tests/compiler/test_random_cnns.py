"""Property: every small CNN with trained-weight pathologies compiles and runs bit-exact
through the functional simulator, or is refused with a named error of the bad-input class
(exit code 2). An internal error (a compiler bug) or a mismatch fails.

The models come from `random_cnns` (its `LAYERS`, `HEADS` and `PATHOLOGIES` tables). The
fast variant is derandomized with no example database, so CI runs the same examples every
time; the slow variant explores many more.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from bitexact import compile_bit_exact
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from random_cnns import random_cnn

from aipusim.base.errors import AipuSimError

#: The multicore modes a model is compiled for.
CONFIGS = (
    {},
    {"aipu_cores_used": 4, "multicore_mode": "batch"},
    {"aipu_cores_used": 4, "multicore_mode": "cooperative"},
)


def compiles_bit_exact_or_is_refused(data: st.DataObject) -> None:
    model = random_cnn(data.draw)
    config = data.draw(st.sampled_from(CONFIGS))
    with tempfile.TemporaryDirectory() as tmp:
        try:
            compile_bit_exact(model, Path(tmp) / "out", config)
        except AipuSimError as exc:
            if exc.exit_code != 2:
                raise
            print(f"refused ({type(exc).__name__}): {exc}")


_SETTINGS = {
    "deadline": None,
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


@settings(max_examples=15, derandomize=True, **_SETTINGS)
@given(st.data())
def test_random_cnns_compile_bit_exact_or_are_refused_by_name(data: st.DataObject) -> None:
    compiles_bit_exact_or_is_refused(data)


@pytest.mark.slow
@settings(max_examples=300, **_SETTINGS)
@given(st.data())
def test_many_random_cnns_compile_bit_exact_or_are_refused_by_name(data: st.DataObject) -> None:
    compiles_bit_exact_or_is_refused(data)
