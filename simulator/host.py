"""The host side: frames streamed over PCIe to each instance replica and results back.

Per replica, one process feeds inputs (H2D, then "start") and one drains outputs (D2H).
``double_buffer`` gives two input and two output buffers, so the input of start ``s+1``
crosses the link while start ``s`` computes; without it the host waits for each start to
finish before sending the next input. Pipeline mode keeps one buffer pair per stage in
flight. Every transfer first takes the host dispatcher for the driver's setup time: in
``multithread`` mode all replicas share one dispatcher thread, in ``multiprocess`` (and the
single-instance modes) each replica has its own. PCIe keeps its GB/s at any core clock, so
its bytes per cycle follow the run's frequency. An *isolated* run (the unloaded latency)
sends each input only once the previous result is back, so a start meets an idle chip.

The host's own work per frame (``host_link.pre_frame_us`` before an input is sent,
``post_frame_us`` once its result is back) runs on a pre- and a post-processing thread
per replica: it overlaps the chip's work on other starts, and a frame counts as done
(throughput, latency) when its post-processing ends.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from aipusim.simulator.links import Link, transfer

if TYPE_CHECKING:
    from aipusim.simulator.engine import Replica, Simulation


def _host_transfer(
    sim: Simulation, rep: Replica, direction: str, nbytes: int, t: int
) -> Generator[Any, Any, tuple[int, int]]:
    """Setup on the dispatcher, then bursts over PCIe and the landing pool's link.

    Returns (cycle the data started to move, cycle it landed)."""
    env = sim.env
    if t > env.now and not env.advance_to(t):
        yield t
    disp: Link = rep.dispatcher
    pool = (
        rep.program.instance.input_pool if direction == "h2d" else rep.program.instance.output_pool
    )
    x = sim.cost.host_transfer(direction, pool, nbytes).transfer
    assert x is not None
    s = max(env.now, disp.free_at)
    disp.free_at = s + x.setup_cycles
    disp.busy_cycles += x.setup_cycles
    start = s + x.setup_cycles
    if nbytes <= 0:
        return start, start
    route = sim.route(x, ("host", rep.index, direction))
    end = yield from transfer(env, route, nbytes, sim.burst_bytes, start, next(sim.streams))
    return start, end


def _host_work(sim: Simulation, worker: Link, cycles: int, t: int) -> Generator[Any, Any, int]:
    """``cycles`` of host processing on ``worker`` from cycle ``t`` (or when it is free);
    returns the cycle it ends."""
    if cycles <= 0:
        return t
    s = max(t, worker.free_at)
    worker.free_at = s + cycles
    worker.busy_cycles += cycles
    end = s + cycles
    if end > sim.env.now and not sim.env.advance_to(end):
        yield end
    return end


def host_inputs(sim: Simulation, rep: Replica) -> Generator[Any, Any, None]:
    """Send each start's input and start the instance when its buffers are free."""
    env = sim.env
    slots = sim.io_slots
    nbytes = rep.input_bytes_per_start
    t = 0
    for s in range(sim.starts):
        if sim.isolated and s > 0:
            # One start at a time: the next input leaves once the last result is back.
            t = max(t, (yield rep.d2h_event(s - 1)))
        if s >= slots:
            # The input buffer is free again once the start that used it has finished.
            t = max(t, (yield rep.done_event(s - slots)))
        rep.issue[s] = max(t, env.now)
        t = yield from _host_work(sim, rep.pre_worker, sim.host_pre_cycles, rep.issue[s])
        begin, end = yield from _host_transfer(sim, rep, "h2d", nbytes, t)
        rep.h2d[s] = (begin, end)
        if nbytes:
            sim.log_host(rep, "h2d", s, begin, end)
        start = end
        if s >= slots:
            start = max(start, (yield rep.d2h_event(s - slots)))
        rep.start_event(s).succeed(start)
        t = env.now


def host_outputs(sim: Simulation, rep: Replica) -> Generator[Any, Any, None]:
    """Fetch each start's output as soon as the instance has finished it."""
    nbytes = rep.output_bytes_per_start
    for s in range(sim.starts):
        done = yield rep.done_event(s)
        begin, end = yield from _host_transfer(sim, rep, "d2h", nbytes, done)
        if nbytes:
            sim.log_host(rep, "d2h", s, begin, end)
        rep.d2h[s] = end
        # the output buffer is free again once the result is back; the frame is done once
        # the host has post-processed it
        rep.d2h_event(s).succeed(end)
        end = yield from _host_work(sim, rep.post_worker, sim.host_post_cycles, end)
        rep.result[s] = end
        if sim.tracer is not None and sim.tracer.b:
            for k in range(sim.frames_per_start):
                sim.tracer.frame(rep, s * sim.frames_per_start + k, rep.issue[s], end)
        if sim.progress is not None:
            sim.progress(sim.frames_per_start)
