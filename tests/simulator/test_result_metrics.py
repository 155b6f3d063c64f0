"""The run metrics of `aipusim.isa.metrics` on hand-written programs, hand-computed.

The program: one core, an INIT task (MVM, 100 vectors: 8 x 100 + 16 = 816 cycles) and one
frame task (MVM, 1000 vectors: 8016 cycles), no host bytes and no host setup cost, so the
host hands every frame over at once. Each task is dispatched 8 cycles after its phase
starts, so INIT ends 824 cycles after the tasklist is in L2 (``t0``) and every frame
takes 8 + 8016 = 8024 cycles: start ``s`` completes at ``t0 + 824 + (s + 1) * 8024``.
"""

from __future__ import annotations

import pytest
from helpers import mvm, program

from aipusim.arch import load_arch
from aipusim.isa.program import MulticoreMode
from aipusim.isa.tasks import Phase
from aipusim.simulator import simulate

ARCH = load_arch(overrides={"host_link.setup_us": 0.0})
FREQ = 800_000_000
PERIOD = 8024
INIT = 824


def run(frames: int, cores: int = 1, mode: MulticoreMode = MulticoreMode.COOPERATIVE, **kw):
    tasks = [mvm(100, phase=Phase.INIT), mvm(1000)]
    prog = program(cores, mode, stream_tasklist=False, **kw)
    return simulate(prog, dict.fromkeys(range(cores), tasks), arch=ARCH, frames=frames)


def loaded(result) -> int:
    """Cycle the tasklist was in L2 (INIT's task is dispatched 8 cycles later)."""
    log = result.task_log
    return int(log.loc[log["frame"] == -1, "start"].min()) - 8


def test_fps_leaves_out_the_warm_up_start() -> None:
    r = run(frames=4)
    assert (r.warmup_frames, r.steady) == (1, True)
    # 3 frames after the first, one per 8024 cycles: INIT and the fill are left out
    assert r.fps == pytest.approx(FREQ / PERIOD)
    assert r.device_fps == pytest.approx(FREQ / PERIOD)
    # ... so the frame count does not change it, unlike frames / run time would
    assert run(frames=2).fps == pytest.approx(r.fps)
    assert r.frames / r.seconds < 0.99 * r.fps


def test_batch_warm_up_is_one_start_of_every_core() -> None:
    r = run(frames=8, cores=4, mode=MulticoreMode.BATCH)
    assert (r.frames_per_start, r.warmup_frames) == (4, 4)
    assert r.fps == pytest.approx(4 * FREQ / PERIOD)


def test_a_single_start_has_no_steady_state() -> None:
    r = run(frames=1)
    t0 = loaded(r)
    assert (r.warmup_frames, r.steady) == (0, False)
    # one frame from the end of INIT to its result
    assert r.fps == pytest.approx(FREQ / PERIOD)
    assert r.init_us == pytest.approx((t0 + INIT) / 800)


def test_cold_start_is_init_plus_the_first_result() -> None:
    r = run(frames=4)
    t0 = loaded(r)
    assert r.init_us == pytest.approx((t0 + INIT) / 800)
    assert r.cold_start_us == pytest.approx((t0 + INIT + PERIOD) / 800)


def test_queued_latency_counts_the_steady_frames_only() -> None:
    r = run(frames=4)
    t0 = loaded(r)
    # Two I/O buffers: starts 0 and 1 are issued at cycle 0, start s >= 2 when s - 2 is
    # done, so s = 2, 3 wait one frame behind the core: 2 x 8024 from issue to result.
    # Start 1 waited for INIT and frame 0 (t0 + 824 + 2 x 8024); start 0 is warm-up.
    first, second, queued = t0 + INIT + PERIOD, t0 + INIT + 2 * PERIOD, 2 * PERIOD
    assert r.latency_us.tolist() == pytest.approx([first / 800, second / 800] + [queued / 800] * 2)
    assert r.steady_frame.tolist() == [False, True, True, True]
    assert r.latency_us_p50 == pytest.approx(2 * PERIOD / 800)
    assert r.latency_us_p99 == pytest.approx(
        (2 * PERIOD + 0.98 * (t0 + INIT)) / 800  # numpy's linear interpolation of 3 values
    )


def test_unloaded_latency_is_one_frame_on_an_idle_chip() -> None:
    # An isolated run: the input of start 1 leaves once start 0's result is back, so it
    # meets an idle, warm chip: dispatch plus the MVM, 8024 cycles.
    r = run(frames=4)
    assert r.latency_us_unloaded == pytest.approx(PERIOD / 800)
    assert r.latency_us_unloaded < r.latency_us_p50
    # Four Batch-1 replicas on the chip: still one frame on an idle chip.
    many = run(frames=2, mode=MulticoreMode.MULTIPROCESS, resources=0.25)
    assert many.replicas == 4 and many.latency_us_unloaded == pytest.approx(PERIOD / 800)


def test_energy_per_frame_is_steady_and_init_is_apart() -> None:
    r4, r8 = run(frames=4), run(frames=8)
    static_w = sum(r4.static_power_w.values())
    # a frame's own work plus the static power over one frame period
    assert r4.energy_mj_per_frame["static"] == pytest.approx(static_w * PERIOD / FREQ * 1e3)
    # idle power is the run's average (activity-based clock gating): the run's idle edges
    # weigh a little less in a longer run, so the static share of a frame moves by < 0.1 %
    assert r4.energy_mj_per_frame == pytest.approx(r8.energy_mj_per_frame, rel=1e-3)
    assert r4.avg_power_w == pytest.approx(r4.energy_mj_per_frame_total * 1e-3 * r4.fps)
    # INIT: its MVM task (the same kind as a frame's, 100 of 1000 vectors) plus static power
    # while it lasted, once per run
    t0 = loaded(r4)
    init_static = static_w * (t0 + INIT) / FREQ * 1e3
    frame_mvm = r4.energy_mj_per_frame["mvm"]
    assert r4.energy_mj_init > init_static
    assert r4.energy_mj_init - init_static < frame_mvm
    assert r4.energy_mj_init == pytest.approx(r8.energy_mj_init, rel=1e-3)


def test_peak_power_by_window() -> None:
    # One frame, no INIT: between loading and the end, one MVM task of 8016 cycles.
    prog = program(1, stream_tasklist=False)
    r = simulate(prog, {0: [mvm(1000)]}, arch=ARCH, frames=1)
    static_w = sum(r.static_power_w.values())
    run_mj = r.energy_mj_run
    mvm_mj = run_mj - static_w * r.seconds * 1e3
    task_w = mvm_mj * 1e-3 / (8016 / FREQ)
    # 100 ns (80 cycles) and 10 us (8000 cycles) fit inside the task: its power + static
    assert r.peak_power_w["100ns"] == pytest.approx(task_w + static_w)
    assert r.peak_power_w["10us"] == pytest.approx(task_w + static_w)
    # 1 ms is longer than the run: the run's average
    assert r.total_cycles < 800_000
    assert r.peak_power_w["1ms"] == pytest.approx(run_mj * 1e-3 / r.seconds)
    assert list(r.peak_power_w) == ["100ns", "10us", "1ms"]
