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

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aipusim.simulator.links import Link, transfer

if TYPE_CHECKING:
    from aipusim.isa.cost import CostModel
    from aipusim.simulator.clock import RunEnvironment
    from aipusim.simulator.engine import Replica
    from aipusim.simulator.parts import Fabric, Ledger, RunConfig
    from aipusim.simulator.trace import Tracer


@dataclass(frozen=True)
class HostSide:
    """The parts of the run the host processes use."""

    env: RunEnvironment
    config: RunConfig
    #: The run's cost model (a host transfer's setup, links and bytes).
    cost: CostModel
    fabric: Fabric
    ledger: Ledger
    #: Task row (``rid``) of each direction's transfers in the ledger: "h2d", "d2h".
    host_rid: Mapping[str, int]
    tracer: Tracer | None
    #: Called with the number of frames each time frames come back to the host.
    progress: Callable[[int], None] | None


def _log(host: HostSide, rep: Replica, direction: str, s: int, begin: int, end: int) -> None:
    """Log a host transfer of start ``s`` (and trace it at level M)."""
    host.ledger.host_log.append((host.host_rid[direction], rep.cores[0].physical, s, begin, end))
    tracer = host.tracer
    if tracer is not None and tracer.m:
        nbytes = rep.input_bytes_per_start if direction == "h2d" else rep.output_bytes_per_start
        tracer.host(rep, direction, s, begin, end, nbytes)


def _host_transfer(
    host: HostSide, rep: Replica, direction: str, nbytes: int, t: int
) -> Generator[Any, Any, tuple[int, int]]:
    """Setup on the dispatcher, then bursts over PCIe and the landing pool's link.

    Returns (cycle the data started to move, cycle it landed)."""
    env = host.env
    if t > env.now and not env.advance_to(t):
        yield t
    disp: Link = rep.dispatcher
    pool = (
        rep.program.instance.input_pool if direction == "h2d" else rep.program.instance.output_pool
    )
    x = host.cost.host_transfer(direction, pool, nbytes).transfer
    assert x is not None
    s = max(env.now, disp.free_at)
    disp.free_at = s + x.setup_cycles
    disp.busy_cycles += x.setup_cycles
    start = s + x.setup_cycles
    if nbytes <= 0:
        return start, start
    route = host.fabric.route(x, ("host", rep.index, direction), ())
    burst = host.config.burst_bytes
    end = yield from transfer(env, route, nbytes, burst, start, next(host.fabric.streams))
    return start, end


def _host_work(env: RunEnvironment, worker: Link, cycles: int, t: int) -> Generator[Any, Any, int]:
    """``cycles`` of host processing on ``worker`` from cycle ``t`` (or when it is free);
    returns the cycle it ends."""
    if cycles <= 0:
        return t
    s = max(t, worker.free_at)
    worker.free_at = s + cycles
    worker.busy_cycles += cycles
    end = s + cycles
    if end > env.now and not env.advance_to(end):
        yield end
    return end


def host_inputs(host: HostSide, rep: Replica) -> Generator[Any, Any, None]:
    """Send each start's input and start the instance when its buffers are free."""
    env, cfg = host.env, host.config
    slots = cfg.io_slots
    nbytes = rep.input_bytes_per_start
    t = 0
    for s in range(cfg.starts):
        if cfg.isolated and s > 0:
            # One start at a time: the next input leaves once the last result is back.
            t = max(t, (yield rep.d2h_event(s - 1)))
        if s >= slots:
            # The input buffer is free again once the start that used it has finished.
            t = max(t, (yield rep.done_event(s - slots)))
        rep.issue[s] = max(t, env.now)
        t = yield from _host_work(env, rep.pre_worker, cfg.host_pre_cycles, rep.issue[s])
        begin, end = yield from _host_transfer(host, rep, "h2d", nbytes, t)
        rep.h2d[s] = (begin, end)
        if nbytes:
            _log(host, rep, "h2d", s, begin, end)
        start = end
        if s >= slots:
            start = max(start, (yield rep.d2h_event(s - slots)))
        rep.start_event(s).succeed(start)
        t = env.now


def host_outputs(host: HostSide, rep: Replica) -> Generator[Any, Any, None]:
    """Fetch each start's output as soon as the instance has finished it."""
    cfg, tracer = host.config, host.tracer
    per_start = cfg.frames_per_start
    nbytes = rep.output_bytes_per_start
    for s in range(cfg.starts):
        done = yield rep.done_event(s)
        begin, end = yield from _host_transfer(host, rep, "d2h", nbytes, done)
        if nbytes:
            _log(host, rep, "d2h", s, begin, end)
        rep.d2h[s] = end
        # the output buffer is free again once the result is back; the frame is done once
        # the host has post-processed it
        rep.d2h_event(s).succeed(end)
        end = yield from _host_work(host.env, rep.post_worker, cfg.host_post_cycles, end)
        rep.result[s] = end
        if tracer is not None and tracer.b:
            for k in range(per_start):
                tracer.frame(rep, s * per_start + k, rep.issue[s], end)
        if host.progress is not None:
            host.progress(per_start)
