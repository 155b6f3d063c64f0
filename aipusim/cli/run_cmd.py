"""``aipusim run``: the main job, compile -> simulate -> profile in one command."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from aipusim.base.errors import ConfigError
from aipusim.cli import main as entry
from aipusim.cli.options import (
    LEVELS_HELP,
    ConfigHelp,
    arch_option,
    build_config,
    conf_option,
    config_line,
    defaults_option,
    json_option,
    no_cache_option,
    set_option,
    uncertainty_option,
)
from aipusim.run.progress import Progress

if TYPE_CHECKING:
    from aipusim.run.result import RunResult


@click.command(cls=ConfigHelp)
@click.argument("model")
@defaults_option
@conf_option
@set_option
@arch_option
@click.option("--frames", type=int, default=8, show_default=True, help="Frames per replica.")
@click.option(
    "-o",
    "--output",
    "output_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Output folder (default: ./<model name>).",
)
@click.option(
    "--levels",
    default="B,PB,PE,K,M",
    show_default=True,
    help=LEVELS_HELP,
)
@click.option("--input-size", type=int, default=None, help="Input side for a zoo model.")
@click.option(
    "--input-shape",
    metavar="N,C,H,W",
    default=None,
    help="Fixed input shape for an ONNX model with dynamic dimensions, e.g. 1,3,224,224.",
)
@click.option(
    "--keep-input-model",
    is_flag=True,
    help="Keep a copy of the ONNX model in the output folder (compile/input_model/); by "
    "default run.json records its path, size and SHA-256 (or the zoo name) instead.",
)
@click.option(
    "--check",
    is_flag=True,
    help="Also execute the run on data (seeded input, same cycles) and compare the outputs "
    "with the int8 reference; exit 1 with FUNCTIONAL_MISMATCH unless bit-exact.",
)
@uncertainty_option
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="The slowest-layers table (and plots/layers.png) shows the N slowest layers "
    "[default: 10 in the table; every layer, in network order, in the plot].",
)
@click.option(
    "--sort",
    type=click.Choice(["busy", "span"]),
    default=None,
    help="Rank layers by exclusive busy time or by span (start of the first task to end of "
    "the last, waits included) [default: busy]; the plot is then ranked too.",
)
@no_cache_option
@json_option
def run(
    model: str,
    defaults: bool,
    conf_path: Path | None,
    overrides: tuple[str, ...],
    arch_path: Path | None,
    frames: int,
    output_dir: Path | None,
    levels: str,
    input_size: int | None,
    input_shape: str | None,
    keep_input_model: bool,
    check: bool,
    uncertainty: int | None,
    top: int | None,
    sort: str | None,
    no_cache: bool,
    as_json: bool,
) -> None:
    """Compile MODEL (an ONNX file or a zoo name), simulate it and profile the trace.

    Prints FPS, latency, energy, power and the slowest layers (--top, --sort), and writes the output
    folder: compile artifacts, trace.txt, report.md, layers.csv, units.csv, plots/*.png.

    Example: ``aipusim run resnet50 --set aipu_cores_used=4 --set multicore_mode=batch``
    """
    progress = Progress()
    if progress.terminal:
        # on a terminal, a first line before the imports below (numpy, onnx: seconds on a
        # cold start); into a pipe or a file bad input stays the one line of its error, and
        # the stages' plain lines follow as the work goes
        progress.opening(f"run {model}: compile, simulate, profile (a line every few seconds)")
    # lazy: loads numpy, onnx, pandas; kept off the CLI's start-up
    from aipusim.api.sources import base_label, starting_config
    from aipusim.compiler.request import parse_input_shape
    from aipusim.isa.trace_schema import parse_levels
    from aipusim.run.job import resolve_model, run_model

    install_s = install_seconds()
    source = resolve_model(model, input_size)
    shape = parse_input_shape(input_shape) if input_shape is not None else None
    if shape is not None and source.path is None:
        raise ConfigError(
            "--input-shape applies to ONNX files; a zoo model takes --input-size, not "
            f"--input-shape {input_shape}"
        )
    tags = [t.value for t in parse_levels(levels)]
    config = build_config(conf_path, overrides, starting_config(model, defaults))
    out = output_dir or Path.cwd() / source.slug

    setup_s = time.perf_counter() - entry.STARTED
    try:
        result = run_model(
            source,
            config,
            out,
            frames=frames,
            levels=tags,
            arch_path=arch_path,
            stage=progress,
            input_shape=shape,
            keep_input_model=keep_input_model,
            check=check,
            bands=_bands(uncertainty, frames, arch_path),
            top=top,
            sort=sort,
            quantization_cache=not no_cache,
            config_base=base_label(model, defaults),
        )
    finally:
        progress.close()
    if as_json:
        # lazy: aipusim.run.job loads numpy, onnx, pandas; kept off the CLI's start-up
        from aipusim.run.job import run_summary

        click.echo(json.dumps(run_summary(result), indent=2))
    else:
        _print_run(result, out)
        click.echo(closing_line(result, setup_s, time.perf_counter() - entry.STARTED, install_s))
    if result.check is not None and not result.check.bit_exact:
        raise result.check.error()


def _bands(uncertainty: int | None, frames: int, arch_path: Path | None) -> Any:
    """``--uncertainty N``: what `run_model` calls for the bands of the headline figures."""
    if uncertainty is None:
        return None
    # lazy: aipusim.calibrate.uncertainty loads numpy, onnx; kept off the CLI's start-up
    from aipusim.calibrate.uncertainty import bands

    def sample(compiled: Path, step: Any) -> Any:
        return bands(compiled, uncertainty, frames=frames, arch_path=arch_path, on_sample=step)

    return sample


#: Seconds a wrapper spent installing aipusim just before this run (`make run` on a fresh
#: clone sets it), counted in the closing line as the first part of the wall time.
INSTALL_SECONDS_ENV = "AIPUSIM_INSTALL_SECONDS"


def install_seconds() -> float:
    """`INSTALL_SECONDS_ENV` as seconds (0 when unset or empty), checked before any work.

    >>> install_seconds()  # (unset: a run not started by a fresh `make run`)
    0.0
    """
    text = os.environ.get(INSTALL_SECONDS_ENV, "").strip()
    if not text:
        return 0.0
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # (also refuses nan)
        raise ConfigError(
            f"{INSTALL_SECONDS_ENV} must be a number of seconds >= 0 or unset, not {text!r}"
        )
    return seconds


def closing_line(result: RunResult, setup_s: float, wall_s: float, install_s: float = 0.0) -> str:
    """Where the whole wall time of the command went, its parts adding up to it (the
    rest, printing the summary, named last); ``install_s`` (`install_seconds`) is added
    to the wall time as its first part.

    The process's own wall time starts when the operating system started it (`main`),
    so interpreter start-up is in "start-up and imports"."""
    parts = [
        *([("install", install_s)] if install_s > 0 else []),
        ("start-up and imports", setup_s),
        ("preparing the model", result.prepare_seconds),
        ("compile", result.compile_seconds),
        ("simulation", result.simulate_seconds),
        ("profile and plots", result.profile_seconds),
        ("writing", result.write_seconds),
    ]
    wall_s += install_s
    parts.append(("printing", max(0.0, wall_s - sum(s for _, s in parts))))
    return f"wall {wall_s:.1f} s: " + ", ".join(f"{name} {s:.1f} s" for name, s in parts)


def _print_run(result: RunResult, out: Path) -> None:
    """The run's summary, slowest layers and (with --check) the functional verdict."""
    # lazy: kept off the command's start-up (aipusim.cli.simulate_cmd)
    from aipusim.cli.simulate_cmd import summary_text

    click.echo(config_line(result.config_base, result.config_changes, result.levels))
    click.echo(summary_text(result.sim))
    click.echo(f"\n  {result.slowest_heading()}:")
    table = result.slowest_layers()
    # (pandas' <NA>, e.g. the MACs of the input and output rows, printed as "-")
    table = table.astype(object).where(table.notna(), None)
    click.echo(table.to_markdown(index=False, floatfmt=".1f", missingval="-"))
    click.echo(f"\nwrote {out}/ (report.md, trace.txt, plots/)")
    if result.check is not None:
        click.echo(f"functional: {result.check.text()}")
