"""``simulate(...)``: the Python entry point of the simulator."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from aipusim.arch import Arch, load_arch
from aipusim.base.errors import ConfigError
from aipusim.isa.program import Program, load_program_tables
from aipusim.isa.table import TaskTable
from aipusim.isa.tasks import Task
from aipusim.isa.trace_schema import POWER_TIMELINE_SUFFIX, TraceHeader, parse_levels
from aipusim.simulator.engine import Simulation
from aipusim.simulator.result import SimResult
from aipusim.simulator.trace import Tracer

#: Runtime knobs ``overrides`` may change, with the type each must have.
RUNTIME_KNOBS: dict[str, type] = {
    "frequency_hz": int,
    "use_hw_tokens": bool,
    "double_buffer": bool,
    "stream_tasklist": bool,
    "mvm_utilization_limit": float,
    "multicore_mode": str,
    "replicas": int,
}
#: Accepted spellings of the knobs (the compiler's names).
ALIASES = {"frequency": "frequency_hz"}


def _knob(key: str, value: Any) -> tuple[str, Any]:
    name = ALIASES.get(key, key)
    if name not in RUNTIME_KNOBS:
        valid = ", ".join(sorted([*RUNTIME_KNOBS, *ALIASES, "profiling_levels"]))
        raise ConfigError(f"simulate override must be one of {valid}, not {key!r}")
    kind = RUNTIME_KNOBS[name]
    if isinstance(value, str):
        text = value.strip()
        if kind is bool:
            if text.lower() not in ("true", "false", "1", "0"):
                raise ConfigError(f"{key} must be true or false, not {value!r}")
            return name, text.lower() in ("true", "1")
        try:
            return name, kind(float(text)) if kind is int else kind(text)
        except ValueError:
            raise ConfigError(f"{key} must be a {kind.__name__}, not {value!r}") from None
    if kind is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if kind is float and isinstance(value, int):
        value = float(value)
    if not isinstance(value, kind):
        raise ConfigError(f"{key} must be a {kind.__name__}, not {value!r}")
    return name, value


def simulate(
    program_or_dir: Program | str | Path,
    tasklists: Mapping[int, Sequence[Task] | TaskTable] | None = None,
    *,
    arch: Arch | None = None,
    frames: int = 8,
    levels: str | Sequence[str] | None = None,
    trace_path: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    progress: Callable[[int], None] | None = None,
) -> SimResult:
    """Simulate a compiled program for ``frames`` frames per instance replica.

    ``program_or_dir`` is a compiled directory (``model.json`` + ``core<N>.tasklist``) or a
    `Program` with in-memory ``tasklists`` ``{logical core: [Task, ...] or TaskTable}``.
    ``levels`` (default: the program's ``profiling_levels``) are the trace tags to record;
    they cost control-core cycles whether or not ``trace_path`` is given. A ``trace_path`` ending in
    ``.parquet`` writes Parquet, anything else text; the power timeline goes beside it
    (``run.trace`` -> ``run.power.parquet``). ``overrides`` change runtime knobs
    (``frequency``, ``double_buffer``, ``use_hw_tokens``, ``stream_tasklist``,
    ``mvm_utilization_limit``, ``multicore_mode``, ``replicas``, ``profiling_levels``).
    ``progress(n)`` is called as frames come back.

    >>> from aipusim.isa.program import Instance, MulticoreMode, Program
    >>> from aipusim.isa.tasks import Mvm, Unit
    >>> prog = Program(model="one", multicore_mode=MulticoreMode.COOPERATIVE,
    ...                aipu_cores_used=1, resources_used=1.0,
    ...                instance=Instance((0,), ("core0.tasklist",), 0, 0))
    >>> mvm = Mvm(unit=Unit.MVM, weight_set=0, in_addr=0, out_addr=0, vectors=1000,
    ...           rows_used=512, cols_used=512)
    >>> simulate(prog, {0: [mvm]}, frames=2).device_latency_cycles.tolist()
    [8024, 8024]
    """
    if isinstance(program_or_dir, Program):
        if tasklists is None:
            raise ConfigError("tasklists must be given with a Program, not None")
        program, lists = program_or_dir, dict(tasklists)
    else:
        program, lists = load_program_tables(program_or_dir)
    arch = arch or load_arch()
    changes: dict[str, Any] = {}
    for key, value in (overrides or {}).items():
        if key == "profiling_levels":
            levels = value
            continue
        name, v = _knob(key, value)
        changes[name] = v
    if changes:
        program = program.with_overrides(**changes)
    tags = parse_levels(levels if levels is not None else list(program.profiling_levels))
    layer_ops = program.extra.get("layer_ops")
    tracer = Tracer(tags, arch.control.trace_line_cycles, layer_ops) if tags else None
    sim = Simulation(program, lists, arch, frames=frames, tracer=tracer, progress=progress)
    result = sim.run()
    if trace_path is not None:
        path = Path(trace_path)
        header = TraceHeader(
            program.frequency_hz,
            arch.chip.cores,
            program.model,
            tuple(t.value for t in tags),
            {"mode": str(program.multicore_mode)},
        )
        (tracer or Tracer((), 0)).write(path, header)
        timeline = path.with_name(path.name.removesuffix(path.suffix) + POWER_TIMELINE_SUFFIX)
        result.power_timeline.to_parquet(timeline, index=False)
    return result
