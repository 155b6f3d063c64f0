"""``aipusim report``: run one of the studies into a folder of Markdown and PNGs."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import click

from aipusim.base.errors import ConfigError
from aipusim.cli.options import defaults_option, json_option, set_option

if TYPE_CHECKING:
    # (the studies import pandas: loaded once a study runs, not for --help or a bad flag)
    from aipusim.studies.common import StudyBase

#: The studies that run models from a base config which --defaults and --set change.
BASED_STUDIES = ("multicore", "power", "layers", "llm")

STUDY_NAMES = (
    "multicore",
    "power",
    "layers",
    "sensitivity",
    "validation",
    "functional",
    "corpus",
    "uncertainty",
    "fidelity",
    "llm",
)


def _split_list(values: tuple[str, ...]) -> list[str]:
    """Repeated and comma-separated values as one list (``--models a,b --models c``)."""
    return [v.strip() for text in values for v in text.split(",") if v.strip()]


def _limits(values: tuple[str, ...]) -> list[float] | None:
    texts = _split_list(values)
    if not texts:
        return None
    out = []
    for text in texts:
        try:
            out.append(float(text))
        except ValueError:
            raise ConfigError(f"--limits must be numbers like 0.125,0.5,1, not {text!r}") from None
    return out


@click.command()
@click.argument("study", type=click.Choice(STUDY_NAMES))
@click.option(
    "-o",
    "--output",
    "output_dir",
    type=click.Path(path_type=Path),
    required=True,
    help="Output folder (README.md, PNGs; created or replaced if it holds an earlier study; "
    "validation: writes validation.md and validation.json into it, e.g. docs).",
)
@click.option(
    "--models",
    multiple=True,
    help="Models (zoo names or ONNX files), comma-separated or repeated "
    "[default: multicore resnet50,mobilenetv2,yolov8n; power resnet50; layers every zoo "
    "model but tiny_cnn; sensitivity resnet50,mobilenetv2,yolov5s,yolov8n; uncertainty "
    "those and deit_tiny; functional every "
    "zoo model; corpus every model of the corpus manifest (`aipusim corpus list`); fidelity "
    "the micro-benchmarks and every zoo model].",
)
@click.option(
    "--frames",
    type=int,
    default=None,
    help="Frames per replica [default: 8; functional 4, a whole start in batch mode; fidelity 3].",
)
@click.option(
    "--input-size", type=int, default=None, help="Input side for zoo models (quick small runs)."
)
@click.option(
    "--limits",
    multiple=True,
    help="power: the mvm_utilization_limit values [default: 0.125 to 1.0 in steps of 0.125].",
)
@click.option(
    "--keys",
    multiple=True,
    help="sensitivity: only these inferred arch numbers (dotted keys) [default: every one "
    "with a range].",
)
@click.option(
    "--samples",
    type=int,
    default=None,
    help="uncertainty: joint samples of the inferred arch numbers per model [default: 64].",
)
@click.option(
    "--fit",
    "fit",
    is_flag=True,
    help="validation: record the calibration's fit in validation.json (the arch file's (I) "
    "numbers then follow it; needs --reason).",
)
@click.option(
    "--corpus-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="corpus: where `aipusim corpus fetch` put the models [default: $AIPUSIM_CORPUS_DIR, "
    "else the user cache folder].",
)
@click.option(
    "--reason",
    default="",
    help="validation --fit: why the fit is re-run (new calibration data or a changed model of "
    "a unit; never a compiler change). Recorded in the fit record.",
)
@click.option(
    "--workers",
    type=int,
    default=2,
    show_default=True,
    help="Runs at once (processes; the corpus study runs its models one after another).",
)
@click.option(
    "--resume",
    is_flag=True,
    help="multicore/power: keep the points already in DIR/results (same commit only).",
)
@defaults_option
@set_option
@json_option
def report(
    study: str,
    output_dir: Path,
    models: tuple[str, ...],
    frames: int | None,
    input_size: int | None,
    limits: tuple[str, ...],
    keys: tuple[str, ...],
    samples: int | None,
    fit: bool,
    corpus_dir: Path | None,
    reason: str,
    workers: int,
    resume: bool,
    defaults: bool,
    overrides: tuple[str, ...],
    as_json: bool,
) -> None:
    """Run STUDY (multicore, power, layers, sensitivity, uncertainty, validation, functional,
    corpus, fidelity or llm) and write its report.

    Each folder gets README.md (what was run, conclusions computed from the numbers, tables)
    and PNG figures; validation writes docs/validation.md (`aipusim calibrate`'s report on
    the published silicon figures, arch/metis_measured.csv, against the frozen fit).
    Models start from their built-in config (a zoo model) or the defaults; multicore,
    power, layers and llm take --defaults and --set to change that base.
    Example: ``aipusim report power -o reports/power``. For one model, ``aipusim compare
    MODEL --modes ...`` (the multicore study) or ``--limits ...`` (the power study) prints
    the table and conclusions.
    """
    # lazy: loads numpy, onnx, pandas; kept off the CLI's start-up
    from aipusim.base.fileio import check_output
    from aipusim.studies import STUDIES

    check_output(output_dir, folder=True)
    if study == "llm" and frames is not None:
        raise ConfigError(
            "--frames applies to the image-model studies, not llm (each decoder step is "
            "simulated for a fixed number of frames)"
        )
    if frames is None:
        frames = {"functional": 4, "fidelity": 3}.get(study, 8)
    if frames < 1:
        raise ConfigError(f"--frames must be an integer >= 1, not {frames}")
    # lazy: aipusim.simulator.budget loads numpy, simpy; kept off the CLI's start-up
    from aipusim.simulator.budget import check_frames_bound

    check_frames_bound(frames, flag="--frames")
    # lazy: aipusim.sweep.runner loads numpy, onnx, pandas, pyarrow; kept off the CLI's start-up
    from aipusim.sweep.runner import check_workers

    check_workers(workers)
    if input_size is not None and input_size < 1:
        raise ConfigError(f"--input-size must be a positive integer, not {input_size}")
    chosen = _split_list(models)
    limit_values = _limits(limits)
    if limit_values is not None and study not in ("power", "llm"):
        raise ConfigError(f"--limits applies to the power and llm studies only, not {study}")
    if resume and study not in ("multicore", "power"):
        raise ConfigError(f"--resume applies to the multicore and power studies only, not {study}")
    chosen_keys = _split_list(keys)
    if chosen_keys and study != "sensitivity":
        raise ConfigError(f"--keys applies to the sensitivity study only, not {study}")
    if samples is not None and study != "uncertainty":
        raise ConfigError(f"--samples applies to the uncertainty study only, not {study}")
    if fit and study != "validation":
        raise ConfigError(f"--fit applies to the validation study only, not {study}")
    if corpus_dir is not None and study != "corpus":
        raise ConfigError(f"--corpus-dir applies to the corpus study only, not {study}")
    if study == "corpus" and input_size is not None:
        raise ConfigError("--input-size applies to zoo models; the corpus study compiles each "
                          "model at its manifest's input shape")  # fmt: skip
    base = study_base(defaults, overrides, study)
    if reason and not fit:
        raise ConfigError("--reason goes with --fit (it is recorded with the fit)")
    if fit and not reason.strip():
        # Hardware numbers are frozen between fits (aipusim.arch.frozen): a re-fit must say why.
        raise ConfigError(
            "--reason must say why the calibration is re-run (new calibration data or a "
            "changed model of a unit), not be empty"
        )
    if study == "validation" and (chosen or input_size is not None):
        raise ConfigError("validation compares ResNet-50 at its published size: no --models, "
                          "no --input-size")  # fmt: skip
    kwargs: dict[str, object] = {
        "frames": frames,
        "input_size": input_size,
        "workers": workers,
        "command": command_line(
            study,
            output_dir,
            chosen,
            frames,
            input_size,
            limit_values,
            _split_list(keys),
            fit,
            corpus_dir,
            samples,
            base,
        ),
        "progress": True,
    }
    if study in BASED_STUDIES:
        kwargs["base"] = base
    if chosen:
        kwargs["models"] = chosen
    if limit_values is not None:
        kwargs["limits"] = limit_values
    if study in ("multicore", "power"):
        kwargs["resume"] = resume
    if chosen_keys:
        kwargs["keys"] = chosen_keys
    if samples is not None:
        kwargs["samples"] = samples
    if study in ("corpus", "fidelity"):
        kwargs = {k: v for k, v in kwargs.items() if k not in ("input_size", "workers")}
    if study == "llm":
        # a decoder's steps are simulated for a fixed number of frames, one at a time
        if input_size is not None:
            raise ConfigError("--input-size applies to image models, not the llm study")
        kwargs = {k: v for k, v in kwargs.items() if k not in ("input_size", "workers", "frames")}
    if study == "corpus":
        kwargs["corpus_dir"] = corpus_dir
    if study == "fidelity":
        kwargs["input_size"] = input_size
    if study == "validation":
        kwargs = {
            "fit_first": fit,
            "reason": reason,
            "command": kwargs["command"],
            "progress": True,
        }
    result = STUDIES[study](output_dir, **kwargs)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    click.echo(f"wrote {result.files[0]} ({len(result.files)} files)")
    for line in result.conclusions:
        click.echo(f"- {line}")


def command_line(
    study: str,
    output_dir: Path,
    models: list[str],
    frames: int,
    input_size: int | None,
    limits: list[float] | None,
    keys: list[str] | None = None,
    fit: bool = False,
    corpus_dir: Path | None = None,
    samples: int | None = None,
    base: StudyBase | None = None,
) -> str:
    """The command that reproduces this report (for its what-was-run section)."""
    args = ["aipusim", "report", study, "-o", str(output_dir)]
    if study == "validation":
        return shlex.join(args + (["--fit"] if fit else []))
    if study != "llm":  # (the llm study takes no --frames)
        args += ["--frames", str(frames)]
    if models:
        args += ["--models", ",".join(models)]
    if input_size is not None:
        args += ["--input-size", str(input_size)]
    if limits is not None:
        args += ["--limits", ",".join(f"{v:g}" for v in limits)]
    if keys:
        args += ["--keys", ",".join(keys)]
    if corpus_dir is not None:
        args += ["--corpus-dir", str(corpus_dir)]
    if samples is not None:
        args += ["--samples", str(samples)]
    return shlex.join(args + (base.args() if base is not None else []))


def study_base(defaults: bool, overrides: tuple[str, ...], study: str) -> StudyBase:
    """The `StudyBase` of ``--defaults`` and ``--set``, refused for a study that does not
    start models from a config (the study checks it on its models before any work)."""
    # lazy: aipusim.studies.common loads numpy, onnx, pandas; kept off the CLI's start-up
    from aipusim.studies.common import BUILT_IN, StudyBase

    base = StudyBase(defaults=defaults, sets=tuple(overrides))
    if base == BUILT_IN:
        return base
    if study not in BASED_STUDIES:
        flag = "--defaults" if defaults else "--set"
        raise ConfigError(
            f"{flag} applies to the {', '.join(BASED_STUDIES)} studies only, not {study}"
        )
    return base
