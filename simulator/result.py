"""`SimResult`: what a run measured (time, throughput, latency, utilization, energy, power)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from aipusim.isa.trace_schema import Component
from aipusim.simulator.power import dynamic_scale, power_timeline, static_power_w
from aipusim.simulator.units import COMPONENTS, C

if TYPE_CHECKING:
    from aipusim.simulator.engine import Simulation


def _union_cycles(start: np.ndarray, end: np.ndarray) -> int:
    """Cycles covered by at least one of the intervals [start, end)."""
    if len(start) == 0:
        return 0
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    # A new block starts where an interval begins after everything before it ended.
    new = np.concatenate([[True], s[1:] > reach[:-1]])
    block_start = s[new]
    idx = np.flatnonzero(new)
    block_end = np.maximum.reduceat(e, idx)
    return int((block_end - block_start).sum())


def _gather_log(sim: Simulation) -> tuple[np.ndarray, ...]:
    """(rid, physical core, phase, start, end) of every executed task and host transfer."""
    parts: list[tuple[np.ndarray, ...]] = []
    for pcore, phase, rids, starts, ends in sim.segments:
        n = len(starts)
        if n:
            parts.append(
                (
                    rids[:n],
                    np.full(n, pcore, np.int64),
                    np.full(n, phase, np.int64),
                    np.frombuffer(starts, np.int64),
                    np.frombuffer(ends, np.int64),
                )
            )
    if sim.host_log:
        h = np.array(sim.host_log, dtype=np.int64)
        parts.append((h[:, 0], h[:, 1], h[:, 2], h[:, 3], h[:, 4]))
    if not parts:
        return tuple(np.zeros(0, np.int64) for _ in range(5))
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(5))


def _poll_cycles(sim: Simulation, spans: list[tuple[int, int]]) -> int:
    """Control-core cycles of the polling loop: one tick per interval while any wait is
    pending (the loop checks every pending token in one pass)."""
    if not spans:
        return 0
    arr = np.array(spans, dtype=np.int64)
    ticks = -(-_union_cycles(arr[:, 0], arr[:, 1]) // sim.poll_interval)
    return int(ticks * sim.poll_cost)


def poll_count(sim: Simulation) -> int:
    """Polling ticks over the whole run (for the control energy)."""
    cycles = sum(_poll_cycles(sim, c.poll_spans) for rep in sim.replicas for c in rep.cores)
    return cycles // max(1, sim.poll_cost)


@dataclass(repr=False)
class SimResult:
    """Outcome of `simulate`. Times in cycles unless the name says otherwise.

    ``fps`` counts the host link (frames per second the host gets back), ``device_fps`` the
    device only (frames per second between the first start and the last finish). INIT work
    (constants loaded once per instance) is part of the run and of its energy; energy per
    frame is the run's total energy divided by the frames, so short runs pay more for INIT
    (``energy_mj_init`` says how much).
    """

    model: str
    multicore_mode: str
    frequency_hz: int
    voltage_v: float
    frames: int
    replicas: int
    active_cores: int
    total_cycles: int
    fps: float
    device_fps: float
    latency_us: np.ndarray
    device_latency_cycles: np.ndarray
    start_cycles: np.ndarray  # cycle each start (frame or batch) began on the device
    lower_bound_cycles: int
    busy_cycles: dict[str, int]
    utilization: dict[str, float]
    core_utilization: dict[str, float]
    link_utilization: dict[str, float]
    energy_mj_per_frame: dict[str, float]
    energy_mj_init: float
    avg_power_w: float
    peak_power_w: float
    static_power_w: dict[str, float]
    power_timeline: pd.DataFrame
    event_counts: dict[str, int]
    _task_log: Callable[[], pd.DataFrame] = field(repr=False)
    _task_log_cache: pd.DataFrame | None = field(default=None, repr=False)
    #: The trace the run wrote (its power timeline beside it), or None.
    trace_path: Path | None = None

    @property
    def task_log(self) -> pd.DataFrame:
        """Every executed task (and host transfer): core, unit, layer, frame, task, start,
        end; sorted by start. ``frame`` is the start index (-1 for INIT)."""
        if self._task_log_cache is None:
            self._task_log_cache = self._task_log()
        return self._task_log_cache

    @property
    def seconds(self) -> float:
        return self.total_cycles / self.frequency_hz

    @property
    def latency_us_p50(self) -> float:
        return float(np.percentile(self.latency_us, 50))

    @property
    def latency_us_p99(self) -> float:
        return float(np.percentile(self.latency_us, 99))

    @property
    def energy_mj_per_frame_total(self) -> float:
        return float(sum(self.energy_mj_per_frame.values()))

    def events(self) -> list[tuple[int, str, int, int, int, int]]:
        """``(core, unit, frame, task, start, end)`` of every task, by start then core.

        >>> # see tests/simulator for exact logs of small programs
        """
        log = self.task_log
        rows = zip(
            log["core"],
            log["unit"],
            log["frame"],
            log["task"],
            log["start"],
            log["end"],
            strict=True,
        )
        return [(int(a), str(b), int(c), int(d), int(e), int(f)) for a, b, c, d, e, f in rows]

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "multicore_mode": self.multicore_mode,
            "frequency_hz": self.frequency_hz,
            "voltage_v": self.voltage_v,
            "frames": self.frames,
            "replicas": self.replicas,
            "fps": self.fps,
            "device_fps": self.device_fps,
            "latency_us_p50": self.latency_us_p50,
            "latency_us_p99": self.latency_us_p99,
            "energy_mj_per_frame": self.energy_mj_per_frame_total,
            "energy_mj_per_frame_by_component": self.energy_mj_per_frame,
            "energy_mj_init": self.energy_mj_init,
            "avg_power_w": self.avg_power_w,
            "peak_power_w": self.peak_power_w,
            "static_power_w": self.static_power_w,
            "total_cycles": self.total_cycles,
            "seconds": self.seconds,
            "lower_bound_cycles": self.lower_bound_cycles,
            "utilization": self.utilization,
            "core_utilization": self.core_utilization,
            "link_utilization": self.link_utilization,
            "busy_cycles": self.busy_cycles,
            "event_counts": self.event_counts,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    def __repr__(self) -> str:
        return (
            f"SimResult(frames={self.frames}, fps={self.fps:.1f}, "
            f"latency_us_p50={self.latency_us_p50:.1f}, "
            f"energy_mj_per_frame={self.energy_mj_per_frame_total:.3f})"
        )


def build_result(sim: Simulation) -> SimResult:
    arch, freq = sim.arch, sim.freq_hz
    rid, core, phase, start, end = _gather_log(sim)
    d2h_end = [rep.d2h[s] for rep in sim.replicas for s in range(sim.starts)]
    total = int(max([*d2h_end, int(end.max()) if len(end) else 0, 1]))

    op = sim.rid_op[rid]  # op row of each logged activity
    names = sorted(set(sim.op_unit))
    code_of = {u: i for i, u in enumerate(names)}
    ucode = np.array([code_of[u] for u in sim.op_unit], dtype=np.int64)[op]
    is_host = np.array([u.startswith("pcie") for u in names], dtype=bool)[ucode]
    physical = sorted({c.physical for rep in sim.replicas for c in rep.cores})
    unit_names = sorted({u for c in sim.codes.values() for u in c.unit_names})
    dur = end - start
    busy: dict[str, int] = {}
    core_util: dict[str, float] = {}
    util: dict[str, float] = {}
    per_key = np.bincount(core * len(names) + ucode, weights=dur, minlength=0) if len(rid) else []
    for p in physical:
        for u in unit_names:
            key = p * len(names) + code_of[u]
            busy[f"core{p}.{u}"] = int(per_key[key]) if key < len(per_key) else 0
        mask = (core == p) & ~is_host
        core_util[f"core{p}"] = _union_cycles(start[mask], end[mask]) / total
        run = next(c for rep in sim.replicas for c in rep.cores if c.physical == p)
        busy[f"core{p}.control"] = int(run.ctl.busy_cycles) + _poll_cycles(sim, run.poll_spans)
    for u in [*unit_names, "control"]:
        util[u] = sum(busy[f"core{p}.{u}"] for p in physical) / (total * len(physical))
    link_util = {name: link.busy_cycles / total for name, link in sim.links.items()}

    volts = sim.voltage_v
    table = sim.op_energy * dynamic_scale(arch, volts)[None, :]
    comp_pj = np.bincount(op, minlength=len(table)) @ table
    tracer = sim.tracer
    lines = tracer.lines if tracer is not None else 0
    extra = np.zeros(len(COMPONENTS))
    polls = poll_count(sim)
    extra[C[Component.CONTROL]] = (lines + polls) * arch.energy.control_task_pj
    extra *= dynamic_scale(arch, volts)
    comp_pj = comp_pj + extra
    static = static_power_w(arch, freq, len(physical), volts)
    static_w = sum(static.values())
    seconds = total / freq
    comp_pj[C[Component.STATIC]] = static_w * seconds * 1e12
    frames_total = sim.frames * len(sim.replicas)
    per_frame = {c.value: float(comp_pj[i] * 1e-9 / frames_total) for i, c in enumerate(COMPONENTS)}
    init_mask = phase < 0
    init_pj = float((np.bincount(op[init_mask], minlength=len(table)) @ table).sum())
    profile = power_timeline(
        table, op, start, end, extra, total, freq, static_w, arch.power.peak_window_us
    )

    latency = []
    dev_lat = []
    starts_t, dones = [], []
    for rep in sim.replicas:
        for s in range(sim.starts):
            lat_us = (rep.d2h[s] - rep.issue[s]) / freq * 1e6
            latency += [lat_us] * sim.frames_per_start
            dev_lat.append(rep.done[s] - rep.started[s])
            starts_t.append(rep.started[s])
            dones.append(rep.done[s])
    device_span = max(dones) - min(starts_t)
    fps = frames_total / seconds
    device_fps = frames_total / (device_span / freq) if device_span > 0 else float("inf")

    # One frame of the instance: how often each op runs in the FRAME phase of every core.
    frame_ops = np.bincount(
        np.concatenate([c.frame.op_index for c in sim.codes.values()]).astype(np.int64),
        minlength=len(sim.ops),
    )
    inst_macs = sum(
        int(n) * o.macs for n, o in zip(frame_ops, sim.ops, strict=True) if n and o.unit == "mvm"
    )
    ddr_bytes = sum(
        int(n) * o.xfer.nbytes
        for n, o in zip(frame_ops, sim.ops, strict=True)
        if n and o.xfer is not None and "ddr" in o.xfer.links
    )
    n_cores = len(sim.codes)
    bound = max(
        inst_macs / (arch.mvm.macs_per_cycle * n_cores),
        ddr_bytes / arch.ddr_bw_bytes_per_cycle(freq),
    )
    names_arr = np.array(names, dtype=object)
    layer_names, rid_layer, rid_seq = sim.layer_names, sim.rid_layer, sim.rid_seq

    def task_log() -> pd.DataFrame:
        log = pd.DataFrame(
            {
                "core": core,
                "unit": names_arr[ucode],
                "layer": layer_names[rid_layer[rid]],
                "frame": phase,
                "task": rid_seq[rid],
                "start": start,
                "end": end,
            }
        )
        return log.sort_values(["start", "core", "end"], kind="stable").reset_index(drop=True)

    return SimResult(
        model=sim.program.model,
        multicore_mode=str(sim.program.multicore_mode),
        frequency_hz=freq,
        voltage_v=volts,
        frames=frames_total,
        replicas=len(sim.replicas),
        active_cores=len(physical),
        total_cycles=total,
        fps=fps,
        device_fps=device_fps,
        latency_us=np.array(latency),
        device_latency_cycles=np.array(dev_lat),
        start_cycles=np.array(starts_t),
        lower_bound_cycles=int(np.ceil(bound)),
        busy_cycles=busy,
        utilization=util,
        core_utilization=core_util,
        link_utilization=link_util,
        energy_mj_per_frame=per_frame,
        energy_mj_init=init_pj * 1e-9,
        avg_power_w=float(comp_pj.sum() * 1e-12 / seconds),
        peak_power_w=profile.peak_w,
        static_power_w=static,
        power_timeline=profile.timeline,
        event_counts={
            "tasks": int(np.sum(rid_seq[rid] >= 0)),
            "trace_lines": lines,
            "polls": polls,
        },
        _task_log=task_log,
    )
