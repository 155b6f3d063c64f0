"""A plain-data view of an `Arch` with its derived figures, for printing and JSON."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aipusim.arch.model import Arch


def arch_summary(arch: Arch) -> dict[str, Any]:
    """Every field of ``arch``, the plausible ``ranges`` of the inferred numbers (dotted key
    -> [low, high]) and a ``derived`` table (peak TOPS, budgets, link rates).

    >>> from aipusim.arch import load_arch
    >>> arch_summary(load_arch())["derived"]["peak_tops"]
    209.7152
    """
    freq_hz = arch.clock.default_hz
    data = asdict(arch)
    data["ranges"] = {r.key: [r.low, r.high] for r in arch.ranges}
    data["derived"] = {
        "freq_hz": freq_hz,
        "mvm_macs_per_cycle_per_core": arch.mvm.macs_per_cycle,
        "mvm_weight_set_bytes": arch.mvm.weight_set_bytes,
        "mvm_weight_bytes_per_core": arch.mvm.weight_bytes,
        "peak_tops_per_core": round(arch.peak_tops_at(freq_hz) / arch.chip.cores, 4),
        "peak_tops": arch.peak_tops,
        "dwpu_macs_per_cycle": arch.dwpu.macs_per_cycle,
        "l1_budget_bytes_per_core": arch.l1.budget_bytes,
        "l2_budget_bytes": arch.l2_budget_bytes,
        "ddr_peak_bw_gb_s": round(arch.ddr.peak_bw_gb_s, 3),
        "ddr_bw_bytes_per_cycle": round(arch.ddr_bw_bytes_per_cycle(freq_hz), 3),
        "l1_read_bytes_per_cycle_per_core": arch.l1.read_bytes_per_cycle,
        "l1_write_bytes_per_cycle_per_core": arch.l1.write_bytes_per_cycle,
        "l2_bw_bytes_per_cycle": arch.l2.bw_bytes_per_cycle,
        "host_bw_bytes_per_cycle": round(arch.host_bw_bytes_per_cycle(freq_hz), 3),
        "ddr_latency_cycles": arch.ns_to_cycles(arch.ddr.latency_ns, freq_hz),
        "sram_mib": arch.sram_mib,
    }
    return data
