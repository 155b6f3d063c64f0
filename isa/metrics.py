"""The run metrics, defined once (docs/architecture.md §7): the simulator computes them from
its run, the profiler from a trace, both with these definitions.

**Warm-up and steady state.** A *start* is one run of an instance: one frame, or in batch
mode one frame per core. The first `WARMUP_STARTS` start(s) of every instance are warm-up:
they pay for INIT (constants brought on chip once) and fill the host buffers and, in
pipeline mode, the stages. The steady state is measured between completions: an
instance's rate is the frames completed after its warm-up divided by the time from the
end of its warm-up to its last completion,

    rate_i = (starts_i - WARMUP_STARTS) * frames_per_start / (end_i[-1] - end_i[W - 1])

and the system's ``fps`` is the sum of the instances' rates. A start completes when its
result is back on the host (``fps``) or when the device has finished it (``device_fps``).
With only the warm-up start(s) per instance there is no steady state: ``fps`` is then
the frames divided by the time from the end of INIT to the last completion, and
``steady`` says False.

The steady *window* (energy and average power) runs from the moment every instance has
finished its warm-up to the moment the first instance is done (all instances in steady
state), or, when the instances do not overlap like that, from the first end of a warm-up
to the last completion.

**Bytes per frame** are the bytes the DDR controller, the L2 port and the host link (PCIe,
both directions) carry for one frame at steady state (`bytes_per_frame`): the simulator
counts what its links carried for the steady frames, the compiler's report adds up what
the cost model says a frame's tasks and host transfers move; the keys are the same.

**Peak power** is the highest average power over a sliding window of each length in
`PEAK_WINDOWS` (named ``100ns``, ``10us``, ``1ms``), over the whole run with INIT; a run
shorter than a window gives its average. The power timeline is binned by `POWER_BIN_US`
(coarser for very long runs; the bin is stated with every plot of it).

>>> steady_state([[100, 200, 300, 400]], frames_per_end=1, origin=0)
SteadyState(fps_per_cycle=0.01, frames=3, warmup_frames=1, window=(100, 400), steady=True)
>>> steady_state([[100]], frames_per_end=4, origin=20)
SteadyState(fps_per_cycle=0.05, frames=4, warmup_frames=0, window=(20, 100), steady=False)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: Starts of each instance that are warm-up (INIT, buffer and pipeline fill).
WARMUP_STARTS = 1
#: Windows of the peak-power figure: name -> seconds.
PEAK_WINDOWS: dict[str, float] = {"100ns": 100e-9, "10us": 10e-6, "1ms": 1e-3}
#: Bin of the power timeline, in µs (before coarsening for very long runs).
POWER_BIN_US = 1.0
#: The parts of a unit's power (`aipusim.simulator.power.unit_power_w`): what its actions
#: cost, its clock while busy, its idle clock before the gate closes, its gated floor, its
#: leakage.
UNIT_POWER_PARTS = ("dynamic", "clocked_busy", "clocked_idle", "gated_idle", "leakage")


@dataclass(frozen=True)
class SteadyState:
    """Steady-state throughput of a run (see the module doc).

    ``fps_per_cycle`` frames per cycle (times the clock: frames per second); ``frames``
    the frames it counts; ``warmup_frames`` the frames left out as warm-up; ``window``
    the (first, last) cycle of the steady window; ``steady`` False when no instance got
    past its warm-up, so the figures include it.
    """

    fps_per_cycle: float
    frames: int
    warmup_frames: int
    window: tuple[int, int]
    steady: bool


def steady_state(ends: Sequence[Sequence[int]], frames_per_end: int, origin: int) -> SteadyState:
    """Throughput from each instance's completion cycles ``ends`` (one list per instance,
    one cycle per start, ``frames_per_end`` frames each); ``origin`` is the cycle counting
    starts from when there is no steady state (the end of INIT)."""
    lists = [sorted(int(t) for t in e) for e in ends if len(e)]
    if not lists:
        return SteadyState(0.0, 0, 0, (origin, origin), False)
    w = WARMUP_STARTS
    if all(len(e) > w for e in lists) and all(e[-1] > e[w - 1] for e in lists):
        rate = sum((len(e) - w) * frames_per_end / (e[-1] - e[w - 1]) for e in lists)
        frames = sum(len(e) - w for e in lists) * frames_per_end
        lo = max(e[w - 1] for e in lists)
        hi = min(e[-1] for e in lists)
        if hi <= lo:
            lo, hi = min(e[w - 1] for e in lists), max(e[-1] for e in lists)
        return SteadyState(rate, frames, w * frames_per_end * len(lists), (lo, hi), True)
    frames = sum(len(e) for e in lists) * frames_per_end
    last = max(e[-1] for e in lists)
    span = max(last - origin, 1)
    return SteadyState(frames / span, frames, 0, (origin, last), False)


def steady_frames(starts_per_instance: int) -> list[bool]:
    """Which starts of an instance count in the steady state (queued latency), in order;
    all of them when there is no steady state.

    >>> steady_frames(3), steady_frames(1)
    ([False, True, True], [True])
    """
    if starts_per_instance <= WARMUP_STARTS:
        return [True] * starts_per_instance
    return [s >= WARMUP_STARTS for s in range(starts_per_instance)]


#: The links `bytes_per_frame` reports, each as the link names it adds up.
FRAME_LINKS: dict[str, tuple[str, ...]] = {
    "ddr": ("ddr",),
    "l2": ("l2",),
    "pcie": ("pcie_h2d", "pcie_d2h"),
}


def bytes_per_frame(link_bytes: Mapping[str, float], frames: float) -> dict[str, float]:
    """Bytes per frame over each link of `FRAME_LINKS`, from bytes by link name (a cost
    model `Traffic` or a link's counter: ``ddr``, ``l2``, ``pcie_h2d``, ``pcie_d2h``; other
    names are ignored) carried for ``frames`` frames.

    >>> bytes_per_frame({"ddr": 800, "l2": 1000, "pcie_h2d": 300, "pcie_d2h": 100}, 2)
    {'ddr': 400.0, 'l2': 500.0, 'pcie': 200.0}
    """
    per = max(float(frames), 1.0)
    return {
        key: sum(float(link_bytes.get(n, 0)) for n in names) / per
        for key, names in FRAME_LINKS.items()
    }


@dataclass(frozen=True)
class TokenFigures:
    """One step of a language model (a prefill of the prompt, or one decode step) as
    per-token figures. A *frame* of such a model is one step of ``batch`` sequences, each
    taking ``tokens`` new tokens (the prompt length for a prefill, 1 for a decode step):

    - ``tokens_per_s`` = ``fps`` x batch x tokens (all sequences, all instances);
    - ``energy_mj_per_token`` and ``ddr_bytes_per_token``: per frame / (batch x tokens);
    - ``roofline_tokens_per_s``: the DDR bandwidth roofline, the peak DDR bandwidth over the
      DDR bytes a token reads (weights streamed from DDR, the KV cache, activations that
      spilled there); None when a token reads nothing from DDR (no DDR limit);
    - ``roofline_share`` = tokens_per_s / roofline_tokens_per_s, the share of the DDR
      bandwidth the run draws; a simulator whose DDR link respects its bandwidth keeps it
      at most 1.

    >>> f = token_figures(100.0, 2, 1, 0.5, 1e6, 3.2e10)
    >>> f.tokens_per_s, f.energy_mj_per_token, f.roofline_tokens_per_s, f.roofline_share
    (200.0, 0.25, 64000.0, 0.003125)
    """

    tokens_per_s: float
    energy_mj_per_token: float
    ddr_bytes_per_token: float
    roofline_tokens_per_s: float | None
    roofline_share: float | None


def token_figures(
    fps: float,
    batch: int,
    tokens: int,
    energy_mj_per_frame: float,
    ddr_bytes_per_frame: float,
    ddr_bytes_per_s: float,
) -> TokenFigures:
    """`TokenFigures` of a step run at ``fps`` frames/s (see there)."""
    per_frame = batch * tokens
    ddr = ddr_bytes_per_frame / per_frame
    rate = fps * per_frame
    roofline = ddr_bytes_per_s / ddr if ddr > 0 else None
    return TokenFigures(
        tokens_per_s=rate,
        energy_mj_per_token=energy_mj_per_frame / per_frame,
        ddr_bytes_per_token=ddr,
        roofline_tokens_per_s=roofline,
        roofline_share=rate / roofline if roofline else None,
    )


__all__ = [
    "FRAME_LINKS",
    "PEAK_WINDOWS",
    "POWER_BIN_US",
    "UNIT_POWER_PARTS",
    "WARMUP_STARTS",
    "SteadyState",
    "TokenFigures",
    "bytes_per_frame",
    "steady_frames",
    "steady_state",
    "token_figures",
]
