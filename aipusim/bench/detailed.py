"""``aipusim bench --detailed``: how fast the detailed mode (``simulate(detail="cycle")``:
L1 banks and LPDDR4x cycle by cycle, PCIe's DLLPs, `aipusim.simulator.detail`) simulates one
frame of a zoo model, in simulated cycles per second of wall time, next to the fast mode
on the same compiled program.

The model is compiled once (not timed); each mode is simulated once. Wall and CPU seconds
are this process's, with the load average of the machine before and after (the figures
are wall times on a shared machine).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from aipusim import zoo
from aipusim.bench.functional import compile_zoo
from aipusim.compiler.config import CompilerConfig

#: The detailed-mode benchmark, with a 10-minute aim on the 2-core machine: ResNet-50 at its
#: published 224 px, batch on 4 cores, one frame.
DETAILED_MODEL = "resnet50"


def _timed(fn: Any) -> tuple[Any, float, float]:
    """``fn()``, its wall seconds and this process's CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def detailed_bench(
    name: str = DETAILED_MODEL,
    *,
    frames: int = 1,
    cores: int = 4,
    mode: str = "batch",
    input_size: int | None = None,
    quantization_cache: bool = True,
) -> dict[str, Any]:
    """Compile zoo model ``name`` for ``mode`` on ``cores`` cores and simulate ``frames``
    frames fast and detailed: seconds, simulated cycles per second, and how far apart the
    two modes' cycles are. Example: ``detailed_bench("tiny_cnn", input_size=32)``."""
    # lazy: aipusim.simulator loads simpy, numba, not otherwise loaded here
    from aipusim.simulator import simulate

    with tempfile.TemporaryDirectory(prefix="aipusim-dbench-") as tmp:
        config = CompilerConfig(aipu_cores_used=cores, multicore_mode=mode)
        _, folder = compile_zoo(name, Path(tmp), config, input_size, quantization_cache)
        load_before = os.getloadavg()[0]
        fast, fast_s, _ = _timed(lambda: simulate(folder, frames=frames))
        cycle, wall_s, cpu_s = _timed(lambda: simulate(folder, frames=frames, detail="cycle"))
        load_after = os.getloadavg()[0]
    waits = cycle.l1_waits or {}
    shape = "x".join(str(d) for d in zoo.info(name).input_shape)
    return {
        "model": name,
        "input": shape if input_size is None else f"{input_size}px",
        "mode": f"{mode} x{cores}",
        "frames": frames,
        "tasks": cycle.event_counts["tasks"],
        "cycles_detailed": cycle.total_cycles,
        "cycles_fast": fast.total_cycles,
        "diff_pct": round(100 * (fast.total_cycles / cycle.total_cycles - 1), 2),
        "detailed_wall_s": round(wall_s, 2),
        "detailed_cpu_s": round(cpu_s, 2),
        "simulated_cycles_per_s": round(cycle.total_cycles / wall_s),
        "fast_wall_s": round(fast_s, 2),
        "l1_accesses": sum(w["accesses"] for w in waits.values()),
        "l1_bank_waits": sum(w["bank_waits"] for w in waits.values()),
        "l1_port_waits": sum(w["port_waits"] for w in waits.values()),
        "load_before": round(load_before, 1),
        "load_after": round(load_after, 1),
    }


__all__ = ["DETAILED_MODEL", "detailed_bench"]
