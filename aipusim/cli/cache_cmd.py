"""``aipusim cache``: where the quantization cache is, how full, and emptying it."""

from __future__ import annotations

import json

import click

from aipusim.cli.options import json_option


@click.group()
def cache() -> None:
    """The quantization cache: calibrations that later compiles reuse."""


@cache.command("info")
@json_option
def info(as_json: bool) -> None:
    """Print the cache folder, its entries, their total size and the size limit.

    The folder is $AIPUSIM_CACHE_DIR/quantization (default: the user cache folder); the
    limit is $AIPUSIM_CACHE_SIZE_MB megabytes (least recently used entries go first).

    Example: ``aipusim cache info --json``
    """
    from aipusim.compiler.quant.cache import QuantizationCache

    found = QuantizationCache().info()
    if as_json:
        click.echo(json.dumps(found.to_dict()))
        return
    click.echo(f"folder:  {found.folder}")
    click.echo(f"entries: {found.entries}")
    click.echo(f"size:    {found.size_bytes / 1e6:.1f} MB of {found.limit_bytes / 1e6:.0f} MB")


@cache.command("clear")
@json_option
def clear(as_json: bool) -> None:
    """Remove every entry: the next compile of each model calibrates again."""
    from aipusim.compiler.quant.cache import QuantizationCache

    store = QuantizationCache()
    removed = store.clear()
    if as_json:
        click.echo(json.dumps({"folder": str(store.folder), "removed": removed}))
    else:
        click.echo(f"removed {removed} entries from {store.folder}")
