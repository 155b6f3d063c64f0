"""``aipusim calibrate``: fit the inferred hardware numbers to measured runs."""

from __future__ import annotations

import json
from pathlib import Path

import click

from aipusim.base.errors import ConfigError
from aipusim.cli.options import arch_option, json_option


def _rows(text: str | None) -> list[int]:
    if not text:
        return []
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--holdout must be data row numbers like 3,5, not {text!r}") from None


@click.command("calibrate")
@click.argument("measured", required=False, type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    "output_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for arch.toml (the fitted arch file), report.md and calibration.json.",
)
@click.option(
    "--holdout",
    default=None,
    metavar="ROWS",
    help="Data rows (1-based, comma-separated) never fitted to: their residuals judge the fit.",
)
@click.option(
    "--keys",
    default=None,
    metavar="KEY,KEY",
    help="The (I) numbers to fit (dotted arch keys with a range) [default: the seven the "
    "validation fits]. Numbers that no row moves are reported and left at their prior.",
)
@click.option(
    "--no-loo",
    "no_loo",
    is_flag=True,
    help="Skip the leave-one-out fits (one fit per row: the honest error, and the slow part).",
)
@arch_option
@json_option
def calibrate(
    measured: Path | None,
    output_dir: Path,
    holdout: str | None,
    keys: str | None,
    no_loo: bool,
    arch_path: Path | None,
    as_json: bool,
) -> None:
    """Fit the inferred (I) numbers of the arch file to MEASURED runs (a CSV; default: the
    two published ResNet-50 points) and report in-sample, leave-one-out and held-out
    residuals.

    Columns: model, conf, set (k=v;k=v), clock_mhz (empty: solved from fps), frames, fps,
    fps_per_w, avg_power_w, latency_us, source. Example: ``aipusim calibrate board.csv
    --holdout 4 -o fit/``; then ``aipusim run MODEL --arch fit/arch.toml``.
    """
    # lazy: aipusim.calibrate.fit loads numpy, onnx; kept off the CLI's start-up
    from aipusim.calibrate.fit import DEFAULT_MEASUREMENTS, calibrate, check_keys, write_outputs

    path = measured if measured is not None else DEFAULT_MEASUREMENTS
    result = calibrate(
        path,
        arch_path=arch_path,
        keys=check_keys(keys),
        holdout=_rows(holdout),
        leave_one_out=not no_loo,
    )
    files = write_outputs(result, output_dir, arch_path)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    click.echo(files[0].read_text())
    click.echo(f"wrote {', '.join(str(f) for f in files)}")
