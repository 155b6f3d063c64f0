"""``aipusim simulate``: run a compiled model's tasklists on the simulated chip."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from aipusim.base.errors import ConfigError
from aipusim.cli.options import (
    LEVELS_HELP,
    arch_option,
    json_option,
    load_arch_option,
    require_dir,
    uncertainty_option,
)
from aipusim.run.progress import Progress

if TYPE_CHECKING:
    from aipusim.simulator import SimResult


def _parse_sets(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set must be key=value, not {item!r}")
        out[key.strip()] = value.strip()
    return out


@click.command("simulate")
@click.argument("compiled_dir", type=click.Path(path_type=Path))
@click.option("--frames", type=int, default=8, show_default=True, help="Frames per instance.")
@click.option(
    "--trace",
    "trace_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write a profiling trace (text; .parquet for Parquet) and the power timeline beside it.",
)
@click.option(
    "--levels",
    default=None,
    metavar="B,PB,PE,K,M,T",
    help=LEVELS_HELP + " Default: the program's profiling_levels; with --trace and none "
    "compiled in, those `aipusim run` records (said on stderr).",
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Change what the runtime applies: frequency, voltage, double_buffer, replicas (of a "
    "Batch-1 model), profiling_levels, frames. Compiler decisions (multicore_mode, tiling, "
    "...) need a recompile. Repeatable.",
)
@click.option(
    "--functional",
    is_flag=True,
    help="Also execute every task on data (same cycles and energy) and compare the outputs "
    "with the int8 reference.",
)
@click.option(
    "--input",
    "input_files",
    multiple=True,
    metavar="NAME=FILE.npy",
    help="Functional input of graph input NAME (int8 as the chip takes it, or float to be "
    "quantized with the input's scale). Default: a seeded random input. Repeatable.",
)
@click.option(
    "--check",
    is_flag=True,
    help="With --functional: exit 1 with FUNCTIONAL_MISMATCH unless the outputs are bit-exact.",
)
@click.option(
    "--outputs",
    "outputs_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="With --functional: write each output tensor (int8) as OUT/<name>.npy.",
)
@click.option(
    "--energy-model",
    type=click.Choice(["cycles", "value_aware"]),
    default="cycles",
    show_default=True,
    help="value_aware (with --functional): also charge each Mvm by the activity of its data "
    "and report the energy both ways.",
)
@click.option(
    "--detail",
    type=click.Choice(["fast", "cycle"]),
    default="fast",
    show_default=True,
    help="cycle: the detailed reference model (L1 banks and LPDDR4x cycle by cycle, PCIe's "
    "DLLPs; slower; what `aipusim report fidelity` checks the fast model against).",
)
@uncertainty_option
@arch_option
@json_option
def simulate(
    compiled_dir: Path,
    frames: int,
    trace_path: Path | None,
    levels: str | None,
    sets: tuple[str, ...],
    functional: bool,
    input_files: tuple[str, ...],
    check: bool,
    outputs_dir: Path | None,
    energy_model: str,
    detail: str,
    uncertainty: int | None,
    arch_path: Path | None,
    as_json: bool,
) -> None:
    """Simulate COMPILED_DIR (model.json + core<N>.tasklist) and print FPS, latency,
    utilization, energy and power.

    Example: ``aipusim simulate out/compiled_model --frames 16 --set frequency=400000000``;
    ``aipusim simulate out --functional --check --frames 1`` also runs the data.
    """
    # lazy: loads numpy, simpy; kept off the CLI's start-up
    from aipusim.isa.program import load_program_tables
    from aipusim.simulator import simulate as run_simulation

    compiled_dir = compiled_folder(compiled_dir)
    if frames < 1:
        raise ConfigError(f"--frames must be an integer >= 1, not {frames}")
    # lazy: aipusim.api.overrides loads numpy; kept off the CLI's start-up
    from aipusim.api.overrides import check_overrides

    overrides = check_overrides(_parse_sets(sets), compiled_dir)
    arch = load_arch_option(arch_path)
    _check_functional_options(functional, input_files, check, outputs_dir, energy_model)
    program, tasklists = load_program_tables(compiled_dir)
    chosen_levels = None
    if trace_path is not None:
        chosen_levels = _default_trace_levels(levels, overrides, program.profiling_levels)
        levels = chosen_levels or levels
    inputs, how = None, ""
    if functional:
        # lazy: aipusim.api.functional_check loads numpy, onnx; kept off the CLI's start-up
        from aipusim.api.functional_check import chip_inputs

        inputs, how = chip_inputs(compiled_dir, _load_inputs(input_files) or None, program=program)
    # (--set frames=N changes the count the simulator checks; the bar then shows no total)
    expected = None if "frames" in overrides else frames * max(1, program.replicas)
    progress = Progress()
    try:
        result = run_simulation(
            program,
            tasklists,
            arch=arch,
            frames=frames,
            levels=levels,
            trace_path=trace_path,
            overrides=overrides,
            progress=progress.stage("simulate", expected),
            functional=functional,
            inputs=inputs,
            energy_model=energy_model,
            constants=compiled_dir if functional else None,
            detail=detail,
        )
    finally:
        progress.close()
    if chosen_levels is not None:
        # (said once the trace is written: a run that fails says only why)
        click.echo(
            f"aipusim: simulate: --trace without --levels: recorded levels {chosen_levels} "
            "(frames, layers, compute and memory tasks, as `run` does; --levels to choose)",
            err=True,
        )
    verdict = None
    if functional:
        # lazy: aipusim.api.functional_check loads numpy, onnx; kept off the CLI's start-up
        from aipusim.api.functional_check import attach_check

        verdict = attach_check(result, compiled_dir, inputs, how)
        if outputs_dir is not None:
            _write_outputs(outputs_dir, result.outputs)
    if uncertainty is not None:
        # lazy: aipusim.calibrate.uncertainty loads numpy, onnx; kept off the CLI's start-up
        from aipusim.calibrate.uncertainty import bands

        result.bands = bands(
            compiled_dir, uncertainty, frames=frames, arch_path=arch_path, **overrides
        )
    if as_json:
        click.echo(result.to_json())
    else:
        click.echo(summary_text(result))
        if verdict is not None:
            click.echo(f"\n  functional: {verdict.text()}")
            if outputs_dir is not None:
                click.echo(
                    f"  wrote {', '.join(f'{n}.npy' for n in result.outputs)} to {outputs_dir}/"
                )
    if check and verdict is not None and not verdict.bit_exact:
        raise verdict.error()


def _default_trace_levels(
    levels: str | None, overrides: dict[str, object], compiled: tuple[str, ...]
) -> str | None:
    """The levels for ``--trace`` when neither ``--levels``, ``--set profiling_levels`` nor
    the program names any: those `run` records (a trace with no level would be empty and
    its profile a table of nothing). None when the levels are given."""
    if levels is not None or "profiling_levels" in overrides or compiled:
        return None
    # lazy: aipusim.run.job loads numpy, onnx, pandas; kept off the CLI's start-up
    from aipusim.run.job import DEFAULT_RUN_LEVELS

    return ",".join(DEFAULT_RUN_LEVELS)


def _check_functional_options(
    functional: bool,
    input_files: tuple[str, ...],
    check: bool,
    outputs_dir: Path | None,
    energy_model: str,
) -> None:
    """The options that only mean something on data come with ``--functional``."""
    if functional:
        return
    given = [
        ("--input", bool(input_files)),
        ("--check", check),
        ("--outputs", outputs_dir is not None),
        ("--energy-model value_aware", energy_model != "cycles"),
    ]
    for flag, used in given:
        if used:
            raise ConfigError(f"{flag} must come with --functional, not without it")


def _load_inputs(items: tuple[str, ...]) -> dict[str, object]:
    """``NAME=FILE.npy`` pairs as arrays by name."""
    # lazy: loads numpy; kept off the CLI's start-up
    import numpy as np

    arrays: dict[str, object] = {}
    for item in items:
        name, sep, file = item.partition("=")
        if not sep or not name.strip() or not file.strip():
            raise ConfigError(f"--input must be NAME=FILE.npy, not {item!r}")
        name = name.strip()
        if name in arrays:
            raise ConfigError(f"--input {name} must be given once, not twice")
        path = Path(file.strip())
        if not path.is_file():
            raise ConfigError(f"--input {name} must name an existing .npy file, not {str(path)!r}")
        try:
            arrays[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"--input {name} must be a numpy .npy array file, not {str(path)!r} ({exc})"
            ) from None
    return arrays


def _write_outputs(folder: Path, outputs: dict[str, object]) -> None:
    """Each output as ``folder/<name>.npy`` (each file whole or not at all)."""
    # lazy: loads numpy; kept off the CLI's start-up
    import numpy as np

    from aipusim.base.fileio import output_path, reporting

    with reporting(folder):
        folder.mkdir(parents=True, exist_ok=True)
    for name, array in outputs.items():
        safe = name.replace("/", "_").replace("\\", "_")
        with output_path(folder / f"{safe}.npy") as tmp, tmp.open("wb") as fh:
            np.save(fh, np.asarray(array), allow_pickle=False)


def compiled_folder(path: Path) -> Path:
    """The ``compiled_model/`` folder that ``path`` names: itself, or the one inside a
    compile output folder. A folder left by a failed compile is refused with its status."""
    # lazy: loads numpy, onnx, pandas; kept off the CLI's start-up
    from aipusim.api.modelfiles import COMPILED_DIR
    from aipusim.isa.program import PROGRAM_FILE

    folder = path / COMPILED_DIR if (path / COMPILED_DIR).is_dir() else path
    if (folder / PROGRAM_FILE).is_file():
        return folder
    # lazy: aipusim.compiler.driver loads numpy, onnx; kept off the CLI's start-up
    from aipusim.compiler.driver import REPORT_NAME

    for report in (path / REPORT_NAME, path.parent / REPORT_NAME):
        try:
            data = json.loads(report.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("status") not in (None, "SUCCEEDED"):
            raise ConfigError(
                f"COMPILED_DIR {str(path)!r} is the output of a failed compile "
                f"({data.get('status')} in {data.get('stage')}: {data.get('message')}); "
                "fix that and compile again"
            )
    return require_dir(folder, "COMPILED_DIR")


def summary_text(result: SimResult) -> str:
    """The human-readable summary of a `SimResult`: the headline figures with their
    definitions (`aipusim.run.figures`), utilisation and energy by component."""
    # lazy: kept off the command's start-up (aipusim.run.figures)
    from aipusim.run.figures import headline

    lines = [
        f"{result.model}: {result.multicore_mode}, {result.replicas} replica(s) on "
        f"{result.active_cores} core(s), {result.frequency_hz / 1e6:g} MHz at "
        f"{result.voltage_v:.2f} V, {result.frames} frames in {result.total_cycles} cycles "
        f"({result.seconds * 1e3:.3f} ms)",
        "",
    ]
    rows = headline(result)
    width = max(len(name) for name, _, _ in rows)
    lines += [f"  {name:<{width}}  {value:>18}   {what}" for name, value, what in rows]
    lines += [
        "",
        "  busy %  " + "  ".join(f"{u}={v * 100:.1f}" for u, v in result.utilization.items()),
        "  cores % " + "  ".join(f"{c}={v * 100:.1f}" for c, v in result.core_utilization.items()),
        "  links % " + "  ".join(f"{k}={v * 100:.1f}" for k, v in result.link_utilization.items()),
        "",
        "  energy per frame by component (mJ, steady state):",
    ]
    for comp, mj in result.energy_mj_per_frame.items():
        lines.append(f"    {comp:<8} {mj:10.5f}")
    if result.bands is not None and result.bands.failed:
        lines += ["", result.bands.failure_line()]
    aware = result.energy_value_aware
    if aware is not None:
        lines += [
            "",
            f"  energy per frame, cycle model {sum(result.energy_mj_per_frame.values()):.5f} mJ;"
            f" value-aware {aware['energy_mj_per_frame']:.5f} mJ (MVM products with both "
            f"operands nonzero: {aware['mvm_active_fraction'] * 100:.1f} %)",
        ]
    return "\n".join(lines)
