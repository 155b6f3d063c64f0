"""``aipusim config``: list, show, convert and validate compiler configurations."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click

from aipusim.base.errors import ConfigError
from aipusim.base.fileio import reporting, write_text
from aipusim.cli.options import (
    arch_option,
    build_config,
    json_option,
    load_arch_option,
    require_file,
    set_option,
)

_CARD_SUFFIXES = (".yaml", ".yml")


@click.group()
def config() -> None:
    """Compiler configurations: built-in model configs, files, YAML model cards."""


@config.command("list")
@json_option
def list_(as_json: bool) -> None:
    """List the built-in model configs (usable by name in a card's compiler_config_file)."""
    # lazy: loads numpy, yaml; kept off the CLI's start-up
    from aipusim.compiler.config import load_config
    from aipusim.compiler.modelcard import builtin_configs

    rows = []
    for name, path in builtin_configs().items():
        loaded = load_config(path)
        rows.append(
            {
                "name": name,
                "file": path.name,
                "aipu_cores_used": loaded.aipu_cores_used,
                "resources_used": loaded.resources_used,
                "multicore_mode": str(loaded.multicore_mode),
                "summary": _first_comment(path),
                "path": str(path),
            }
        )
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        click.echo(
            f"{row['file']:<22} cores={row['aipu_cores_used']} "
            f"resources={row['resources_used']:<5} {row['multicore_mode']:<13} {row['summary']}"
        )


def _first_comment(path: Path) -> str:
    """The first sentence of the file's leading comment."""
    words: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        words.append(line.lstrip("#").strip())
        if words[-1].endswith("."):
            break
    return " ".join(words)


@config.command("show")
@click.argument("source", required=False)
@click.option("--model", "model_name", help="Model of a YAML card with several models.")
@click.option("--all", "show_all", is_flag=True, help="Every property, not only the changed.")
@set_option
@json_option
def show(
    source: str | None,
    model_name: str | None,
    show_all: bool,
    overrides: tuple[str, ...],
    as_json: bool,
) -> None:
    """Print an effective config as TOML (or JSON): the properties that differ from the
    defaults, or all of them with --all.

    SOURCE is a built-in config name (see `aipusim config list`), a .json/.toml config
    file, or a YAML model card; without SOURCE, the defaults. --set is applied last.

    \b
    Examples:
      aipusim config show resnet50
      aipusim config show card.yaml --model my-model --all --json
    """
    # lazy: aipusim.compiler.config loads numpy; kept off the CLI's start-up
    from aipusim.compiler.config import dumps_toml

    loaded = build_config(None, overrides, _load_source(source, model_name))
    if as_json:
        click.echo(json.dumps(loaded.to_dict(only_changed=not show_all), indent=2))
    else:
        click.echo(dumps_toml(loaded, only_changed=not show_all), nl=False)


def _load_source(source: str | None, model_name: str | None) -> Any:
    # lazy: loads numpy, yaml; kept off the CLI's start-up
    from aipusim.compiler.config import CompilerConfig, load_config
    from aipusim.compiler.modelcard import builtin_config_path, load_model_card

    if source is None:
        return CompilerConfig()
    path = Path(source)
    if path.suffix.lower() in _CARD_SUFFIXES:
        return load_model_card(require_file(path, "SOURCE")).model(model_name).config
    if path.suffix or path.exists():
        return load_config(require_file(path, "SOURCE", (".json", ".toml")))
    return load_config(builtin_config_path(source))


@config.command("convert")
@click.option(
    "--from-yaml",
    "card_path",
    required=True,
    type=click.Path(path_type=Path),
    metavar="CARD.yaml",
    help="YAML model card with inline compilation_config.",
)
@click.option(
    "--model",
    "model_name",
    help="Convert only this model (default: every model with an inline compilation_config).",
)
@click.option(
    "-o",
    "--output-dir",
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="Folder for the TOML files (default: the card's folder).",
)
@click.option("--stdout", "to_stdout", is_flag=True, help="Print the TOML instead of writing.")
@click.option("--force", is_flag=True, help="Overwrite existing TOML files.")
@json_option
def convert(
    card_path: Path,
    model_name: str | None,
    output_dir: Path | None,
    to_stdout: bool,
    force: bool,
    as_json: bool,
) -> None:
    """Write a card's inline compilation_config as TOML, one <model>.toml per model.

    Only the inline values are written (canonical names), so the file can replace the
    inline block via compiler_config_file. The card itself is not changed.
    """
    # lazy: aipusim.compiler.modelcard loads numpy, yaml; kept off the CLI's start-up
    from aipusim.compiler.modelcard import load_model_card

    card = load_model_card(require_file(card_path, "--from-yaml", _CARD_SUFFIXES))
    entries = [card.model(model_name)] if model_name else list(card.models.values())
    entries = [e for e in entries if e.inline_config]
    if not entries:
        which = f"model `{model_name}`" if model_name else "no model"
        raise ConfigError(f"{card_path}: {which} has an inline compilation_config to convert")
    folder = output_dir if output_dir is not None else card.path.parent
    written = []
    for entry in entries:
        text = entry.inline_as_toml(
            header=f"Converted from {card.path.name}, model {entry.name}, by aipusim config "
            "convert."
        )
        if to_stdout:
            click.echo(text, nl=False)
            continue
        target = folder / (re.sub(r"[^A-Za-z0-9._-]", "_", entry.name) + ".toml")
        if target.exists() and not force:
            raise ConfigError(f"{target} exists; pass --force to overwrite it")
        with reporting(folder, "create"):
            folder.mkdir(parents=True, exist_ok=True)
        write_text(target, text)
        written.append({"model": entry.name, "path": str(target)})
    if to_stdout:
        return
    if as_json:
        click.echo(json.dumps(written, indent=2))
    else:
        for item in written:
            click.echo(f"wrote {item['path']} (model {item['model']})")


@config.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@arch_option
@json_option
def validate(paths: tuple[Path, ...], arch_path: Path | None, as_json: bool) -> None:
    """Check config files (.json/.toml) and YAML model cards; stops at the first error.

    With --arch, the configs are also checked against that hardware (cores, clock, memory).
    """
    # lazy: loads numpy, yaml; kept off the CLI's start-up
    from aipusim.compiler.config import check_against_arch, load_config
    from aipusim.compiler.modelcard import load_model_card

    arch = load_arch_option(arch_path)
    results = []
    for path in paths:
        if path.suffix.lower() in _CARD_SUFFIXES:
            card = load_model_card(require_file(path, "PATH"))
            configs = {f"{path} (model {n})": e.config for n, e in card.models.items()}
        else:
            configs = {str(path): load_config(require_file(path, "PATH", (".json", ".toml")))}
        for label, loaded in configs.items():
            try:
                check_against_arch(loaded, arch)
            except ConfigError as exc:
                raise ConfigError(f"{label}: {exc}") from None
            results.append({"source": label, "changed": len(loaded.changed())})
    if as_json:
        click.echo(json.dumps(results, indent=2))
    else:
        for item in results:
            click.echo(f"{item['source']}: valid, {item['changed']} non-default values")
