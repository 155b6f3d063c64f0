"""``aipusim bench``: how fast the toolkit itself is, as a table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pandas as pd

from aipusim.base.errors import ConfigError, ZooError
from aipusim.cli.options import json_option, no_cache_option


@click.command()
@click.argument("models", nargs=-1)
@click.option(
    "--frames", type=int, default=8, show_default=True, help="Frames simulated (0: compile only)."
)
@click.option("--input-size", type=int, default=None, help="Input side (default: published).")
@click.option(
    "--functional",
    is_flag=True,
    help="Time one functional frame of MODELS (default: resnet50) compiled cooperative on 4 "
    "cores, next to onnxruntime fp32 and the int8 reference.",
)
@click.option(
    "--detailed",
    is_flag=True,
    help="Time the detailed mode (simulate --detail cycle) on --frames frames (here default "
    "1) of MODELS (default: resnet50 at its published size) compiled batch on 4 cores: "
    "simulated cycles per second, wall and CPU seconds, against the fast mode.",
)
@click.option(
    "--sweep",
    is_flag=True,
    help="Time a 200-point sweep of tiny_cnn at 32 px, or of the one zoo model in MODELS (at "
    "--input-size, default its published size): 4 modes x 5 utilization limits x 5 clocks x "
    "2 DDR rates (or the --arch-param values) on --workers local workers: points/s, where "
    "a point's time goes, compiles needed, worker memory.",
)
@click.option(
    "--warm-cold",
    is_flag=True,
    help="Time cold against warm compiles of the one zoo model in MODELS (default: resnet50) "
    "on one core and on four in every multicore mode: cold (empty quantization cache), warm "
    "in the same process (as a sweep worker), and the first compile of a fresh process with "
    "the quantization cached; wall and CPU seconds.",
)
@click.option(
    "--arch-param",
    "arch_params",
    multiple=True,
    metavar="KEY=V1,V2",
    help="With --sweep: arch values to sweep instead of the two DDR data rates (e.g. "
    "energy.ddr_seq_pj_per_byte=40,64: a simulator-only number, so points share programs).",
)
@click.option(
    "--workers", type=int, default=2, show_default=True, help="Sweep workers (with --sweep)."
)
@click.option(
    "--markdown",
    "md_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the figures' tables into this Markdown page (e.g. docs/benchmarks.md), "
    "between generated-block markers; the rest of the page is kept.",
)
@no_cache_option
@json_option
def bench(
    models: tuple[str, ...],
    frames: int,
    input_size: int | None,
    functional: bool,
    sweep: bool,
    warm_cold: bool,
    workers: int,
    md_path: Path | None,
    no_cache: bool,
    as_json: bool,
    arch_params: tuple[str, ...] = (),
    detailed: bool = False,
) -> None:
    """Compile and simulate zoo MODELS (default: resnet50 mobilenetv2 yolov8n); print the
    compile time, simulation wall time, simulated tasks/s and peak RSS of each, then the
    seconds of every compiler pass per model (and of the compile's reading, checking and
    writing outside the passes), naming the slowest pass of each model and over all. With
    --frames 0 only compile (default models: the whole zoo).

    Each model runs in its own fresh process. Wall times depend on the machine and its load:
    compare figures taken on the same machine.
    """
    # lazy: loads numpy, onnx; kept off the CLI's start-up
    from aipusim import zoo
    from aipusim.base.fileio import check_output
    from aipusim.bench.speed import BENCH_MODELS, measured_note, write_markdown_block

    kinds = [
        flag
        for flag, on in (
            ("--functional", functional),
            ("--detailed", detailed),
            ("--warm-cold", warm_cold),
            ("--sweep", sweep),
        )
        if on
    ]
    if len(kinds) > 1:
        raise ConfigError(
            "bench must take at most one of --functional, --detailed, --warm-cold and "
            f"--sweep, not {' and '.join(kinds)}"
        )
    chosen = models or (tuple(zoo.names()) if frames == 0 else BENCH_MODELS)
    if functional or detailed or warm_cold:
        chosen = models or ("resnet50",)
    unknown = [m for m in chosen if m not in zoo.names()]
    if unknown:
        raise ZooError(f"model must be one of {', '.join(zoo.names())}, not {unknown[0]!r}")
    if frames < 0:
        raise ConfigError(f"--frames must be an integer >= 0, not {frames}")
    if md_path is not None:
        check_output(md_path)  # before the minutes a benchmark takes
    if functional:
        rows, (block, heading, text) = _functional(chosen, input_size, not no_cache)
    elif detailed:
        frames = 1 if frames == 8 else frames  # the default of the other modes
        rows, (block, heading, text) = _detailed(chosen, frames, input_size, not no_cache)
    elif warm_cold:
        rows, (block, heading, text) = _warm_cold(chosen, input_size)
    elif sweep:
        rows, (block, heading, text) = _sweep(
            frames, workers, not no_cache, models, input_size, arch_params
        )
    else:
        rows, (block, heading, text) = _models(chosen, frames, input_size, not no_cache)
    click.echo(json.dumps(rows, indent=2) if as_json else text)
    if md_path is not None:
        command = " ".join(
            [
                "aipusim bench",
                *models,
                *(["--functional"] if functional else []),
                *(["--detailed"] if detailed else []),
                *(["--warm-cold"] if warm_cold else []),
                *(["--sweep", "--workers", str(workers)] if sweep else []),
                *[f"--arch-param {a}" for a in (arch_params if sweep else ())],
                *([] if functional or warm_cold else ["--frames", str(frames)]),
                *(["--input-size", str(input_size)] if input_size else []),
                *(["--no-cache"] if no_cache else []),
            ]
        )
        write_markdown_block(md_path, block, f"{measured_note(command)}\n\n{text}", heading)
        click.echo(f"wrote the {block!r} block of {md_path}", err=True)


#: What a mode returns: its rows (``--json``), and the generated block's name, its
#: heading on a page that lacks it, and the Markdown text printed and written.
_Out = tuple[Any, tuple[str, str, str]]


def _models(
    chosen: tuple[str, ...], frames: int, input_size: int | None, quantization_cache: bool
) -> _Out:
    """The default mode: a row per model, then the seconds of every compiler pass."""
    # lazy: aipusim.bench.speed loads numpy, onnx; kept off the CLI's start-up
    from aipusim.bench.speed import pass_table, run_bench, slowest_pass

    rows = run_bench(chosen, frames, input_size, quantization_cache=quantization_cache)
    name, seconds, share = slowest_pass(rows)
    slowest = ", ".join(f"{r['model']}: {r['slowest_pass']}" for r in rows)
    text = "\n".join(
        [
            pd.DataFrame(rows).drop(columns="passes").to_markdown(index=False),
            "\ncompile seconds per pass:\n",
            pass_table(rows).to_markdown(),
            f"\nslowest pass: {slowest}",
            f"slowest pass over all: {name}, {seconds:.2f} s ({share:.0%} of all compile seconds)",
        ]
    )
    if frames == 0:
        return rows, ("compile", "## Compile time per model (`aipusim bench --frames 0`)", text)
    return rows, ("models", "## Compile and simulation speed (`aipusim bench`)", text)


def _functional(models: tuple[str, ...], input_size: int | None, quantization_cache: bool) -> _Out:
    """``--functional``: one row per model, the seconds and the two ratios."""
    # lazy: aipusim.bench.functional loads numpy, onnx; kept off the CLI's start-up
    from aipusim.bench.functional import functional_bench

    rows = [
        functional_bench(m, input_size=input_size, quantization_cache=quantization_cache)
        for m in models
    ]
    text = (
        pd.DataFrame(rows).to_markdown(index=False)
        + "\n\nmedians of 3 runs after a warm-up; functional_s: simulate(..., functional=True) "
        "of one frame (timing run, schedule, data, hazard sweeps)"
    )
    return rows, ("functional", "## Functional mode speed (`aipusim bench --functional`)", text)


def _detailed(
    models: tuple[str, ...], frames: int, input_size: int | None, quantization_cache: bool
) -> _Out:
    """``--detailed``: one row per model, fast and detailed."""
    # lazy: aipusim.bench.detailed loads numpy, onnx; kept off the CLI's start-up
    from aipusim.bench.detailed import detailed_bench

    if frames < 1:
        raise ConfigError(f"--frames must be an integer >= 1 with --detailed, not {frames}")
    rows = [
        detailed_bench(m, frames=frames, input_size=input_size,
                       quantization_cache=quantization_cache)
        for m in models
    ]  # fmt: skip
    text = (
        pd.DataFrame(rows).to_markdown(index=False)
        + "\n\none run of each mode on the same compiled program (batch, 4 cores); "
        "simulated_cycles_per_s: the detailed run's cycles over its wall seconds; "
        "detailed_cpu_s: this process's CPU seconds in that run; load: the load average "
        "before and after the two runs; l1_*: the banked L1's accesses and waits"
    )
    return rows, ("detailed", "## Detailed mode speed (`aipusim bench --detailed`)", text)


def _warm_cold(models: tuple[str, ...], input_size: int | None) -> _Out:
    """``--warm-cold``: one row per multicore mode, then what the columns mean."""
    # lazy: aipusim.bench.speed loads numpy, onnx; kept off the CLI's start-up
    from aipusim.bench.speed import warm_cold_bench

    if len(models) != 1:
        raise ConfigError(f"MODELS must be one zoo model with --warm-cold, not {len(models)}")
    rows = warm_cold_bench(models[0], input_size=input_size)
    text = (
        pd.DataFrame(rows).to_markdown(index=False)
        + "\n\ncold: a fresh process, empty quantization cache (it calibrates); warm: "
        "medians of 3 compiles after it in the same process (a sweep worker's); first_warm: "
        "the first compile of another fresh process, quantization cached (`aipusim compile` "
        "again). Seconds of the compile itself (Python's start-up and imports not counted); "
        "speedup: cold CPU seconds over warm CPU seconds; warm_frame: a warm compile plus "
        "one simulated frame in the first process (what a design-space loop pays a point), "
        "medians of 3."
    )
    return rows, ("warm-cold", "## Warm and cold compiles (`aipusim bench --warm-cold`)", text)


def _sweep(
    frames: int,
    workers: int,
    quantization_cache: bool,
    models: tuple[str, ...] = (),
    input_size: int | None = None,
    arch_params: tuple[str, ...] = (),
) -> _Out:
    """``--sweep``: one row of figures, then what they mean."""
    # lazy: loads numpy, onnx, pyarrow; kept off the CLI's start-up
    from aipusim.bench.speed import SWEEP_ARCH_PARAMS, SWEEP_INPUT_SIZE, SWEEP_MODEL, sweep_bench
    from aipusim.sweep.runner import check_workers

    if frames < 1:
        raise ConfigError(f"--frames must be an integer >= 1 with --sweep, not {frames}")
    if len(models) > 1:
        raise ConfigError(f"MODELS must be one zoo model with --sweep, not {len(models)}")
    check_workers(workers)
    model = models[0] if models else SWEEP_MODEL
    if input_size is None and model == SWEEP_MODEL:
        input_size = SWEEP_INPUT_SIZE
    row = sweep_bench(
        workers=workers,
        frames=frames,
        model=model,
        input_size=input_size,
        quantization_cache=quantization_cache,
        arch_params=tuple(arch_params) or SWEEP_ARCH_PARAMS,
    )
    memory = (
        ""
        if row["worker_rss_mb_peak"] is None
        else f" Worker memory (median over workers): {row['worker_rss_mb_early']} MB early in "
        f"the sweep, {row['worker_rss_mb_late']} MB late; peak {row['worker_rss_mb_peak']} MB."
    )
    text = pd.DataFrame([row]).to_markdown(index=False) + (
        f"\n\n{row['points']} points of {row['model']} in {row['wall_s']:.1f} s on {workers} "
        f"workers: {row['points_per_s']:.2f} points/s, {row['compiles']} compiles (a point "
        f"whose program is its worker's previous one is only simulated); "
        f"{row['cpu_s']:.1f} CPU seconds of the process and its workers, "
        f"{row['cpu_s_per_point']:.3f} a point. A point in its "
        f"worker: compile {row['compile_s_mean']:.3f} s on average over the points (front "
        f"end {row['compile_front_s']:.3f} s with the quantization {row['quantization']}, back "
        f"end {row['compile_back_s']:.3f} s, reading/checking/writing "
        f"{row['compile_outside_s']:.3f} s, from one compile per mode), simulate "
        f"{row['simulate_s_mean']:.3f} s, the rest (arch files, pool, storing rows) "
        f"{row['other_s_per_point']:.3f} s.{memory}"
    )
    block = "sweep" if model == SWEEP_MODEL else f"sweep-{model}"
    heading = (
        f"## Sweep speed (`aipusim bench {'' if model == SWEEP_MODEL else model + ' '}--sweep`)"
    )
    return row, (block, heading, text)
