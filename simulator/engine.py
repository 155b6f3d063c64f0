"""The run: one SimPy environment wiring cores, shared links, tokens and the host.

Build a `Simulation` from a `Program` and its tasklists, call `run()`, get a `SimResult`.
Time is integer cycles of the AIPU clock. Everything is deterministic: processes are created
in a fixed order, SimPy breaks ties by creation order, and no randomness is used.
"""

from __future__ import annotations

import gc
import itertools
import math
from collections.abc import Callable, Generator, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import simpy

from aipusim.arch.model import Arch
from aipusim.base.errors import DeadlockError, SimulationError, TasklistError
from aipusim.isa.cost import COMPONENTS, Burst, CostModel, Transfer, burst_cycles, pcie_wire_bytes
from aipusim.isa.cost import Link as CostLink
from aipusim.isa.encoding import RECORD_BYTES
from aipusim.isa.program import MulticoreMode, Program
from aipusim.isa.table import TaskTable
from aipusim.isa.tasks import Pool, Task
from aipusim.simulator.clock import RunEnvironment
from aipusim.simulator.core import CoreRun, describe_block, unit_process
from aipusim.simulator.detail import Detail
from aipusim.simulator.host import HostSide, host_inputs, host_outputs
from aipusim.simulator.links import Link, Route, transfer
from aipusim.simulator.parts import Fabric, Ledger, RunConfig
from aipusim.simulator.ports import PortGroup
from aipusim.simulator.prepare import UNIT_ORDER, CoreCode, prepare_core
from aipusim.simulator.tokens import BarrierHub, Token
from aipusim.simulator.trace import Tracer
from aipusim.simulator.units import Op, TaskCoster

if TYPE_CHECKING:
    from aipusim.simulator.detail.l1 import L1Calendar
    from aipusim.simulator.result import ReplicaRecord, RunRecord, SimResult


def check_voltage(arch: Arch, freq_hz: int, voltage_v: float | None) -> float:
    """The supply voltage of a run: ``voltage_v`` if the chip can run ``freq_hz`` at it
    (from the lowest operating point that reaches the clock up to the highest point of the
    table), else a `SimulationError`; None gives that lowest point."""
    lowest = arch.clock.voltage_at(freq_hz)
    if voltage_v is None:
        return lowest
    highest = max(p.voltage_v for p in arch.clock.vf_points)
    if not lowest - 1e-9 <= voltage_v <= highest + 1e-9:
        valid = f"{lowest:g}" if lowest == highest else f"{lowest:g}-{highest:g}"
        raise SimulationError(
            f"voltage_v must be {valid} V at {freq_hz / 1e6:g} MHz (the "
            f"operating points of {arch.chip.name}), not {voltage_v:g}"
        )
    return float(voltage_v)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector. Preparing and running allocate millions of
    small acyclic objects (records, tuples, events) that reference counting frees; the
    collector would re-scan all the live ones on every generation sweep for nothing."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class Replica:
    """One copy of the instance on the chip: its cores, global tokens, barriers, frames."""

    def __init__(
        self,
        env: RunEnvironment,
        config: RunConfig,
        program: Program,
        index: int,
        global_tokens: int,
        dispatcher: Link,
    ) -> None:
        self.env = env
        self.starts = config.starts
        self.frames_per_start = config.frames_per_start
        self.index = index
        self.program = program
        self.gtok = [Token(f"rep{index}.global{i}") for i in range(global_tokens)]
        self.barriers = BarrierHub(env)
        self.dispatcher = dispatcher
        self.cores: list[CoreRun] = []
        inst = program.instance
        self.input_bytes_per_start = inst.input_bytes * config.frames_per_start
        self.output_bytes_per_start = inst.output_bytes * config.frames_per_start
        self.issue: dict[int, int] = {}
        self.h2d: dict[int, tuple[int, int]] = {}
        self.d2h: dict[int, int] = {}
        #: When each start's results are ready on the host: back over PCIe, post-processed.
        self.result: dict[int, int] = {}
        #: The host threads that pre-process inputs and post-process results of this replica.
        self.pre_worker = Link(f"host_pre{index}", 1.0)
        self.post_worker = Link(f"host_post{index}", 1.0)
        self.done: dict[int, int] = {}
        self.started: dict[int, int] = {}
        self._events: dict[tuple[str, int], simpy.Event] = {}

    def record(self) -> ReplicaRecord:
        """What this replica and its cores recorded over the finished run."""
        from aipusim.simulator.result import CoreRecord, ReplicaRecord

        cores = [
            CoreRecord(
                physical=c.physical,
                code=c.code,
                control_busy_cycles=int(c.ctl.busy_cycles),
                poll_spans=c.poll_spans,
                init_end_cycle=c.done_event(-1).value,
            )
            for c in self.cores
        ]
        return ReplicaRecord(
            index=self.index,
            cores=cores,
            issue=self.issue,
            h2d=self.h2d,
            started=self.started,
            done=self.done,
            d2h=self.d2h,
            result=self.result,
        )

    def _event(self, name: str, s: int) -> simpy.Event:
        ev = self._events.get((name, s))
        if ev is None:
            ev = self._events[(name, s)] = self.env.event()
        return ev

    def start_event(self, s: int) -> simpy.Event:
        return self._event("start", s)

    def done_event(self, s: int) -> simpy.Event:
        return self._event("done", s)

    def d2h_event(self, s: int) -> simpy.Event:
        return self._event("d2h", s)

    def barrier_cores(self, mask: int, seq: int, phase: int, core: CoreRun) -> frozenset[int]:
        n = len(self.cores)
        cores = (
            frozenset(range(n)) if mask == 0 else frozenset(i for i in range(8) if mask >> i & 1)
        )
        if not cores <= frozenset(range(n)) or core.logical not in cores:
            raise TasklistError(
                f"core {core.logical} task {seq} (Barrier, layer {core.code.layer(phase, seq)!r}): "
                f"core_mask must name cores of the instance 0-{n - 1} including its own, "
                f"not {mask:#b}"
            )
        return cores

    def gather_frames(self) -> Generator[Any, Any, None]:
        """Gather the cores' frame ends into instance-level 'done' events."""
        for s in range(self.starts):
            end = 0
            for c in self.cores:
                end = max(end, (yield c.done_event(s)))
            self.done[s] = end
            self.done_event(s).succeed(end)


class Simulation:
    """A configured run; `run()` executes it once and returns a `SimResult`."""

    def __init__(
        self,
        program: Program,
        tasklists: Mapping[int, Sequence[Task] | TaskTable],
        arch: Arch,
        *,
        frames: int = 8,
        tracer: Tracer | None = None,
        progress: Callable[[int], None] | None = None,
        voltage_v: float | None = None,
        isolated: bool = False,
        contention: bool = True,
        detail: Detail = Detail.FAST,
    ) -> None:
        if not isinstance(frames, int) or frames < 1:
            raise SimulationError(f"frames must be an integer >= 1, not {frames!r}")
        freq = program.frequency_hz
        if not arch.clock.min_hz <= freq <= arch.clock.max_hz:
            raise SimulationError(
                f"frequency_hz must be {arch.clock.min_hz}-{arch.clock.max_hz}, not {freq}"
            )
        #: Core supply: the lowest operating point that reaches the clock, unless raised.
        self.voltage_v = check_voltage(arch, freq, voltage_v)
        if program.replicas * program.aipu_cores_used > arch.chip.cores:
            raise SimulationError(
                f"replicas x aipu_cores_used must fit the {arch.chip.cores} cores of the chip, "
                f"not {program.replicas} x {program.aipu_cores_used}"
            )
        missing = sorted(set(program.instance.cores) - set(tasklists))
        if missing:
            raise SimulationError(f"tasklists must be given for cores {missing}, not omitted")
        self.program = program
        self.tasklists = tasklists
        self.arch = arch
        #: The host sends each start only once the previous result is back.
        self.isolated = isolated
        #: False: every engine that moves data (a DMA queue of a core, the host's side of
        #: each direction, a core's tasklist fetch) has the shared links to itself, so a
        #: transfer takes exactly its cost-model time (what-if and the cost model's check).
        self.contention = contention
        self.detail = detail
        #: The cores' L1 is the banked, cycle-level one (detailed mode; with contention off
        #: every task has L1 to itself, as in the fast mode)
        self.banked = detail is Detail.CYCLE and contention
        self._private_links: dict[tuple[Any, str], Link] = {}
        self.freq_hz = freq
        self.env = RunEnvironment()
        self.tracer = tracer
        #: Called with the number of frames each time frames come back to the host.
        self.progress = progress
        self.frames_per_start = program.frames_per_start
        self.starts = math.ceil(frames / self.frames_per_start)
        self.frames = self.starts * self.frames_per_start
        self.use_hw_tokens = program.use_hw_tokens
        ctrl = arch.control
        self.poll_interval = ctrl.poll_interval_cycles
        self.poll_cost = ctrl.poll_cost_cycles
        self.burst_bytes = arch.dma.burst_bytes
        db = program.double_buffer
        per_stage = (
            program.aipu_cores_used if program.multicore_mode == MulticoreMode.PIPELINE else 1
        )
        self.io_slots = (2 if db else 1) * per_stage
        window = arch.l2.tasklist_reserved_bytes_per_core
        self.chunk_records = max(1, (window // 2) // RECORD_BYTES)
        self.window_records = window // RECORD_BYTES

        coster = TaskCoster(arch, freq, program.mvm_utilization_limit)
        #: The cost model of this run (the compiler's, at the run's clock and MVM limit).
        self.cost: CostModel = coster.model
        self.token_latency = self.cost.token_latency_cycles(False)
        #: The host's own work on a start's frames before they are sent and once back.
        self.host_pre_cycles = self.cost.host_pre_cycles * self.frames_per_start
        self.host_post_cycles = self.cost.host_post_cycles * self.frames_per_start
        #: Every distinct op of the run (`Op.index` is the row).
        self.ops: list[Op] = []
        self.codes: dict[int, CoreCode] = {}
        rid_base = 0
        with gc_paused():
            for c in program.instance.cores:
                code = self._prepare(c, tasklists[c], coster, rid_base)
                self.codes[c] = code
                rid_base += code.n_records
        self._task_table(rid_base)

        used = range(program.replicas * program.aipu_cores_used)
        self.links: dict[str, Link] = {
            name.value: Link(name.value, self.cost.link_bw(name)) for name in CostLink
        }
        if detail is Detail.CYCLE:
            # lazy: the cycle-level models load numba (about a second of every process
            # that simulates), and only the detailed mode uses them
            from aipusim.simulator.detail.ddr_link import DdrBurstTimer
            from aipusim.simulator.detail.lpddr4 import Lpddr4Config

            # DDR's bursts timed by the cycle-level LPDDR4x model (with contention off the
            # private DDR links keep the closed form: one memory cannot be private)
            timer = DdrBurstTimer(Lpddr4Config.from_arch(arch), freq)
            self.links[CostLink.DDR.value].detail = timer
        #: Requesters of a core's L1 ports: the unit queues in `UNIT_ORDER`, then data
        #: multicast in from another core (`remote`).
        self.requester = {u: i for i, u in enumerate(UNIT_ORDER)}
        self.remote = len(UNIT_ORDER)
        #: Each physical core's L1 port groups (read, write) that bookings go through:
        #: None where they can never be over-subscribed, and with contention off.
        self.ports: dict[int, tuple[PortGroup | None, PortGroup | None]] = {
            p: (None, None) for p in used
        }
        #: Detailed mode: each physical core's banked L1, booked cycle by cycle in place of
        #: the fluid port groups (`aipusim.simulator.detail.l1.L1Calendar`).
        self.banks: dict[int, L1Calendar] = {}
        if self.banked:
            from aipusim.simulator.detail.l1 import BankedL1, L1Calendar  # lazy: numba

            l1 = BankedL1.of(arch)
            self.banks = {p: L1Calendar(l1, self.remote + 1) for p in used}
        elif contention:
            self._share_ports()
        #: Numbers the transfers, so DDR can tell a burst that continues a stream
        self.streams = itertools.count()
        self.global_token_latency = self.cost.token_latency_cycles(True)

        #: The run's constants, links and log as the core and host processes get them.
        self.config = RunConfig(
            starts=self.starts,
            frames_per_start=self.frames_per_start,
            burst_bytes=self.burst_bytes,
            contention=contention,
            use_hw_tokens=self.use_hw_tokens,
            token_latency_cycles=self.token_latency,
            global_token_latency_cycles=self.global_token_latency,
            poll_interval_cycles=self.poll_interval,
            poll_cost_cycles=self.poll_cost,
            dispatch_cycles_per_task=ctrl.dispatch_cycles_per_task,
            local_tokens=arch.tokens.local_per_core,
            chunk_records=self.chunk_records,
            window_records=self.window_records,
            io_slots=self.io_slots,
            isolated=isolated,
            host_pre_cycles=self.host_pre_cycles,
            host_post_cycles=self.host_post_cycles,
        )
        fabric = Fabric(
            self.route, self.ports, self.requester, self.remote, self.streams, self.banks
        )
        #: Executed tasks and host transfers (`parts.Ledger`); `segments` and `host_log`
        #: are its lists.
        self.ledger = Ledger()
        self.segments = self.ledger.segments
        self.host_log = self.ledger.host_log
        self.host = HostSide(
            self.env, self.config, self.cost, fabric, self.ledger, self.host_rid, tracer, progress
        )

        self._init_events: dict[tuple[str, int], simpy.Event] = {}
        shared = Link("host_dispatcher", 1.0)
        self.replicas: list[Replica] = []
        n_global = arch.tokens.global_count
        for r in range(program.replicas):
            multi = program.multicore_mode != MulticoreMode.MULTITHREAD
            dispatcher = Link(f"host_dispatcher{r}", 1.0) if multi else shared
            rep = Replica(self.env, self.config, program, r, n_global, dispatcher)
            for logical in program.instance.cores:
                physical = r * program.aipu_cores_used + logical
                parts = (self.env, self.config, fabric, self.ledger, tracer, len(self.ops))
                rep.cores.append(CoreRun(*parts, rep, logical, physical, self.codes[logical]))
            self.replicas.append(rep)

    # -- preparation -------------------------------------------------------------------
    def _prepare(
        self, logical: int, tasks: Sequence[Task] | TaskTable, coster: TaskCoster, rid_base: int
    ) -> CoreCode:
        table = tasks if isinstance(tasks, TaskTable) else TaskTable.from_tasks(tasks)
        code = prepare_core(logical, table, coster, self.ops, rid_base, addresses=self.banked)
        if not self.program.stream_tasklist and code.n_records > self.window_records:
            raise SimulationError(
                f"tasklist of core {logical} is {code.n_records * RECORD_BYTES} bytes; without "
                f"stream_tasklist it must fit the L2 tasklist window of "
                f"{self.arch.l2.tasklist_reserved_bytes_per_core} bytes"
            )
        return code

    def _task_table(self, n_tasks: int) -> None:
        """The run's tables for the result: a row per op (plus one per host direction) and
        a row per task (``rid``: each core's INIT then FRAME tasks, then the two host
        transfers)."""
        inst = self.program.instance
        rows = [op.energy for op in self.ops]
        xfers = [op.xfer for op in self.ops]
        #: Unit of each op row.
        self.op_unit = [op.unit for op in self.ops]
        self.host_rid: dict[str, int] = {}
        host_ops = []
        for direction in ("h2d", "d2h"):
            nbytes = (inst.input_bytes if direction == "h2d" else inst.output_bytes) * (
                self.frames_per_start
            )
            pool = inst.input_pool if direction == "h2d" else inst.output_pool
            self.host_rid[direction] = n_tasks + len(host_ops)
            host_ops.append(len(rows))
            host = self.cost.host_transfer(direction, pool, nbytes)
            rows.append(host.energy_pj)
            xfers.append(host.transfer)
            self.op_unit.append(f"pcie_{direction}")
        #: Energy of each op row, pJ per component at nominal voltage.
        self.op_energy = np.array(rows, dtype=np.float64).reshape(len(rows), len(COMPONENTS))
        #: Names of the shared links, the columns of `op_link_bytes`.
        self.link_names = [name.value for name in CostLink]
        #: Bytes each op row moves over each shared link: what one run of it adds to the
        #: link's byte counter (`Link.nbytes`).
        self.op_link_bytes = np.zeros((len(rows), len(self.link_names)), np.int64)
        column = {name: i for i, name in enumerate(self.link_names)}
        for row, x in enumerate(xfers):
            for name in x.links if x is not None else ():
                self.op_link_bytes[row, column[name]] += x.nbytes
        names: dict[str, int] = {"": 0}
        ops, seqs, layers = [], [], []
        for code in self.codes.values():
            remap = np.array([names.setdefault(s, len(names)) for s in code.strings], np.int64)
            for pc in (code.init, code.frame):
                ops.append(pc.op_index)
                seqs.append(np.arange(len(pc), dtype=np.int64))
                layers.append(remap[pc.layers] if len(remap) else pc.layers.astype(np.int64))
        ops.append(np.array(host_ops, np.int64))
        seqs.append(np.full(len(host_ops), -1, np.int64))
        layers.append(np.zeros(len(host_ops), np.int64))
        #: Per task row: op row, position in its phase (-1: host transfer), layer name.
        self.rid_op = np.concatenate(ops).astype(np.int64)
        self.rid_seq = np.concatenate(seqs)
        self.rid_layer = np.concatenate(layers)
        self.layer_names = np.array(list(names), dtype=object)

    # -- processes ---------------------------------------------------------------------
    def _core_loop(self, core: CoreRun) -> Generator[Any, Any, None]:
        env = self.env
        code = core.code
        nbytes = code.n_records * RECORD_BYTES
        resident = self.config.resident(code)
        t0 = 0
        if not self.program.stream_tasklist:
            # The whole tasklist is copied into the core's L2 window before it starts.
            t0 = yield from self._fetch(core, nbytes, 0)
        else:
            core.ctl.arrival = {}
            total = code.n_records if resident else len(code.init) + self.starts * len(code.frame)
            env.process(self._loader(core, total))
        core.start_phase(-1, t0)
        yield core.done_event(-1)
        prev = yield self._init_done(core.replica)
        for s in range(self.starts):
            host_start = yield core.replica.start_event(s)
            start = max(host_start, prev)
            started = core.replica.started
            started[s] = min(started.get(s, start), start)
            core.start_phase(s, start)
            prev = yield core.done_event(s)

    def _init_done(self, rep: Replica) -> simpy.Event:
        key = ("init", rep.index)
        ev = self._init_events.get(key)
        if ev is None:
            ev = self._init_events[key] = self.env.event()
            self.env.process(self._wait_init(rep, ev))
        return ev

    def _wait_init(self, rep: Replica, ev: simpy.Event) -> Generator[Any, Any, None]:
        end = 0
        for c in rep.cores:
            end = max(end, (yield c.done_event(-1)))
        ev.succeed(end)

    def _loader(self, core: CoreRun, total_records: int) -> Generator[Any, Any, None]:
        """Stream the tasklist into the L2 window chunk by chunk (two chunks resident)."""
        env = self.env
        ctl = core.ctl
        per = self.chunk_records
        for c in range(math.ceil(total_records / per)):
            t = env.now
            if c >= 2:
                # Chunk c reuses the buffer of chunk c-2: wait until that one is dispatched.
                while ctl.dispatched_gp < (c - 1) * per - 1:
                    yield ctl.progress
                t = max(env.now, ctl.last_dispatch)
            n = min(per, total_records - c * per)
            end = yield from self._fetch(core, n * RECORD_BYTES, t)
            assert ctl.arrival is not None
            ctl.arrival[c] = end
            ctl.wake()

    def link_for(self, name: str, engine: Any) -> Link:
        """The link ``name`` as ``engine`` (a hashable name of whoever issues the
        transfer) books it: the shared one, or with ``contention`` off its own copy."""
        if self.contention:
            return self.links[name]
        link = self._private_links.get((engine, name))
        if link is None:
            link = self._private_links[(engine, name)] = Link(name, self.links[name].bw)
        return link

    def _share_ports(self) -> None:
        """A `PortGroup` for each direction of a core's L1 whose requesters can ask for
        more than it carries: more of them than ports, wanting more bytes per cycle
        together (each at most its fastest task's rate) than the ports move. Only those
        can ever squeeze a booking; the others are not booked at all."""
        # (physical core, 0 read / 1 write) -> requester -> the most bytes per cycle it asks
        users: dict[tuple[int, int], dict[int, float]] = {}

        def use(key: tuple[int, int], who: int, rate: float) -> None:
            group = users.setdefault(key, {})
            group[who] = max(group.get(who, 0.0), rate)

        inst = self.program.instance
        for rep in range(self.program.replicas):
            base = rep * self.program.aipu_cores_used
            for logical, code in self.codes.items():
                p = base + logical
                for phase in (code.init, code.frame):
                    for unit, queue in phase.by_unit.items():
                        me = self.requester[unit]
                        for op in dict.fromkeys(queue.ops):
                            x = op.xfer
                            if op.l1_read:
                                use((p, 0), me, op.l1_read / op.dur)
                            if op.l1_write:
                                use((p, 1), me, op.l1_write / op.dur)
                            if x is None:
                                continue
                            if x.src == Pool.L1:
                                use((p, 0), me, x.channel_bw)
                            if x.dst == Pool.L1:
                                for i, c in enumerate(inst.cores):
                                    if x.dst_cores >> i & 1 or (not x.dst_cores and c == logical):
                                        who = me if c == logical else self.remote
                                        use((base + c, 1), who, x.channel_bw)
        l1 = self.arch.l1
        for (p, direction), wants in users.items():
            ports = (l1.read_ports, l1.write_ports)[direction]
            if len(wants) <= ports or sum(wants.values()) <= ports * l1.port_bytes_per_cycle:
                continue
            requesters = self.remote + 1
            group = PortGroup(ports, l1.port_bytes_per_cycle, requesters, tuple(sorted(wants)))
            pair = list(self.ports[p])
            pair[direction] = group
            self.ports[p] = (pair[0], pair[1])

    def route(
        self,
        x: Transfer,
        engine: Hashable,
        l1: Sequence[tuple[PortGroup, int]] = (),
        banks: Sequence[tuple[L1Calendar, int, bool]] = (),
    ) -> Route:
        """The `Route` of transfer ``x`` as ``engine`` (a hashable name of whoever issues
        it) books it, through the L1 port groups ``l1`` or, in the detailed mode, the banked
        L1s ``banks`` (``(calendar, requester, write)``; none for the host and the
        tasklist fetch, which do not touch L1)."""
        bursts = []
        size = self.burst_bytes
        last = x.nbytes - ((x.nbytes - 1) // size) * size if x.nbytes > 0 else 0
        for nbytes in (min(size, x.nbytes), last):
            bursts.append(self.cost.burst(x, nbytes))
        links = [self.link_for(n.value, engine) for n in x.links]
        ddr_k = x.links.index(CostLink.DDR) if CostLink.DDR in x.links else -1
        side = self._pcie_reverse(x, engine, bursts) if self.detail is Detail.CYCLE else None
        return Route(
            links, bursts, x.latency_cycles, l1, ddr_k=ddr_k, write=x.ddr_write,
            shared=self.contention, side=side, banks=banks,
        )  # fmt: skip

    def _pcie_reverse(
        self, x: Transfer, engine: Any, bursts: list[Burst]
    ) -> tuple[tuple[tuple[Link, int], ...], ...] | None:
        """Detailed mode: the other direction's line time that each burst (full, last) of a
        transfer over PCIe draws for its DLLPs and read requests (`pcie_wire_bytes`), or
        None for a transfer that does not cross PCIe."""
        pcie = [n for n in x.links if n in (CostLink.PCIE_H2D, CostLink.PCIE_D2H)]
        if not pcie:
            return None
        h2d = pcie[0] is CostLink.PCIE_H2D
        other = CostLink.PCIE_D2H if h2d else CostLink.PCIE_H2D
        link, bw = self.link_for(other.value, engine), self.cost.link_bw(other)
        return tuple(
            ((link, burst_cycles(pcie_wire_bytes(self.arch.host_link, b.nbytes, h2d)[1], bw)),)
            for b in bursts
        )

    def l1_waits(self) -> dict[str, dict[str, int]] | None:
        """Detailed mode: each L1 requester's bank waits, port waits and accesses in the
        banked L1s, summed over the cores (`SimResult.l1_waits`); None in the fast mode."""
        if not self.banks:
            return None
        total = sum(cal.waits for cal in self.banks.values())
        names = [*UNIT_ORDER, "multicast_in"]
        keys = ("bank_waits", "port_waits", "accesses")
        return {
            names[i]: dict(zip(keys, map(int, row), strict=True))
            for i, row in enumerate(total)
            if row.any()
        }

    def link_totals(self) -> dict[str, tuple[int, int]]:
        """(busy cycles, bytes) of each link over the run, private copies included."""
        out = {name: (link.busy_cycles, link.nbytes) for name, link in self.links.items()}
        for (_, name), link in self._private_links.items():
            busy, nbytes = out[name]
            out[name] = (busy + link.busy_cycles, nbytes + link.nbytes)
        return out

    def _fetch(self, core: CoreRun, nbytes: int, t: int) -> Generator[Any, Any, int]:
        """Tasklist bytes from DDR into the core's L2 window, from cycle ``t`` on."""
        x = self.cost.tasklist_fetch(nbytes)
        route = self.route(x, ("tasklist", core.physical))
        return (
            yield from transfer(self.env, route, nbytes, self.burst_bytes, t, next(self.streams))
        )

    # -- run ---------------------------------------------------------------------------
    def run(self) -> SimResult:
        env = self.env
        for rep in self.replicas:
            for core in rep.cores:
                env.process(self._core_loop(core))
                for unit in core.code.unit_names:
                    env.process(unit_process(core, unit))
            env.process(rep.gather_frames())
            env.process(host_inputs(self.host, rep))
            env.process(host_outputs(self.host, rep))
        from aipusim.simulator.result import build_result

        with gc_paused():
            env.run()
            self._check_finished()
            return build_result(self.record(), None if self.isolated else self._unloaded_probe())

    def record(self) -> RunRecord:
        """What the finished run recorded, for `result.build_result` to reduce."""
        from aipusim.simulator.result import RunRecord

        return RunRecord(
            model=self.program.model,
            multicore_mode=str(self.program.multicore_mode),
            arch=self.arch,
            program=self.program,
            tasklists=self.tasklists,
            cost=self.cost,
            config=self.config,
            freq_hz=self.freq_hz,
            voltage_v=self.voltage_v,
            frames=self.frames,
            ops=self.ops,
            codes=self.codes,
            op_energy=self.op_energy,
            op_unit=self.op_unit,
            op_link_bytes=self.op_link_bytes,
            link_names=self.link_names,
            rid_op=self.rid_op,
            rid_seq=self.rid_seq,
            rid_layer=self.rid_layer,
            layer_names=self.layer_names,
            segments=self.ledger.segments,
            host_log=self.ledger.host_log,
            replicas=[rep.record() for rep in self.replicas],
            link_totals=self.link_totals(),
            trace_lines=self.tracer.lines if self.tracer is not None else 0,
        )

    def _unloaded_probe(self) -> Callable[[], float]:
        """A measurement of the unloaded latency, for the result to run when asked: one
        replica of the program, two starts, each input sent once the previous result is
        back; the second start's input-to-result time (the first one waits for INIT). It
        holds the program and tasklists, not this run."""
        program, tasklists, arch = self.program, self.tasklists, self.arch
        voltage, contention, detail = self.voltage_v, self.contention, self.detail
        tracer = self.tracer
        tags = tracer.levels if tracer is not None else ()
        names = (tracer.onnx_ops, tracer.layer_macs) if tracer is not None else (None, None)

        def measure() -> float:
            probe = Simulation(
                program.with_overrides(replicas=1),
                tasklists,
                arch,
                frames=2 * program.frames_per_start,
                tracer=Tracer(tags, arch.control.trace_line_cycles, *names) if tags else None,
                voltage_v=voltage,
                isolated=True,
                contention=contention,
                detail=detail,
            )
            return float(probe.run().latency_us[-1])

        return measure

    def _check_finished(self) -> None:
        problems: list[str] = []
        for rep in self.replicas:
            for core in rep.cores:
                for unit, blocked in sorted(core.blocked.items()):
                    seq, what = blocked[0], describe_block(blocked)
                    phase = core.current_phase.get(unit, -1)
                    where = "init" if phase < 0 else f"frame {core.frame_of(phase)}"
                    problems.append(
                        f"core {core.physical} {unit} task {seq} ({where}, layer "
                        f"{core.code.layer(phase, seq)!r}) waits for {what}"
                    )
            problems += [f"replica {rep.index}: {p}" for p in rep.barriers.pending()]
        done = all(len(rep.result) == self.starts for rep in self.replicas)
        if problems or not done:
            if not problems:
                for rep in self.replicas:
                    for core in rep.cores:
                        if core.finished_units < core.n_units:
                            problems.append(f"core {core.physical} never finished its frames")
            shown = "; ".join(problems[:12])
            more = f"; and {len(problems) - 12} more" if len(problems) > 12 else ""
            raise DeadlockError(
                f"simulation deadlocked at cycle {int(self.env.now)} with tasks still "
                f"waiting: {shown}{more}"
            )
