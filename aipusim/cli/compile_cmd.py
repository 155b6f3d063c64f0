"""``aipusim compile``: check every flag, build the final config, hand it to the driver.

The flags are those of the vendor compiler CLI (``-i``, ``-o``, ``--conf``,
``--generate-config``, ``--quantize-only``, ``--input-shape``, ``--imageset``, ``--transform``,
``--input-data-layout``, ``--color-format``, ``--imreader-backend``, ``--cli-args``) plus
``--aipu-cores``, ``--set KEY=VALUE``, ``--arch``, ``--no-cache`` (calibrate again instead
of reusing the quantization cache) and the calibration choices ``--calibration
auto|images|random``, ``--image-mean`` and ``--image-std``.

Config precedence, highest first: ``--aipu-cores``/``--quantize-only``/``--set`` given on
this command line, the ``--conf`` file, the values of a ``--cli-args`` file, the defaults.
Every other flag: this command line, then ``--cli-args``, then its default.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from aipusim.base.errors import ConfigError, QuantizationError
from aipusim.base.fileio import check_name, check_output
from aipusim.cli.options import (
    ConfigHelp,
    StrictChoice,
    arch_option,
    build_config,
    conf_option,
    config_line,
    defaults_option,
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


@click.command("compile", cls=ConfigHelp)
@click.option(
    "-i",
    "--input",
    "input_path",
    type=click.Path(path_type=Path),
    metavar="MODEL",
    help="ONNX model, a zoo model name (aipusim zoo list), or quantized_model_manifest.json "
    "of a --quantize-only run.",
)
@click.option(
    "-o",
    "--output",
    "output_dir",
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="Output folder for all artifacts.",
)
@defaults_option
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
    help="Folder of calibration images (default: scikit-image's sample photographs for an "
    "image input, random data otherwise; see --calibration).",
)
@click.option(
    "--transform",
    type=click.Path(path_type=Path),
    metavar="FILE.py",
    help="Python file defining get_preprocess_transform(image). It is RUN as code: "
    "pass only files you trust. Without --imageset it preprocesses the bundled images.",
)
@click.option(
    "--calibration",
    type=StrictChoice(["auto", "images", "random"], "--calibration"),
    default="auto",
    show_default=True,
    help="Calibration data: auto = images when the input is an image (1 or 3 channels, "
    "NCHW or NHWC, H and W >= 16), else seeded random data; images; random.",
)
@click.option(
    "--image-mean",
    metavar="M[,M,M]",
    help="Per-channel mean subtracted from images scaled to [0, 1] by the built-in "
    "preprocessing (default 0; ImageNet: 0.485,0.456,0.406).",
)
@click.option(
    "--image-std",
    metavar="S[,S,S]",
    help="Per-channel std the built-in preprocessing divides by (default 1; ImageNet: "
    "0.229,0.224,0.225).",
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
    "--keep-input-model",
    is_flag=True,
    help="Copy the ONNX model into OUT/input_model/; by default OUT/input_model/source.json "
    "records its path, size and SHA-256 instead (a zoo model given by name, built for the "
    "compile, is always copied).",
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
      aipusim compile -i tiny_cnn -o out/
    """
    if flags["generate_dir"] is not None:
        _generate_config(flags["generate_dir"], flags["as_json"])
        return

    # a zoo model is built here for the compile; the compile keeps its own copy
    scratch = Path(tempfile.mkdtemp(prefix="aipusim-model-"))
    try:
        _compile(ctx, flags, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _compile(ctx: click.Context, flags: dict[str, Any], scratch: Path) -> None:
    """The compile of `compile_command`; a zoo model given by name is built in ``scratch``."""
    request = _build_request(ctx, flags, scratch)
    # Imported here: the driver pulls in onnx/numpy, which --help and bad input never need.
    from aipusim.compiler.driver import compile_model

    # lazy: kept off the command's start-up (aipusim.run.progress)
    from aipusim.run.progress import Progress, compile_stage

    progress = Progress()
    try:
        result = compile_model(request, after_pass=compile_stage(progress))
    finally:
        progress.close()
    # lazy: kept off the command's start-up (aipusim.run.config_text)
    from aipusim.run.config_text import config_changes

    changes = config_changes(request.config)
    if flags["as_json"]:
        summary = {
            "input": str(request.cli_args["input"]),
            "output_dir": str(request.output_dir),
            "status": result.status,
            "config": {"base": flags["config_base"], "changes": changes},
        }
        click.echo(json.dumps(summary))
        return
    click.echo(config_line(flags["config_base"], changes))
    if request.stop_after is not None and result.status == "STOPPED":
        click.echo(
            f"stopped after {request.stop_after} as asked: {request.cli_args['input']} -> "
            f"{request.output_dir}"
        )
    else:
        click.echo(f"compiled {request.cli_args['input']} -> {request.output_dir}")
        line = _placement_line(Path(request.output_dir))
        if line:
            click.echo(line)


def _placement_line(out: Path) -> str:
    """The compile report's placement summary (`placement.placement_summary`), if any."""
    # lazy: aipusim.compiler.backend.emit.files loads numpy, onnx; kept off the CLI's start-up
    from aipusim.compiler.backend.emit.files import COMPILED_DIR, REPORT_FILE

    report = out / COMPILED_DIR / REPORT_FILE
    if not report.is_file():
        return ""
    return str(json.loads(report.read_text()).get("placement", {}).get("summary", ""))


def _generate_config(folder: Path, as_json: bool) -> None:
    # lazy: aipusim.compiler.config loads numpy; kept off the CLI's start-up
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


def _build_request(ctx: click.Context, flags: dict[str, Any], scratch: Path) -> CompileRequest:
    """Merge flags over ``--cli-args``, check them all, and build the `CompileRequest`."""
    # lazy: loads numpy, onnx; kept off the CLI's start-up
    from aipusim.compiler.config import check_against_arch
    from aipusim.compiler.quant.data import parse_channel_values
    from aipusim.compiler.request import (
        CalibrationMode,
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

    input_path = pick_path("input_path", "input")
    if input_path is None:
        raise ConfigError("-i/--input is required (an ONNX model), unless --generate-config")
    model_path = _model_file(input_path, scratch)
    start = _start(input_path, model_path, flags["defaults"])
    config = _build_config(flags, saved, start)
    # (for the printout: where the config started)
    flags["config_base"] = start[1]
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
    calibration = pick("calibration", "calibration")
    mean_text = pick("image_mean", "image_mean")
    std_text = pick("image_std", "image_std")
    try:
        mean = parse_channel_values(mean_text, "--image-mean") if mean_text else None
        std = parse_channel_values(std_text, "--image-std") if std_text else None
    except QuantizationError as exc:
        raise ConfigError(str(exc)) from None

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
        "calibration": str(calibration),
        "image_mean": mean_text,
        "image_std": std_text,
        "aipu_cores": config.aipu_cores_used,
        "set": sets,
        "arch": str(arch_path) if arch_path else None,
    }
    return CompileRequest(
        model_path=model_path,
        output_dir=output_dir,
        config=config,
        input_shape=parse_input_shape(shape_text) if shape_text else None,
        imageset=imageset,
        transform=transform,
        input_data_layout=_member(InputDataLayout, layout, "--input-data-layout"),
        color_format=_member(ColorFormat, color, "--color-format"),
        imreader_backend=_member(ImreaderBackend, backend, "--imreader-backend"),
        calibration=_member(CalibrationMode, calibration, "--calibration"),
        image_mean=mean,
        image_std=std,
        arch_path=arch_path,
        cli_args=cli_args,
        dump_after=_pass_list(flags["dump_after"], "--dump-after"),
        stop_after=_pass_list(flags["stop_after"], "--stop-after", single=True)[0]
        if flags["stop_after"]
        else None,
        quantization_cache=not flags["no_cache"],
        # a zoo model is built into a scratch folder that goes away: only a copy keeps it
        keep_input_model=flags["keep_input_model"] or model_path != input_path,
    )


def _model_file(given: Path, scratch: Path) -> Path:
    """The model file ``-i`` names: an ONNX model or quantized manifest, or a zoo model
    built into ``scratch`` when ``given`` is a zoo name and no such file exists."""
    # lazy: aipusim.zoo loads numpy, onnx; kept off the CLI's start-up
    from aipusim import zoo

    if given.is_file() or given.suffix.lower() in MODEL_SUFFIXES:
        return require_file(given, "-i/--input", MODEL_SUFFIXES)
    if str(given) not in zoo.names():
        raise ConfigError(
            f"-i/--input must be an existing file or a zoo model ({', '.join(zoo.names())}), "
            f"not {str(given)!r}"
        )
    # lazy: loads onnx; kept off the CLI's start-up
    import onnx

    path = scratch / f"{given}.onnx"
    onnx.save(zoo.build(str(given)), path)
    return path


def _pass_list(text: str | None, flag: str, *, single: bool = False) -> tuple[str, ...]:
    """Pass names of a --dump-after / --stop-after value, each checked."""
    if not text:
        return ()
    # lazy: aipusim.compiler.pipeline loads numpy, onnx; kept off the CLI's start-up
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


def _start(given: Path, model_path: Path, defaults: bool) -> tuple[CompilerConfig, str]:
    """(config, label) a compile starts from: a zoo model's built-in config, unless
    ``--defaults``; the defaults for a file (`aipusim.api.sources.starting_config`)."""
    # lazy: loads numpy, onnx; kept off the CLI's start-up
    from aipusim.api.sources import base_label, starting_config
    from aipusim.compiler.config import CompilerConfig

    if given == model_path:  # a file, not a zoo name built into the scratch folder
        return CompilerConfig(), "the defaults"
    return starting_config(str(given), defaults), base_label(str(given), defaults)


def _build_config(
    flags: dict[str, Any], saved: dict[str, Any], start: tuple[CompilerConfig, str]
) -> CompilerConfig:
    """Start (`_start`) < --cli-args values < --conf < explicit --aipu-cores/--quantize-only/
    --set."""
    # lazy: aipusim.compiler.config loads numpy; kept off the CLI's start-up
    from aipusim.compiler.config import PROPERTIES

    base = start[0].copy()
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
