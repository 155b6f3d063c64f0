"""Power model (Accelergy style): action counts x energy per action + static power x time.

- Dynamic energy per action and static power come from the one cost model
  (`aipusim.isa.cost`: `dynamic_scale`, `static_power_w`): on-chip components scale by
  ``(V / V_nom)^2`` at the run's voltage (the V-f point of its clock unless the run raises
  it); DDR and PCIe energy are off-chip and do not scale. Energy per action does not depend
  on the clock; static power does.
- Clock power follows activity (`unit_clock_power_w`): a unit burns its clock power
  (`aipusim.isa.cost.unit_clock_w`) in every busy cycle (clock power is per cycle, not per
  action: the per-action energies are switching energies, and the MVM's measured MAC
  energy has its clock taken out, `aipusim.isa.cost.mvm_clock_pj_per_mac`); idle for a gap
  of g cycles, it burns it for ``min(g, L)`` cycles and ``gated_residual_fraction`` of it
  for the rest, L the gating latency. Only a core's always-on clock share, the chip's clock
  distribution network and leakage are constant (`aipusim.isa.cost.static_power_w`). Like
  static power, the units' clock power is spread evenly over the run (the timeline and the
  peaks see its average).
- The timeline spreads each task's energy uniformly over its cycles, bins it exactly
  (`POWER_BIN_US` per bin, coarser for very long runs) and adds static power. Peak power
  (`peak_power_w`) is the highest average over a sliding window of each length of
  `aipusim.isa.metrics.PEAK_WINDOWS`, computed exactly on the same energy (`EnergyCurve`),
  not on the bins.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from aipusim.arch.model import Arch
from aipusim.isa.cost import COMPONENTS, C, static_power_w, unit_clock_w, unit_leakage_w
from aipusim.isa.metrics import PEAK_WINDOWS, POWER_BIN_US, UNIT_POWER_PARTS
from aipusim.isa.trace_schema import (
    POWER_TIME_COLUMNS,
    POWER_TOTAL_COLUMN,
    Component,
    power_column,
)

if TYPE_CHECKING:
    import pandas as pd

#: Upper bound of timeline bins; longer runs get wider bins.
MAX_BINS = 200_000


@dataclass(frozen=True)
class PowerProfile:
    """Binned power over the run (``bin_cycles`` per bin): the timeline's columns."""

    columns: Mapping[str, np.ndarray]
    bin_cycles: int

    def timeline(self) -> pd.DataFrame:
        """The columns as a table (pandas is imported here: a run that never looks at its
        timeline does not pay the half second pandas takes to import)."""
        import pandas as pd

        return pd.DataFrame(dict(self.columns))


def idle_split(
    start: np.ndarray, end: np.ndarray, total_cycles: int, latency: int
) -> tuple[int, int]:
    """How the cycles ``[0, total_cycles)`` in which a unit busy on ``[start, end)`` is idle
    split into clocked ones (the first ``latency`` cycles of each idle gap, before its clock
    gate closes) and gated ones.

    >>> idle_split(np.array([0]), np.array([500]), 1000, 16)  # busy half the time
    (16, 484)
    >>> idle_split(np.array([0, 510, 505]), np.array([500, 600, 520]), 1000, 16)
    (21, 384)
    >>> idle_split(np.array([], dtype=np.int64), np.array([], dtype=np.int64), 100, 16)
    (16, 84)
    """
    if len(start) == 0:
        gaps = np.array([total_cycles], dtype=np.int64)
    else:
        order = np.argsort(start, kind="stable")
        s = start[order].astype(np.int64)
        reach = np.maximum.accumulate(end[order].astype(np.int64))  # busy up to, so far
        gaps = np.concatenate([[s[0]], s[1:] - reach[:-1], [total_cycles - reach[-1]]])
        gaps = np.maximum(gaps, 0)
    clocked = np.minimum(gaps, latency)
    return int(clocked.sum()), int((gaps - clocked).sum())


def unit_clock_power_w(
    arch: Arch,
    freq_hz: int,
    voltage_v: float,
    intervals: Mapping[tuple[int, str], tuple[np.ndarray, np.ndarray]],
    cores: list[int],
    total_cycles: int,
) -> dict[str, tuple[float, float, float]]:
    """Unit kind -> (clocked busy W, clocked idle W, gated idle W) averaged over
    ``total_cycles``, summed over ``cores``; ``intervals[(core, unit)]`` are the unit's busy
    ``(start, end)`` cycles.

    >>> from aipusim.arch import load_arch
    >>> busy = {(0, "mvm"): (np.array([0]), np.array([500]))}
    >>> w = unit_clock_power_w(load_arch(), 800_000_000, 0.8, busy, [0], 1000)
    >>> [round(x, 5) for x in w["mvm"]]  # 0.165 W x 500/1000, x 16/1000, x 0.2 x 484/1000
    [0.0825, 0.00264, 0.01597]
    """
    clock = unit_clock_w(arch, freq_hz, voltage_v)
    cg = arch.clock_gating
    total = max(1, int(total_cycles))
    out: dict[str, tuple[float, float, float]] = {}
    empty = np.zeros(0, dtype=np.int64)
    for unit, watts in clock.items():
        clocked = gated = 0
        for core in cores:
            s, e = intervals.get((core, unit), (empty, empty))
            c, g = idle_split(s, e, total, cg.gating_latency_cycles)
            clocked, gated = clocked + c, gated + g
        busy = total * len(cores) - clocked - gated
        out[unit] = (
            watts * busy / total,
            watts * clocked / total,
            watts * cg.gated_residual_fraction * gated / total,
        )
    return out


#: The unit kinds of the breakdown (`unit_power_w`), each with the energy component whose
#: dynamic energy it reports; the two DMA channels are one kind.
UNIT_KINDS: dict[str, Component] = {
    "mvm": Component.MVM,
    "wload": Component.WLOAD,
    "dpu": Component.DPU,
    "dwpu": Component.DWPU,
    "dma": Component.DMA,
    "control": Component.CONTROL,
    "l1": Component.L1,
    "l2": Component.L2,
    "ddr": Component.DDR,
    "pcie": Component.PCIE,
}


def _kind(unit: str) -> str:
    return "dma" if unit.startswith("dma") else unit


def unit_power_w(
    arch: Arch,
    freq_hz: int,
    voltage_v: float,
    log: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    unit_names: list[str],
    cores: list[int],
    total_cycles: int,
) -> dict[str, dict[str, float]]:
    """The run's power per unit kind (`UNIT_KINDS`), averaged over ``total_cycles``: its
    ``clocked_idle`` and ``gated_idle`` power (`unit_idle_power_w`) and its ``leakage``
    (`aipusim.isa.cost.unit_leakage_w`); ``dynamic`` is 0 until `add_dynamic_w`. The
    always-on clock of the active ``cores`` and the chip's clock network are ``control``'s
    clocked idle power, the
    DDR PHY with the DRAM devices' standby power and the PCIe link in L0 those of ``ddr``
    and ``pcie``. ``log`` is the logged activities' ``(core, unit code, start, end)``, a
    code indexing ``unit_names``."""
    core, code, start, end = log
    intervals: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}
    order = np.lexsort((code, core))
    key = core[order].astype(np.int64) * len(unit_names) + code[order]
    bounds = np.flatnonzero(np.diff(key)) + 1
    for chunk in np.split(order, bounds) if len(order) else []:
        c, u = int(core[chunk[0]]), unit_names[int(code[chunk[0]])]
        intervals[(c, u)] = (start[chunk], end[chunk])
    out = {kind: dict.fromkeys(UNIT_POWER_PARTS, 0.0) for kind in UNIT_KINDS}
    clocks = unit_clock_power_w(arch, freq_hz, voltage_v, intervals, cores, total_cycles)
    for unit, (busy, clocked, gated) in clocks.items():
        out[_kind(unit)]["clocked_busy"] += busy
        out[_kind(unit)]["clocked_idle"] += clocked
        out[_kind(unit)]["gated_idle"] += gated
    for unit, watts in unit_leakage_w(arch, voltage_v).items():
        out[_kind(unit)]["leakage"] += watts
    static = static_power_w(arch, freq_hz, len(cores), voltage_v)
    out["control"]["clocked_idle"] += static["clock_always_on"] + static["clock_network"]
    out["ddr"]["clocked_idle"] += static["ddr_phy"] + static["dram_background"]
    out["pcie"]["clocked_idle"] += static["pcie_l0"]
    return out


def unit_clocks_w(arch: Arch, units: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """The clock power of the clock-gated unit kinds of ``units`` (`unit_power_w`), the
    terms `static_power_w` leaves out: ``unit_clocked_busy``, ``unit_clocked_idle`` and
    ``unit_gated_idle``, W."""
    kinds = {_kind(unit) for unit in arch.clock_gating.unit_shares()}
    parts = ("clocked_busy", "clocked_idle", "gated_idle")
    return {f"unit_{p}": sum(units[k][p] for k in kinds) for p in parts}


def add_dynamic_w(units: dict[str, dict[str, float]], run_pj: np.ndarray, seconds: float) -> None:
    """Fill each unit kind's ``dynamic`` power of ``units`` (`unit_power_w`) from the run's
    dynamic energy per component ``run_pj`` (pJ, `COMPONENTS` order) over ``seconds``."""
    for kind, comp in UNIT_KINDS.items():
        units[kind]["dynamic"] = float(run_pj[C[comp]]) * 1e-12 / seconds


def power_timeline(
    table: np.ndarray,
    row: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    extra_pj: np.ndarray,
    total_cycles: int,
    freq_hz: int,
    static_w: float,
    bin_us: float = POWER_BIN_US,
) -> PowerProfile:
    """Bin the (already voltage-scaled) energy ``table[row]`` of each logged activity into
    bins of ``bin_us`` (coarser when the run would need more than `MAX_BINS`).

    ``extra_pj`` (per component) is energy not tied to a logged activity (trace lines,
    polls); it is spread evenly over the run.
    """
    total_cycles = max(1, int(total_cycles))
    bin_cycles = max(1, round(bin_us * 1e-6 * freq_hz), math.ceil(total_cycles / MAX_BINS))
    nbins = math.ceil(total_cycles / bin_cycles)
    edges = np.arange(nbins + 1, dtype=np.float64) * bin_cycles
    # A task spreads energy E over [s, e) at rate r = E / (e - s). The energy up to cycle t
    # is sum_i r_i * (relu(t - s_i) - relu(t - e_i)); on the bin grid t = k*B each relu sum
    # is k*B * (sum of r_i with x_i < k*B) - (sum of r_i * x_i with x_i < k*B), i.e. two
    # cumulative bincounts: exact, and O(tasks + bins) without sorting.
    s = start.astype(np.float64)
    e = np.maximum(end, start + 1).astype(np.float64)
    inv_d = 1.0 / (e - s)
    idx_s = np.minimum(np.floor(s / bin_cycles).astype(np.int64) + 1, nbins + 1)
    idx_e = np.minimum(np.floor(e / bin_cycles).astype(np.int64) + 1, nbins + 1)
    bin_s = bin_cycles / freq_hz
    data: dict[str, np.ndarray] = {
        POWER_TIME_COLUMNS[0]: edges[:-1].astype(np.int64),
        POWER_TIME_COLUMNS[1]: np.minimum(edges[1:], total_cycles).astype(np.int64),
    }
    total = np.zeros(nbins)
    run_s = total_cycles / freq_hz

    def relu_sum(idx: np.ndarray, rate: np.ndarray, x: np.ndarray) -> np.ndarray:
        r = np.cumsum(np.bincount(idx, weights=rate, minlength=nbins + 2))[: nbins + 1]
        rx = np.cumsum(np.bincount(idx, weights=rate * x, minlength=nbins + 2))[: nbins + 1]
        return edges * r - rx

    for ci, comp in enumerate(COMPONENTS):
        if comp == Component.STATIC:
            watts = np.full(nbins, static_w)
        else:
            watts = np.full(nbins, extra_pj[ci] * 1e-12 / run_s)
            if len(row):
                energy = table[:, ci][row]
                if energy.any():
                    rate = energy * inv_d
                    cum = relu_sum(idx_s, rate, s) - relu_sum(idx_e, rate, e)
                    watts += np.diff(cum) * 1e-12 / bin_s
        data[power_column(comp)] = watts
        total += watts
    data[POWER_TOTAL_COLUMN] = total
    return PowerProfile(data, bin_cycles)


class EnergyCurve:
    """The run's energy up to any cycle, exactly, with each activity's energy spread evenly
    over its cycles and a constant power (static, extras) on top: piecewise linear, with
    breaks where an activity starts or ends.

    >>> c = EnergyCurve(np.array([0, 10]), np.array([10, 20]), np.array([100.0, 300.0]),
    ...                 constant_pj_per_cycle=1.0, total_cycles=40)
    >>> c.energy_pj(np.array([5, 15, 40])).tolist()
    [55.0, 265.0, 440.0]
    >>> c.peak_pj_per_cycle(10.0), c.peak_pj_per_cycle(1000.0)
    (31.0, 11.0)
    """

    def __init__(
        self,
        start: np.ndarray,
        end: np.ndarray,
        energy_pj: np.ndarray,
        *,
        constant_pj_per_cycle: float,
        total_cycles: int,
    ) -> None:
        s = start.astype(np.float64)
        e = np.maximum(end, start + 1).astype(np.float64)
        rate = energy_pj / (e - s)
        self.total_cycles = max(1, int(total_cycles))
        #: Cycles where the power can change (every activity's start and end), sorted.
        self.breaks = np.unique(np.concatenate([s, e, [0.0, float(self.total_cycles)]]))
        n = len(self.breaks)
        # The power on [breaks[k], breaks[k + 1]): what started minus what ended by then.
        delta = np.bincount(np.searchsorted(self.breaks, s), weights=rate, minlength=n)
        delta -= np.bincount(np.searchsorted(self.breaks, e), weights=rate, minlength=n)
        self._delta = delta
        self._slope = np.cumsum(delta) + float(constant_pj_per_cycle)
        #: Energy from cycle 0 to each break.
        self._at = np.concatenate([[0.0], np.cumsum(self._slope[:-1] * np.diff(self.breaks))])

    def energy_pj(self, t: np.ndarray) -> np.ndarray:
        """Energy from cycle 0 to each cycle of ``t`` (floats allowed)."""
        t = np.asarray(t, dtype=np.float64)
        k = np.maximum(np.searchsorted(self.breaks, t, side="right") - 1, 0)
        return self._at[k] + self._slope[k] * (t - self.breaks[k])

    def peak_pj_per_cycle(self, window_cycles: float) -> float:
        """The highest average over ``window_cycles`` consecutive cycles inside the run
        (the run's average when it is shorter). The window's energy, as a function of where
        it begins, is piecewise linear and grows while the power entering it exceeds the
        power leaving it; so its maximum is at a window that begins where the power rises
        or ends where it falls (or at either end of the run): those are the only positions
        tried."""
        total = self.total_cycles
        w = float(window_cycles)
        if w >= total:
            return float(self.energy_pj(np.array([total]))[0]) / total
        b, at = self.breaks, self._at
        edge = (b == 0) | (b == total)
        starts = (b <= total - w) & ((self._delta > 0) | edge)  # begin where power rises
        ends = (b >= w) & ((self._delta < 0) | edge)  # end where power falls
        gain = np.concatenate(
            [
                self.energy_pj(b[starts] + w) - at[starts],
                at[ends] - self.energy_pj(b[ends] - w),
            ]
        )
        return float(gain.max()) / w


def peak_power_w(curve: EnergyCurve, freq_hz: int) -> dict[str, float]:
    """`PEAK_WINDOWS` name -> highest sliding-window average power, W."""
    return {
        name: curve.peak_pj_per_cycle(seconds * freq_hz) * 1e-12 * freq_hz
        for name, seconds in PEAK_WINDOWS.items()
    }
