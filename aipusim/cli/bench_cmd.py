"""``aipusim bench``: how fast the toolkit itself is, as a table."""

from __future__ import annotations

import json

import click
import pandas as pd

from aipusim.cli.options import json_option


@click.command()
@click.argument("models", nargs=-1)
@click.option("--frames", type=int, default=8, show_default=True, help="Frames simulated.")
@click.option("--input-size", type=int, default=None, help="Input side (default: published).")
@json_option
def bench(models: tuple[str, ...], frames: int, input_size: int | None, as_json: bool) -> None:
    """Compile and simulate zoo MODELS (default: resnet50 mobilenetv2 yolov8n); print the
    compile time, simulation wall time, simulated tasks/s and peak RSS of each.

    Each model runs in its own fresh process. Wall times depend on the machine and its load:
    compare figures taken on the same machine.
    """
    from aipusim import zoo
    from aipusim.base.errors import ConfigError, ZooError
    from aipusim.bench import BENCH_MODELS, run_bench

    chosen = models or BENCH_MODELS
    unknown = [m for m in chosen if m not in zoo.names()]
    if unknown:
        raise ZooError(f"model must be one of {', '.join(zoo.names())}, not {unknown[0]!r}")
    if frames < 1:
        raise ConfigError(f"--frames must be an integer >= 1, not {frames}")
    rows = run_bench(tuple(chosen), frames, input_size)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(pd.DataFrame(rows).to_markdown(index=False))
