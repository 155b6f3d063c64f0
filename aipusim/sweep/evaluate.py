"""`evaluate_point`: compile one design point, simulate it, and return its measurements.

Runs inside a worker process (local pool or Dask). Everything it writes goes to a private
temporary folder that is removed afterwards: the model as ONNX (zoo models are built here,
in the worker, so only the point's few fields travel), the arch TOML with the point's
overrides (so the compiler and the simulator see the same hardware), and the compiler's
output folder.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from aipusim.sweep.space import SweepPoint


def write_model(point: SweepPoint, folder: Path) -> Path:
    """The ONNX file of the point: its own ``.onnx`` path, or its zoo model built here."""
    if point.model.lower().endswith(".onnx"):
        return Path(point.model)
    import onnx

    from aipusim import zoo

    path = folder / f"{point.model}.onnx"
    onnx.save(zoo.build(point.model, input_size=point.input_size), path)
    return path


def write_arch(point: SweepPoint, folder: Path) -> Path | None:
    """The arch file of the point: the sweep's own, or a copy with the point's overrides."""
    if not point.arch_params:
        return Path(point.arch_path) if point.arch_path is not None else None
    import tomli_w

    from aipusim.arch import DEFAULT_ARCH_PATH, load_arch
    from aipusim.arch.loader import read_toml

    # load_arch checks the overrides (unknown keys, types, consistency) with its messages.
    load_arch(point.arch_path, point.arch_overrides())
    raw = read_toml(Path(point.arch_path) if point.arch_path else DEFAULT_ARCH_PATH)
    for dotted, value in point.arch_params:
        *tables, key = dotted.split(".")
        node = raw
        for table in tables:
            node = node[table]
        node[key] = value
    path = folder / "arch.toml"
    path.write_bytes(tomli_w.dumps(raw).encode())
    return path


def evaluate_point(point: SweepPoint) -> dict[str, Any]:
    """Compile and simulate ``point`` with the public API; the measurements of its row.

    Raises the pipeline's `AipuSimError` when the point cannot be compiled or simulated
    (the runner records it as a failed row).
    Example: ``evaluate_point(build_space(["tiny_cnn"], frames=2).points[0])["fps"]``.
    """
    import aipusim
    from aipusim.functional_check import chip_inputs, compare

    config = point.config()
    with tempfile.TemporaryDirectory(prefix="aipusim-sweep-") as tmp:
        folder = Path(tmp)
        arch_path = write_arch(point, folder)
        model_path = write_model(point, folder)
        start = time.perf_counter()
        model = aipusim.compile(
            model_path,
            config,
            output_dir=folder / "compiled",
            arch=arch_path,
            cache=point.quantization_cache,
        )
        compiled = time.perf_counter()
        # The trace levels of the compiled program (each trace line costs control-core cycles,
        # so a point measures exactly what its config asks for).
        levels = list(config.profiling_levels)
        compiled_dir = model.compiled_dir()
        inputs, how = chip_inputs(compiled_dir) if point.check else (None, "")
        result = model.simulate(point.frames, levels=levels, functional=point.check, inputs=inputs)
        simulated = time.perf_counter()
        row = metrics(result) | {"compile_s": compiled - start, "simulate_s": simulated - compiled}
        if point.check:
            row |= check_columns(compare(result, compiled_dir, inputs, how))
        return row


def check_columns(verdict: Any) -> dict[str, Any]:
    """The functional check's columns of a sweep row from a `FunctionalCheck`."""
    return {
        "bit_exact": verdict.bit_exact,
        "mismatches": sum(v["mismatches"] for v in verdict.outputs.values()),
        "check": verdict.text(),
    }


def metrics(result: Any) -> dict[str, Any]:
    """The measurement columns of a sweep row from a `SimResult` (`store.METRIC_COLUMNS`)."""
    watts = result.avg_power_w
    return {
        "fps": result.fps,
        "device_fps": result.device_fps,
        "warmup_frames": result.warmup_frames,
        "latency_us_unloaded": result.latency_us_unloaded,
        "latency_us_p50": result.latency_us_p50,
        "latency_us_p99": result.latency_us_p99,
        "cold_start_us": result.cold_start_us,
        "energy_mj_per_frame": result.energy_mj_per_frame_total,
        "energy_mj_init": result.energy_mj_init,
        "avg_power_w": watts,
        **{f"peak_power_w_{w}": v for w, v in result.peak_power_w.items()},
        "fps_per_w": result.fps / watts if watts > 0 else float("nan"),
        "total_cycles": result.total_cycles,
    }


__all__ = ["check_columns", "evaluate_point", "metrics", "write_arch", "write_model"]
