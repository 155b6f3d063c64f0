"""`EnergyCurve` and the peak power by window, on hand-made activities."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from aipusim.simulator.power import EnergyCurve, peak_power_w


def curve() -> EnergyCurve:
    # 1 pJ/cycle constant; a burst of 200 pJ over [100, 102) (100 pJ/cycle) and a long task
    # of 2000 pJ over [1000, 3000) (1 pJ/cycle); the run is 10,000 cycles.
    return EnergyCurve(
        np.array([100, 1000]),
        np.array([102, 3000]),
        np.array([200.0, 2000.0]),
        constant_pj_per_cycle=1.0,
        total_cycles=10_000,
    )


def test_energy_up_to_any_cycle_is_exact() -> None:
    c = curve()
    assert c.energy_pj(np.array([0, 101, 102, 2000, 10_000])).tolist() == [
        0.0,
        101 + 100,
        102 + 200,
        2000 + 200 + 1000,
        10_000 + 2200,
    ]


@pytest.mark.parametrize(
    ("window", "average"),
    [
        (1, 101.0),  # inside the burst
        (2, 101.0),  # the whole burst
        (10, 1 + 200 / 10),  # the burst and 8 quiet cycles
        (2000, 2.0),  # the long task beats the burst spread over 2000 cycles (1.1)
        (4000, 1 + 2200 / 4000),  # a window holding both
        (20_000, 12_200 / 10_000),  # longer than the run: its average
    ],
)
def test_peak_is_the_best_window_anywhere(window: int, average: float) -> None:
    assert curve().peak_pj_per_cycle(window) == pytest.approx(average)


def test_named_windows_in_watts() -> None:
    # at 1 GHz a cycle is 1 ns: 100 ns = 100 cycles, 10 us = 10,000 cycles (the whole run)
    peaks = peak_power_w(curve(), 1_000_000_000)
    assert list(peaks) == ["100ns", "10us", "1ms"]
    assert peaks["100ns"] == pytest.approx((1 + 200 / 100) * 1e-3)
    assert peaks["10us"] == pytest.approx(1.22e-3)
    assert peaks["1ms"] == pytest.approx(1.22e-3)


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 60), st.integers(1, 30), st.floats(0.0, 100.0)),
        min_size=1,
        max_size=12,
    ),
    st.integers(1, 100),
)
def test_peak_equals_the_brute_force_maximum(tasks: list, window: int) -> None:
    start = np.array([s for s, _, _ in tasks])
    end = start + np.array([d for _, d, _ in tasks])
    energy = np.array([e for _, _, e in tasks])
    total = int(end.max()) + 5
    c = EnergyCurve(start, end, energy, constant_pj_per_cycle=0.5, total_cycles=total)
    if window >= total:
        best = c.energy_pj(np.array([total]))[0] / total
    else:
        t = np.arange(total - window + 1)  # every integer position (breaks are integers)
        best = float((c.energy_pj(t + window) - c.energy_pj(t)).max()) / window
    assert c.peak_pj_per_cycle(window) == pytest.approx(best)
