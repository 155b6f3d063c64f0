"""What every study shares: its output folder, the what-was-run header, number formats,
design points for the sweep engine, and figure saving.

A study's conclusions quote numbers from its tables, so both go through `fmt`: the text a
conclusion shows is exactly the text of the table cell it comes from.

>>> fmt(1234.5678, "fps"), fmt(0.123456, "energy_mj")
('1234.6', '0.1235')
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import multiprocessing
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from aipusim import zoo
from aipusim.api.sources import starting_config, with_sets
from aipusim.arch import DEFAULT_ARCH_PATH, load_arch
from aipusim.base import __version__
from aipusim.base.errors import ConfigError
from aipusim.base.fileio import reporting, write_text
from aipusim.run.config_text import config_changes as changes
from aipusim.run.job import resolve_model
from aipusim.run.report import source_revision

# re-exported: the studies take their number formats and figures from here with the rest
from aipusim.studies.tables import FORMATS as FORMATS
from aipusim.studies.tables import fmt as fmt
from aipusim.studies.tables import md_table as md_table
from aipusim.studies.tables import pyplot as pyplot
from aipusim.studies.tables import save_figure as save_figure

#: Marker file that says a folder holds a study written by `aipusim report`.
STUDY_MARKER = "study.json"
#: Sub-folder of a study that holds the sweep engine's Parquet results.
RESULTS_DIR = "results"


def prepare_study_dir(out: Path) -> None:
    """Refuse a folder that holds anything but an earlier study; create it otherwise."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"-o must be a folder, not the file {str(out)!r}")
    if out.is_dir() and any(out.iterdir()) and not (out / STUDY_MARKER).is_file():
        raise ConfigError(
            f"-o {str(out)!r} must be empty or an earlier `aipusim report` folder; "
            "it holds other files"
        )
    with reporting(out, "create"):
        out.mkdir(parents=True, exist_ok=True)


def clear_outputs(out: Path, keep_results: bool) -> None:
    """Remove the files an earlier study wrote into ``out`` (its own folder, see marker)."""
    for path in out.iterdir():
        if path.name == RESULTS_DIR and keep_results:
            continue
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()


def source_state() -> tuple[str, bool]:
    """The commit of this checkout and whether its source files differ from it."""
    revision = source_revision()
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "."],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return revision, False
    dirty = any(line.strip().endswith(".py") for line in out.stdout.splitlines())
    return revision, dirty


@dataclass(frozen=True)
class StudyBase:
    """Where a study starts each model's config: the model's built-in zoo config (or the
    defaults, ``defaults``), then ``sets`` (``--set KEY=VALUE`` texts) on top; the study's
    own swept properties go on top of that.

    >>> StudyBase(sets=("frequency=400000000",)).config("tiny_cnn").frequency
    400000000
    >>> StudyBase(defaults=True).describe()
    'the defaults (--defaults)'
    """

    defaults: bool = False
    sets: tuple[str, ...] = ()

    def config(self, model: str) -> Any:
        """The effective base config of ``model``."""
        return with_sets(starting_config(model, self.defaults), self.sets)

    def describe(self) -> str:
        """The base as a study's what-was-run section names it."""
        start = "the defaults (--defaults)" if self.defaults else "built-in zoo config"
        return start + "".join(f", `--set {s}`" for s in self.sets)

    def args(self) -> list[str]:
        """The command-line flags that give this base (for a study's reproducing command)."""
        return (["--defaults"] if self.defaults else []) + [
            a for s in self.sets for a in ("--set", s)
        ]

    def check(
        self, models: Sequence[str], study: str, swept: Sequence[str] = (), choose: str = ""
    ) -> None:
        """Before a study touches its folder: refuse ``--set`` of a property the study
        sweeps itself (it would be overwritten), and build every model's base config (a
        value the config refuses fails here)."""
        clash = sorted({s.split("=", 1)[0].strip() for s in self.sets} & set(swept))
        if clash:
            raise ConfigError(
                f"--set must not name {', '.join(clash)}: the {study} study sets it itself "
                f"({choose})"
            )
        for model in models:
            self.config(model)


#: The base every study uses unless told otherwise: each model's built-in zoo config.
BUILT_IN = StudyBase()


def base_config(model: str, base: StudyBase = BUILT_IN) -> Any:
    """The config a study runs ``model`` with: by default its built-in zoo config, else the
    defaults (`StudyBase`)."""
    return base.config(model)


def check_models(models: Sequence[str], input_size: int | None) -> list[str]:
    """The models as given, each checked (zoo name or ONNX file); at least one."""
    if not models:
        raise ConfigError("--models must name at least one model, not none")
    for model in models:
        resolve_model(model, input_size)
    return list(dict.fromkeys(models))


def input_label(model: str, input_size: int | None) -> str:
    """``HxW`` of the model's input as run (zoo models; at the published size with its
    published MACs), or ``file`` for an ONNX file."""
    if model not in zoo.names():
        return "file"
    if input_size is not None:
        return f"{input_size}x{input_size}"
    info = zoo.info(model)
    _, _, h, w = info.input_shape
    # The published multiply-accumulate count holds at the default size only.
    gmacs = f", {info.published_gmacs:g} GMAC per frame" if info.published_gmacs else ""
    return f"{h}x{w}{gmacs}"


@dataclass
class RunInfo:
    """The what-was-run facts of a study, rendered as the README's first section."""

    study: str
    command: str
    models: list[str]
    input_size: int | None
    frames: int
    #: Per model, the config properties that differ from the defaults (before the study's
    #: own swept properties).
    config_changes: dict[str, dict[str, Any]]
    swept: str
    extra: list[str] = field(default_factory=list)
    #: What each model's input is, when not a zoo model's or an ONNX file's (`input_label`).
    input_labels: dict[str, str] = field(default_factory=dict)
    #: Where each model's config starts (`StudyBase.describe`).
    base: str = "built-in zoo config"

    def markdown(self) -> list[str]:
        arch = load_arch()
        revision, dirty = source_state()
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        lines = [
            "## What was run",
            "",
            f"- command: `{self.command}`",
            "- models (input): "
            + ", ".join(
                f"`{m}` ({self.input_labels.get(m) or input_label(m, self.input_size)})"
                for m in self.models
            ),
            f"- swept: {self.swept}",
            f"- frames per replica: {self.frames}",
            f"- base config of each model ({self.base}; changes from the defaults):",
        ]
        for model in self.models:
            changes = self.config_changes.get(model, {})
            text = ", ".join(f"`{k}={v}`" for k, v in changes.items()) or "none"
            lines.append(f"  - `{model}`: {text}")
        lines += [
            f"- chip: `{arch.chip.name}`, {arch.chip.cores} cores, peak {arch.peak_tops:.1f} TOPS "
            f"(default `arch/metis.toml`)",
            f"- aipusim {__version__}, commit `{revision}`"
            + (" with uncommitted source changes in the tree" if dirty else "")
            + f"; generated {now}",
            *self.extra,
            "",
        ]
        return lines

    def to_dict(self) -> dict[str, Any]:
        revision, dirty = source_state()
        return {
            "study": self.study,
            "command": self.command,
            "models": self.models,
            "input_size": self.input_size,
            "frames": self.frames,
            "commit": revision,
            "dirty": dirty,
        }


def config_changes(model: str, base: StudyBase = BUILT_IN) -> dict[str, Any]:
    """The base config of ``model`` as ``{property: value}`` of its non-defaults."""
    return changes(base_config(model, base))


def design_point(
    model: str,
    params: Sequence[tuple[str, Any]],
    frames: int,
    input_size: int | None,
    context_digest: str,
    check: bool = False,
    base: StudyBase = BUILT_IN,
) -> Any:
    """A sweep point of ``model`` with ``params`` on top of its base config (`StudyBase`;
    ``check``: also run on data against the int8 reference)."""
    # lazy: aipusim.sweep loads pyarrow, not otherwise loaded here
    from aipusim.sweep import SweepPoint

    base_json = json.dumps(base_config(model, base).to_dict(only_changed=True), sort_keys=True)
    return SweepPoint(
        model=model,
        params=tuple(params),
        arch_params=(),
        frames=frames,
        input_size=input_size,
        base_config_json=base_json,
        context_digest=context_digest,
        check=check,
    )


def run_points(
    study: str,
    points: Sequence[Any],
    keys: Sequence[tuple[str, tuple[Any, ...]]],
    directory: Path,
    workers: int,
    progress: bool,
) -> pd.DataFrame:
    """Run ``points`` with the sweep engine into ``directory``; every stored row.

    The context (study, commit, base configs) goes into the folder, so a ``--resume``
    with other code or configs is refused instead of mixing results.
    """
    # lazy: loads pyarrow, not otherwise loaded here
    from aipusim.sweep import SweepSpace, parse_backend, run_sweep
    from aipusim.sweep.store import ResultStore

    for point in points:
        point.config()  # an invalid combination fails here, before any compile
    context = {
        "study": study,
        "commit": source_state()[0],
        "base_configs": {p.model: json.loads(p.base_config_json) for p in points},
        "arch_sha256": hashlib.sha256(DEFAULT_ARCH_PATH.read_bytes()).hexdigest(),
    }
    space = SweepSpace(
        models=tuple(dict.fromkeys(p.model for p in points)),
        params=tuple(keys),
        arch_params=(),
        points=tuple(points),
        context=context,
    )
    run_sweep(space, directory, backend=parse_backend(workers=workers), progress=progress)
    table = ResultStore(directory).read()
    wanted = {p.point_id for p in points}
    return table[table["point_id"].isin(wanted)].reset_index(drop=True)


def context_digest(study: str) -> str:
    """Part of every point id of a study: the commit, so a new commit means new points."""
    return hashlib.sha256(f"{study}:{source_state()[0]}".encode()).hexdigest()[:16]


def rows_per_model(
    measure_model: Callable[..., list[dict[str, Any]]],
    args: Sequence[tuple[Any, ...]],
    workers: int,
) -> pd.DataFrame:
    """``measure_model(*a)`` for every model's ``a``, in up to ``workers`` spawned processes
    (one model a task: each runs its front end once), as one table of all their rows."""
    if workers <= 1 or len(args) == 1:
        parts = [measure_model(*a) for a in args]
    else:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(workers, len(args)), mp_context=ctx) as pool:
            parts = list(pool.map(measure_model, *zip(*args, strict=True)))
    return pd.DataFrame([row for part in parts for row in part])


def backend_runs_line(runs: int, seconds: float, workers: int, models: int) -> str:
    """The what-was-run line of a study that recompiles each model's back end per run."""
    return (
        f"- {runs} compiles of the back end and simulations in {seconds:.0f} s "
        f"({os.cpu_count()} CPUs, {min(workers, models)} worker(s)); the front end "
        "(import, quantization) once per model"
    )


def consistent_overrides(arch: Any, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``overrides`` of ``arch`` plus what keeps its V-f table valid (no more voltage for a
    lower clock): a supply set below a slower point's lowers that point to it, one set
    above a faster point's raises that point to it; the supplies set stay as set.

    >>> from aipusim.arch import load_arch
    >>> consistent_overrides(load_arch(), {"clock.vf_points[2].voltage_v": 0.75})
    {'clock.vf_points[2].voltage_v': 0.75, 'clock.vf_points[1].voltage_v': 0.75}
    """
    points = arch.clock.vf_points
    slowest_first = sorted(range(len(points)), key=lambda i: points[i].max_hz)

    def key(i: int) -> str:
        return f"clock.vf_points[{i}].voltage_v"

    volts = {i: overrides.get(key(i), points[i].voltage_v) for i in slowest_first}
    fixed = {i for i in slowest_first if key(i) in overrides}
    for slow, fast in itertools.pairwise(slowest_first):
        if volts[fast] < volts[slow] and fast not in fixed:
            volts[fast] = volts[slow]
    for fast, slow in itertools.pairwise(slowest_first[::-1]):
        if volts[slow] > volts[fast] and slow not in fixed:
            volts[slow] = volts[fast]
    out = dict(overrides)
    for i in slowest_first:
        if i not in fixed and volts[i] != points[i].voltage_v:
            out[key(i)] = volts[i]
    return out


@dataclass
class StudyResult:
    """What a study wrote and concluded."""

    study: str
    output_dir: Path
    table: pd.DataFrame
    conclusions: list[str]
    files: list[Path]

    def to_dict(self) -> dict[str, Any]:
        return {
            "study": self.study,
            "output_dir": str(self.output_dir),
            "readme": str(self.output_dir / "README.md"),
            "files": [str(p) for p in self.files],
            "conclusions": self.conclusions,
        }


def write_readme(
    out: Path, title: str, intro: str, info: RunInfo, conclusions: list[str], body: list[str]
) -> Path:
    """``README.md``: title, what was run, the conclusions, then the tables and figures."""
    lines = [
        f"# {title}",
        "",
        intro,
        "",
        *info.markdown(),
        "## Conclusions (computed from the tables below)",
        "",
        *[f"- {c}" for c in conclusions],
        "",
        *body,
    ]
    path = out / "README.md"
    write_text(path, "\n".join(lines).rstrip() + "\n")
    write_text(out / STUDY_MARKER, json.dumps(info.to_dict(), indent=2) + "\n")
    return path
