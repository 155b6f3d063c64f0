"""Timing and action counts of each task kind, from the `Arch` numbers only.

What a task does becomes a compact `Op` once, before the run, so the unit processes do no
per-task arithmetic on dataclasses: its fixed duration (compute kinds), the links a transfer
crosses and its fixed costs (DMA kinds), and its dynamic energy per component in pJ at the
nominal voltage (the power model scales it to the run's voltage). An op says nothing of where
its task comes from (layer, tile) or which addresses it touches, so the tiles of a layer share
one (see `prepare`).

Timing rules (first order, DESIGN.md §4/§5):

- ``Mvm``: ``vectors * cycles_per_vector * passes`` where ``passes`` is how many times the
  ``cols_used`` columns must be cut to fit the banks kept active by
  ``mvm_utilization_limit``; outputs drain at ``outputs_per_cycle`` in parallel, so the
  slower of the two counts; plus the pipeline fill/drain latency.
- ``WeightLoad``: ``bytes / weight_load_bw`` on the IMC write port (own queue ``wload``).
- ``DpuOp``: its lane operations (`aipusim.isa.dpu_work`: ``elements * operands`` for the
  element-wise kinds) over the lanes, plus the pipeline latency.
- ``DwpuOp``: channel groups of ``dwpu.channels`` x output pixels x windows of
  ``macs_per_channel_per_cycle`` MACs, plus the pipeline latency.
- ``DmaCopy``: setup plus bursts over the links of its path (see `links`).
- Token, barrier and host-handshake tasks take no unit time (the control core's dispatch
  and polling are charged by the dispatcher).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aipusim.arch.model import Arch
from aipusim.base.errors import TasklistError
from aipusim.isa.dpu_work import dpu_charged_ops, dpu_lane_ops
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
    TokenScope,
    TokenSignal,
    TokenWait,
    Unit,
    WeightLoad,
)
from aipusim.isa.trace_schema import Component

#: Energy components, in the column order of every energy vector.
COMPONENTS: tuple[Component, ...] = tuple(Component)
C = {c: i for i, c in enumerate(COMPONENTS)}

#: Record kinds (what the unit process does with a record).
K_COMPUTE = 0  # fixed duration on the unit
K_DMA = 1  # a transfer over links
K_BARRIER = 2  # control core waits for the other cores
K_HOST = 3  # control core host handshake

#: Unit queues that are "compute" for the trace ([K]); the others are memory ([M]).
COMPUTE_UNITS = frozenset({Unit.MVM, Unit.WLOAD, Unit.DPU, Unit.DWPU})


@dataclass(frozen=True, slots=True)
class Xfer:
    """The fixed part of a transfer: bytes, links by name, setup and access latency."""

    nbytes: int
    links: tuple[str, ...]
    setup_cycles: int
    latency_cycles: int
    src: str
    dst: str


@dataclass(slots=True, eq=False)
class Op:
    """What a task does on its unit, shared by every task that differs only in origin and
    addresses. ``waits``/``signals`` are ``(global?, index, count)``."""

    unit: str
    kind: int
    dur: int
    waits: tuple[tuple[bool, int, int], ...]
    signals: tuple[tuple[bool, int, int], ...]
    xfer: Xfer | None
    barrier: tuple[int, int] | None  # (barrier_id, core_mask)
    macs: int
    energy: tuple[float, ...]  # pJ per component at nominal voltage, in COMPONENTS order
    is_ctrl: bool
    index: int = -1  # row of this op in the run's op table


def _tokens(refs: tuple, arch: Arch, where: str) -> tuple[tuple[bool, int, int], ...]:
    """``(global?, index, count)`` operands, range-checked against the arch's token counts."""
    out = []
    for ref in refs:
        is_global = ref.scope == TokenScope.GLOBAL
        limit = arch.tokens.global_count if is_global else arch.tokens.local_per_core
        if not 0 <= ref.index < limit:
            raise TasklistError(
                f"{where}: {ref.scope} token index must be 0-{limit - 1}, not {ref.index}"
            )
        if ref.count < 1:
            raise TasklistError(f"{where}: token count must be >= 1, not {ref.count}")
        out.append((is_global, ref.index, ref.count))
    return tuple(out)


def _where(label: str, seq: int, task: Task) -> str:
    """Names a task in an error message."""
    return f"{label} task {seq} ({type(task).__name__}, layer {task.layer!r})"


class TaskCoster:
    """Turns tasks into `Op`s for one run (one arch, clock and MVM limit).

    >>> from aipusim.arch import load_arch
    >>> coster = TaskCoster(load_arch(), 800_000_000, 1.0)
    >>> t = Mvm(unit=Unit.MVM, weight_set=0, in_addr=0, out_addr=0, vectors=100,
    ...         rows_used=512, cols_used=512)
    >>> coster.op(t, "core 0", 0).dur
    816
    """

    def __init__(self, arch: Arch, freq_hz: int, mvm_utilization_limit: float) -> None:
        self.arch = arch
        self.freq_hz = freq_hz
        self.active_cols = arch.mvm.active_cols(mvm_utilization_limit)
        self.ddr_latency = arch.ns_to_cycles(arch.ddr.latency_ns, freq_hz)
        self.pcie_setup = arch.ns_to_cycles(arch.host_link.setup_us * 1000.0, freq_hz)
        self.e = arch.energy

    def op(self, task: Task, label: str, seq: int) -> Op:
        """The op of ``task``, the ``seq``-th of its phase on core ``label`` (named in
        errors)."""
        where = _where(label, seq, task)
        kind, dur, macs, xfer, barrier, energy = self._cost(task, where)
        unit = task.unit
        return Op(
            str(unit),
            kind,
            dur,
            _tokens(task.waits, self.arch, where),
            _tokens(task.signals, self.arch, where),
            xfer,
            barrier,
            macs,
            energy,
            unit == Unit.CTRL,
        )

    def _cost(self, task: Task, where: str) -> tuple:
        """(kind, duration, MACs, transfer, barrier, energy) of a task."""
        energy = [0.0] * len(COMPONENTS)
        energy[C[Component.CONTROL]] = self.e.control_task_pj
        kind, dur, macs, xfer, barrier = K_COMPUTE, 0, 0, None, None
        if isinstance(task, Mvm):
            dur, macs = self._mvm(task, energy, where)
        elif isinstance(task, WeightLoad):
            dur = math.ceil(task.bytes / self.arch.mvm.weight_load_bw_bytes_per_cycle)
            energy[C[Component.WLOAD]] += task.bytes * self.e.imc_weight_write_pj_per_byte
            energy[C[Component.L1]] += task.bytes * self.e.l1_read_pj_per_byte
        elif isinstance(task, DpuOp):
            dur = self._dpu(task, energy)
        elif isinstance(task, DwpuOp):
            dur, macs = self._dwpu(task, energy)
        elif isinstance(task, DmaCopy):
            kind, xfer = K_DMA, self._dma(task, energy, where)
        elif isinstance(task, Barrier):
            kind, barrier = K_BARRIER, (task.barrier_id, task.core_mask)
        elif isinstance(task, HostTransfer):
            kind = K_HOST
        elif not isinstance(task, TokenWait | TokenSignal):
            raise TasklistError(f"{where}: task kind must be a known kind, not {type(task)}")
        return kind, dur, macs, xfer, barrier, tuple(energy)

    def _mvm(self, t: Mvm, energy: list[float], where: str) -> tuple[int, int]:
        mvm = self.arch.mvm
        if not (0 < t.rows_used <= mvm.rows and 0 < t.cols_used <= mvm.cols):
            raise TasklistError(
                f"{where}: rows_used/cols_used must be 1-{mvm.rows}/1-{mvm.cols}, "
                f"not {t.rows_used}/{t.cols_used}"
            )
        if not 0 <= t.weight_set < mvm.weight_sets:
            raise TasklistError(
                f"{where}: weight_set must be 0-{mvm.weight_sets - 1}, not {t.weight_set}"
            )
        # Gated banks: columns beyond the active ones need another pass of the same vectors.
        passes = math.ceil(t.cols_used / self.active_cols)
        compute = t.vectors * mvm.cycles_per_vector * passes
        drain = math.ceil(t.vectors * t.cols_used / mvm.outputs_per_cycle)
        dur = max(compute, drain) + mvm.pipeline_latency_cycles
        macs = t.macs
        e = self.e
        energy[C[Component.MVM]] += macs * e.mvm_mac_pj
        out_elems = t.vectors * t.cols_used
        energy[C[Component.L1]] += t.vectors * t.rows_used * passes * e.l1_read_pj_per_byte
        out_bytes = out_elems * (4 if t.post == PostOp.NONE else 1)
        if t.accumulate:
            energy[C[Component.L1]] += out_elems * 4 * e.l1_read_pj_per_byte
        energy[C[Component.L1]] += out_bytes * e.l1_write_pj_per_byte
        if t.post != PostOp.NONE:
            energy[C[Component.DPU]] += out_elems * e.dpu_requant_act_pj
        return dur, macs

    def _dpu(self, t: DpuOp, energy: list[float]) -> int:
        dpu, e = self.arch.dpu, self.e
        ops = dpu_lane_ops(t.kind, t.elements, t.operands, self.arch)
        dur = math.ceil(ops / dpu.lanes) + dpu.pipeline_latency_cycles
        per = e.dpu_requant_act_pj if t.kind in (DpuKind.REQUANT, DpuKind.LUT) else e.dpu_lane_op_pj
        energy[C[Component.DPU]] += dpu_charged_ops(t.kind, t.elements, t.operands, self.arch) * per
        energy[C[Component.L1]] += ops * e.l1_read_pj_per_byte + t.elements * e.l1_write_pj_per_byte
        return dur

    def _dwpu(self, t: DwpuOp, energy: list[float]) -> tuple[int, int]:
        dw, e = self.arch.dwpu, self.e
        groups = math.ceil(t.channels / dw.channels)
        windows = math.ceil(t.kh * t.kw / dw.macs_per_channel_per_cycle)
        dur = groups * t.out_h * t.out_w * windows + dw.pipeline_latency_cycles
        macs = t.macs
        energy[C[Component.DWPU]] += macs * e.dwpu_mac_pj
        energy[C[Component.L1]] += t.channels * t.h * t.w * e.l1_read_pj_per_byte
        energy[C[Component.L1]] += t.channels * t.out_h * t.out_w * e.l1_write_pj_per_byte
        return dur, macs

    def _dma(self, t: DmaCopy, energy: list[float], where: str) -> Xfer:
        arch, e = self.arch, self.e
        if t.bytes <= 0:
            raise TasklistError(f"{where}: bytes must be > 0, not {t.bytes}")
        if t.unit == Unit.SYSDMA:
            links: list[str] = ["sysdma"]
            setup = arch.sysdma.setup_cycles
        else:
            links = [f"chan:{t.unit}"]
            setup = arch.dma.setup_cycles
        pools = {t.src_pool, t.dst_pool}
        latency = 0
        if Pool.DDR in pools:
            links += ["ddr", "l2"]  # DDR hangs off the NoC: its data crosses the L2 port too
            latency += self.ddr_latency
        elif Pool.L2 in pools:
            links.append("l2")
        if Pool.L2 in pools:
            latency += arch.l2.latency_cycles
        if Pool.HOST in pools:
            links.append("pcie_h2d" if t.src_pool == Pool.HOST else "pcie_d2h")
            setup += self.pcie_setup
        if pools == {Pool.L1}:
            latency += arch.l1.latency_cycles
        n = t.bytes
        dests = max(1, bin(t.dst_core_mask).count("1"))
        row_bytes = n / max(1, t.rows)
        ddr_pj = e.ddr_seq_pj_per_byte if row_bytes >= 64 else e.ddr_random_pj_per_byte
        read = {
            Pool.DDR: (Component.DDR, ddr_pj),
            Pool.L2: (Component.L2, e.l2_read_pj_per_byte),
            Pool.L1: (Component.L1, e.l1_read_pj_per_byte),
            Pool.HOST: (Component.PCIE, e.pcie_pj_per_byte),
        }[t.src_pool]
        write = {
            Pool.DDR: (Component.DDR, ddr_pj),
            Pool.L2: (Component.L2, e.l2_write_pj_per_byte),
            Pool.L1: (Component.L1, e.l1_write_pj_per_byte),
            Pool.HOST: (Component.PCIE, e.pcie_pj_per_byte),
        }[t.dst_pool]
        energy[C[read[0]]] += n * read[1]
        energy[C[write[0]]] += n * dests * write[1]
        energy[C[Component.DMA]] += n * e.dma_pj_per_byte
        # NoC wires: DDR<->L1 crosses the NoC without an L2 bank (whose energy includes its
        # own wires); a multicast crosses it once more per extra destination core.
        noc_bytes = n if pools == {Pool.DDR, Pool.L1} else 0
        noc_bytes += n * (dests - 1)
        energy[C[Component.L2]] += noc_bytes * e.noc_hop_pj_per_byte
        return Xfer(n, tuple(links), setup, latency, str(t.src_pool), str(t.dst_pool))
