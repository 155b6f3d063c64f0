"""The main job: compile -> simulate -> profile one model into one output folder.

The folder is built beside its final place and renamed at the end, so a failed or
interrupted run leaves nothing half written. It holds the compile artifacts
(``compiled_model/`` and friends), the trace, the power timeline, ``report.md``, the
tables and the plots.

>>> from aipusim.run.job import resolve_model
>>> resolve_model("tiny_cnn").name
'tiny_cnn'
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from aipusim import zoo
from aipusim.api.functional_check import attach_check, chip_inputs
from aipusim.arch import load_arch
from aipusim.base.atomic import check_replaceable, swap_into_place, temp_folder_beside
from aipusim.base.errors import ConfigError, ZooError
from aipusim.base.fileio import check_output, folder_error, reporting
from aipusim.compiler.driver import compile_model
from aipusim.compiler.request import CompileRequest
from aipusim.isa.program import load_program_tables
from aipusim.run.config_text import config_changes
from aipusim.run.progress import StageHook, compile_stage
from aipusim.run.report import write_run_report
from aipusim.run.result import RunResult

#: Trace levels a run records by default: frames, layer begin/end, compute and memory
#: tasks. Token lines ([T]) are left out because each trace line costs control-core cycles.
DEFAULT_RUN_LEVELS = ("B", "PB", "PE", "K", "M")
#: Marker file that says a folder was written by `run` (and may be replaced by a rerun).
RUN_MARKER = "run.json"
TRACE_NAME = "trace.txt"


@dataclass(frozen=True)
class ModelSource:
    """A model to run: a zoo name (built on demand) or an ONNX file."""

    #: What the model is called everywhere (`model_name`).
    name: str
    path: Path | None = None  # None: a zoo model
    input_size: int | None = None

    @property
    def slug(self) -> str:
        """``name`` fit for a file or folder name (a graph name may hold any character)."""
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", self.name).strip(".") or "model"

    def materialize(self, folder: Path) -> Path:
        """The ONNX file of this model, building a zoo model into ``folder`` if needed."""
        if self.path is not None:
            return self.path

        target = folder / f"{self.name}.onnx"
        onnx.save(zoo.build(self.name, input_size=self.input_size), target)
        return target


def model_name(model: str | Path) -> str:
    """What a model is called by run, the studies and the reports: a zoo model's name; for
    an ONNX file, its graph's name, or the file's stem when the graph has none (or the file
    cannot be read here; reading it fails later with its own message).

    >>> model_name("resnet50")
    'resnet50'
    """
    text = str(model)
    if text in zoo.names() or not Path(text).is_file():
        return text

    try:
        graph_name = onnx.load(text, load_external_data=False).graph.name
    except Exception:  # not ONNX: the import names the problem when it reads the file
        graph_name = ""
    return graph_name or Path(text).stem


def resolve_model(model: str | Path, input_size: int | None = None) -> ModelSource:
    """An existing ``.onnx`` path, or a zoo name; anything else names what is valid."""
    text = str(model)
    path = Path(text)
    if path.is_file():
        if input_size is not None:
            raise ConfigError("--input-size applies to zoo models only; an ONNX file has its own")
        return ModelSource(model_name(path), path.resolve())
    if text in zoo.names():
        return ModelSource(text, None, input_size)
    if path.suffix.lower() == ".onnx" or os.sep in text:
        raise ConfigError(f"model file must exist, not {text!r}")
    raise ZooError(
        f"MODEL must be an ONNX file or a zoo model ({', '.join(zoo.names())}), not {text!r}"
    )


def prepare_output_dir(out: Path, marker: str = RUN_MARKER, command: str = "aipusim run") -> None:
    """Refuse an output folder that would lose someone else's files, or cannot be written:
    a folder is replaced whole, so it must be empty or hold ``marker`` (an earlier output
    of ``command``)."""
    check_output(out, folder=True)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"output folder must be a folder, not the file {str(out)!r}")
    if out.is_dir() and any(out.iterdir()) and not (out / marker).is_file():
        raise ConfigError(
            f"output folder {str(out)!r} must be empty or an earlier `{command}` folder; "
            "it holds other files"
        )
    check_replaceable(out)


def run_model(
    source: ModelSource,
    config: Any,
    output_dir: Path,
    *,
    frames: int = 8,
    levels: Sequence[str] = DEFAULT_RUN_LEVELS,
    arch_path: Path | None = None,
    drop_percentile: float | None = None,
    stage: StageHook | None = None,
    input_shape: tuple[int, ...] | None = None,
    keep_input_model: bool = False,
    check: bool = False,
    bands: Callable[[Path, Callable[[int], None]], Any] | None = None,
    top: int | None = None,
    sort: str | None = None,
    quantization_cache: bool = True,
    config_base: str = "the defaults",
) -> RunResult:
    """Compile, simulate and profile ``source``; write everything to ``output_dir``.

    ``stage(name, total)`` is called when a stage starts and returns a function that takes
    progress steps (the CLI hangs progress bars on it). ``input_shape`` fixes the dynamic
    dimensions of an ONNX model's input (``--input-shape``). The folder holds no copy of
    the ONNX model (``compile/input_model/source.json`` and ``run.json`` say which it was:
    path, size and SHA-256, or the zoo name) unless ``keep_input_model``. ``check`` also
    executes the run on data (a seeded input; the same cycles) and compares the outputs
    with the int8 reference (`RunResult.check`, report.md, ``run.json``). ``bands(compiled_dir,
    step)``: the spread of the headline figures, attached to the result as ``sim.bands``
    (``run --uncertainty N`` passes `aipusim.calibrate.uncertainty.bands`; ``step(1)`` per sample).
    ``top``/``sort``: the slowest-layers table shows the ``top``
    layers (default 10) by ``sort`` (busy or span time); ``plots/layers.png`` shows every
    layer in network order, or with either given, the ``top`` (default all) by ``sort``.
    ``quantization_cache=False`` calibrates again instead of reusing the quantization
    cache (``--no-cache``). The result times every part (`RunResult`). ``config_base``:
    where ``config`` started (`aipusim.api.sources.base_label`), as report.md, ``run.json``
    and the printout say.
    """
    entered = time.perf_counter()
    # lazy: loads numba, pyarrow, simpy, tqdm, not otherwise loaded here
    from aipusim.profiler import layer_table, load_trace, plot_all, unit_table, write_table
    from aipusim.simulator import simulate
    from aipusim.simulator.budget import check_frames_bound

    if frames < 1:
        raise ConfigError(f"--frames must be an integer >= 1, not {frames}")
    check_frames_bound(frames, flag="--frames")
    prepare_output_dir(output_dir)
    arch = load_arch(arch_path)
    hook = stage or (lambda _name, _total: lambda _n: None)
    with reporting(output_dir):
        tmp = temp_folder_beside(output_dir)
    scratch: Path | None = None
    try:
        # a zoo model is built outside the output folder: only --keep-input-model keeps a copy
        scratch = Path(tempfile.mkdtemp(prefix="aipusim-model-"))
        model_path = source.materialize(scratch)
        t0 = time.perf_counter()
        prepare_s = t0 - entered
        compile_model(
            CompileRequest(
                model_path=model_path,
                output_dir=tmp / "compile",
                config=config,
                arch_path=arch_path,
                input_shape=input_shape,
                cli_args={"input": str(model_path), "output": str(output_dir)},
                keep_input_model=keep_input_model,
                quantization_cache=quantization_cache,
            ),
            after_pass=compile_stage(hook),
        )
        compile_s = time.perf_counter() - t0
        shutil.rmtree(scratch, ignore_errors=True)

        compiled = tmp / "compile" / "compiled_model"
        program, tasklists = load_program_tables(compiled)
        inputs, how = chip_inputs(compiled, program=program) if check else (None, "")
        step = hook("simulate", frames * max(1, program.replicas))
        t0 = time.perf_counter()
        sim = simulate(
            program,
            tasklists,
            arch=arch,
            frames=frames,
            levels=list(levels),
            trace_path=tmp / TRACE_NAME,
            progress=step,
            functional=check,
            inputs=inputs,
            constants=compiled if check else None,
        )
        simulate_s = time.perf_counter() - t0
        verdict = attach_check(sim, compiled, inputs, how) if check else None
        if bands is not None:
            sim.bands = bands(tmp / "compile", hook("uncertainty", None))

        step = hook("profile", 3)
        t0 = time.perf_counter()
        percent = config.profiling_drop_percentile if drop_percentile is None else drop_percentile
        trace = load_trace(tmp / TRACE_NAME)
        layers = layer_table(trace, percent)
        units = unit_table(trace)
        write_table(layers, tmp / "layers.csv")
        write_table(units, tmp / "units.csv")
        step(1)
        plots = plot_all(
            trace,
            tmp / "plots",
            percent,
            peak_macs_per_cycle=arch.mvm.macs_per_cycle,
            ddr_bytes_per_cycle=arch.ddr_bw_bytes_per_cycle(program.frequency_hz),
            table=layers,
            layer_top=top,
            layer_sort=sort,
            weight_load_bytes_per_cycle=arch.mvm.weight_load_bw_bytes_per_cycle,
            l1_fill_bytes_per_cycle=arch.dma.channel_bw_bytes_per_cycle,
        )
        step(1)
        profile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = RunResult(
            source.name,
            output_dir,
            compile_s,
            simulate_s,
            sim,
            layers,
            units,
            [output_dir / p.relative_to(tmp) for p in plots],
            check=verdict,
            top=top if top is not None else 10,
            sort=sort or "busy",
            config_base=config_base,
            config_changes=config_changes(config),
            levels=list(levels),
            prepare_seconds=prepare_s,
            profile_seconds=profile_s,
        )
        write_run_report(result, tmp / "report.md", config=config, arch=arch, levels=levels)
        summary = {**run_summary(result), "input_model": input_record(source, tmp / "compile")}
        (tmp / RUN_MARKER).write_text(json.dumps(summary, indent=2) + "\n")
        step(1)
        with reporting(output_dir, "replace"):
            swap_into_place(tmp, output_dir)
        result.write_seconds = time.perf_counter() - t0
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise folder_error(exc, tmp, output_dir) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return result


def input_record(source: ModelSource, compiled: Path) -> dict[str, Any]:
    """Which model a run compiled: a zoo name and size, or the ONNX file's path, size and
    SHA-256 (from the compile's ``input_model/source.json``; with a kept copy, its path)."""
    if source.path is None:
        return {"zoo": source.name, "input_size": source.input_size}
    ref = compiled / "input_model" / "source.json"
    if ref.is_file():
        return json.loads(ref.read_text())
    return {"path": str(source.path), "copy": "compile/input_model/fp32_model.onnx"}


def run_summary(result: RunResult) -> dict[str, Any]:
    """The run's headline figures as plain data (``run.json``, ``aipusim run --json``)."""
    sim = result.sim
    return {
        "model": result.model,
        "output_dir": str(result.output_dir),
        "compile_s": round(result.compile_seconds, 3),
        "simulate_s": round(result.simulate_seconds, 3),
        "config": {
            "base": result.config_base,
            "changes": result.config_changes,
            "trace_levels": result.levels,
        },
        **json.loads(sim.to_json()),
        "slowest_layers": json.loads(result.slowest_layers().to_json(orient="records")),
    }
