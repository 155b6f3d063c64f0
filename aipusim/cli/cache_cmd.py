"""``aipusim cache``: where the quantization cache is, how full, and emptying it."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

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
    # lazy: aipusim.compiler.quant.cache loads numpy, onnx; kept off the CLI's start-up
    from aipusim.compiler.quant.cache import QuantizationCache

    found = QuantizationCache().info()
    zoo_files = _zoo_files()
    zoo_bytes = sum(f.stat().st_size for f in zoo_files)
    if as_json:
        click.echo(json.dumps(found.to_dict() | {"zoo_models": len(zoo_files),
                                                 "zoo_models_bytes": zoo_bytes}))  # fmt: skip
        return
    click.echo(f"folder:  {found.folder}")
    click.echo(f"entries: {found.entries}")
    click.echo(f"size:    {found.size_bytes / 1e6:.1f} MB of {found.limit_bytes / 1e6:.0f} MB")
    click.echo(
        f"zoo models built for sweeps: {len(zoo_files)} ({zoo_bytes / 1e6:.1f} MB, the "
        "latest few kept)"
    )


def _zoo_files() -> list[Path]:
    """The zoo model files sweeps keep beside the quantization cache (`zoo_model_file`)."""
    # lazy: loads numpy, onnx, pandas, pyarrow; kept off the CLI's start-up
    from aipusim.compiler.quant.cache import cache_root
    from aipusim.sweep.evaluate import ZOO_SUBDIR

    folder = cache_root() / ZOO_SUBDIR
    return sorted(folder.glob("*.onnx")) if folder.is_dir() else []


@cache.command("clear")
@json_option
def clear(as_json: bool) -> None:
    """Remove every entry (the next compile of each model calibrates again) and the zoo
    model files sweeps keep."""
    # lazy: aipusim.compiler.quant.cache loads numpy, onnx; kept off the CLI's start-up
    from aipusim.compiler.quant.cache import QuantizationCache

    store = QuantizationCache()
    removed = store.clear()
    zoo_removed = 0
    for path in _zoo_files():
        with contextlib.suppress(FileNotFoundError):  # (another process removed it)
            path.unlink()
            zoo_removed += 1
    if as_json:
        click.echo(json.dumps({"folder": str(store.folder), "removed": removed,
                               "zoo_models_removed": zoo_removed}))  # fmt: skip
    else:
        click.echo(
            f"removed {removed} entries from {store.folder} and {zoo_removed} zoo model files"
        )
