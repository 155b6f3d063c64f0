"""The metric definitions shared by the simulator and the profiler (`aipusim.isa.metrics`)."""

from __future__ import annotations

import pytest

from aipusim.isa.metrics import PEAK_WINDOWS, WARMUP_STARTS, steady_frames, steady_state


def test_the_rule_is_one_warm_up_start_and_three_named_windows() -> None:
    assert WARMUP_STARTS == 1
    assert PEAK_WINDOWS == {"100ns": 100e-9, "10us": 10e-6, "1ms": 1e-3}


def test_instances_add_their_steady_rates() -> None:
    # instance 0: a frame every 10 cycles after its warm-up; instance 1: every 20
    s = steady_state([[50, 60, 70, 80], [55, 75, 95]], frames_per_end=1, origin=0)
    assert s.fps_per_cycle == pytest.approx(3 / 30 + 2 / 40)
    assert (s.frames, s.warmup_frames, s.steady) == (5, 2, True)
    # all instances past their warm-up (55) until the first one is done (80)
    assert s.window == (55, 80)


def test_a_batch_start_carries_several_frames() -> None:
    s = steady_state([[100, 300, 500]], frames_per_end=4, origin=0)
    assert (s.fps_per_cycle, s.frames, s.warmup_frames) == (8 / 400, 8, 4)


def test_without_a_second_start_the_warm_up_is_counted() -> None:
    s = steady_state([[500], [520]], frames_per_end=1, origin=100)
    assert (s.steady, s.warmup_frames, s.frames) == (False, 0, 2)
    assert s.fps_per_cycle == pytest.approx(2 / 420)
    assert s.window == (100, 520)


def test_non_overlapping_instances_take_the_whole_steady_span() -> None:
    s = steady_state([[10, 20], [30, 40]], frames_per_end=1, origin=0)
    assert s.window == (10, 40)


def test_steady_frames_of_an_instance() -> None:
    assert steady_frames(4) == [False, True, True, True]
    assert steady_frames(1) == [True]
    assert steady_state([], 1, 7).fps_per_cycle == 0.0
