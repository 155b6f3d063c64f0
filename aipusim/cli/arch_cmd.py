"""``aipusim arch``: show and check hardware descriptions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from aipusim.arch import DEFAULT_ARCH_PATH, arch_summary, load_arch


@click.group()
def arch() -> None:
    """Show or validate the hardware description (arch TOML)."""


@arch.command("show")
@click.option(
    "--arch",
    "arch_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=f"Hardware TOML (default: the bundled {DEFAULT_ARCH_PATH.name}).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def show(arch_path: Path | None, as_json: bool) -> None:
    """Print every parameter of the chip and the figures derived from them.

    Example: ``aipusim arch show --json | jq .derived.peak_tops``
    """
    summary = arch_summary(load_arch(arch_path))
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    derived = summary.pop("derived")
    chip = summary["chip"]
    click.echo(
        f"{chip['name']}: {chip['cores']} cores at {derived['freq_hz'] / 1e6:g} MHz, "
        f"peak {derived['peak_tops']:.1f} TOPS int8 "
        f"({derived['peak_tops_per_core']:.1f} per core)"
    )
    for table, values in summary.items():
        click.echo(f"\n[{table}]")
        for key, value in values.items():
            click.echo(f"  {key:<34} {_fmt(value)}")
    click.echo("\n[derived]")
    for key, value in derived.items():
        click.echo(f"  {key:<34} {_fmt(value)}")


@arch.command("validate")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
def validate(path: Path) -> None:
    """Check a hardware TOML; prints its peak TOPS when it is valid."""
    loaded = load_arch(path)
    click.echo(f"{path}: valid ({loaded.chip.name}, peak {loaded.peak_tops:.1f} TOPS)")


def _fmt(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 10_000:
        return f"{value:,}"
    if isinstance(value, (list, tuple)):
        return "; ".join(_fmt(v) for v in value)
    if isinstance(value, dict):
        return " ".join(f"{k}={_fmt(v)}" for k, v in value.items())
    return str(value)
