"""The headline figures of a simulation, each with its value and its definition: one list
that the ``aipusim simulate``/``run`` printout and ``report.md`` both show, so they can
never disagree (definitions: `aipusim.isa.metrics`, `aipusim.simulator.SimResult`).

>>> from types import SimpleNamespace
>>> r = SimpleNamespace(fps=100.0, device_fps=120.0, steady=True, warmup_frames=4,
...     frames_per_start=4, latency_us_unloaded=900.0, latency_us_p50=1000.0,
...     latency_us_p99=1100.0, cold_start_us=2000.0, init_us=500.0, avg_power_w=4.0,
...     peak_power_w={"100ns": 9.0, "10us": 7.0, "1ms": 5.0},
...     energy_mj_per_frame_total=40.0, energy_mj_init=3.0,
...     bytes_per_frame={"ddr": 2.5e6, "l2": 3.7e7, "pcie": 1.5e5})
>>> headline(r)[0]
('system FPS', '100.0', 'steady state, 4 warm-up frame(s) left out; host link included')
>>> headline(r)[-1][:2]
('bytes per frame ddr / l2 / pcie', '2.500 / 37.000 / 0.150 MB')
"""

from __future__ import annotations

from typing import Any


def headline(result: Any) -> list[tuple[str, str, str]]:
    """(figure, value with unit, definition) of each headline figure of ``result``."""
    per = result.frames_per_start
    one = "one frame" if per == 1 else f"one batch of {per} frames"
    if result.steady:
        steady = f"steady state, {result.warmup_frames} warm-up frame(s) left out"
    else:
        steady = "no steady state: only the warm-up start ran (run more frames)"
    peaks = result.peak_power_w
    bands = getattr(result, "bands", None)

    def band(name: str, digits: int) -> str:
        # the spread over the inferred hardware numbers, when the run sampled them
        if bands is None:
            return ""
        b = getattr(bands, name)
        return (
            f"; p5-p95 {b.p5:.{digits}f}-{b.p95:.{digits}f} over {bands.samples} samples of "
            "the (I) numbers"
        )

    return [
        ("system FPS", f"{result.fps:.1f}", f"{steady}; host link included{band('fps', 0)}"),
        ("device FPS", f"{result.device_fps:.1f}", "the same, device only"),
        (
            "latency unloaded",
            f"{result.latency_us_unloaded:.1f} us",
            f"{one} through an idle chip (a second, isolated simulation)",
        ),
        (
            "latency queued p50 / p99",
            f"{result.latency_us_p50:.1f} / {result.latency_us_p99:.1f} us",
            "steady frames, input issued to result back, inputs as fast as the buffers allow",
        ),
        (
            "cold start",
            f"{result.cold_start_us:.1f} us",
            f"INIT ({result.init_us:.1f} us) plus the first result back",
        ),
        ("average power", f"{result.avg_power_w:.3f} W", f"steady state{band('avg_power_w', 3)}"),
        (
            "peak power " + " / ".join(peaks),
            " / ".join(f"{w:.3f}" for w in peaks.values()) + " W",
            "highest average over a sliding window of that length, whole run",
        ),
        (
            "energy per frame",
            f"{result.energy_mj_per_frame_total:.4f} mJ",
            "steady state: a frame's own work plus static power over one frame period"
            + band("energy_mj_per_frame", 4),
        ),
        ("energy of INIT", f"{result.energy_mj_init:.4f} mJ", "once per instance, on its own"),
        (
            "bytes per frame " + " / ".join(result.bytes_per_frame),
            " / ".join(f"{b / 1e6:.3f}" for b in result.bytes_per_frame.values()) + " MB",
            f"{'steady frames' if result.steady else 'every frame (no steady state)'}: what "
            "those links carried, INIT left out",
        ),
    ]


__all__ = ["headline"]
