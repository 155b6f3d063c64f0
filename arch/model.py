"""Frozen dataclasses describing the chip; one per TOML table of ``arch/metis.toml``.

Field names match the TOML keys one to one, so the loader is generic and a dotted override
(``ddr.data_rate_mt_s``) names a field directly. Derived figures (MACs per cycle, peak
TOPS, L1 budget, link bytes per cycle at a clock) are properties, never stored twice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class ChipSpec:
    name: str
    cores: int


@dataclass(frozen=True)
class VfPoint:
    """An operating point: the chip runs at ``voltage_v`` for clocks up to ``max_hz``."""

    max_hz: int
    voltage_v: float


@dataclass(frozen=True)
class ClockSpec:
    default_hz: int
    min_hz: int
    max_hz: int
    nominal_voltage_v: float
    vf_points: tuple[VfPoint, ...]

    def voltage_at(self, freq_hz: int) -> float:
        """The lowest voltage whose operating point reaches ``freq_hz``.

        >>> from aipusim.arch import load_arch
        >>> load_arch().clock.voltage_at(700_000_000), load_arch().clock.voltage_at(400_000_000)
        (0.85, 0.68)
        """
        reachable = [p.voltage_v for p in self.vf_points if p.max_hz >= freq_hz]
        return min(reachable) if reachable else self.nominal_voltage_v


@dataclass(frozen=True)
class ControlSpec:
    dispatch_cycles_per_task: int
    token_signal_latency_cycles: int
    poll_interval_cycles: int
    poll_cost_cycles: int
    trace_line_cycles: int


@dataclass(frozen=True)
class MvmSpec:
    rows: int
    cols: int
    banks: int
    bank_cols: int
    input_blocks: int
    weight_sets: int
    weight_bits: int
    activation_bits: int
    cycles_per_vector: int
    outputs_per_cycle: int
    max_accumulation_inputs: int
    weight_load_bw_bytes_per_cycle: int
    utilization_step: float
    pipeline_latency_cycles: int
    #: PWORD: the array reads input channels in words of this many (apply_pword_padding).
    pword_channels: int
    #: Width of the adder tree's sums: an Mvm saturates its sums (and the sums with the
    #: partial sums it accumulates onto) to this many bits, two's complement.
    accumulator_bits: int

    @property
    def accumulator_range(self) -> tuple[int, int]:
        """(lowest, highest) sum the array holds.

        >>> from aipusim.arch import load_arch
        >>> load_arch().mvm.accumulator_range
        (-33554432, 33554431)
        """
        top = 1 << (self.accumulator_bits - 1)
        return -top, top - 1

    @property
    def macs_per_cycle(self) -> int:
        """Peak multiply-accumulates per cycle of one core's array (32,768 for Metis)."""
        return self.rows * self.cols // self.cycles_per_vector

    @property
    def weight_set_bytes(self) -> int:
        """Bytes of one full weight set (rows x cols weights)."""
        return self.rows * self.cols * self.weight_bits // 8

    @property
    def weight_bytes(self) -> int:
        """All weight sets of one core (1 MiB for Metis)."""
        return self.weight_set_bytes * self.weight_sets

    def active_banks(self, utilization: float) -> int:
        """Banks kept active under ``mvm_utilization_limit`` = ``utilization``."""
        return max(1, math.floor(self.banks * utilization + 1e-9))

    def active_cols(self, utilization: float) -> int:
        """Output columns usable under ``mvm_utilization_limit`` = ``utilization``."""
        return self.active_banks(utilization) * self.bank_cols


@dataclass(frozen=True)
class DpuSpec:
    lanes: int
    pipeline_latency_cycles: int
    #: The DPU's 18-bit float ("float18"): 1 sign, this many exponent and fraction bits.
    float_exponent_bits: int
    float_fraction_bits: int
    #: Cycles one lane needs for a float18 divide or square root (a multiply-add is one).
    float_div_sqrt_cycles: int

    @property
    def float_bits(self) -> int:
        """Width of the DPU's float format (sign + exponent + fraction)."""
        return 1 + self.float_exponent_bits + self.float_fraction_bits


@dataclass(frozen=True)
class DwpuSpec:
    channels: int
    macs_per_channel_per_cycle: int
    pipeline_latency_cycles: int

    @property
    def macs_per_cycle(self) -> int:
        return self.channels * self.macs_per_channel_per_cycle


class Arbitration(StrEnum):
    """Who the detailed L1's crossbar serves first when requesters want the same bank or
    port: a turning order, or by requester index."""

    ROUND_ROBIN = "round_robin"
    FIXED = "fixed"


@dataclass(frozen=True)
class L1Spec:
    size_bytes: int
    reserved_bytes: int
    #: Ports of each direction, shared by the core's requesters; each requester holds at
    #: most one port of a direction at a time.
    read_ports: int
    write_ports: int
    port_bytes_per_cycle: int
    latency_cycles: int
    #: The detailed mode's L1 (`aipusim.simulator.detail.l1`): banks of ``bank_bytes``
    #: behind the crossbar, and how its arbiter picks among requesters.
    banks: int
    bank_bytes: int
    arbitration: str

    @property
    def budget_bytes(self) -> int:
        """L1 bytes per core the compiler may use (size minus the system reservation)."""
        return self.size_bytes - self.reserved_bytes

    @property
    def read_bytes_per_cycle(self) -> int:
        """All read ports of a core together."""
        return self.read_ports * self.port_bytes_per_cycle

    @property
    def write_bytes_per_cycle(self) -> int:
        """All write ports of a core together."""
        return self.write_ports * self.port_bytes_per_cycle


@dataclass(frozen=True)
class L2Spec:
    size_bytes: int
    reserved_bytes: int
    tasklist_reserved_bytes_per_core: int
    ports: int
    port_bytes_per_cycle: int
    banks: int
    bank_bytes_per_cycle: int
    interleave_bytes: int
    latency_cycles: int

    @property
    def bw_bytes_per_cycle(self) -> int:
        """What L2 serves per cycle: its ports together, or its banks if fewer."""
        return min(self.ports * self.port_bytes_per_cycle, self.banks * self.bank_bytes_per_cycle)


@dataclass(frozen=True)
class NocSpec:
    bw_bytes_per_cycle: int
    hop_latency_cycles: int
    hops_to_hub: int
    sync_cycles: int


@dataclass(frozen=True)
class DdrSpec:
    size_bytes: int
    default_used_bytes: int
    reserved_bytes: int
    data_rate_mt_s: int
    channels: int
    channel_width_bits: int
    banks_per_channel: int
    page_bytes: int
    interleave_bytes: int
    t_rcd_ns: float
    t_rp_ns: float
    t_wtr_ns: float
    t_rtw_ns: float
    t_rfc_ns: float
    t_refi_ns: float
    latency_ns: float
    ranks_per_channel: int
    burst_length: int
    read_latency_tck: int
    write_latency_tck: int
    t_ccd_tck: int
    t_ras_ns: float
    t_rp_ab_ns: float
    t_rrd_ns: float
    t_faw_ns: float
    t_wr_ns: float
    t_rtp_ns: float
    t_rfc_pb_ns: float
    act_command_tck: int
    cas_command_tck: int
    pre_command_tck: int
    refresh_mode: str
    read_queue_depth: int
    write_queue_depth: int
    write_drain_high_fraction: float
    write_drain_low_fraction: float

    @property
    def tck_ns(self) -> float:
        """One clock of the DRAM command clock (two data transfers per clock)."""
        return 2000.0 / self.data_rate_mt_s

    @property
    def channel_bytes_per_ns(self) -> float:
        """Data bytes one channel moves per ns while it streams."""
        return self.data_rate_mt_s * self.channel_width_bits / 8 / 1000

    @property
    def peak_bw_gb_s(self) -> float:
        """All channels streaming, nothing else (34.1 GB/s for LPDDR4x-4266 x64)."""
        return self.channel_bytes_per_ns * self.channels

    @property
    def refresh_share(self) -> float:
        """Share of the time a channel is refreshing (all-bank refresh)."""
        return self.t_rfc_ns / self.t_refi_ns


@dataclass(frozen=True)
class DmaSpec:
    channels_per_core: int
    channel_bw_bytes_per_cycle: int
    setup_cycles: int
    burst_bytes: int


@dataclass(frozen=True)
class SysDmaSpec:
    count: int
    bw_bytes_per_cycle: int
    setup_cycles: int


@dataclass(frozen=True)
class TokenSpec:
    local_per_core: int
    global_count: int


@dataclass(frozen=True)
class HostLinkSpec:
    lanes: int
    gt_s: float
    encoding_data_bits: int
    encoding_line_bits: int
    tlp_overhead_bytes: int
    dllp_bytes: int
    max_payload_bytes: int
    max_read_request_bytes: int
    read_completion_bytes: int
    tlps_per_ack: int
    tlps_per_fc_update: int
    setup_us: float
    pre_frame_us: float
    post_frame_us: float

    @property
    def line_gb_s(self) -> float:
        """Bytes a direction's line carries per second (GB/s), after the line code:
        TLPs and DLLPs share it (`aipusim.isa.cost.pcie_wire_bytes`).

        >>> from aipusim.arch import load_arch
        >>> round(load_arch().host_link.line_gb_s, 3)
        3.938
        """
        return self.lanes * self.gt_s / 8 * self.encoding_data_bits / self.encoding_line_bits


@dataclass(frozen=True)
class MemoryMapSpec:
    l1_virtual_address: int
    l1_core0_physical_address: int
    l1_core_stride_bytes: int


@dataclass(frozen=True)
class EnergySpec:
    """Dynamic energy per action, pJ, at the nominal voltage."""

    mvm_mac_pj: float
    imc_weight_write_pj_per_byte: float
    imc_col_sum_pj_per_byte: float
    dwpu_mac_pj: float
    dpu_lane_op_pj: float
    dpu_requant_act_pj: float
    l1_read_pj_per_byte: float
    l1_write_pj_per_byte: float
    l2_read_pj_per_byte: float
    l2_write_pj_per_byte: float
    noc_hop_pj_per_byte: float
    ddr_seq_pj_per_byte: float
    ddr_random_pj_per_byte: float
    dma_pj_per_byte: float
    pcie_pj_per_byte: float
    control_task_pj: float
    #: Value-aware MVM energy: the published efficiency at random data and at a sparse point,
    #: and the fraction of nonzero products at that point (see `mvm_activity_fit`).
    mvm_dense_tops_per_w: float
    mvm_sparse_tops_per_w: float
    mvm_sparse_active_fraction: float

    @property
    def mvm_activity_fit(self) -> tuple[float, float]:
        """(a, b) of the value-aware MAC energy ``mvm_mac_pj * (a + b * p)``, ``p`` the
        fraction of products with a nonzero input and a nonzero weight: the line through
        the two published points (p = 1 at ``mvm_dense_tops_per_w``, p =
        ``mvm_sparse_active_fraction`` at ``mvm_sparse_tops_per_w``).

        >>> from aipusim.arch import load_arch
        >>> a, b = load_arch().energy.mvm_activity_fit
        >>> round(a, 4), round(b, 4), round(15 / (a + b * 0.05), 1)
        (0.1399, 0.8601, 82.0)
        """
        ratio = self.mvm_dense_tops_per_w / self.mvm_sparse_tops_per_w
        b = (1.0 - ratio) / (1.0 - self.mvm_sparse_active_fraction)
        return 1.0 - b, b


@dataclass(frozen=True)
class StaticPowerSpec:
    sram_leakage_w_per_mib: float
    logic_leakage_w: float
    pcie_l0_w: float
    ddr_phy_w: float
    dram_background_w_per_channel: float
    clock_network_w: float
    core_clocked_idle_w: float
    leakage_voltage_exponent: float


@dataclass(frozen=True)
class ClockGatingSpec:
    """Activity-based idle power: each unit's share of a core's clocked-idle power, burnt
    while it idles ungated, then only a residual once its clock gate closes."""

    gating_latency_cycles: int
    always_on_fraction: float
    gated_residual_fraction: float
    mvm_idle_share: float
    wload_idle_share: float
    dpu_idle_share: float
    dwpu_idle_share: float
    dma0_idle_share: float
    dma1_idle_share: float

    def unit_shares(self) -> dict[str, float]:
        """Unit queue name -> its share of a core's gateable clock power (summing to 1).

        >>> from aipusim.arch import load_arch
        >>> round(load_arch().clock_gating.unit_shares()["mvm"], 3)
        0.55
        """
        raw = {
            "mvm": self.mvm_idle_share,
            "wload": self.wload_idle_share,
            "dpu": self.dpu_idle_share,
            "dwpu": self.dwpu_idle_share,
            "dma0": self.dma0_idle_share,
            "dma1": self.dma1_idle_share,
        }
        total = sum(raw.values())
        return {unit: share / total for unit, share in raw.items()}


@dataclass(frozen=True)
class ParamRange:
    """The plausible range of an inferred (I) number of the arch file (``[ranges]``):
    ``key`` is its dotted name (``clock.vf_points[1].voltage_v``)."""

    key: str
    low: float
    high: float


@dataclass(frozen=True)
class Arch:
    """The whole chip. Load it with `aipusim.arch.load_arch`.

    >>> from aipusim.arch import load_arch
    >>> arch = load_arch()
    >>> arch.chip.cores, arch.mvm.macs_per_cycle, arch.peak_tops
    (4, 32768, 209.7152)
    >>> round(arch.ddr.peak_bw_gb_s, 3), arch.l1.read_bytes_per_cycle
    (34.128, 128)
    """

    chip: ChipSpec
    clock: ClockSpec
    control: ControlSpec
    mvm: MvmSpec
    dpu: DpuSpec
    dwpu: DwpuSpec
    l1: L1Spec
    l2: L2Spec
    noc: NocSpec
    ddr: DdrSpec
    dma: DmaSpec
    sysdma: SysDmaSpec
    tokens: TokenSpec
    host_link: HostLinkSpec
    memory_map: MemoryMapSpec
    energy: EnergySpec
    static_power: StaticPowerSpec
    clock_gating: ClockGatingSpec
    #: Plausible ranges of the inferred numbers (empty for a file without ``[ranges]``).
    ranges: tuple[ParamRange, ...] = ()

    # -- derived figures -------------------------------------------------------------
    def peak_tops_at(self, freq_hz: int) -> float:
        """Chip peak int8 tera-operations per second (2 ops per MAC) at ``freq_hz``."""
        return 2 * self.mvm.macs_per_cycle * self.chip.cores * freq_hz / 1e12

    @property
    def peak_tops(self) -> float:
        """Chip peak TOPS at the default clock (209.7 for Metis)."""
        return round(self.peak_tops_at(self.clock.default_hz), 4)

    @staticmethod
    def gb_s_to_bytes_per_cycle(bw_gb_s: float, freq_hz: int) -> float:
        """Bytes per cycle of a link that keeps its GB/s whatever the core clock."""
        return bw_gb_s * 1e9 / freq_hz

    def ddr_bw_bytes_per_cycle(self, freq_hz: int | None = None) -> float:
        """Peak DDR bytes per cycle at ``freq_hz`` (default clock if None): every channel
        streaming, no page opening, turnaround or refresh (`aipusim.isa.cost` adds those)."""
        return self.gb_s_to_bytes_per_cycle(self.ddr.peak_bw_gb_s, freq_hz or self.clock.default_hz)

    def host_bw_bytes_per_cycle(self, freq_hz: int | None = None) -> float:
        """PCIe line bytes per cycle per direction at ``freq_hz`` (TLP and DLLP overhead
        included: `aipusim.isa.cost.pcie_wire_bytes` says how many line bytes data takes)."""
        freq_hz = freq_hz or self.clock.default_hz
        return self.gb_s_to_bytes_per_cycle(self.host_link.line_gb_s, freq_hz)

    def ns_to_cycles(self, ns: float, freq_hz: int | None = None) -> int:
        """Whole cycles (rounded up) that ``ns`` nanoseconds last at ``freq_hz``."""
        return math.ceil(ns * (freq_hz or self.clock.default_hz) / 1e9)

    @property
    def l2_budget_bytes(self) -> int:
        """L2 bytes the compiler may use: size minus system and per-core tasklist windows."""
        tasklists = self.l2.tasklist_reserved_bytes_per_core * self.chip.cores
        return self.l2.size_bytes - self.l2.reserved_bytes - tasklists

    @property
    def sram_mib(self) -> float:
        """All on-chip SRAM (L1, L2, IMC weight arrays) in MiB, for leakage."""
        per_core = self.l1.size_bytes + self.mvm.weight_bytes
        return (per_core * self.chip.cores + self.l2.size_bytes) / 2**20
