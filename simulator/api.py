"""``simulate(...)``: the Python entry point of the simulator."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from aipusim.arch import Arch, load_arch
from aipusim.base.errors import ConfigError, SimulationError, TasklistError
from aipusim.base.fileio import check_output, output_path
from aipusim.isa.program import MulticoreMode, Program, load_program_tables
from aipusim.isa.table import TaskTable
from aipusim.isa.tasks import Task
from aipusim.isa.trace_schema import (
    HEADER_INSTANCE_CORES,
    HEADER_TOKEN_LATENCY,
    POWER_BIN_KEY,
    POWER_PEAK_KEY,
    POWER_STEADY_KEY,
    POWER_TIMELINE_SUFFIX,
    TraceHeader,
    parse_levels,
)
from aipusim.simulator.budget import check_run_memory
from aipusim.simulator.detail import Detail
from aipusim.simulator.engine import Simulation, check_voltage
from aipusim.simulator.functional.energy import EnergyModel, value_aware
from aipusim.simulator.functional.io import NOT_COMPLETE, check_inputs
from aipusim.simulator.result import RunRecord, SimResult
from aipusim.simulator.trace import Tracer

#: Settings the runtime really applies to a compiled program, with the type of each:
#: the clock and the supply voltage, double buffering of the host transfers (off always;
#: on only if the program was compiled with two I/O buffers) and, in the Batch-1 modes,
#: how many of the copies that fit the chip to start. ``profiling_levels`` (the trace)
#: is runtime too. Everything else in ``model.json`` was decided by the compiler.
RUNTIME_KNOBS: dict[str, type] = {
    "frequency_hz": int,
    "voltage_v": float,
    "double_buffer": bool,
    "replicas": int,
}
#: Accepted spellings of the knobs (the compiler's names).
ALIASES = {"frequency": "frequency_hz", "voltage": "voltage_v"}
#: What ``--set`` says for a knob (the compiler's name where it has one).
SHOWN = {"frequency_hz": "frequency", "voltage_v": "voltage"}
PROFILING_LEVELS = "profiling_levels"
#: How many frames to run (the ``frames`` argument, also accepted as an override).
FRAMES = "frames"
#: Fields of `Program` that the compiler fixed (its names for them where they differ).
COMPILE_TIME = (
    "multicore_mode",
    "aipu_cores_used",
    "resources_used",
    "mvm_utilization_limit",
    "use_hw_tokens",
    "stream_tasklist",
    "chip_cores",
)


def fixed_at_compile_time(name: str, compiled: Any, wanted: Any) -> ConfigError:
    """The error for an override of a compile-time decision: say what it was compiled with
    and how to get ``wanted`` instead.

    >>> print(fixed_at_compile_time("multicore_mode", "cooperative", "batch"))
    multicore_mode is fixed at compile time (cooperative); recompile with --set \
multicore_mode=batch
    """
    was = "" if compiled is None else f" ({_text(compiled)})"
    return ConfigError(
        f"{name} is fixed at compile time{was}; recompile with --set {name}={_text(wanted)}"
    )


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(map(str, value))
    return str(value)


def runtime_names() -> list[str]:
    """The names ``overrides`` accepts, as the messages list them."""
    return sorted({SHOWN.get(k, k) for k in RUNTIME_KNOBS} | {PROFILING_LEVELS, FRAMES})


def _knob(key: str, value: Any, program: Program) -> tuple[str, Any]:
    name = ALIASES.get(key, key)
    if name not in RUNTIME_KNOBS:
        if name in COMPILE_TIME:
            raise fixed_at_compile_time(name, getattr(program, name), value)
        valid = ", ".join(runtime_names())
        raise ConfigError(f"simulate override must be one of {valid}, not {key!r}")
    return name, _convert(key, value, RUNTIME_KNOBS[name])


_KIND_TEXT = {int: "an integer", float: "a number", bool: "true or false"}


def _convert(key: str, value: Any, kind: type) -> Any:
    """``value`` (text from ``--set`` or a Python value) as a ``kind``; nan and inf are not
    numbers here, and a huge integer keeps its digits (text is not read through a float)."""
    given = value
    if isinstance(value, str):
        text = value.strip()
        if kind is bool:
            if text.lower() not in ("true", "false", "1", "0"):
                raise ConfigError(f"{key} must be true or false, not {value!r}")
            return text.lower() in ("true", "1")
        try:
            value = int(text) if kind is int and text.lstrip("+-").isdigit() else float(text)
        except ValueError:
            raise ConfigError(f"{key} must be {_KIND_TEXT[kind]}, not {value!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{key} must be {_KIND_TEXT[kind]}, not {given!r}")
    if kind is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{key} must be {_KIND_TEXT[kind]}, not {given!r}")
    return value


def _check_clock(program: Program, changes: dict[str, Any], arch: Arch) -> None:
    """The clock and the voltage of a run against the chip's operating points: bad input
    (`ConfigError`, exit status 2), named with the valid range."""
    clock = arch.clock
    freq = changes.get("frequency_hz", program.frequency_hz)
    if not clock.min_hz <= freq <= clock.max_hz:
        where = "frequency" if "frequency_hz" in changes else "frequency_hz of model.json"
        raise ConfigError(
            f"{where} must be an integer {clock.min_hz}-{clock.max_hz} (Hz, the clock range "
            f"of {arch.chip.name}), not {freq}"
        )
    voltage = changes.get("voltage_v")
    if voltage is not None:
        try:
            check_voltage(arch, freq, voltage)
        except SimulationError as exc:
            raise ConfigError(str(exc).replace("voltage_v", "voltage", 1)) from None


def _check_runtime(program: Program, changes: dict[str, Any]) -> None:
    """What the compiled program allows of the runtime knobs that need it."""
    slots = int(program.extra.get("frame_slots", 2 if program.double_buffer else 1))
    if changes.get("double_buffer") and slots < 2:
        raise ConfigError(
            "double_buffer=true needs two I/O buffers per frame, but the program was compiled "
            "with one (double_buffer=false); recompile with --set double_buffer=true"
        )
    if "replicas" in changes:
        wanted = changes["replicas"]
        if program.multicore_mode not in (MulticoreMode.MULTIPROCESS, MulticoreMode.MULTITHREAD):
            raise ConfigError(
                f"replicas is fixed at compile time ({program.replicas}: a "
                f"{program.multicore_mode} instance on {program.aipu_cores_used} core(s)); "
                "recompile with --set multicore_mode=multiprocess for copies of a 1-core model"
            )
        most = program.default_replicas()
        if not 1 <= wanted <= most:
            raise ConfigError(
                f"replicas must be 1-{most} (the copies that aipu_cores_used="
                f"{program.aipu_cores_used} and resources_used={program.resources_used} fit "
                f"on the chip), not {wanted}"
            )


def check_addresses(
    program: Program, tasklists: Mapping[int, Sequence[Task] | TaskTable], arch: Arch
) -> None:
    """Refuse tasklists with an access outside the usable part of its pool (a
    `TasklistError` naming the first task), as `aipusim isa check` reports them."""
    from aipusim.isa.addresses import find_violations

    for core in program.instance.cores:
        tasks = tasklists.get(core)
        if tasks is None:
            continue
        table = tasks if isinstance(tasks, TaskTable) else TaskTable.from_tasks(tasks)
        found = find_violations(table, arch)
        if found:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            raise TasklistError(f"core {core} {found[0]}{more}")


def _check_functional(
    program: Program, functional: bool, inputs: Mapping[str, Any] | None, energy_model: str
) -> EnergyModel:
    """The energy model, once the functional arguments agree (before anything runs)."""
    if not isinstance(functional, bool):
        raise ConfigError(f"functional must be true or false, not {functional!r}")
    valid = ", ".join(m.value for m in EnergyModel)
    if energy_model not in tuple(EnergyModel):
        raise ConfigError(f"energy_model must be one of {valid}, not {energy_model!r}")
    model = EnergyModel(energy_model)
    if not functional:
        if model is EnergyModel.VALUE_AWARE:
            raise ConfigError(
                "energy_model=value_aware must come with functional=True (the energy follows "
                "the data), not without it"
            )
        if inputs is not None:
            raise ConfigError("inputs must come with functional=True, not without it")
        return model
    if program.memory is None:
        raise SimulationError(NOT_COMPLETE)
    check_inputs(program.memory, inputs)
    return model


def _attach(
    result: SimResult,
    rec: RunRecord,
    inputs: Mapping[str, Any] | None,
    constants: bytes | str | Path | None,
    model: EnergyModel,
) -> None:
    """Execute the run on data and put what it gave on ``result``."""
    # numba's compiler loads only when a run executes data
    from aipusim.simulator.functional.execute import run_functional

    aware = model is EnergyModel.VALUE_AWARE
    run = run_functional(
        rec, inputs=dict(inputs) if inputs is not None else None, constants=constants,
        value_aware=aware,
    )  # fmt: skip
    result.outputs = run.outputs
    result.functional = run.summary
    result.tensors = run.tensors
    result.tensor_writers = run.tensor_writers
    result.functional_tasks = run.tasks
    if aware:
        result.energy_value_aware = value_aware(result, rec.arch, run.mvm_activity)


def write_power_timeline(result: SimResult, path: Path) -> Path:
    """The power timeline as Parquet, with its bin and the run's peak power by window in
    the schema metadata (what the profiler's power plot states)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(result.power_timeline, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[POWER_BIN_KEY.encode()] = str(result.power_bin_us).encode()
    meta[POWER_PEAK_KEY.encode()] = json.dumps(result.peak_power_w).encode()
    meta[POWER_STEADY_KEY.encode()] = repr(float(result.avg_power_w)).encode()
    with output_path(path) as tmp:
        pq.write_table(table.replace_schema_metadata(meta), tmp)
    return path


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
    contention: bool = True,
    functional: bool = False,
    inputs: Mapping[str, Any] | None = None,
    energy_model: str = EnergyModel.CYCLES,
    constants: bytes | str | Path | None = None,
    detail: str = Detail.FAST,
) -> SimResult:
    """Simulate a compiled program for ``frames`` frames per instance replica.

    ``program_or_dir`` is a compiled directory (``model.json`` + ``core<N>.tasklist``) or a
    `Program` with in-memory ``tasklists`` ``{logical core: [Task, ...] or TaskTable}``.
    ``levels`` (default: the program's ``profiling_levels``) are the trace tags to record;
    they cost control-core cycles whether or not ``trace_path`` is given. A ``trace_path`` ending in
    ``.parquet`` writes Parquet, anything else text; the power timeline goes beside it
    (``run.trace`` -> ``run.power.parquet``). ``overrides`` change what the runtime
    really applies (`RUNTIME_KNOBS`: ``frequency``, ``voltage``, ``double_buffer``,
    ``replicas`` of a Batch-1 model; ``profiling_levels`` and ``frames`` too, the same as
    the arguments); a decision of the compiler
    (``multicore_mode``, ``mvm_utilization_limit``, ...) is refused with a hint to
    recompile.
    ``progress(n)`` is called as frames come back. ``contention=False`` gives every engine
    that moves data the shared links to itself (a what-if: each transfer then takes its
    cost-model time, `aipusim.isa.cost`).

    ``functional=True`` then executes every task of the run on data, in the order the timing
    model ran it (`aipusim.simulator.functional`; no cycle or energy changes): ``inputs``
    ``{name: int8 array of the input's logical shape}`` (default: a seeded random input,
    which the summary says), the constants image from the compiled directory (or
    ``constants``: its bytes, for an in-memory `Program`). Two unordered tasks touching the
    same bytes raise `HazardError`. The result then carries ``outputs``, ``functional``,
    ``tensors``, ``tensor_writers`` and ``functional_tasks``; ``energy_model="value_aware"``
    adds ``energy_value_aware`` (each Mvm charged by the activity of its data).

    ``detail="cycle"`` runs the detailed reference model of L1 and the links
    (`aipusim.simulator.detail`, what it changes in `DETAILED_PARTS`): slower, and what the
    fast default is checked against (``aipusim report fidelity``).

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
    if trace_path is not None:
        check_output(trace_path)
    if isinstance(program_or_dir, Program):
        if tasklists is None:
            raise ConfigError("tasklists must be given with a Program, not None")
        program, lists = program_or_dir, dict(tasklists)
    else:
        program, lists = load_program_tables(program_or_dir)
    arch = arch or load_arch()
    changes: dict[str, Any] = {}
    for key, value in (overrides or {}).items():
        if key == PROFILING_LEVELS:
            levels = value
            continue
        if key == FRAMES:
            frames = _convert(key, value, int)
            continue
        name, v = _knob(key, value, program)
        changes[name] = v
    _check_runtime(program, changes)
    _check_clock(program, changes, arch)
    voltage = changes.pop("voltage_v", None)
    if changes:
        program = program.with_overrides(**changes)
    tags = parse_levels(levels if levels is not None else list(program.profiling_levels))
    tracer = (
        Tracer(
            tags,
            arch.control.trace_line_cycles,
            program.extra.get("layer_ops"),
            program.extra.get("layer_macs"),
        )
        if tags
        else None
    )
    if not isinstance(contention, bool):
        raise ConfigError(f"contention must be true or false, not {contention!r}")
    if detail not in set(Detail):
        raise ConfigError(f"detail must be one of {', '.join(Detail)}, not {detail!r}")
    check_addresses(program, lists, arch)
    model = _check_functional(program, functional, inputs, energy_model)
    if isinstance(frames, int) and not isinstance(frames, bool) and frames >= 1:
        # refused before it starts, not killed for want of memory an hour later
        check_run_memory(
            {c: lists[c] for c in program.instance.cores if c in lists},
            frames=frames,
            frames_per_start=program.frames_per_start,
            replicas=program.replicas,
            traced=tracer is not None,
        )
    sim = Simulation(
        program,
        lists,
        arch,
        frames=frames,
        tracer=tracer,
        progress=progress,
        voltage_v=voltage,
        contention=contention,
        detail=Detail(detail),
    )
    result = sim.run()
    result.detail = str(Detail(detail))
    result.l1_waits = sim.l1_waits()
    if functional:
        source = constants if isinstance(program_or_dir, Program) else program_or_dir
        _attach(result, sim.record(), inputs, source, model)
    if trace_path is not None:
        path = Path(trace_path)
        header = TraceHeader(
            program.frequency_hz,
            arch.chip.cores,
            program.model,
            tuple(t.value for t in tags),
            {
                "mode": str(program.multicore_mode),
                HEADER_INSTANCE_CORES: str(program.aipu_cores_used),
                HEADER_TOKEN_LATENCY: str(arch.control.token_signal_latency_cycles),
            },
        )
        with output_path(path) as tmp:
            (tracer or Tracer((), 0)).write(tmp, header)
        timeline = path.with_name(path.name.removesuffix(path.suffix) + POWER_TIMELINE_SUFFIX)
        write_power_timeline(result, timeline)
        result.trace_path = path
    return result
