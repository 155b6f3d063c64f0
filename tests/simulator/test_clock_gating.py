"""Activity-based idle power (clock gating) and MVM energy of padded rows, hand-computed."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import mvm, program

from aipusim.arch import load_arch
from aipusim.base.errors import ArchError
from aipusim.isa.cost import (
    cost_model,
    mvm_clock_pj_per_mac,
    mvm_data_rows,
    static_power_w,
    unit_clock_w,
)
from aipusim.isa.tasks import Mvm
from aipusim.simulator import simulate
from aipusim.simulator.power import idle_split, unit_clock_power_w

ARCH = load_arch(overrides={"host_link.setup_us": 0.0})
FREQ = 800_000_000


def test_a_unit_busy_half_the_time() -> None:
    # busy [0, 500) of 1000 cycles: idle 500 cycles, of which 16 (the gating latency) clocked
    latency = ARCH.clock_gating.gating_latency_cycles
    assert latency == 16
    assert idle_split(np.array([0]), np.array([500]), 1000, latency) == (16, 484)
    # gaps shorter than the latency never gate; overlapping tasks are one busy span
    s, e = np.array([0, 100, 108, 150]), np.array([100, 104, 200, 160])
    assert idle_split(s, e, 300, latency) == (4 + 16, 84)
    # the power: the MVM's share of the gateable clock of a core, at 0.8 V and 800 MHz
    volts = ARCH.clock.nominal_voltage_v
    clock = ARCH.static_power.core_clocked_idle_w * (1 - ARCH.clock_gating.always_on_fraction)
    mvm_w = clock * ARCH.clock_gating.unit_shares()["mvm"]
    assert unit_clock_w(ARCH, FREQ, volts)["mvm"] == pytest.approx(mvm_w)
    busy = {(0, "mvm"): (np.array([0]), np.array([500]))}
    w = unit_clock_power_w(ARCH, FREQ, volts, busy, [0], 1000)
    residual = ARCH.clock_gating.gated_residual_fraction
    # busy 500 cycles clocked, then 16 idle cycles clocked, 484 gated
    expect = (mvm_w * 500 / 1000, mvm_w * 16 / 1000, mvm_w * residual * 484 / 1000)
    assert w["mvm"] == pytest.approx(expect)
    # a unit with no task idles the whole run: 16 cycles clocked, the rest gated
    dpu_w = clock * ARCH.clock_gating.unit_shares()["dpu"]
    assert w["dpu"] == pytest.approx((0.0, dpu_w * 16 / 1000, dpu_w * residual * 984 / 1000))
    # two cores: the busy cycles of both count
    two = {**busy, (1, "mvm"): (np.array([0]), np.array([1000]))}
    w2 = unit_clock_power_w(ARCH, FREQ, volts, two, [0, 1], 1000)
    assert w2["mvm"][0] == pytest.approx(mvm_w * 1500 / 1000)


def test_the_run_reports_power_per_unit() -> None:
    prog = program(1, stream_tasklist=False)
    r = simulate(prog, {0: [mvm(1000)]}, arch=ARCH, frames=1)
    units = r.unit_power_w
    # the breakdown is all the run's energy
    total_w = sum(sum(parts.values()) for parts in units.values())
    assert total_w == pytest.approx(r.energy_mj_run * 1e-3 / r.seconds)
    # the MVM: one task of 8016 cycles; idle before it and after it, each gap clocked for
    # the gating latency, then gated
    log = r.task_log
    s, e = int(log["start"].iloc[0]), int(log["end"].iloc[0])
    assert e - s == 8016
    total = r.total_cycles
    mvm_w = unit_clock_w(ARCH, FREQ, r.voltage_v)["mvm"]
    gaps = [s, total - e]
    clocked = sum(min(g, 16) for g in gaps)
    gated = sum(gaps) - clocked
    residual = ARCH.clock_gating.gated_residual_fraction
    assert units["mvm"]["clocked_busy"] == pytest.approx(mvm_w * (e - s) / total)
    assert units["mvm"]["clocked_idle"] == pytest.approx(mvm_w * clocked / total)
    assert units["mvm"]["gated_idle"] == pytest.approx(mvm_w * residual * gated / total)
    assert units["mvm"]["dynamic"] > 0 and units["mvm"]["leakage"] > 0
    assert units["dwpu"]["dynamic"] == 0 and units["dwpu"]["gated_idle"] > 0


def test_padded_rows_cost_the_zero_product_energy() -> None:
    model = cost_model(load_arch())
    e = model.arch.energy
    zero = e.mvm_activity_fit[0]
    # each MAC leaves out the array's clock, which is charged per busy cycle instead
    clock = mvm_clock_pj_per_mac(model.arch)
    geo = dict(unit="mvm", weight_set=0, in_addr=0, out_addr=0, vectors=10, cols_used=8)
    # a 3-channel first conv: 3 of each 64 rows carry data; 7 taps in 448 rows
    first = Mvm(**geo, rows_used=448, cin=3, cpad=64)
    data = 21
    expect = 10 * 8 * ((data + zero * (448 - data)) * e.mvm_mac_pj - 448 * clock)
    assert model.mvm_mac_energy_pj(first) == pytest.approx(expect)
    # a block starting mid-period: rows 62 .. 129 hold channels 62, 63 (padding), 0 .. 63
    # of the next tap (3 data), and 0 .. 1 of the third (2 data)
    mid = Mvm(**geo, rows_used=68, row0=62, cin=3, cpad=64)
    expect = 10 * 8 * ((5 + zero * 63) * e.mvm_mac_pj - 68 * clock)
    assert model.mvm_mac_energy_pj(mid) == pytest.approx(expect)
    # full channels: every MAC costs mvm_mac_pj less the clock
    dense = Mvm(**geo, rows_used=128, cin=64, cpad=64)
    assert model.mvm_mac_energy_pj(dense) == pytest.approx(10 * 8 * 128 * (e.mvm_mac_pj - clock))


def test_a_fully_used_array_costs_the_measured_mac_energy() -> None:
    # the array's clock per busy cycle plus its MACs less the clock: mvm_mac_pj a MAC, the
    # 15 TOPS/W the MAC energy comes from, at any share of the gateable clock
    arch = load_arch(overrides={"clock_gating.mvm_idle_share": 0.7})
    volts = arch.clock.nominal_voltage_v
    per_cycle_pj = unit_clock_w(arch, FREQ, volts)["mvm"] * 1e12 / FREQ
    macs = arch.mvm.macs_per_cycle
    per_mac = per_cycle_pj / macs + arch.energy.mvm_mac_pj - mvm_clock_pj_per_mac(arch)
    assert per_mac == pytest.approx(arch.energy.mvm_mac_pj)


def test_a_clock_above_the_zero_product_energy_is_refused() -> None:
    arch = load_arch(overrides={"energy.mvm_mac_pj": 0.01})
    with pytest.raises(ArchError, match="must be below the zero-product MAC energy"):
        mvm_clock_pj_per_mac(arch)


def test_the_dram_devices_standby_power_is_per_channel_and_constant() -> None:
    # the devices' own standby power: per x16 channel, on their own supply, so neither the
    # core clock nor the core supply moves it; the run charges it to `ddr` as clocked idle
    per_channel = ARCH.static_power.dram_background_w_per_channel
    top = static_power_w(ARCH, FREQ, 4)
    low = static_power_w(ARCH, 200_000_000, 1, voltage_v=0.68)
    assert top["dram_background"] == low["dram_background"] == per_channel * ARCH.ddr.channels
    two = load_arch(overrides={"ddr.channels": 2})
    assert static_power_w(two, FREQ, 4)["dram_background"] == pytest.approx(2 * per_channel)
    prog = program(1, stream_tasklist=False)
    r = simulate(prog, {0: [mvm(1000)]}, arch=ARCH, frames=1)
    phy = ARCH.static_power.ddr_phy_w
    assert r.unit_power_w["ddr"]["clocked_idle"] == pytest.approx(phy + 4 * per_channel)


def test_a_window_without_width_counts_every_row() -> None:
    # swicr with no window row (kw + (icr - 1) * stride_w <= 0) has no padding period: every
    # row counts as data, as for a task without its geometry, rather than dividing by zero
    base = dict(unit="mvm", weight_set=0, in_addr=0, out_addr=0, vectors=1, cols_used=1)
    t = Mvm(**base, rows_used=64, cin=3, cpad=64, swicr=1, kw=0, icr=0)
    assert mvm_data_rows(t) == 64


def test_the_chip_clock_network_scales_with_f_v2_and_not_with_cores() -> None:
    # the chip-level clock tree feeds the uncore too: f * V^2 from its nominal figure, the
    # same whichever cores run, never gated; the run charges it to `control` as clocked idle
    arch = load_arch(overrides={"host_link.setup_us": 0.0, "static_power.clock_network_w": 0.5})
    nominal = arch.clock.nominal_voltage_v
    assert static_power_w(arch, FREQ, 4, voltage_v=nominal)["clock_network"] == pytest.approx(0.5)
    low = static_power_w(arch, 400_000_000, 1, voltage_v=0.68)["clock_network"]
    assert low == pytest.approx(0.5 * 0.5 * (0.68 / nominal) ** 2)
    prog = program(1, stream_tasklist=False)
    base = load_arch(overrides={"host_link.setup_us": 0.0, "static_power.clock_network_w": 0.01})
    with_net = simulate(prog, {0: [mvm(1000)]}, arch=arch, frames=1)
    without = simulate(prog, {0: [mvm(1000)]}, arch=base, frames=1)
    scale = (FREQ / arch.clock.default_hz) * (arch.clock.voltage_at(FREQ) / nominal) ** 2
    control = with_net.unit_power_w["control"]["clocked_idle"]
    assert control - without.unit_power_w["control"]["clocked_idle"] == pytest.approx(0.49 * scale)
    assert with_net.total_cycles == without.total_cycles
