"""`evaluate_point`: compile one design point, simulate it, and return its measurements.

Runs inside a worker process (local pool or Dask). Everything it writes goes to private
temporary folders that are removed afterwards: the model as ONNX (zoo models are built here,
in the worker, so only the point's few fields travel), the arch TOML with the point's
overrides (so the compiler and the simulator see the same hardware), and the compiler's
output folder.

A worker is long-lived and keeps, in memory, what the next point can reuse:

- each model it compiles, read and checked once per worker while its file is unchanged
  (`aipusim.compiler.importer.read_model`) and compiled from that file without a copy; a
  zoo model is built once on the machine and kept as a file in the cache folder
  (`zoo_model_file`);
- the last compiled program, with its `program_key`: points that differ only in what the
  compiler never reads (the frame count, the arch's ``energy`` and ``static_power``
  numbers) are compiled once and simulated many times. The runner sends such points to
  one worker, one after the other (`aipusim.sweep.runner.program_groups`). Only one
  program is kept, so a worker's memory does not grow with the number of points.

The clock (``frequency``) and the DDR numbers are *not* runtime-only: the compiler's cost
model converts DDR bandwidth and latency to cycles at the compiled clock, and the
schedule (weight prefetch, streaming choices) and the program's recorded clock follow
from them, so points with another clock or DDR rate compile again. (On ResNet-50 the
tasklists and constants come out byte-identical at 100, 400 and 800 MHz, batch and
cooperative on 4 cores; only ``model.json``'s ``frequency_hz`` and the compile-time
estimates of ``report.json`` differ. Nothing tells that before compiling, so nothing is
shared on that ground.)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import onnx
import tomli_w

import aipusim
from aipusim import zoo
from aipusim.api.functional_check import chip_inputs, compare
from aipusim.api.sources import cache_folder, load_source
from aipusim.arch import DEFAULT_ARCH_PATH, load_arch
from aipusim.arch.loader import read_toml
from aipusim.base.atomic import temp_name
from aipusim.isa.metrics import UNIT_POWER_PARTS
from aipusim.sweep.space import SweepPoint

#: Arch tables only the simulator reads (energy per event, static power, clock gating):
#: points that differ only in keys under these share a compiled program (`program_key`).
SIMULATOR_ONLY_ARCH_TABLES = ("energy", "static_power", "clock_gating")


def program_key(point: SweepPoint) -> str:
    """What the compiler reads of ``point``: points with equal keys compile to the same
    program (all but the frame count and the arch keys under `SIMULATOR_ONLY_ARCH_TABLES`).

    >>> from aipusim.sweep.space import build_space
    >>> a, b = build_space(["tiny_cnn"], arch_params=["energy.control_task_pj=1,2"]).points
    >>> program_key(a) == program_key(b)
    True
    """
    compiled_arch = sorted(
        (k, repr(v))
        for k, v in point.arch_params
        if k.split(".")[0] not in SIMULATOR_ONLY_ARCH_TABLES
    )
    identity = {
        "model": point.model,
        "input_size": point.input_size,
        "params": sorted((k, repr(v)) for k, v in point.params),
        "arch": compiled_arch,
        "base": point.base_config_json,
        "arch_path": point.arch_path,
        "context": point.context_digest,
        "check": point.check,
        "cache": point.quantization_cache,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def write_model(point: SweepPoint, folder: Path) -> Path:
    """The ONNX file of the point: its own ``.onnx`` path, or its zoo model built here."""
    if point.model.lower().endswith(".onnx"):
        return Path(point.model)

    path = folder / f"{point.model}.onnx"
    onnx.save(zoo.build(point.model, input_size=point.input_size), path)
    return path


def write_arch(point: SweepPoint, folder: Path) -> Path | None:
    """The arch file of the point: the sweep's own, or a copy with the point's overrides."""
    if not point.arch_params:
        return Path(point.arch_path) if point.arch_path is not None else None

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


#: Sub-folder of the cache folder (`aipusim.compiler.quant.cache.cache_root`) holding
#: built zoo models, and how many it keeps (the most recently written).
ZOO_SUBDIR = "zoo"
ZOO_FILES_KEPT = 6


def zoo_model_file(name: str, input_size: int | None, use_cache: bool = True) -> Path:
    """The ONNX file of zoo model ``name`` at ``input_size``: built once and kept in the
    cache folder, keyed by the zoo's own source and the onnx version (building ResNet-50's
    random weights takes seconds; reading the file back, one). ``use_cache=False``
    (``--no-cache``) builds it into a temporary folder of this process instead.
    """
    digest = hashlib.sha256(f"{name}:{input_size}:{onnx.__version__}".encode())
    for source in sorted(Path(zoo.__file__).parent.glob("*.py")):
        digest.update(source.read_bytes())
    folder = cache_folder() / ZOO_SUBDIR
    if not use_cache:
        folder = Path(tempfile.mkdtemp(prefix="aipusim-zoo-"))
    path = folder / f"{name}-{input_size or 'published'}-{digest.hexdigest()[:16]}.onnx"
    if path.is_file():
        return path
    model = zoo.build(name, input_size=input_size)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = temp_name(path)
        onnx.save(model, tmp)
        tmp.replace(path)  # whole or absent, whatever other workers do meanwhile
    except OSError:
        # (an unwritable cache folder: the quantization cache warns about it)
        folder = Path(tempfile.mkdtemp(prefix="aipusim-zoo-"))
        path = folder / path.name
        onnx.save(model, path)
        return path
    built = []
    for other in folder.glob("*.onnx"):
        if not other.name.startswith("."):  # (not another writer's temporary file)
            with contextlib.suppress(OSError):
                built.append((other.stat().st_mtime, other))
    for _, old in sorted(built, reverse=True)[ZOO_FILES_KEPT:]:
        with contextlib.suppress(OSError):
            old.unlink()
    return path


class _Worker:
    """What a worker process keeps between points: its zoo model files and its last
    compiled program (one: memory stays bounded whatever the number of points)."""

    def __init__(self) -> None:
        self._models: dict[tuple[str, int | None, bool, str], Any] = {}
        self._program: tuple[str, Any, tempfile.TemporaryDirectory[str]] | None = None

    def model(self, point: SweepPoint) -> Any:
        """The point's model for `aipusim.compile`: its ONNX file (a zoo model's is built
        once on the machine), which the compiler reads and checks once per worker while
        the file is unchanged (`aipusim.compiler.importer.read_model`) and compiles
        without a copy; without the cache (its own temporary folder) the zoo model
        as an ``onnx.ModelProto``, read once per worker."""
        if point.model.lower().endswith(".onnx"):
            return point.model
        # (the cache folder too: a process that changes $AIPUSIM_CACHE_DIR, as the tests
        # do, must not reuse a file of the folder before, which may be gone)
        key = (point.model, point.input_size, point.quantization_cache, str(cache_folder()))
        if key not in self._models:
            path = zoo_model_file(point.model, point.input_size, point.quantization_cache)
            if point.quantization_cache:
                self._models[key] = str(path)
            else:
                try:
                    self._models[key] = load_source(path)[0]
                finally:  # (its own temporary folder)
                    shutil.rmtree(path.parent, ignore_errors=True)
        return self._models[key]

    def program(self, point: SweepPoint) -> tuple[Any, float]:
        """The compiled program of ``point`` and the seconds its compile took here (0.0
        when the previous point's program is the same one)."""
        key = program_key(point)
        if self._program is not None and self._program[0] == key:
            return self._program[1], 0.0
        self.drop_program()
        folder = tempfile.TemporaryDirectory(prefix="aipusim-sweep-")
        try:
            arch_path = write_arch(point, Path(folder.name))
            source = self.model(point)
            start = time.perf_counter()
            model = aipusim.compile(
                source,
                point.config(),
                output_dir=Path(folder.name) / "compiled",
                arch=arch_path,
                cache=point.quantization_cache,
            )
            seconds = time.perf_counter() - start
        except BaseException:
            folder.cleanup()
            raise
        self._program = (key, model, folder)
        return model, seconds

    def evaluate(self, point: SweepPoint) -> dict[str, Any]:
        """`evaluate_point` in this worker."""
        config = point.config()
        model, compile_s = self.program(point)
        with tempfile.TemporaryDirectory(prefix="aipusim-sweep-arch-") as tmp:
            # The point's own hardware numbers (a shared program was compiled with another
            # point's simulator-only numbers).
            arch_path = write_arch(point, Path(tmp))
            arch = None
            if arch_path is not None:
                arch = load_arch(arch_path)
            start = time.perf_counter()
            # The trace levels of the compiled program (each trace line costs control-core
            # cycles, so a point measures exactly what its config asks for).
            levels = list(config.profiling_levels)
            compiled_dir = model.compiled_dir()
            inputs, how = chip_inputs(compiled_dir) if point.check else (None, "")
            result = model.simulate(
                point.frames, levels=levels, functional=point.check, inputs=inputs, arch=arch
            )
            simulated = time.perf_counter()
        row = metrics(result) | {"compile_s": compile_s, "simulate_s": simulated - start}
        if point.check:
            row |= check_columns(compare(result, compiled_dir, inputs, how))
        return row

    def drop_program(self) -> None:
        if self._program is not None:
            self._program[2].cleanup()
            self._program = None


#: The worker of this process (its state lives as long as the process).
_WORKER = _Worker()


def evaluate_point(point: SweepPoint) -> dict[str, Any]:
    """Compile and simulate ``point`` with the public API; the measurements of its row.

    The compile is skipped when this worker's previous point has the same `program_key`
    (its ``compile_s`` is then 0.0). Raises the pipeline's `AipuSimError` when the point
    cannot be compiled or simulated (the runner records it as a failed row).
    Example: ``evaluate_point(build_space(["tiny_cnn"], frames=2).points[0])["fps"]``.
    """
    return _WORKER.evaluate(point)


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
        **{
            f"power_w_{part}": sum(u[part] for u in result.unit_power_w.values())
            for part in UNIT_POWER_PARTS
        },
        "unit_power_w": json.dumps(result.unit_power_w, sort_keys=True),
    }


__all__ = [
    "SIMULATOR_ONLY_ARCH_TABLES",
    "ZOO_FILES_KEPT",
    "ZOO_SUBDIR",
    "check_columns",
    "evaluate_point",
    "metrics",
    "program_key",
    "write_arch",
    "write_model",
    "zoo_model_file",
]
