"""``aipusim zoo``: list the built-in models and export them as ONNX files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from aipusim.base.errors import ZooError
from aipusim.run.progress import Progress


@click.group()
def zoo() -> None:
    """Built-in models (ResNet, MobileNetV2, EfficientNet-B0, YOLOv5s/v8n, DeiT-Tiny,
    ViT-B/16, a tiny CNN; the decoders llama_1b and tiny_decoder) with seeded random
    weights, exported the way torch.onnx exports them."""


def _record(name: str) -> dict[str, Any]:
    # lazy: aipusim.zoo loads numpy, onnx; kept off the CLI's start-up
    from aipusim import zoo as zoo_api

    entry = zoo_api.info(name)
    model = zoo_api.build(name)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    return {
        "name": name,
        "input_shape": shape,
        "params": zoo_api.count_params(model),
        "gmacs": round(zoo_api.count_macs(model) / 1e9, 4),
        "gmacs_published": entry.published_gmacs,
        "source": entry.source,
        "description": entry.description,
    }


@zoo.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of records.")
def list_models(as_json: bool) -> None:
    """Build every model at its default size and show input shape, parameters and
    multiply-accumulates (built and published).

    Example: ``aipusim zoo list --json | jq '.[] | {name, gmacs}'``
    """
    # lazy: aipusim.zoo loads numpy, onnx; kept off the CLI's start-up
    from aipusim import zoo as zoo_api

    names = zoo_api.names()
    progress = Progress()
    step = progress.stage("building", len(names))
    try:
        records = []
        for n in names:
            progress.note(n)
            records.append(_record(n))
            step(1)
    finally:
        progress.close()
    if as_json:
        click.echo(json.dumps(records, indent=2))
        return
    # lazy: loads pandas; kept off the CLI's start-up
    import pandas as pd

    table = pd.DataFrame(
        {
            "name": [r["name"] for r in records],
            "input": ["x".join(map(str, r["input_shape"])) for r in records],
            "params (M)": [f"{r['params'] / 1e6:.2f}" for r in records],
            "GMACs": [f"{r['gmacs']:.3f}" for r in records],
            "published GMACs": [_fmt_published(r) for r in records],
            "deviation": [_fmt_deviation(r) for r in records],
        }
    )
    align = ["left", "left"] + ["right"] * 4
    click.echo(table.to_markdown(index=False, colalign=align, disable_numparse=True))


def _fmt_published(record: dict[str, Any]) -> str:
    published = record["gmacs_published"]
    return "-" if published is None else f"{published:.2f}"


def _fmt_deviation(record: dict[str, Any]) -> str:
    published = record["gmacs_published"]
    return "-" if published is None else f"{(record['gmacs'] / published - 1) * 100:+.1f} %"


def _parse_size(text: str | None) -> int | tuple[int, int] | None:
    if text is None:
        return None
    parts = text.lower().split("x")
    if len(parts) in (1, 2) and all(p.strip().isdigit() for p in parts):
        sizes = [int(p) for p in parts]
        return sizes[0] if len(sizes) == 1 else (sizes[0], sizes[1])
    raise ZooError(f"--input-size must be N or HxW (e.g. 640 or 480x640), not {text!r}")


@zoo.command("export")
@click.argument("name")
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The .onnx file to write.",
)
@click.option(
    "--input-size",
    default=None,
    metavar="N|HxW",
    help="Image size (default: the published one, 224 or 640).",
)
@click.option("--batch", default=1, show_default=True, type=int, help="Batch size.")
@click.option("--seed", default=0, show_default=True, type=int, help="Weight seed.")
@click.option("--json", "as_json", is_flag=True, help="Print the written model's record.")
def export(
    name: str, output: Path, input_size: str | None, batch: int, seed: int, as_json: bool
) -> None:
    """Build zoo model NAME and write it as an ONNX file.

    Example: ``aipusim zoo export yolov8n -o yolov8n.onnx``
    """
    # lazy: loads numpy, onnx; kept off the CLI's start-up
    from aipusim import zoo as zoo_api
    from aipusim.base.fileio import check_output, write_bytes

    check_output(output)
    model = zoo_api.build(name, input_size=_parse_size(input_size), batch=batch, seed=seed)
    write_bytes(output, model.SerializeToString())
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    record = {
        "name": name,
        "path": str(output),
        "input_shape": shape,
        "params": zoo_api.count_params(model),
        "gmacs": round(zoo_api.count_macs(model) / 1e9, 4),
        "seed": seed,
    }
    if as_json:
        click.echo(json.dumps(record, indent=2))
        return
    click.echo(
        f"wrote {output}: {name}, input {'x'.join(map(str, shape))}, "
        f"{record['params'] / 1e6:.2f} M parameters, {record['gmacs']:.3f} GMACs"
    )


@zoo.command("decoder")
@click.argument("name")
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The folder to write prefill.onnx, decode.onnx and their shared weights.bin into.",
)
@click.option("--prompt", default=128, show_default=True, type=int,
              help="Prompt tokens the prefill graph takes.")  # fmt: skip
@click.option("--past", default=None, type=int,
              help="Cached tokens the decode graph takes [default: --prompt].")  # fmt: skip
@click.option("--batch", default=1, show_default=True, type=int, help="Sequences at once.")
@click.option("--positions", default=4096, show_default=True, type=int,
              help="RoPE table rows: the longest context the graphs serve.")  # fmt: skip
@click.option("--seed", default=0, show_default=True, type=int, help="Weight seed.")
@click.option("--json", "as_json", is_flag=True, help="Print the written decoder's record.")
def decoder(
    name: str,
    output: Path,
    prompt: int,
    past: int | None,
    batch: int,
    positions: int,
    seed: int,
    as_json: bool,
) -> None:
    """Build decoder NAME (llama_1b, tiny_decoder) as its two graphs: prefill (the
    prompt) and decode (one token with the KV cache), sharing one weights file.

    Example: ``aipusim zoo decoder tiny_decoder --prompt 64 -o tiny_decoder``
    """
    # lazy: loads numpy, onnx; kept off the CLI's start-up
    from aipusim.base.fileio import check_output
    from aipusim.zoo.decoder import (
        DECODE_FILE,
        PREFILL_FILE,
        DecoderGraph,
        build_decoder,
        decoder_size,
        save_decoder,
    )

    size = decoder_size(name)
    past = prompt if past is None else past
    for flag, value in (("--prompt", prompt), ("--past", past), ("--batch", batch)):
        if value < 1:
            raise ZooError(f"{flag} must be an integer >= 1, not {value}")
    if max(prompt, past + 1) > positions:
        raise ZooError(
            f"--positions must be at least the longest context, max(--prompt, --past + 1) = "
            f"{max(prompt, past + 1)}, not {positions}"
        )
    check_output(output, folder=True)
    common = {"batch": batch, "positions": positions, "seed": seed}
    prefill = build_decoder(name, tokens=prompt, **common)
    decode = build_decoder(name, graph=DecoderGraph.DECODE, past=past, **common)
    written = save_decoder(prefill, decode, output)
    record = {
        "name": name,
        "prefill": str(output / PREFILL_FILE),
        "decode": str(output / DECODE_FILE),
        "prompt": prompt,
        "past": past,
        "batch": batch,
        "params": size.param_count(),
        "bytes_written": written,
        "seed": seed,
        "source": size.source,
    }
    if as_json:
        click.echo(json.dumps(record, indent=2))
        return
    click.echo(
        f"wrote {output}/: {name} prefill ({prompt} tokens) and decode ({past} cached), "
        f"batch {batch}, {size.param_count() / 1e6:.1f} M parameters, "
        f"{written / 2**20:.1f} MiB"
    )
