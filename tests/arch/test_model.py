"""Derived figures of the arch dataclasses."""

from __future__ import annotations

import pytest

from aipusim.arch import arch_summary, load_arch


def test_link_rates_keep_their_gb_s_when_the_clock_changes() -> None:
    arch = load_arch()
    # LPDDR4x-4266 on 64 bits: 34.128 GB/s peak = 42.66 B/cycle at 800 MHz
    assert arch.ddr.peak_bw_gb_s == pytest.approx(34.128)
    assert arch.ddr_bw_bytes_per_cycle(800_000_000) == pytest.approx(42.66)
    # Half the clock: the same GB/s is twice as many bytes per (longer) cycle.
    assert arch.ddr_bw_bytes_per_cycle(400_000_000) == pytest.approx(85.32)
    # PCIe Gen3 x4: 8 GT/s x 4 lanes, 128b/130b: 3.938 GB/s of line per direction
    assert arch.host_bw_bytes_per_cycle() == pytest.approx(4e9 * 128 / 130 / 800e6)


def test_mvm_utilization_keeps_whole_banks() -> None:
    mvm = load_arch().mvm
    assert mvm.active_cols(1.0) == 512
    assert mvm.active_cols(0.5) == 256
    assert mvm.active_cols(0.125) == 64
    assert mvm.active_banks(0.01) == 1


def test_peak_scales_with_frequency() -> None:
    arch = load_arch()
    assert arch.peak_tops_at(400_000_000) == pytest.approx(arch.peak_tops / 2)


def test_summary_has_the_derived_peak_and_budgets() -> None:
    derived = arch_summary(load_arch())["derived"]
    assert derived["peak_tops"] == pytest.approx(209.7152)
    assert derived["peak_tops_per_core"] == pytest.approx(52.4288)
    assert derived["l2_budget_bytes"] == 32 * 2**20 - 1_245_184 - 4 * 2**20
    assert derived["ddr_latency_cycles"] == 80


def test_memory_figures_follow_from_their_parts() -> None:
    arch = load_arch()
    assert arch.l1.read_bytes_per_cycle == arch.l1.read_ports * arch.l1.port_bytes_per_cycle
    assert arch.l2.bw_bytes_per_cycle == min(4 * 64, 16 * 32)  # ports, not banks, limit
    assert arch.ddr.refresh_share == pytest.approx(280 / 3904)
