"""``aipusim compile``: check every flag, build the final config, hand it to the driver.

The flags are those of the vendor compiler CLI (``-i``, ``-o``, ``--conf``,
``--generate-config``, ``--quantize-only``, ``--input-shape``, ``--imageset``, ``--transform``,
``--input-data-layout``, ``--color-format``, ``--imreader-backend``, ``--cli-args``) plus
``--aipu-cores``, ``--set KEY=VALUE``, ``--arch`` and ``--no-cache`` (calibrate again instead
of reusing the quantization cache).

Config precedence, highest first: ``--aipu-cores``/``--quantize-only``/``--set`` given on
this command line, the ``--conf`` file, the values of a ``--cli-args`` file, the defaults.
Every other flag: this command line, then ``--cli-args``, then its default.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from aipusim.base.errors import ConfigError
from aipusim.base.fileio import check_name, check_output
from aipusim.cli.options import (
    DefaultsConfigHelp,
    StrictChoice,
    arch_option,
    build_config,
    conf_option,
    json_option,
    load_arch_option,
    no_cache_option,
    require_dir,
    require_file,
    set_option,
)

if TYPE_CHECKING:
    from aipusim.compiler.config import CompilerConfig
    from aipusim.compiler.request import CompileRequest

#: Suffixes -i accepts: an ONNX model, or the manifest of a quantize-only run.
MODEL_SUFFIXES = (".onnx", ".json")
DEFAULT_CONF_NAME = "default_conf.json"


@click.command("compile", cls=DefaultsConfigHelp)
@click.option(
    "-i",
    "--input",
    "input_path",
    type=click.Path(path_type=Path),
    metavar="MODEL",
    help="ONNX model, or quantized_model_manifest.json of a --quantize-only run.",
)
@click.option(
    "-o",
    "--output",
    "output_dir",
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="Output folder for all artifacts.",
)
@conf_option
@click.option(
    "--generate-config",
    "generate_dir",
    type=click.Path(path_type=Path),
    metavar="DIR",
    help=f"Write DIR/{DEFAULT_CONF_NAME} with every property at its default, then stop.",
)
@click.option(
    "--quantize-only", is_flag=True, help="Stop after quantization (compiler_mode = quantize_only)."
)
@click.option(
    "--input-shape",
    metavar="N,C,H,W",
    help="Fixed input shape for models with dynamic dimensions, e.g. 1,3,224,224.",
)
@click.option(
    "--imageset",
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="Folder of calibration images (default: random data).",
)
@click.option(
    "--transform",
    type=click.Path(path_type=Path),
    metavar="FILE.py",
    help="Python file defining get_preprocess_transform(image). It is RUN as code: "
    "pass only files you trust.",
)
@click.option(
    "--input-data-layout",
    type=StrictChoice(["NCHW", "NHWC"], "--input-data-layout"),
    help="Tensor layout of the input.",
)
@click.option(
    "--color-format",
    type=StrictChoice(["RGB", "BGR", "GRAY"], "--color-format"),
    default="RGB",
    show_default=True,
    help="Colour format of calibration images.",
)
@click.option(
    "--imreader-backend",
    type=StrictChoice(["PIL", "OPENCV"], "--imreader-backend"),
    default="PIL",
    show_default=True,
    help="Library that reads calibration images.",
)
@click.option(
    "--cli-args",
    "cli_args_path",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="cli_args.json of an earlier run; flags given here override its values.",
)
@click.option(
    "--aipu-cores", metavar="N", help="Cores per compiled instance (aipu_cores_used, 1-4)."
)
@click.option(
    "--dump-after",
    metavar="PASS[,PASS...]",
    help="Write the IR after these passes (or 'all') to OUT/ir/<NN>_<pass>.txt. Passes: "
    "import, the front end (rewrite_einsum ... validate_operators), then lower, tile, "
    "multicore, imc, memplan, schedule, estimate, emit.",
)
@click.option(
    "--stop-after",
    metavar="PASS",
    help="End the compilation after this pass (status STOPPED, no compiled_model/); "
    "with --dump-after, to inspect one stage.",
)
@set_option
@arch_option
@no_cache_option
@json_option
@click.pass_context
def compile_command(ctx: click.Context, **flags: Any) -> None:
    """Compile an ONNX model into per-core tasklists and artifacts.

    \b
    Examples:
      aipusim compile --generate-config out/
      aipusim compile -i model.onnx --conf out/default_conf.json -o out/
      aipusim compile -i model.onnx -o out/ --aipu-cores 4 --set multicore_mode=batch
    """
    if flags["generate_dir"] is not None:
        _generate_config(flags["generate_dir"], flags["as_json"])
        return
    request = _build_request(ctx, flags)
    # Imported here: the driver pulls in onnx/numpy, which --help and bad input never need.
    from aipusim.compiler.driver import compile_model
    from aipusim.compiler.pipeline import pass_names
    from aipusim.progress import Progress

    progress = Progress()
    step = progress.stage("compile", len(pass_names()))

    def after_pass(name: str, _graph: object) -> None:
        progress.note(f"after {name}")
        step(1)

    try:
        result = compile_model(request, after_pass=after_pass)
    finally:
        progress.close()
    if flags["as_json"]:
        summary = {
            "input": str(request.model_path),
            "output_dir": str(request.output_dir),
            "status": result.status,
        }
        click.echo(json.dumps(summary))
    elif request.stop_after is not None and result.status == "STOPPED":
        click.echo(
            f"stopped after {request.stop_after} as asked: {request.model_path} -> "
            f"{request.output_dir}"
        )
    else:
        click.echo(f"compiled {request.model_path} -> {request.output_dir}")
        line = _placement_line(Path(request.output_dir))
        if line:
            click.echo(line)


def _placement_line(out: Path) -> str:
    """The compile report's placement summary (`placement.placement_summary`), if any."""
    from aipusim.compiler.backend.emit import COMPILED_DIR, REPORT_FILE

    report = out / COMPILED_DIR / REPORT_FILE
    if not report.is_file():
        return ""
    return str(json.loads(report.read_text()).get("placement", {}).get("summary", ""))


def _generate_config(folder: Path, as_json: bool) -> None:
    from aipusim.compiler.config import CompilerConfig, save_config

    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--generate-config must be a folder, not the file {str(folder)!r}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"--generate-config cannot create {str(folder)!r}: {exc.strerror}"
        ) from None
    path = folder / DEFAULT_CONF_NAME
    save_config(CompilerConfig(), path)
    click.echo(json.dumps({"written": str(path)}) if as_json else f"wrote {path}")


def _explicit(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE


def _build_request(ctx: click.Context, flags: dict[str, Any]) -> CompileRequest:
    """Merge flags over ``--cli-args``, check them all, and build the `CompileRequest`."""
    from aipusim.compiler.config import check_against_arch
    from aipusim.compiler.request import (
        ColorFormat,
        CompileRequest,
        ImreaderBackend,
        InputDataLayout,
        load_cli_args,
        parse_input_shape,
    )

    saved: dict[str, Any] = {}
    if flags["cli_args_path"] is not None:
        saved = load_cli_args(require_file(flags["cli_args_path"], "--cli-args", (".json",)))

    def pick(param: str, key: str) -> Any:
        """This command line's value, else the --cli-args value, else the flag default."""
        if _explicit(ctx, param) or key not in saved:
            return flags[param]
        return saved[key]

    def pick_path(param: str, key: str) -> Path | None:
        value = pick(param, key)
        return Path(value) if value is not None else None

    config = _build_config(flags, saved)
    input_path = pick_path("input_path", "input")
    if input_path is None:
        raise ConfigError("-i/--input is required (an ONNX model), unless --generate-config")
    require_file(input_path, "-i/--input", MODEL_SUFFIXES)
    output_dir = pick_path("output_dir", "output")
    if output_dir is None and config.output_dir is not None:
        output_dir = Path(config.output_dir)
    if output_dir is None:
        raise ConfigError("-o/--output is required (the folder for the artifacts)")
    check_name(output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise ConfigError(f"-o/--output must be a folder, not the file {str(output_dir)!r}")
    check_output(output_dir, folder=True)
    config.output_dir = str(output_dir)

    shape_text = pick("input_shape", "input_shape")
    imageset = pick_path("imageset", "imageset")
    transform = pick_path("transform", "transform")
    if imageset is not None:
        require_dir(imageset, "--imageset")
    if transform is not None:
        require_file(transform, "--transform", (".py",))
    layout = pick("input_data_layout", "input_data_layout")
    color = pick("color_format", "color_format")
    backend = pick("imreader_backend", "imreader_backend")

    arch_path = pick_path("arch_path", "arch")
    check_against_arch(config, load_arch_option(arch_path))

    sets = list(saved.get("set", [])) + list(flags["overrides"])
    cli_args = {
        "input": str(input_path),
        "output": str(output_dir),
        "conf": str(flags["conf_path"]) if flags["conf_path"] else saved.get("conf"),
        "quantize_only": config.compiler_mode == "quantize_only",
        "input_shape": shape_text,
        "imageset": str(imageset) if imageset else None,
        "transform": str(transform) if transform else None,
        "input_data_layout": str(layout) if layout else None,
        "color_format": str(color),
        "imreader_backend": str(backend),
        "aipu_cores": config.aipu_cores_used,
        "set": sets,
        "arch": str(arch_path) if arch_path else None,
    }
    return CompileRequest(
        model_path=input_path,
        output_dir=output_dir,
        config=config,
        input_shape=parse_input_shape(shape_text) if shape_text else None,
        imageset=imageset,
        transform=transform,
        input_data_layout=_member(InputDataLayout, layout, "--input-data-layout"),
        color_format=_member(ColorFormat, color, "--color-format"),
        imreader_backend=_member(ImreaderBackend, backend, "--imreader-backend"),
        arch_path=arch_path,
        cli_args=cli_args,
        dump_after=_pass_list(flags["dump_after"], "--dump-after"),
        stop_after=_pass_list(flags["stop_after"], "--stop-after", single=True)[0]
        if flags["stop_after"]
        else None,
        quantization_cache=not flags["no_cache"],
    )


def _pass_list(text: str | None, flag: str, *, single: bool = False) -> tuple[str, ...]:
    """Pass names of a --dump-after / --stop-after value, each checked."""
    if not text:
        return ()
    from aipusim.compiler.pipeline import pass_names

    valid = pass_names()
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    allowed = valid if single else [*valid, "all"]
    bad = [n for n in names if n not in allowed]
    if bad or not names or (single and len(names) != 1):
        what = "one pass" if single else "passes separated by commas (or all)"
        raise ConfigError(f"{flag} must be {what} of {', '.join(allowed)}, not {text!r}")
    return names


def _member(enum: Any, value: str | None, flag: str) -> Any:
    """A `StrEnum` member from a flag value (values from --cli-args are checked here)."""
    if value is None:
        return None
    return StrictChoice(enum, flag).convert(value, None, None)


def _build_config(flags: dict[str, Any], saved: dict[str, Any]) -> CompilerConfig:
    """Defaults < --cli-args values < --conf < explicit --aipu-cores/--quantize-only/--set."""
    from aipusim.compiler.config import PROPERTIES, CompilerConfig

    base = CompilerConfig()
    if "conf" in saved:
        base = build_config(Path(saved["conf"]), (), base)
    base = build_config(None, saved.get("set", []), base)
    saved_flags: dict[str, Any] = {}
    if "aipu_cores" in saved:
        saved_flags["aipu_cores_used"] = saved["aipu_cores"]
    if saved.get("quantize_only"):
        saved_flags["compiler_mode"] = "quantize_only"
    _apply(base, saved_flags, "--cli-args")

    config = build_config(flags["conf_path"], (), base)
    explicit: dict[str, Any] = {}
    if flags["aipu_cores"] is not None:
        try:
            explicit["aipu_cores_used"] = PROPERTIES["aipu_cores_used"].parse(flags["aipu_cores"])
        except ConfigError as exc:
            raise ConfigError(f"--aipu-cores: {exc}") from None
    if flags["quantize_only"]:
        explicit["compiler_mode"] = "quantize_only"
    _apply(config, explicit, "command line")
    return build_config(None, flags["overrides"], config)


def _apply(config: CompilerConfig, values: dict[str, Any], source: str) -> None:
    if not values:
        return
    try:
        config.update(**values)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
