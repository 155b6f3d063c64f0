"""``aipusim compare``: the multicore or the power study for one model, printed.

The two questions people bring a model with (which multicore mode, which utilization
limit) are studies of `aipusim.studies`; this command runs one of them on one model and
prints its table, the figure it wrote and its conclusions, so the answer needs no
``aipusim report`` folder reading.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import click

from aipusim.base.errors import ConfigError
from aipusim.cli.options import defaults_option, json_option, set_option
from aipusim.cli.report_cmd import _limits, _split_list, study_base


@click.command("compare")
@click.argument("model")
@click.option(
    "--modes",
    multiple=True,
    metavar="M1,M2,...",
    help="Compare these multicore modes: multiprocess (4 x Batch-1: four one-core "
    "instances), batch, cooperative, pipeline [default: all four, unless --limits].",
)
@click.option(
    "--limits",
    multiple=True,
    metavar="U1,U2,...",
    help="Compare these mvm_utilization_limit values in (0, 1] instead (the power study).",
)
@click.option("--frames", type=int, default=8, show_default=True, help="Frames per replica.")
@click.option(
    "--input-size", type=int, default=None, help="Input side for a zoo model (quick small runs)."
)
@click.option(
    "-o",
    "--output",
    "output_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Folder for README.md, the figure and the Parquet results [default: "
    "./compare_<model>_modes or ./compare_<model>_limits].",
)
@click.option("--workers", type=int, default=2, show_default=True, help="Runs at once (processes).")
@defaults_option
@set_option
@json_option
def compare(
    model: str,
    modes: tuple[str, ...],
    limits: tuple[str, ...],
    frames: int,
    input_size: int | None,
    output_dir: Path | None,
    workers: int,
    defaults: bool,
    overrides: tuple[str, ...],
    as_json: bool,
) -> None:
    """Compare multicore modes (--modes) or utilization limits (--limits) for MODEL.

    MODEL is a zoo name or an ONNX file; it starts from its built-in config (a zoo model)
    or the defaults (--defaults), with --set on top. Prints the table, the figure and the
    conclusions of the multicore study (aipusim report multicore) or the power study
    (aipusim report power) for it.

    \b
    Examples:
      aipusim compare resnet50 --modes batch,cooperative
      aipusim compare resnet50 --limits 0.25,0.5,1.0
    """
    # lazy: loads numpy, onnx, pandas, pyarrow, simpy; kept off the CLI's start-up
    from aipusim.base.fileio import check_output
    from aipusim.run.job import resolve_model
    from aipusim.simulator.budget import check_frames_bound
    from aipusim.studies.common import md_table
    from aipusim.sweep.runner import check_workers

    if modes and limits:
        raise ConfigError("compare takes --modes or --limits, not both")
    if frames < 1:
        raise ConfigError(f"--frames must be an integer >= 1, not {frames}")
    check_frames_bound(frames, flag="--frames")
    check_workers(workers)
    source = resolve_model(model, input_size)
    study = "power" if limits else "multicore"
    base = study_base(defaults, overrides, study)
    what = "limits" if limits else "modes"
    out = output_dir or Path.cwd() / f"compare_{source.slug}_{what}"
    check_output(out, folder=True)
    command = ["aipusim", "compare", model, "-o", str(out), "--frames", str(frames)]
    if input_size is not None:
        command += ["--input-size", str(input_size)]
    common = {
        "models": [model],
        "frames": frames,
        "input_size": input_size,
        "workers": workers,
        "progress": not as_json,
        "base": base,
    }
    if limits:
        # lazy: aipusim.studies.power loads numpy, onnx, pandas; kept off the CLI's start-up
        from aipusim.studies import power

        values = _limits(limits)
        assert values is not None  # (limits is not empty)
        command += ["--limits", ",".join(f"{v:g}" for v in values)]
        command += base.args()
        result = power.run_power_study(out, limits=values, command=shlex.join(command), **common)
        kinds = power.KINDS
    else:
        # lazy: aipusim.studies.multicore loads numpy, onnx, pandas; kept off the CLI's start-up
        from aipusim.studies import multicore

        names = _split_list(modes) or None
        if names is not None:
            command += ["--modes", ",".join(names)]
        command += base.args()
        result = multicore.run_multicore_study(
            out, modes=names, command=shlex.join(command), **common
        )
        kinds = multicore.KINDS
    if as_json:
        summary = result.to_dict()
        summary["table"] = json.loads(result.table.to_json(orient="records"))
        click.echo(json.dumps(summary, indent=2))
        return
    click.echo(md_table(result.table.drop(columns=["model", "error"]), kinds))
    click.echo("")
    for line in result.conclusions:
        click.echo(f"- {line}")
    figures = ", ".join(str(p) for p in result.files if p.suffix == ".png")
    click.echo(f"\nfigure: {figures}\nwrote {result.files[0]} (what was run, tables, figures)")
