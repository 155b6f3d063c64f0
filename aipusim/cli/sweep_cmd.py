"""``aipusim sweep`` (run a design-space sweep) and ``aipusim sweep-report`` (summarise it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from aipusim.base.errors import ConfigError
from aipusim.cli.options import (
    ConfigHelp,
    arch_option,
    build_config,
    conf_option,
    config_line,
    defaults_option,
    json_option,
    no_cache_option,
    require_dir,
    set_option,
)


@click.command("sweep", cls=ConfigHelp, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("models", nargs=-1, metavar="MODEL...")
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="KEY=V1,V2,...",
    help="Sweep a compiler config property over these values; repeatable. A list "
    "value joins its members with '+' (profiling_levels=B+PB,B).",
)
@click.option(
    "--arch-param",
    "arch_params",
    multiple=True,
    metavar="KEY=V1,V2,...",
    help="Sweep a dotted arch TOML key (e.g. ddr.data_rate_mt_s=3200,4266); repeatable.",
)
@click.option(
    "--frames", type=int, default=8, show_default=True, help="Frames simulated per point."
)
@click.option(
    "--input-size",
    type=int,
    default=None,
    metavar="PIXELS",
    help="Input height/width of zoo models (default: each model's own).",
)
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(path_type=Path),
    required=True,
    metavar="DIR",
    help="Result folder (Parquet parts); re-running resumes it.",
)
@click.option(
    "--workers",
    type=int,
    default=None,
    metavar="N",
    help="Local worker processes (default: one per CPU).",
)
@click.option(
    "--cluster",
    default=None,
    metavar="local:N",
    help="Run on a Dask LocalCluster of N workers (needs aipusim[distributed]).",
)
@click.option(
    "--scheduler",
    default=None,
    metavar="tcp://HOST:PORT",
    help="Run on a running Dask scheduler (needs aipusim[distributed]); .onnx MODEL "
    "files and --arch must be readable at the same paths on its workers.",
)
@click.option(
    "--flush-every",
    type=int,
    default=8,
    show_default=True,
    metavar="N",
    help="Store finished points every N points (and at least every 10 s).",
)
@click.option("--no-progress", is_flag=True, help="Do not show the progress bar.")
@click.option(
    "--check",
    is_flag=True,
    help="Also run every point on data (a seeded input) and compare its outputs with the "
    "int8 reference: columns bit_exact, mismatches, check. Slower: every task executes.",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Go on from a damaged DIR: unreadable part-*.parquet files are set aside (*.bad) "
    "and their points run again; a broken _sweep.json is rewritten. (An intact DIR is "
    "always resumed.)",
)
@defaults_option
@conf_option
@set_option
@arch_option
@no_cache_option
@json_option
def sweep(
    models: tuple[str, ...],
    params: tuple[str, ...],
    arch_params: tuple[str, ...],
    frames: int,
    input_size: int | None,
    output: Path,
    workers: int | None,
    cluster: str | None,
    scheduler: str | None,
    flush_every: int,
    no_progress: bool,
    check: bool,
    resume: bool,
    defaults: bool,
    conf_path: Path | None,
    overrides: tuple[str, ...],
    arch_path: Path | None,
    no_cache: bool,
    as_json: bool,
) -> None:
    """Compile and simulate MODEL(s) at every combination of the swept values.

    MODEL is a zoo model name or an .onnx file. Each model starts from its base config
    (a zoo model's built-in one, see below), --conf/--set change it for every point; each
    --param KEY=V1,V2 then multiplies the points. Results go to DIR as a
    Parquet dataset, one row per point; a point that fails is recorded with its error and
    the sweep goes on. Re-running the same command skips the points already in DIR.

    \b
    Examples:
      aipusim sweep tiny_cnn resnet18 --set aipu_cores_used=4 \\
          --param multicore_mode=batch,cooperative --param mvm_utilization_limit=0.5,1 -o out/
      aipusim sweep resnet50 --arch-param ddr.data_rate_mt_s=3200,4266 --cluster local:4 -o out/
    """
    # lazy: loads numpy, onnx, pandas, pyarrow; kept off the CLI's start-up
    from aipusim.api.sources import base_label, starting_config
    from aipusim.base.fileio import check_output
    from aipusim.run.config_text import config_changes
    from aipusim.sweep.runner import parse_backend, require_dask, run_sweep
    from aipusim.sweep.space import build_space, check_models

    if flush_every < 1:
        raise ConfigError(f"--flush-every must be a positive integer, not {flush_every}")
    check_output(output, folder=True)
    if frames >= 1:  # (build_space names a bad count)
        # lazy: aipusim.simulator.budget loads numpy, simpy; kept off the CLI's start-up
        from aipusim.simulator.budget import check_frames_bound

        check_frames_bound(frames, flag="--frames")
    backend = parse_backend(workers=workers, cluster=cluster, scheduler=scheduler)
    if backend.kind != "local":
        require_dask("--cluster" if cluster is not None else "--scheduler")
    check_models(models)
    bases = {m: build_config(conf_path, overrides, starting_config(m, defaults)) for m in models}
    space = build_space(
        list(models),
        params,
        arch_params,
        frames=frames,
        input_size=input_size,
        base=bases,
        arch_path=arch_path,
        check=check,
        quantization_cache=not no_cache,
    )
    summary = run_sweep(
        space,
        output,
        backend=backend,
        flush_every=flush_every,
        progress=not no_progress,
        resume=resume,
    )
    configs = {
        m: {
            "base": base_label(m, defaults),
            "changes": config_changes(c),
            # a point records the trace levels of its config (profiling_levels)
            "trace_levels": [str(v) for v in c.profiling_levels],
        }
        for m, c in bases.items()
    }
    if as_json:
        click.echo(json.dumps({**summary.to_dict(), "config": configs}))
    else:
        # lazy: loads numpy, onnx, pandas, pyarrow; kept off the CLI's start-up
        from aipusim.sweep import ResultStore
        from aipusim.sweep.report import result_table

        for model, config in configs.items():
            line = config_line(config["base"], config["changes"], config["trace_levels"])
            click.echo(f"{model}: {line}")
        click.echo(result_table(ResultStore(output).read()) + "\n")
        click.echo(
            f"sweep: {summary.total} points ({summary.skipped} already done, {summary.ran} run, "
            f"{summary.failed} failed) -> {summary.directory}"
        )


@click.command("sweep-report", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("directory", type=click.Path(path_type=Path), metavar="DIR")
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(path_type=Path),
    default=None,
    metavar="DIR",
    help="Where to write report.md and the plots, outside DIR (default: DIR_report beside "
    "it, so DIR stays a Parquet dataset pandas can read).",
)
@json_option
def sweep_report(directory: Path, output: Path | None, as_json: bool) -> None:
    """Draw the Pareto fronts of a sweep (FPS vs FPS/W, latency vs power) and a table.

    Writes report.md, pareto_fps.png and pareto_latency.png to DIR_report/ beside DIR.
    """
    # lazy: aipusim.sweep.report loads numpy, onnx, pandas, pyarrow; kept off the CLI's start-up
    from aipusim.sweep.report import write_report

    require_dir(directory, "DIR")
    if output is not None:
        # lazy: kept off the command's start-up (aipusim.base.fileio)
        from aipusim.base.fileio import check_output

        check_output(output, folder=True)
    summary: dict[str, Any] = write_report(directory, output)
    if as_json:
        click.echo(json.dumps(summary))
    else:
        click.echo(
            f"sweep-report: {summary['points']} points ({summary['ok']} ok, "
            f"{summary['failed']} failed) -> {summary['report']}"
        )
