"""The one cost model of the hardware: what a task costs on an `Arch` (DESIGN.md §1).

`CostModel` answers one question, "what does this task cost?", with a `TaskCost`: the
cycles it holds its unit when nothing else competes, the multiply-accumulates it performs,
the bytes it moves over each memory and link (`Traffic`) and its dynamic energy by
`Component` at the nominal voltage, all from the numbers of ``arch/*.toml``. A transfer
also carries its `Transfer`: the shared links it crosses, which the simulator books burst
by burst against other transfers.

The compiler's estimates, its tiling, IMC and multicore choices and its scheduler call this
model; so does the simulator, which adds only what one task cannot know: contention on
shared links, tokens, barriers and dispatch by the control core. Static power and the
voltage scaling of dynamic energy live here too, so that nothing else turns arch numbers
into durations or energy.

Timing rules (first order, DESIGN.md §4/§5):

- ``Mvm``: ``vectors * cycles_per_vector * passes``, where ``passes`` is how many times the
  ``cols_used`` columns must be cut to fit the banks that ``mvm_utilization_limit`` keeps
  active; the outputs drain at ``outputs_per_cycle``, so the slower of the two counts; plus
  the pipeline fill/drain latency.
- ``WeightLoad``: ``bytes / weight_load_bw`` on the IMC write port.
- ``DpuOp``: its lane operations (`aipusim.isa.dpu_work`) over the lanes, plus the pipeline.
- ``DwpuOp``: channel groups of ``dwpu.channels`` x output pixels x windows of
  ``macs_per_channel_per_cycle`` MACs, plus the pipeline.
- ``DmaCopy``: setup, then bursts of ``dma.burst_bytes``, each as long as its slowest link
  (the issuing channel included), then the access latency of the far memory.
- Token, barrier and host-handshake tasks take no unit time (the control core's dispatch
  is the simulator's business).

>>> from aipusim.arch import load_arch
>>> from aipusim.isa.tasks import Mvm, Unit
>>> model = CostModel(load_arch())
>>> cost = model.task(Mvm(unit=Unit.MVM, weight_set=0, in_addr=0, out_addr=0, vectors=100,
...                       rows_used=512, cols_used=512))
>>> cost.cycles, cost.macs, cost.traffic.l1_read
(816, 26214400, 51200)
"""

from __future__ import annotations

import enum
import functools
import math
from dataclasses import dataclass

from aipusim.arch.model import Arch
from aipusim.base.errors import TasklistError
from aipusim.isa.dpu_work import dpu_charged_ops, dpu_lane_ops, dpu_read_bytes
from aipusim.isa.tasks import (
    Barrier,
    DmaCopy,
    DpuKind,
    DpuOp,
    DwpuOp,
    HostTransfer,
    Mvm,
    Pool,
    PostOp,
    Task,
    TokenSignal,
    TokenWait,
    Unit,
    WeightLoad,
)
from aipusim.isa.trace_schema import Component

#: Energy components, in the column order of every energy vector.
COMPONENTS: tuple[Component, ...] = tuple(Component)
#: Column of each component in an energy vector.
C: dict[Component, int] = {c: i for i, c in enumerate(COMPONENTS)}
#: Components that draw from the chip's core supply (their energy scales with V^2); DDR
#: and PCIe have their own supplies, static power is costed apart.
ON_CHIP: frozenset[Component] = frozenset(COMPONENTS) - {
    Component.DDR,
    Component.PCIE,
    Component.STATIC,
}
#: Bytes of one int32 partial sum or unrequantized MVM output.
PSUM_BYTES = 4


class Link(enum.StrEnum):
    """The shared links a transfer can cross (each a serial server with a bandwidth)."""

    DDR = "ddr"  # the LPDDR controller
    L2 = "l2"  # the L2 port / NoC
    SYSDMA = "sysdma"  # the chip's system DMA engine
    PCIE_H2D = "pcie_h2d"  # host link, host to device
    PCIE_D2H = "pcie_d2h"  # host link, device to host


@dataclass(frozen=True, slots=True)
class Traffic:
    """Bytes a task moves through each memory and link (one frame of it, one task)."""

    ddr: int = 0
    l2: int = 0  # L2 port / NoC (DDR traffic crosses it too)
    l1_read: int = 0
    l1_write: int = 0
    imc_write: int = 0  # IMC weight-set writes
    pcie_h2d: int = 0
    pcie_d2h: int = 0

    def __add__(self, other: Traffic) -> Traffic:
        return Traffic(*(getattr(self, f) + getattr(other, f) for f in self.__dataclass_fields__))

    def as_dict(self) -> dict[str, int]:
        """Non-zero counters by name."""
        return {f: getattr(self, f) for f in self.__dataclass_fields__ if getattr(self, f)}


@dataclass(frozen=True, slots=True)
class Transfer:
    """What a transfer books on shared links: ``nbytes`` over ``links`` (in path order), the
    issuing engine's own bandwidth (0: none), setup before the first burst and the access
    latency after the last one."""

    nbytes: int
    links: tuple[Link, ...]
    channel_bw: float
    setup_cycles: int
    latency_cycles: int
    src: Pool
    dst: Pool


@dataclass(frozen=True, slots=True)
class TaskCost:
    """What one task costs: ``cycles`` on its unit when nothing else competes (a transfer:
    over idle links), its MACs, bytes moved and dynamic energy (pJ per `COMPONENTS`
    column, at the nominal voltage)."""

    cycles: int
    macs: int
    traffic: Traffic
    energy_pj: tuple[float, ...]
    transfer: Transfer | None = None

    @property
    def energy_total_pj(self) -> float:
        return float(sum(self.energy_pj))


def burst_cycles(nbytes: int, bw_bytes_per_cycle: float) -> int:
    """Whole cycles ``nbytes`` hold a link of ``bw_bytes_per_cycle`` (0 for no link).

    >>> burst_cycles(16_384, 30.0), burst_cycles(64, 0.0)
    (547, 0)
    """
    return int(-(-nbytes // bw_bytes_per_cycle)) if bw_bytes_per_cycle else 0


class CostModel:
    """The cost of tasks on ``arch`` at ``freq_hz`` with ``mvm_utilization_limit`` banks.

    Link bandwidths in GB/s (DDR, PCIe) keep their GB/s at any core clock, so their bytes
    per cycle follow ``freq_hz``; on-chip links are fixed in bytes per cycle.
    """

    def __init__(
        self, arch: Arch, freq_hz: int | None = None, mvm_utilization_limit: float = 1.0
    ) -> None:
        self.arch = arch
        self.freq_hz = int(freq_hz or arch.clock.default_hz)
        self.mvm_utilization_limit = mvm_utilization_limit
        self.active_cols = arch.mvm.active_cols(mvm_utilization_limit)
        self.ddr_latency_cycles = arch.ns_to_cycles(arch.ddr.latency_ns, self.freq_hz)
        self.pcie_setup_cycles = arch.ns_to_cycles(arch.host_link.setup_us * 1000.0, self.freq_hz)
        self._bw = {
            Link.DDR: arch.ddr_bw_bytes_per_cycle(self.freq_hz),
            Link.L2: float(arch.l2.bw_bytes_per_cycle),
            Link.SYSDMA: float(arch.sysdma.bw_bytes_per_cycle),
            Link.PCIE_H2D: arch.host_bw_bytes_per_cycle(self.freq_hz),
            Link.PCIE_D2H: arch.host_bw_bytes_per_cycle(self.freq_hz),
        }

    # -- links ---------------------------------------------------------------------------
    def link_bw(self, link: Link) -> float:
        """Bytes per cycle of a shared link at this clock."""
        return self._bw[link]

    @property
    def channel_bw(self) -> float:
        """Bytes per cycle of one core DMA channel (its own, never shared)."""
        return float(self.arch.dma.channel_bw_bytes_per_cycle)

    def transfer_cycles(self, tr: Transfer) -> int:
        """Cycles of a transfer over idle links: setup, its bursts (each as long as its
        slowest link, the issuing channel included) and the access latency."""
        burst = self.arch.dma.burst_bytes
        n_full = (tr.nbytes - 1) // burst if tr.nbytes > 0 else 0
        last = tr.nbytes - n_full * burst

        def one(nbytes: int) -> int:
            slowest = burst_cycles(nbytes, tr.channel_bw)
            for link in tr.links:
                slowest = max(slowest, burst_cycles(nbytes, self._bw[link]))
            return slowest

        return tr.setup_cycles + n_full * one(burst) + one(last) + tr.latency_cycles

    # -- kind-level costs (the compiler plans with these) ---------------------------------
    def mvm_cycles(self, vectors: int, cols_used: int) -> int:
        """One `Mvm` task of ``vectors`` input vectors over ``cols_used`` columns."""
        mvm = self.arch.mvm
        passes = math.ceil(cols_used / self.active_cols)
        compute = vectors * mvm.cycles_per_vector * passes
        drain = math.ceil(vectors * cols_used / mvm.outputs_per_cycle)
        return max(compute, drain) + mvm.pipeline_latency_cycles

    def weight_load_cycles(self, nbytes: int) -> int:
        """One `WeightLoad` of ``nbytes`` into an IMC weight set."""
        return math.ceil(nbytes / self.arch.mvm.weight_load_bw_bytes_per_cycle)

    def dpu_cycles(self, kind: DpuKind, elements: int, operands: int) -> int:
        """One `DpuOp`: its lane operations over the lanes, plus the pipeline."""
        dpu = self.arch.dpu
        ops = dpu_lane_ops(kind, elements, operands, self.arch)
        return math.ceil(ops / dpu.lanes) + dpu.pipeline_latency_cycles

    def dwpu_cycles(self, channels: int, out_h: int, out_w: int, kh: int, kw: int) -> int:
        """One `DwpuOp` producing ``channels`` x ``out_h`` x ``out_w`` from kh x kw windows."""
        dw = self.arch.dwpu
        groups = math.ceil(channels / dw.channels)
        windows = math.ceil(kh * kw / dw.macs_per_channel_per_cycle)
        return groups * out_h * out_w * windows + dw.pipeline_latency_cycles

    def dma_transfer(
        self,
        unit: Unit,
        src: Pool,
        dst: Pool,
        nbytes: int,
    ) -> Transfer:
        """The path of a `DmaCopy` of ``nbytes`` from ``src`` to ``dst`` issued on ``unit``."""
        arch = self.arch
        links: list[Link] = []
        if unit == Unit.SYSDMA:
            links.append(Link.SYSDMA)
            setup, channel_bw = arch.sysdma.setup_cycles, 0.0
        else:
            setup, channel_bw = arch.dma.setup_cycles, self.channel_bw
        pools = {src, dst}
        latency = 0
        if Pool.DDR in pools:
            # DDR hangs off the NoC: its data crosses the L2 port too
            links += [Link.DDR, Link.L2]
            latency += self.ddr_latency_cycles
        elif Pool.L2 in pools:
            links.append(Link.L2)
        if Pool.L2 in pools:
            latency += arch.l2.latency_cycles
        if Pool.HOST in pools:
            links.append(Link.PCIE_H2D if src == Pool.HOST else Link.PCIE_D2H)
            setup += self.pcie_setup_cycles
        if pools == {Pool.L1}:
            latency += arch.l1.latency_cycles
        return Transfer(nbytes, tuple(links), channel_bw, setup, latency, src, dst)

    def dma_cycles(self, unit: Unit, src: Pool, dst: Pool, nbytes: int) -> int:
        """Cycles of a `DmaCopy` over idle links."""
        return self.transfer_cycles(self.dma_transfer(unit, src, dst, nbytes))

    # -- whole tasks ---------------------------------------------------------------------
    def task(self, task: Task, where: str = "") -> TaskCost:
        """The cost of one task. ``where`` names it in the `TasklistError` raised for a task
        this arch cannot run (a weight set or array size out of range, no bytes)."""
        where = where or f"{type(task).__name__} task of layer {task.layer!r}"
        energy = [0.0] * len(COMPONENTS)
        energy[C[Component.CONTROL]] = self.arch.energy.control_task_pj
        if isinstance(task, Mvm):
            return self._mvm(task, energy, where)
        if isinstance(task, WeightLoad):
            return self._weight_load(task, energy)
        if isinstance(task, DpuOp):
            return self._dpu(task, energy)
        if isinstance(task, DwpuOp):
            return self._dwpu(task, energy)
        if isinstance(task, DmaCopy):
            return self._dma(task, energy, where)
        if isinstance(task, Barrier | HostTransfer | TokenWait | TokenSignal):
            return TaskCost(0, 0, Traffic(), tuple(energy))
        raise TasklistError(f"{where}: task kind must be a known kind, not {type(task)}")

    def _mvm(self, t: Mvm, energy: list[float], where: str) -> TaskCost:
        mvm, e = self.arch.mvm, self.arch.energy
        if not (0 < t.rows_used <= mvm.rows and 0 < t.cols_used <= mvm.cols):
            raise TasklistError(
                f"{where}: rows_used/cols_used must be 1-{mvm.rows}/1-{mvm.cols}, "
                f"not {t.rows_used}/{t.cols_used}"
            )
        if not 0 <= t.weight_set < mvm.weight_sets:
            raise TasklistError(
                f"{where}: weight_set must be 0-{mvm.weight_sets - 1}, not {t.weight_set}"
            )
        passes = math.ceil(t.cols_used / self.active_cols)
        macs = t.macs
        out_elems = t.vectors * t.cols_used
        # every pass streams the input vectors again
        read = t.vectors * t.rows_used * passes
        if t.accumulate:
            read += out_elems * PSUM_BYTES
        write = out_elems * (PSUM_BYTES if t.post == PostOp.NONE else 1)
        energy[C[Component.MVM]] += macs * e.mvm_mac_pj
        energy[C[Component.L1]] += read * e.l1_read_pj_per_byte + write * e.l1_write_pj_per_byte
        if t.post != PostOp.NONE:
            energy[C[Component.DPU]] += out_elems * e.dpu_requant_act_pj
        traffic = Traffic(l1_read=read, l1_write=write)
        return TaskCost(self.mvm_cycles(t.vectors, t.cols_used), macs, traffic, tuple(energy))

    def _weight_load(self, t: WeightLoad, energy: list[float]) -> TaskCost:
        e = self.arch.energy
        energy[C[Component.WLOAD]] += t.bytes * e.imc_weight_write_pj_per_byte
        energy[C[Component.L1]] += t.bytes * e.l1_read_pj_per_byte
        traffic = Traffic(l1_read=t.bytes, imc_write=t.bytes)
        return TaskCost(self.weight_load_cycles(t.bytes), 0, traffic, tuple(energy))

    def _dpu(self, t: DpuOp, energy: list[float]) -> TaskCost:
        e = self.arch.energy
        per = e.dpu_requant_act_pj if t.kind in (DpuKind.REQUANT, DpuKind.LUT) else e.dpu_lane_op_pj
        energy[C[Component.DPU]] += dpu_charged_ops(t.kind, t.elements, t.operands, self.arch) * per
        read = dpu_read_bytes(t.kind, t.elements, t.operands, self.arch)
        write = t.elements
        energy[C[Component.L1]] += read * e.l1_read_pj_per_byte + write * e.l1_write_pj_per_byte
        cycles = self.dpu_cycles(t.kind, t.elements, t.operands)
        return TaskCost(cycles, 0, Traffic(l1_read=read, l1_write=write), tuple(energy))

    def _dwpu(self, t: DwpuOp, energy: list[float]) -> TaskCost:
        e = self.arch.energy
        macs = t.macs
        read = t.channels * t.h * t.w
        write = t.channels * t.out_h * t.out_w
        energy[C[Component.DWPU]] += macs * e.dwpu_mac_pj
        energy[C[Component.L1]] += read * e.l1_read_pj_per_byte + write * e.l1_write_pj_per_byte
        cycles = self.dwpu_cycles(t.channels, t.out_h, t.out_w, t.kh, t.kw)
        return TaskCost(cycles, macs, Traffic(l1_read=read, l1_write=write), tuple(energy))

    def _dma(self, t: DmaCopy, energy: list[float], where: str) -> TaskCost:
        if t.bytes <= 0:
            raise TasklistError(f"{where}: bytes must be > 0, not {t.bytes}")
        tr = self.dma_transfer(t.unit, t.src_pool, t.dst_pool, t.bytes)
        dests = max(1, bin(t.dst_core_mask).count("1"))
        n = t.bytes
        e = self.arch.energy
        row_bytes = n / max(1, t.rows * t.planes)  # contiguous run length
        ddr_pj = e.ddr_seq_pj_per_byte if row_bytes >= 64 else e.ddr_random_pj_per_byte
        side = {
            Pool.DDR: (Component.DDR, ddr_pj, ddr_pj),
            Pool.L2: (Component.L2, e.l2_read_pj_per_byte, e.l2_write_pj_per_byte),
            Pool.L1: (Component.L1, e.l1_read_pj_per_byte, e.l1_write_pj_per_byte),
            Pool.HOST: (Component.PCIE, e.pcie_pj_per_byte, e.pcie_pj_per_byte),
        }
        read_c, read_pj, _ = side[t.src_pool]
        write_c, _, write_pj = side[t.dst_pool]
        energy[C[read_c]] += n * read_pj
        energy[C[write_c]] += n * dests * write_pj
        energy[C[Component.DMA]] += n * e.dma_pj_per_byte
        # NoC wires: DDR<->L1 crosses the NoC without an L2 bank (whose energy includes its
        # own wires); a multicast crosses it once more per extra destination core.
        noc_bytes = n if {t.src_pool, t.dst_pool} == {Pool.DDR, Pool.L1} else 0
        noc_bytes += n * (dests - 1)
        energy[C[Component.L2]] += noc_bytes * e.noc_hop_pj_per_byte
        traffic = Traffic(
            ddr=n if Pool.DDR in (t.src_pool, t.dst_pool) else 0,
            l2=n if Link.L2 in tr.links else 0,
            l1_read=n if t.src_pool == Pool.L1 else 0,
            l1_write=n * dests if t.dst_pool == Pool.L1 else 0,
            pcie_h2d=n if t.src_pool == Pool.HOST else 0,
            pcie_d2h=n if t.dst_pool == Pool.HOST else 0,
        )
        return TaskCost(self.transfer_cycles(tr), 0, traffic, tuple(energy), tr)

    def host_transfer(self, direction: str, pool: Pool, nbytes: int) -> TaskCost:
        """The host's side of moving one input (``h2d``) or output (``d2h``) of ``nbytes``
        between host memory and the instance's I/O buffer in ``pool``. ``cycles`` counts
        the driver's setup on the host dispatcher, then the bursts and the latency."""
        e = self.arch.energy
        energy = [0.0] * len(COMPONENTS)
        energy[C[Component.PCIE]] = nbytes * e.pcie_pj_per_byte
        h2d = direction == "h2d"
        links = [Link.PCIE_H2D if h2d else Link.PCIE_D2H]
        latency = 0
        traffic = Traffic(pcie_h2d=nbytes) if h2d else Traffic(pcie_d2h=nbytes)
        if pool == Pool.DDR:
            links += [Link.DDR, Link.L2]
            latency = self.ddr_latency_cycles
            energy[C[Component.DDR]] = nbytes * e.ddr_seq_pj_per_byte
            traffic = traffic + Traffic(ddr=nbytes, l2=nbytes)
        elif pool == Pool.L2:
            links.append(Link.L2)
            latency = self.arch.l2.latency_cycles
            energy[C[Component.L2]] = nbytes * (
                e.l2_write_pj_per_byte if h2d else e.l2_read_pj_per_byte
            )
            traffic = traffic + Traffic(l2=nbytes)
        src, dst = (Pool.HOST, pool) if h2d else (pool, Pool.HOST)
        tr = Transfer(nbytes, tuple(links), 0.0, self.pcie_setup_cycles, latency, src, dst)
        return TaskCost(self.transfer_cycles(tr), 0, traffic, tuple(energy), tr)

    def tasklist_fetch(self, nbytes: int) -> Transfer:
        """The control core's fetch of ``nbytes`` of its tasklist from DDR into its L2
        window (before the run, or chunk by chunk when streaming)."""
        latency = self.ddr_latency_cycles
        return Transfer(nbytes, (Link.DDR, Link.L2), 0.0, 0, latency, Pool.DDR, Pool.L2)

    # -- power ---------------------------------------------------------------------------
    def control_pj(self, actions: int) -> float:
        """Energy of ``actions`` control-core actions (trace lines written, polls)."""
        return actions * self.arch.energy.control_task_pj

    def lower_bound_cycles(self, macs: int, ddr_bytes: int, cores: int) -> float:
        """The analytic floor of a run: its MACs at the arrays' peak rate, or its DDR bytes
        at the DDR bandwidth, whichever is longer."""
        return max(
            macs / (self.arch.mvm.macs_per_cycle * max(1, cores)),
            ddr_bytes / self._bw[Link.DDR],
        )


@functools.lru_cache(maxsize=64)
def cost_model(
    arch: Arch, freq_hz: int | None = None, mvm_utilization_limit: float = 1.0
) -> CostModel:
    """A shared `CostModel` for these settings (the compiler asks for one per decision)."""
    return CostModel(arch, freq_hz, mvm_utilization_limit)


def dynamic_scale(arch: Arch, voltage_v: float) -> tuple[float, ...]:
    """Per-component factor applied to nominal-voltage energies at ``voltage_v``
    (``(V / V_nom)^2`` on chip, 1 off chip), in `COMPONENTS` order."""
    v = voltage_v / arch.clock.nominal_voltage_v
    return tuple(v * v if c in ON_CHIP else 1.0 for c in COMPONENTS)


def static_power_w(
    arch: Arch, freq_hz: int, active_cores: int, voltage_v: float | None = None
) -> dict[str, float]:
    """Static and always-on power by source, in W, at ``voltage_v`` (default: the lowest
    operating point that reaches ``freq_hz``): SRAM and logic leakage scaling with
    ``(V / V_nom)^leakage_voltage_exponent``, the PCIe link in L0 and the LPDDR PHY
    (constant), and a clocked-idle overhead per active core scaling with ``f * V^2``.

    >>> from aipusim.arch import load_arch
    >>> round(sum(static_power_w(load_arch(), 800_000_000, 4).values()), 3)
    1.84
    """
    sp = arch.static_power
    volts = arch.clock.voltage_at(freq_hz) if voltage_v is None else voltage_v
    v = volts / arch.clock.nominal_voltage_v
    leak = v**sp.leakage_voltage_exponent
    return {
        "sram_leakage": sp.sram_leakage_w_per_mib * arch.sram_mib * leak,
        "logic_leakage": sp.logic_leakage_w * leak,
        "pcie_l0": sp.pcie_l0_w,
        "ddr_phy": sp.ddr_phy_w,
        "clocked_idle": sp.core_clocked_idle_w
        * active_cores
        * (freq_hz / arch.clock.default_hz)
        * v
        * v,
    }


__all__ = [
    "COMPONENTS",
    "ON_CHIP",
    "PSUM_BYTES",
    "C",
    "CostModel",
    "Link",
    "TaskCost",
    "Traffic",
    "Transfer",
    "burst_cycles",
    "cost_model",
    "dynamic_scale",
    "static_power_w",
]
