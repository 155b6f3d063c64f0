"""Test doubles of the compile+simulate pipeline for the sweep engine tests (tests only).

They compute deterministic figures from the point itself (its config and the arch with the
point's overrides), so engine behaviour (resume, dedup, failure isolation, backends) can be
checked without the cost of compiling. Module-level functions, so the local pool and Dask
workers can import them by reference (pytest puts this folder on ``sys.path``, and Dask's
spawned workers inherit it).
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from aipusim.arch import load_arch
from aipusim.sweep.space import SweepPoint


def arch_figures(point: SweepPoint) -> dict[str, Any]:
    """Figures that follow from the arch and config: MVM rate scaled by the MVM limit."""
    arch = load_arch(point.arch_path, point.arch_overrides())
    config = point.config()
    share = float(config.mvm_utilization_limit) * config.aipu_cores_used / arch.chip.cores
    work = 1e3 * len(point.model) * point.frames
    fps = arch.peak_tops * 1e3 * share / work * (1.0 + arch.ddr.latency_ns / 100.0)
    watts = 0.5 + 4.0 * share
    return {
        "fps": fps,
        "device_fps": 1.1 * fps,
        "warmup_frames": 1,
        "latency_us_unloaded": 0.9e6 / fps,
        "latency_us_p50": 1e6 / fps,
        "latency_us_p99": 1.1e6 / fps,
        "cold_start_us": 2e6 / fps,
        "energy_mj_per_frame": 1e3 * watts / fps,
        "energy_mj_init": 0.1,
        "avg_power_w": watts,
        "peak_power_w_100ns": 2.0 * watts,
        "peak_power_w_10us": 1.5 * watts,
        "peak_power_w_1ms": 1.2 * watts,
        "fps_per_w": fps / watts,
        "total_cycles": int(arch.clock.default_hz * point.frames / fps),
        "compile_s": 0.0,
        "simulate_s": 0.0,
    }


def fails_for_resnet(point: SweepPoint) -> dict[str, Any]:
    """`arch_figures`, except that every resnet18 point raises (a crashing pipeline)."""
    if point.model == "resnet18":
        raise RuntimeError(f"boom\non {point.label()}")
    return arch_figures(point)


def dies_for_resnet(point: SweepPoint) -> dict[str, Any]:
    """`arch_figures`, except that a resnet18 point kills its worker process (like an OOM)."""
    if point.model == "resnet18":
        time.sleep(0.5)  # let the tiny_cnn points finish first
        os._exit(1)
    return arch_figures(point)


def slow_figures(point: SweepPoint) -> dict[str, Any]:
    """`arch_figures` after a pause; leaves a marker file per finished point in $SWEEP_MARKS."""
    time.sleep(float(os.environ.get("SWEEP_SLEEP_S", "0.3")))
    figures = arch_figures(point)
    marks = os.environ.get("SWEEP_MARKS")
    if marks:
        (Path(marks) / uuid.uuid4().hex).touch()
    return figures


def main(argv: list[str]) -> None:
    """``python sweep_evaluators.py DIR FLUSH_EVERY``: a slow sweep to interrupt."""
    from aipusim.sweep import build_space, parse_backend, run_sweep

    directory, flush_every = argv[0], int(argv[1])
    space = build_space(*SPACE_ARGS, frames=2)
    run_sweep(
        space,
        directory,
        evaluator=slow_figures,
        backend=parse_backend(workers=2),
        flush_every=flush_every,
        flush_seconds=1e6,
        progress=False,
    )


#: The space the interruption tests sweep: 2 models x 3 x 2 = 12 points.
SPACE_ARGS = (
    ["tiny_cnn", "resnet18"],
    ["mvm_utilization_limit=0.25,0.5,1", "multicore_mode=batch,cooperative"],
)


if __name__ == "__main__":
    main(sys.argv[1:])
