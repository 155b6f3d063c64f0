"""`SimResult`: what a run measured (time, throughput, latency, utilization, energy, power).

The figures follow the definitions of `aipusim.isa.metrics` (warm-up, steady state, peak
windows), the same ones the profiler uses on a trace.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from aipusim.isa.cost import COMPONENTS, C, dynamic_scale, static_power_w
from aipusim.isa.metrics import (
    POWER_BIN_US,
    WARMUP_STARTS,
    SteadyState,
    bytes_per_frame,
    steady_frames,
    steady_state,
)
from aipusim.isa.trace_schema import Component
from aipusim.simulator.power import (
    EnergyCurve,
    PowerProfile,
    add_dynamic_w,
    peak_power_w,
    power_timeline,
    unit_clocks_w,
    unit_power_w,
)

if TYPE_CHECKING:
    import pandas as pd

    from aipusim.arch.model import Arch
    from aipusim.isa.cost import CostModel
    from aipusim.isa.program import Program
    from aipusim.isa.table import TaskTable
    from aipusim.isa.tasks import Task
    from aipusim.simulator.parts import RunConfig
    from aipusim.simulator.prepare import CoreCode
    from aipusim.simulator.units import Op


class TaskLog(Protocol):
    """The raw logs of a run (`parts.Ledger`, also read off a `RunRecord`)."""

    segments: list
    host_log: list


class LinkTables(Protocol):
    """What counting the links' bytes needs (a `RunRecord`)."""

    op_link_bytes: np.ndarray
    link_names: list[str]
    replicas: Sequence[ReplicaRecord]
    config: RunConfig
    cost: CostModel


@dataclass(frozen=True)
class CoreRecord:
    """What one core of a replica recorded over the run."""

    physical: int
    code: CoreCode
    #: Control-core cycles spent dispatching tasks (the polling loop's are ``poll_spans``).
    control_busy_cycles: int
    #: (first check, resolution) of every polled wait (use_hw_tokens=false).
    poll_spans: Sequence[tuple[int, int]]
    #: Cycle INIT ended on every unit of the core.
    init_end_cycle: int


@dataclass(frozen=True)
class ReplicaRecord:
    """What one replica recorded over the run: its cores and, per start, the cycle the
    host issued the input (``issue``), its H2D transfer (begin, landed), the device
    started and finished it (``started``, ``done``), its D2H transfer ended (``d2h``) and
    the result was ready on the host (``result``)."""

    index: int
    cores: Sequence[CoreRecord]
    issue: Mapping[int, int]
    h2d: Mapping[int, tuple[int, int]]
    started: Mapping[int, int]
    done: Mapping[int, int]
    d2h: Mapping[int, int]
    result: Mapping[int, int]


@dataclass(frozen=True)
class RunRecord:
    """What a finished run recorded, with the tables to reduce it: the input of
    `build_result` (the engine makes it, `Simulation.record`)."""

    model: str
    multicore_mode: str
    arch: Arch
    #: What ran: the program and each logical core's tasklist (the functional mode reads
    #: the tasks behind the logged rows).
    program: Program
    tasklists: Mapping[int, Sequence[Task] | TaskTable]
    #: The run's cost model (control energy, tasklist fetches, the lower bound).
    cost: CostModel
    config: RunConfig
    freq_hz: int
    voltage_v: float
    #: Frames of one replica (whole starts).
    frames: int
    #: Every distinct op of the run and each logical core's prepared tasklist.
    ops: Sequence[Op]
    codes: Mapping[int, CoreCode]
    #: Per op row (ops, then one per host direction): energy (pJ per component at nominal
    #: voltage), unit, bytes over each link of ``link_names``.
    op_energy: np.ndarray
    op_unit: Sequence[str]
    op_link_bytes: np.ndarray
    link_names: list[str]
    #: Per task row (``rid``): op row, position in its phase (-1: host transfer), layer.
    rid_op: np.ndarray
    rid_seq: np.ndarray
    rid_layer: np.ndarray
    layer_names: np.ndarray
    #: The ledger's logs (`parts.Ledger`).
    segments: list
    host_log: list
    #: Each replica's frame cycles and its cores' control-core busy time and polled waits.
    replicas: Sequence[ReplicaRecord]
    #: (busy cycles, bytes) of each link over the run, private copies included.
    link_totals: Mapping[str, tuple[int, int]]
    #: Trace lines written (each costs control-core energy).
    trace_lines: int


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


def _gather_log(log: TaskLog) -> tuple[np.ndarray, ...]:
    """(rid, physical core, phase, start, end) of every executed task and host transfer."""
    parts: list[tuple[np.ndarray, ...]] = []
    for pcore, phase, rids, starts, ends in log.segments:
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
    if log.host_log:
        h = np.array(log.host_log, dtype=np.int64)
        parts.append((h[:, 0], h[:, 1], h[:, 2], h[:, 3], h[:, 4]))
    if not parts:
        return tuple(np.zeros(0, np.int64) for _ in range(5))
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(5))


def _poll_cycles(config: RunConfig, spans: list[tuple[int, int]]) -> int:
    """Control-core cycles of the polling loop: one tick per interval while any wait is
    pending (the loop checks every pending token in one pass)."""
    if not spans:
        return 0
    arr = np.array(spans, dtype=np.int64)
    ticks = -(-_union_cycles(arr[:, 0], arr[:, 1]) // config.poll_interval_cycles)
    return int(ticks * config.poll_cost_cycles)


def poll_count(config: RunConfig, replicas: Sequence[ReplicaRecord]) -> int:
    """Polling ticks over the whole run (for the control energy)."""
    cycles = sum(_poll_cycles(config, c.poll_spans) for rep in replicas for c in rep.cores)
    return cycles // max(1, config.poll_cost_cycles)


@dataclass(repr=False)
class SimResult:
    """Outcome of `simulate`. Times in cycles unless the name says otherwise.

    Steady state (`aipusim.isa.metrics`): the first start of every instance is warm-up
    (``warmup_frames`` frames); ``fps`` is the steady-state system throughput with the host
    link (results back on the host), ``device_fps`` the same with the device's finish
    times; ``latency_us_p50``/``p99`` the queued latency (input issued to result back, the
    host sending as fast as its buffers allow) of the steady frames; ``energy_mj_per_frame``
    and ``avg_power_w`` over the steady window; ``bytes_per_frame`` what the DDR controller,
    the L2 port and the host link carried for the steady frames (`link_bytes`), per frame.
    ``steady`` is False when the run had only the warm-up start(s): those figures then
    include the warm-up.

    On its own: ``init_us`` (INIT, constants brought on chip once per instance),
    ``cold_start_us`` (from the run's start to the first result back: INIT plus the first
    frame), ``energy_mj_init`` (INIT's tasks plus static power while it lasts),
    ``latency_us_unloaded`` (one start through an idle, warm chip: a second, isolated
    simulation, run on first use). ``peak_power_w`` maps each window of
    `aipusim.isa.metrics.PEAK_WINDOWS` to the highest sliding-window average over the whole
    run; ``power_timeline`` is binned by ``power_bin_us``.
    """

    model: str
    multicore_mode: str
    frequency_hz: int
    voltage_v: float
    frames: int
    frames_per_start: int  # frames one start of an instance carries (batch: one per core)
    replicas: int
    active_cores: int
    total_cycles: int
    fps: float
    device_fps: float
    warmup_frames: int
    steady: bool
    latency_us: np.ndarray  # queued latency of every frame, by replica then start
    steady_frame: np.ndarray  # per frame of latency_us: counted in the steady state
    device_latency_cycles: np.ndarray
    start_cycles: np.ndarray  # cycle each start (frame or batch) began on the device
    init_us: float
    cold_start_us: float
    lower_bound_cycles: int
    busy_cycles: dict[str, int]
    utilization: dict[str, float]
    core_utilization: dict[str, float]
    link_utilization: dict[str, float]
    #: Bytes per steady frame over DDR, L2 and PCIe (`aipusim.isa.metrics.bytes_per_frame`).
    bytes_per_frame: dict[str, float]
    energy_mj_per_frame: dict[str, float]
    energy_mj_init: float
    energy_mj_run: float
    avg_power_w: float
    static_power_w: dict[str, float]
    #: Per unit kind, average W over the run: ``dynamic``, ``clocked_busy`` (its clock while
    #: busy), ``clocked_idle`` (idle, clock not yet gated), ``gated_idle`` and ``leakage``
    #: (`aipusim.simulator.power`).
    unit_power_w: dict[str, dict[str, float]]
    _power: PowerProfile = field(repr=False)
    power_bin_us: float
    event_counts: dict[str, int]
    _task_log: Callable[[], pd.DataFrame] = field(repr=False)
    _peaks: Callable[[], dict[str, float]] = field(repr=False)
    _task_log_cache: pd.DataFrame | None = field(default=None, repr=False)
    _peaks_cache: dict[str, float] | None = field(default=None, repr=False)
    _power_cache: pd.DataFrame | None = field(default=None, repr=False)
    _unloaded: Callable[[], float] | None = field(default=None, repr=False)
    _unloaded_cache: float | None = field(default=None, repr=False)
    #: The trace the run wrote (its power timeline beside it), or None.
    trace_path: Path | None = None
    #: Functional mode (`simulate(..., functional=True)`), else None: the outputs of the
    #: last frame (int8, logical shape, not dequantized) by name; the summary (tasks
    #: executed, saturated MVM sums, hazard-checked bytes, the input used, output shapes);
    #: the tensors of the program's memory map as their layer left them in the last frame,
    #: with the last writer of each element (a row of ``functional_tasks``; -1: the
    #: constants image or nobody).
    outputs: dict[str, np.ndarray] | None = None
    functional: dict[str, Any] | None = None
    tensors: dict[str, np.ndarray] | None = None
    tensor_writers: dict[str, np.ndarray] | None = None
    functional_tasks: pd.DataFrame | None = None
    #: ``energy_model="value_aware"``: the energy figures with each Mvm charged by the
    #: activity of its data (`aipusim.simulator.functional.energy`), beside the cycle
    #: model's figures above, which stay as they are.
    energy_value_aware: dict[str, Any] | None = None
    #: ``simulate(..., uncertainty=N)``: the p5-p95 bands of FPS, energy per frame and
    #: average power over N joint samples of the inferred arch numbers
    #: (`aipusim.calibrate.uncertainty.Bands`), else None.
    bands: Any = None
    #: How finely the links were modelled (`aipusim.simulator.detail.Detail`).
    detail: str = "fast"
    #: Detailed mode: per L1 requester (a unit queue, ``multicast_in`` for data multicast
    #: in from another core), summed over the cores, the cycles it waited for a bank held
    #: by another requester (``bank_waits``), for a port (``port_waits``), and its L1
    #: accesses (``accesses``) in the banked L1 (`aipusim.simulator.detail.l1`); None in
    #: the fast mode.
    l1_waits: dict[str, dict[str, int]] | None = None

    @property
    def task_log(self) -> pd.DataFrame:
        """Every executed task (and host transfer): core, unit, layer, frame, task, start,
        end; sorted by start. ``frame`` is the start index (-1 for INIT)."""
        if self._task_log_cache is None:
            self._task_log_cache = self._task_log()
        return self._task_log_cache

    @property
    def power_timeline(self) -> pd.DataFrame:
        """Power per component in bins of ``power_bin_us`` (one row per bin: start and end
        cycle, watts per component, total), made into a table the first time it is read."""
        if self._power_cache is None:
            self._power_cache = self._power.timeline()
        return self._power_cache

    @property
    def peak_power_w(self) -> dict[str, float]:
        """Window name -> the highest average power over a sliding window of that length
        anywhere in the run, INIT included (`aipusim.isa.metrics.PEAK_WINDOWS`), W; worked
        out exactly on the run's energy curve the first time it is read."""
        if self._peaks_cache is None:
            self._peaks_cache = self._peaks()
        return dict(self._peaks_cache)

    @property
    def latency_us_unloaded(self) -> float:
        """One start (a frame; a batch in batch mode) through an idle chip: input over the
        host link, the device, the result back, with nothing else in flight. Measured by a
        second simulation of the same program (one instance, INIT done, each input sent
        once the previous result is back), run the first time this is read."""
        if self._unloaded_cache is None:
            if self._unloaded is None:
                return float("nan")
            self._unloaded_cache = self._unloaded()
        return self._unloaded_cache

    @property
    def seconds(self) -> float:
        return self.total_cycles / self.frequency_hz

    @property
    def _queued(self) -> np.ndarray:
        return self.latency_us[self.steady_frame] if self.steady_frame.any() else self.latency_us

    @property
    def latency_us_p50(self) -> float:
        """Median queued latency of the steady frames."""
        return float(np.percentile(self._queued, 50))

    @property
    def latency_us_p99(self) -> float:
        """99th percentile of the queued latency of the steady frames."""
        return float(np.percentile(self._queued, 99))

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
            "detail": self.detail,
            "frames": self.frames,
            "frames_per_start": self.frames_per_start,
            "replicas": self.replicas,
            "fps": self.fps,
            "device_fps": self.device_fps,
            "warmup_frames": self.warmup_frames,
            "steady": self.steady,
            "latency_us_unloaded": self.latency_us_unloaded,
            "latency_us_p50": self.latency_us_p50,
            "latency_us_p99": self.latency_us_p99,
            "init_us": self.init_us,
            "cold_start_us": self.cold_start_us,
            "energy_mj_per_frame": self.energy_mj_per_frame_total,
            "energy_mj_per_frame_by_component": self.energy_mj_per_frame,
            "energy_mj_init": self.energy_mj_init,
            "energy_mj_run": self.energy_mj_run,
            "avg_power_w": self.avg_power_w,
            "peak_power_w": self.peak_power_w,
            "power_bin_us": self.power_bin_us,
            "static_power_w": self.static_power_w,
            "unit_power_w": self.unit_power_w,
            "total_cycles": self.total_cycles,
            "seconds": self.seconds,
            "lower_bound_cycles": self.lower_bound_cycles,
            "utilization": self.utilization,
            "core_utilization": self.core_utilization,
            "link_utilization": self.link_utilization,
            "bytes_per_frame": self.bytes_per_frame,
            "busy_cycles": self.busy_cycles,
            "event_counts": self.event_counts,
            **({"functional": self.functional} if self.functional is not None else {}),
            **(
                {"energy_value_aware": self.energy_value_aware}
                if self.energy_value_aware is not None
                else {}
            ),
            **(self.bands.to_dict() if self.bands is not None else {}),
            **({"l1_waits": self.l1_waits} if self.l1_waits is not None else {}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    def __repr__(self) -> str:
        return (
            f"SimResult(frames={self.frames}, fps={self.fps:.1f}, "
            f"latency_us_p50={self.latency_us_p50:.1f}, "
            f"energy_mj_per_frame={self.energy_mj_per_frame_total:.3f})"
        )


def link_bytes(tables: LinkTables, op: np.ndarray, phase: np.ndarray, first: int) -> dict[str, int]:
    """Bytes each shared link carried for the starts from ``first`` on (``-1``: the whole
    run, INIT included): the transfers of their tasks and host transfers, and the tasklist
    records fetched for them. Over the whole run this is the links' own byte counters
    (`Simulation.link_totals`). ``op``/``phase``: op row and phase of every logged activity.
    """
    runs = np.bincount(op[phase >= first], minlength=len(tables.op_link_bytes))
    moved = runs @ tables.op_link_bytes
    out = {name: int(n) for name, n in zip(tables.link_names, moved, strict=True)}
    config = tables.config
    fetched = sum(
        config.tasklist_bytes(core.code, p)
        for rep in tables.replicas
        for core in rep.cores
        for p in range(max(first, -1), config.starts)
    )
    for name in tables.cost.tasklist_fetch(fetched).links:
        out[name] += fetched
    return out


def _throughput(rec: RunRecord, ends: str, origin: int) -> SteadyState:
    """Steady state of the run from each replica's completion cycles (``d2h`` or ``done``)."""
    starts = rec.config.starts
    per_replica = [[getattr(rep, ends)[s] for s in range(starts)] for rep in rec.replicas]
    return steady_state(per_replica, rec.config.frames_per_start, origin)


def build_result(rec: RunRecord, unloaded: Callable[[], float] | None = None) -> SimResult:
    """The `SimResult` of a finished run from its record; ``unloaded`` measures the
    unloaded latency (in µs) when first asked."""
    arch, freq, config = rec.arch, rec.freq_hz, rec.config
    starts, per_start = config.starts, config.frames_per_start
    rid, core, phase, start, end = _gather_log(rec)
    d2h_end = [rep.result[s] for rep in rec.replicas for s in range(starts)]
    total = int(max([*d2h_end, int(end.max()) if len(end) else 0, 1]))

    op = rec.rid_op[rid]  # op row of each logged activity
    names = sorted(set(rec.op_unit))
    code_of = {u: i for i, u in enumerate(names)}
    ucode = np.array([code_of[u] for u in rec.op_unit], dtype=np.int64)[op]
    is_host = np.array([u.startswith("pcie") for u in names], dtype=bool)[ucode]
    physical = sorted({c.physical for rep in rec.replicas for c in rep.cores})
    unit_names = sorted({u for c in rec.codes.values() for u in c.unit_names})
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
        run = next(c for rep in rec.replicas for c in rep.cores if c.physical == p)
        busy[f"core{p}.control"] = run.control_busy_cycles + _poll_cycles(config, run.poll_spans)
    for u in [*unit_names, "control"]:
        util[u] = sum(busy[f"core{p}.{u}"] for p in physical) / (total * len(physical))
    link_util = {name: busy / total for name, (busy, _) in rec.link_totals.items()}

    # -- energy and power -----------------------------------------------------------
    volts = rec.voltage_v
    scale = np.array(dynamic_scale(arch, volts))
    table = rec.op_energy * scale[None, :]
    lines = rec.trace_lines
    extra = np.zeros(len(COMPONENTS))
    polls = poll_count(config, rec.replicas)
    extra[C[Component.CONTROL]] = rec.cost.control_pj(lines + polls)
    extra *= scale
    static = static_power_w(arch, freq, len(physical), volts)
    units = unit_power_w(arch, freq, volts, (core, ucode, start, end), names, physical, total)
    static.update(unit_clocks_w(arch, units))
    static_w = sum(static.values())
    static_pj_per_cycle = static_w * 1e12 / freq
    # Energy not tied to a logged activity (trace lines, polls) goes evenly over the run;
    # static power is constant. Per component, pJ per cycle.
    const_pj = extra / total
    const_pj[C[Component.STATIC]] += static_pj_per_cycle
    run_pj = np.bincount(op, minlength=len(table)) @ table + extra
    run_pj[C[Component.STATIC]] = static_pj_per_cycle * total
    add_dynamic_w(units, run_pj, total / freq)

    init_mask = phase < 0
    init_end = max((c.init_end_cycle for rep in rec.replicas for c in rep.cores), default=0)
    init_pj = float((np.bincount(op[init_mask], minlength=len(table)) @ table).sum())
    init_pj += static_pj_per_cycle * init_end

    host = _throughput(rec, "result", init_end)
    device = _throughput(rec, "done", init_end)
    # Energy per frame at steady state: the work of the steady frames (their own tasks and
    # host transfers) per frame, plus the constant power over one steady frame period.
    first = WARMUP_STARTS if host.steady else 0
    mine = phase >= first
    work_pj = np.bincount(op[mine], minlength=len(table)) @ table
    period = 1.0 / host.fps_per_cycle if host.fps_per_cycle > 0 else 0.0
    frame_pj = work_pj / max(host.frames, 1) + const_pj * period
    per_frame = {c.value: float(frame_pj[i] * 1e-9) for i, c in enumerate(COMPONENTS)}
    avg_w = float(frame_pj.sum() * 1e-12 * host.fps_per_cycle * freq)
    frame_bytes = bytes_per_frame(link_bytes(rec, op, phase, first), host.frames)

    def peaks() -> dict[str, float]:
        curve = EnergyCurve(
            start,
            end,
            table[op].sum(axis=1),
            constant_pj_per_cycle=float(const_pj.sum()),
            total_cycles=total,
        )
        return peak_power_w(curve, freq)

    profile = power_timeline(table, op, start, end, extra, total, freq, static_w, POWER_BIN_US)

    # -- frames ------------------------------------------------------------------------
    latency = []
    counted = []
    dev_lat = []
    starts_t = []
    keep = steady_frames(starts)
    for rep in rec.replicas:
        for s in range(starts):
            lat_us = (rep.result[s] - rep.issue[s]) / freq * 1e6
            latency += [lat_us] * per_start
            counted += [keep[s]] * per_start
            dev_lat.append(rep.done[s] - rep.started[s])
            starts_t.append(rep.started[s])
    frames_total = rec.frames * len(rec.replicas)
    cold = max(rep.result[0] for rep in rec.replicas)

    # One frame of the instance: how often each op runs in the FRAME phase of every core.
    frame_ops = np.bincount(
        np.concatenate([c.frame.op_index for c in rec.codes.values()]).astype(np.int64),
        minlength=len(rec.ops),
    )
    inst_macs = sum(
        int(n) * o.macs for n, o in zip(frame_ops, rec.ops, strict=True) if n and o.unit == "mvm"
    )
    ddr_bytes = sum(
        int(n) * o.xfer.nbytes
        for n, o in zip(frame_ops, rec.ops, strict=True)
        if n and o.xfer is not None and "ddr" in o.xfer.links
    )
    n_cores = len(rec.codes)
    bound = rec.cost.lower_bound_cycles(inst_macs, ddr_bytes, n_cores)
    names_arr = np.array(names, dtype=object)
    layer_names, rid_layer, rid_seq = rec.layer_names, rec.rid_layer, rec.rid_seq

    def task_log() -> pd.DataFrame:
        import pandas as pd

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

    us = 1e6 / freq
    return SimResult(
        model=rec.model,
        multicore_mode=rec.multicore_mode,
        frequency_hz=freq,
        voltage_v=volts,
        frames=frames_total,
        frames_per_start=per_start,
        replicas=len(rec.replicas),
        active_cores=len(physical),
        total_cycles=total,
        fps=host.fps_per_cycle * freq,
        device_fps=device.fps_per_cycle * freq,
        warmup_frames=host.warmup_frames,
        steady=host.steady,
        latency_us=np.array(latency),
        steady_frame=np.array(counted, dtype=bool),
        device_latency_cycles=np.array(dev_lat),
        start_cycles=np.array(starts_t),
        init_us=init_end * us,
        cold_start_us=cold * us,
        lower_bound_cycles=int(np.ceil(bound)),
        busy_cycles=busy,
        utilization=util,
        core_utilization=core_util,
        link_utilization=link_util,
        bytes_per_frame=frame_bytes,
        energy_mj_per_frame=per_frame,
        energy_mj_init=init_pj * 1e-9,
        energy_mj_run=float(run_pj.sum() * 1e-9),
        avg_power_w=avg_w,
        static_power_w=static,
        unit_power_w=units,
        _power=profile,
        power_bin_us=profile.bin_cycles * us,
        event_counts={
            "tasks": int(np.sum(rid_seq[rid] >= 0)),
            "trace_lines": lines,
            "polls": polls,
        },
        _task_log=task_log,
        _peaks=peaks,
        _unloaded=unloaded,
    )
