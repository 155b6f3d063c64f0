"""Value-aware MVM energy: each Mvm charged by the activity of its data.

The cycle model charges a MAC ``mvm_mac_pj``, a channel-padding one the zero-product cost
(`aipusim.isa.cost.CostModel.mvm_mac_energy_pj`). With the data known, a MAC costs
``mvm_mac_pj * (a + b * p)`` (`aipusim.arch.model.EnergySpec.mvm_activity_fit`: the line
through 15 TOPS/W at random data and 82 TOPS/W at 50 % input and 90 % weight sparsity),
``p`` the fraction of the task's products whose input and weight are both nonzero. So a
task of ``macs`` MACs with ``active`` such products costs ``mvm_mac_pj * (a * macs + b *
active)``: zero-padded rows (64-channel padding, conv1's 3 channels) are no longer full MACs.
Both models leave the array's clock out of a MAC (`aipusim.isa.cost.mvm_clock_pj_per_mac`):
it is charged per busy cycle of the MVM.

The difference to the cycle model goes into the MVM component of the same figures the
result reports (INIT, the run, a steady frame, average power), at the run's voltage.

>>> from aipusim.arch import load_arch
>>> round(mac_energy_pj(load_arch(), macs=1000, active=50) / (1000 * 0.185), 4)  # clock out
0.1489
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from aipusim.arch.model import Arch
from aipusim.isa.cost import C, dynamic_scale, mvm_clock_pj_per_mac
from aipusim.isa.metrics import WARMUP_STARTS
from aipusim.isa.trace_schema import Component

if TYPE_CHECKING:
    from aipusim.simulator.result import SimResult


class EnergyModel(enum.StrEnum):
    """How a run charges MVM energy: by the cycle model's MAC count, or by its data."""

    CYCLES = "cycles"
    VALUE_AWARE = "value_aware"


def mac_energy_pj(arch: Arch, macs: int, active: int) -> float:
    """Value-aware energy of ``macs`` MACs of which ``active`` had two nonzero operands,
    pJ at the nominal voltage, less the array's clock (charged per busy cycle:
    `aipusim.isa.cost.mvm_clock_pj_per_mac`), as the cycle model charges a MAC."""
    a, b = arch.energy.mvm_activity_fit
    clock = mvm_clock_pj_per_mac(arch) * macs
    return arch.energy.mvm_mac_pj * (a * macs + b * active) - clock


def value_aware(
    result: SimResult, arch: Arch, tasks: Iterable[tuple[int, int, int, float]]
) -> dict[str, Any]:
    """The result's energy figures with value-aware MVM energy. ``tasks``: ``(phase, macs,
    active, charged)`` of every executed Mvm (phase -1: INIT; else the start; ``charged``
    the cycle model's MAC energy of it, pJ at the nominal voltage)."""
    scale = dynamic_scale(arch, result.voltage_v)[C[Component.MVM]]
    first = WARMUP_STARTS if result.steady else 0
    init = run = frames = 0.0
    macs_all = active_all = 0
    for phase, macs, active, charged in tasks:
        delta = (mac_energy_pj(arch, macs, active) - charged) * scale
        run += delta
        macs_all += macs
        active_all += active
        if phase < 0:
            init += delta
        elif phase >= first:
            frames += delta
    counted = max(result.frames - result.warmup_frames, 1)
    per_frame = dict(result.energy_mj_per_frame)
    per_frame[Component.MVM.value] += frames / counted * 1e-9
    total = sum(per_frame.values())
    return {
        "energy_mj_per_frame": total,
        "energy_mj_per_frame_by_component": per_frame,
        "energy_mj_init": result.energy_mj_init + init * 1e-9,
        "energy_mj_run": result.energy_mj_run + run * 1e-9,
        "avg_power_w": total * 1e-3 * result.fps,
        "mvm_active_fraction": active_all / macs_all if macs_all else 0.0,
    }


__all__ = ["EnergyModel", "mac_energy_pj", "value_aware"]
