"""`compile_model`: run the pipeline for one `CompileRequest` and write its artifacts.

The output folder is written completely or not at all: everything goes into a temporary
folder beside it, which is renamed into place at the end. On failure the temporary folder
is removed and only ``compilation_report.json`` (status code, failing stage, message) and
``compilation_log.txt`` are written to the output folder, if it can be written; when the
output folder holds an earlier good compile, that compile is kept untouched and the
failure's report and log go to ``<output>.failed/`` beside it (`failure_dir`; the
exception carries a note saying so), which the next successful compile removes.

Artifacts (reference ``compiler-cli.txt``): ``cli_args.json``, ``conf.json``,
``input_model/fp32_model.onnx``, ``quantized_model/`` (when the quantizer ran),
``preprocess.onnx`` / ``postprocess.onnx`` (host graphs of the cleaner), the cleaner's
dumps, ``ir/<NN>_<pass>.txt`` for ``dump_ir``, ``pass_dependency_graph.json`` with
``trace_tvm_passes``, ``compilation_report.json`` and ``compilation_log.txt``; on failure
with ``save_error_artifact``, ``error_artifact.zip``.

>>> from aipusim.compiler.driver import compile_model  # doctest: +SKIP
>>> result = compile_model(request)  # doctest: +SKIP
>>> result.status  # doctest: +SKIP
'SUCCEEDED'
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import logging
import shutil
import time
import traceback
import zipfile
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from aipusim.base import __version__
from aipusim.base.atomic import check_replaceable, swap_into_place, temp_folder_beside
from aipusim.base.errors import (
    AipuSimError,
    CompilerInternalError,
    ConfigError,
    FileAccessError,
)
from aipusim.base.fileio import check_name, check_output, folder_error, reporting
from aipusim.compiler.backend.emit.files import COMPILED_DIR, verify_crcs
from aipusim.compiler.export import save_onnx
from aipusim.compiler.importer import external_files, file_identity, read_model
from aipusim.compiler.ir import Graph
from aipusim.compiler.memory_estimate import DEFAULT_REMEDY, check_compile_memory
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.pipeline import (
    IMPORT,
    INTERNAL_ERROR,
    PIPELINE,
    Pass,
    PassRecord,
    PipelineResult,
    Stage,
    pass_names,
    run_pipeline,
)

log = logging.getLogger("aipusim.compiler.driver")

REPORT_NAME = "compilation_report.json"
ERROR_ARTIFACT = "error_artifact.zip"
LOG_NAME = "compilation_log.txt"
SUCCEEDED = "SUCCEEDED"
#: Status of a compilation ended on purpose after the pass its ``stop_after`` names.
STOPPED = "STOPPED"
#: ONNX protobufs cannot exceed 2 GiB; larger models are saved with external data.
_PROTO_LIMIT_BYTES = (1 << 31) - 1


@dataclass(frozen=True)
class CompileResult:
    """What a successful compilation produced."""

    status: str
    output_dir: Path
    #: The AIPU (core) graph after the last pass that ran.
    graph: Graph
    host_graphs: Mapping[str, Graph]
    records: tuple[PassRecord, ...]
    #: Paths (relative to ``output_dir``) of the files written.
    files: tuple[str, ...]
    results: Mapping[str, Any] = field(default_factory=dict)

    @property
    def pass_seconds(self) -> dict[str, float]:
        """Wall time of each pass that ran."""
        return {r.name: r.seconds for r in self.records if r.ran}


class _Failure(Exception):
    """Carries the stage of a failure outside the pipeline (setup, artifact writing)."""


def _prepare_target(out: Path, remove_output_dir: bool) -> None:
    """Refuse output folders we must not replace."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"output dir `{out}` must be a folder, not a file")
    if out.is_dir() and any(out.iterdir()):
        ours = (out / REPORT_NAME).is_file()
        if not (ours or remove_output_dir):
            raise ConfigError(
                f"output dir `{out}` must be empty or an earlier compile output (set "
                "remove_output_dir to replace it), not a folder with other files"
            )


def _safe_relpath(name: str, what: str) -> Path:
    rel = Path(name)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise ConfigError(f"{what} must be a file name inside the output dir, not `{name}`")
    return rel


def _save_onnx(model: onnx.ModelProto, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if model.ByteSize() > _PROTO_LIMIT_BYTES:
        onnx.save(model, str(path), save_as_external_data=True, location=f"{path.name}.data")
    else:
        onnx.save(model, str(path))


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def _graph_summary(graph: Graph) -> dict[str, Any]:
    return {
        "name": graph.name,
        "nodes": len(graph.nodes),
        "ops": graph.ops(),
        "inputs": {n: list(graph.shape(n)) for n in graph.inputs},
        "outputs": {n: list(graph.shape(n)) for n in graph.outputs},
        "constant_bytes": int(sum(a.nbytes for a in graph.constants.values())),
    }


def _pass_trace(records: Iterable[PassRecord]) -> dict[str, Any]:
    """pass_dependency_graph.json: each pass with start/end (ms) and its parent stage."""
    passes = []
    stages: dict[str, dict[str, float]] = {}
    for r in records:
        if not r.ran:
            continue
        start_ms, end_ms = r.start_s * 1e3, (r.start_s + r.seconds) * 1e3
        passes.append({"name": r.name, "parent": r.stage, "start_ms": start_ms, "end_ms": end_ms})
        span = stages.setdefault(r.stage, {"start_ms": start_ms, "end_ms": end_ms})
        span["start_ms"] = min(span["start_ms"], start_ms)
        span["end_ms"] = max(span["end_ms"], end_ms)
    nodes = [{"name": "compile", "parent": None}]
    nodes += [{"name": s, "parent": "compile", **span} for s, span in stages.items()]
    return {"nodes": nodes + passes}


def _write_quantized(tmp: Path, ctx: PassContext) -> str | None:
    found = ctx.results.get("quantize")
    if not found:
        return None
    from aipusim.compiler.quant import accuracy_with_advice, write_quantized_model

    cfg = ctx.config
    # The accuracy run executes the float model in onnx.reference (slow on big models):
    # it is what quantize_only is for, and quantization_debug asks for it explicitly. Both
    # report every layer's SQNR, and below the target the limiting layers and a scheme.
    if str(cfg.compiler_mode) == "quantize_only" or cfg.quantization_debug:
        report = accuracy_with_advice(
            found["float_graph"],
            found["qgraph"],
            found["calibration"],
            cfg,
            arch=ctx.get_arch(),
        )
        ctx.results["accuracy"] = report
    else:
        report = {
            "evaluated": False,
            "reason": "accuracy is measured with compiler_mode quantize_only or quantization_debug",
        }
    manifest = write_quantized_model(
        tmp / "quantized_model", found["qgraph"], report, core=found.get("files")
    )
    return str(manifest.relative_to(tmp))


#: The graph of the last whole ONNX file (no external data) this process imported:
#: ``(the file's identity and the import's arguments, the graph)``. A `Graph` never
#: changes, so a sweep worker compiling the same file again starts its passes from it
#: instead of parsing and importing the file again (`_import_key`).
_last_import: tuple[tuple[object, ...], Graph] | None = None


def _import_key(request: Any, ctx: PassContext) -> tuple[object, ...] | None:
    """What the import of ``request``'s model depends on: the file (`file_identity`) and
    the path given, the input shape, the layout and the opset; None for a quantized-model
    manifest."""
    path = Path(request.model_path)
    identity = None if path.suffix.lower() == ".json" else file_identity(path)
    if identity is None:
        return None
    shape = request.input_shape
    if isinstance(shape, Mapping):
        shape = tuple(sorted((str(k), tuple(v)) for k, v in shape.items()))
    # (the path as given too: a graph without a name is named after it)
    return (identity, str(path), shape, ctx.input_layout, int(ctx.config.onnx_opset_version))


def _load_input(
    path: Path, tmp: Path, keep: bool = True, import_key: tuple[object, ...] | None = None
) -> tuple[Any, str | None, str | None, bool]:
    """(model for `run_pipeline`, pass it starts after, copied quantized-model manifest,
    whether its import may be remembered under ``import_key``).

    An ONNX model is copied to ``input_model/`` (with ``keep``; else its path, size and
    SHA-256 go to ``input_model/source.json``); a ``quantized_model_manifest.json`` of a
    quantize-only run is loaded as its quantized graph (the passes up to ``quantize`` are
    not run again) and its folder is copied to ``quantized_model/``. A file this process
    imported last with the same ``import_key`` gives the graph it imported to.
    """
    if Path(path).suffix.lower() == ".json":
        from aipusim.compiler.quant import read_quantized_model

        qgraph = read_quantized_model(path)
        shutil.copytree(Path(path).parent, tmp / "quantized_model")
        return qgraph, "quantize", f"quantized_model/{Path(path).name}", False
    if import_key is not None and _last_import is not None and _last_import[0] == import_key:
        # (a whole-model file: its bytes are the model)
        proto: Any = _last_import[1]
        external = False
    else:
        # large external tensors stay in their files: the import maps them (`read_model`)
        proto, external = read_model(path, load_external=False)
    if not keep:
        _write_json(tmp / "input_model" / SOURCE_REF, _source_ref(Path(path)))
        return proto, None, None, not external
    copy = tmp / "input_model" / "fp32_model.onnx"
    copy.parent.mkdir(parents=True, exist_ok=True)
    # the file's bytes (and its external-data files, at the same places beside it):
    # many times faster than serializing the proto again, and the weights are not read
    # into memory
    shutil.copyfile(path, copy)
    for location in external_files(proto) if external else ():
        target = copy.parent / location
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(path).parent / location, target)
    return proto, None, None, not external


#: What ``input_model/`` holds when the model is not copied.
SOURCE_REF = "source.json"


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes (hex), read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _source_ref(path: Path) -> dict[str, Any]:
    """Where the compiled model came from: its path, size and SHA-256."""
    return {
        "path": str(Path(path).resolve()),
        "size_bytes": Path(path).stat().st_size,
        "sha256": file_sha256(Path(path)),
    }


def _files_under(root: Path) -> tuple[str, ...]:
    return tuple(sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()))


#: ``extra`` of log records meant for compilation_log.txt only.
_FILE_ONLY = {"aipusim_file_only": True}


class _Forward(logging.Handler):
    """Passes records at the user's verbosity on to the root logger's handlers (stderr)."""

    def emit(self, record: logging.LogRecord) -> None:
        if not getattr(record, "aipusim_file_only", False):
            logging.getLogger().callHandlers(record)


class _CompileLog:
    """Collects every INFO+ record of ``aipusim.*`` into compilation_log.txt during a
    compile, without changing what the user sees on stderr (their ``-v`` level)."""

    def __init__(self, path: Path) -> None:
        self.logger = logging.getLogger("aipusim")
        self.saved = (self.logger.level, self.logger.propagate)
        effective = self.logger.getEffectiveLevel()
        self.file = logging.FileHandler(path, encoding="utf-8")
        self.file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self.handlers: list[logging.Handler] = [self.file]
        # records stop here instead of propagating; the ones the user asked for go on
        self.forward = _Forward(level=effective)
        self.handlers.append(self.forward)
        self.logger.propagate = False
        self.logger.setLevel(min(effective, logging.INFO))
        for h in self.handlers:
            self.logger.addHandler(h)

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        for h in self.handlers:
            self.logger.removeHandler(h)
        self.file.close()
        self.logger.setLevel(self.saved[0])
        self.logger.propagate = self.saved[1]


def compile_model(
    request: Any,
    *,
    dump_ir: Collection[str] = (),
    passes: Iterable[Pass] | None = None,
    after_pass: Callable[[str, Graph], None] | None = None,
) -> CompileResult:
    """Compile ``request`` (a `CompileRequest`) and write its output folder.

    ``dump_ir`` names passes (or ``all``) whose IR is written to ``ir/``; ``passes``
    replaces the pass list (tests); ``after_pass(name, graph)`` runs after every pass.
    Raises the `AipuSimError` that stopped the compilation after writing the failure
    report; an unexpected exception (a compiler bug) is reported the same way and re-raised.
    """
    config = request.config
    out = Path(request.output_dir)
    passes = tuple(PIPELINE if passes is None else passes)
    dump_ir = (*dump_ir, *getattr(request, "dump_after", ()))
    asked_stop = getattr(request, "stop_after", None)
    check_name(out)
    _prepare_target(out, bool(config.remove_output_dir))
    check_output(out, folder=True)
    check_replaceable(out, "output dir")
    with reporting(out, "create"):
        tmp = temp_folder_beside(out)
    compile_log = _CompileLog(tmp / LOG_NAME)
    ctx = PassContext(
        config,
        input_layout=str(getattr(request, "input_data_layout", None) or "NCHW"),
        request=request,
        write_dir=tmp,
    )
    stage = "initialize"
    t0 = time.perf_counter()
    try:
        log.info("aipusim %s compiling %s -> %s", __version__, request.model_path, out)
        _write_json(tmp / "cli_args.json", dict(request.cli_args))
        _write_json(tmp / "conf.json", config.to_dict())
        arch_path = getattr(request, "arch_path", None)
        if arch_path is not None:
            from aipusim.arch import load_arch

            ctx.arch = load_arch(arch_path)
        stage = IMPORT
        import_key = _import_key(request, ctx)
        model, start_after, copied_manifest, rememberable = _load_input(
            request.model_path, tmp, getattr(request, "keep_input_model", True), import_key
        )
        if not rememberable:
            import_key = None
        quantize_only = str(config.compiler_mode) == "quantize_only"
        stop_after = "quantize" if quantize_only and "quantize" in pass_names(passes) else None
        if asked_stop is not None:
            if asked_stop not in pass_names(passes):
                raise ConfigError(
                    f"stop_after must name a pass ({', '.join(pass_names(passes))}), "
                    f"not {asked_stop}"
                )
            stop_after = _earlier(asked_stop, stop_after, passes)
        # quantize_only is the vendor's own early end (SUCCEEDED); any other is STOPPED
        stopped = stop_after is not None and not (quantize_only and stop_after == "quantize")
        result: PipelineResult = run_pipeline(
            model,
            ctx,
            input_shape=request.input_shape,
            passes=passes,
            dump_after=dump_ir,
            stop_after=stop_after,
            after_pass=_remembering_import(
                _with_memory_check(
                    after_pass, start_after is None, getattr(request, "memory_remedy", None)
                ),
                import_key,
            ),
            source_name=str(request.model_path),
            start_after=start_after,
            model_checked=True,
            external_dir=Path(request.model_path).parent,
        )
        stage = "quantize"
        quant_manifest = _write_quantized(tmp, ctx) or copied_manifest
        stage = "write_artifacts"
        for name, content in ctx.files.items():
            path = tmp / _safe_relpath(name, "an artifact path")
            if isinstance(content, onnx.ModelProto):
                _save_onnx(content, path)
            elif isinstance(content, Graph):
                save_onnx(content, path)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content)
        for i, name in enumerate(pass_names(passes)):
            if name in result.dumps:
                (tmp / "ir").mkdir(exist_ok=True)
                (tmp / "ir" / f"{i:02d}_{name}.txt").write_text(result.dumps[name] + "\n")
        if config.trace_tvm_passes:
            _write_json(tmp / "pass_dependency_graph.json", _pass_trace(result.records))
        stage = "write_artifacts"
        if stopped:
            status = STOPPED
        else:
            _check_written(tmp, quantize_only)
            status = SUCCEEDED
        report = _report(status, stop_after if stopped else None, "", result.records,
                         time.perf_counter() - t0)  # fmt: skip
        report["graph"] = _graph_summary(result.graph)
        report["host_graphs"] = {k: _graph_summary(g) for k, g in ctx.host_graphs.items()}
        if quant_manifest:
            report["quantized_model"] = quant_manifest
        if "quantize" in ctx.results:
            # "cached" or "computed" (calibrated in this compile), see compiler.quant.cache
            report["quantization"] = ctx.results["quantize"]["cache"]
        if "accuracy" in ctx.results:
            report["accuracy"] = ctx.results["accuracy"]
        _write_json(tmp / REPORT_NAME, report)
        if stopped:
            log.info("compilation stopped after %s as asked", stop_after)
        else:
            log.info("compilation succeeded in %.2f s", time.perf_counter() - t0)
        compile_log.flush()
        files = _files_under(tmp)
        stage = "swap"
        swap_into_place(tmp, out)
        # (a failure report kept beside the earlier compile describes a superseded attempt)
        shutil.rmtree(failure_dir(out), ignore_errors=True)
    except BaseException as caught:
        exc = caught
        if isinstance(caught, OSError) and not isinstance(caught, AipuSimError):
            # a file the compile could not read or write: one line naming it, not a bug
            exc = folder_error(caught, tmp, out)
        failed_stage = ctx.failed_pass or stage
        status = (
            INTERRUPTED
            if isinstance(exc, KeyboardInterrupt)
            else ctx.failed_status or _status_for(exc, failed_stage)
        )
        if isinstance(exc, KeyboardInterrupt):
            message = f"interrupted (Ctrl-C) in {failed_stage}"
        elif isinstance(exc, AipuSimError):
            message = str(exc)
        else:
            message = (
                f"internal error in pass `{failed_stage}`: {type(exc).__name__}: {exc} "
                f"(the traceback is in {LOG_NAME})"
            )
        # file only: the CLI prints the error line itself (and Python the traceback of a bug)
        detail = (
            message if isinstance(exc, AipuSimError | KeyboardInterrupt) else traceback.format_exc()
        )
        log.error("compilation failed in %s: %s", failed_stage, detail, extra=_FILE_ONLY)
        compile_log.flush()
        report = _report(status, failed_stage, message, ctx.records, time.perf_counter() - t0)
        artifact = None
        if config.save_error_artifact:
            artifact = _error_artifact(tmp, ctx, report, bool(config.randomize_onnx_model))
            report["error_artifact"] = ERROR_ARTIFACT
        kept = _holds_good_compile(out)
        where = _write_failure(tmp, failure_dir(out) if kept else out, report, artifact)
        if kept and where is not None:
            exc.add_note(
                f"the earlier compile in {out} is kept; this failure's report is in {where}"
            )
        if exc is not caught:
            raise exc from None
        if isinstance(exc, Exception) and not isinstance(exc, AipuSimError):
            # A bug, not bad input: one line for the user (exit status 1), the
            # traceback in the compile log; never a silent success.
            internal = CompilerInternalError(message)
            for note in getattr(exc, "__notes__", ()):
                internal.add_note(note)
            raise internal from exc
        raise
    finally:
        compile_log.close()
    return CompileResult(
        status=status,
        output_dir=out,
        graph=result.graph,
        host_graphs=dict(ctx.host_graphs),
        records=tuple(result.records),
        files=files,
        results=dict(ctx.results),
    )


#: Status of a compile stopped by Ctrl-C (or SIGTERM turned into KeyboardInterrupt).
INTERRUPTED = "INTERRUPTED"


def _with_memory_check(
    after_pass: Callable[[str, Graph], None] | None, calibrates: bool, remedy: str | None
) -> Callable[[str, Graph], None] | None:
    """``after_pass`` preceded, right after the import, by the memory estimate of the
    compile (when it will calibrate: not for an already quantized model); a refusal
    suggests ``remedy`` (None: `DEFAULT_REMEDY`)."""
    if not calibrates:
        return after_pass

    def hook(name: str, graph: Graph) -> None:
        if name == IMPORT:
            check_compile_memory(graph, remedy=remedy or DEFAULT_REMEDY)
        if after_pass is not None:
            after_pass(name, graph)

    return hook


def _remembering_import(
    after_pass: Callable[[str, Graph], None] | None, import_key: tuple[object, ...] | None
) -> Callable[[str, Graph], None] | None:
    """``after_pass`` that also keeps the imported graph as `_last_import` under
    ``import_key`` (None: nothing kept)."""
    if import_key is None:
        return after_pass

    def hook(name: str, graph: Graph) -> None:
        global _last_import
        if name == IMPORT:
            _last_import = (import_key, graph)
        if after_pass is not None:
            after_pass(name, graph)

    return hook


def _status_for(exc: BaseException, stage: str) -> str:
    """The status of a failure outside the passes (setup, artifact writing)."""
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPTED
    if isinstance(exc, AipuSimError) and not isinstance(exc, FileAccessError):
        return exc.status
    if not isinstance(exc, FileAccessError | OSError):
        return INTERNAL_ERROR  # a bug of aipusim, not the environment
    # a file the compile could not read or write: the stage it happened in
    if stage == "initialize":
        return "INITIALIZE_CLI_ERROR"
    if stage == IMPORT:
        return Stage.IMPORT.status
    if stage == "quantize":
        return Stage.QUANTIZE.status
    return "TOP_LEVEL_LOWER_ERROR"


def _earlier(a: str, b: str | None, passes: tuple[Pass, ...]) -> str:
    """Of two pass names, the one that comes first in the pass list."""
    if b is None:
        return a
    names = pass_names(passes)
    return a if names.index(a) <= names.index(b) else b


def _check_written(tmp: Path, quantize_only: bool) -> None:
    """A compile succeeds only with its result on disk: ``compiled_model/`` whose files
    match the CRCs its ``model.json`` records, or for ``quantize_only`` the quantized
    model."""
    if quantize_only:
        if not (tmp / "quantized_model").is_dir():
            raise CompilerInternalError("quantize_only wrote no quantized_model/ folder")
        return
    compiled = tmp / COMPILED_DIR
    if not (compiled / "model.json").is_file():
        raise CompilerInternalError(
            "the pass list ended without writing compiled_model/model.json (its last pass "
            "must be emit)"
        )
    verify_crcs(compiled)


def _report(
    status: str, stage: str | None, message: str, records: list[PassRecord], seconds: float
) -> dict[str, Any]:
    return {
        "status": status,
        "stage": stage,
        "message": message,
        "aipusim_version": __version__,
        "seconds": round(seconds, 4),
        "passes": [
            {
                "name": r.name,
                "stage": r.stage,
                "ran": r.ran,
                "seconds": round(r.seconds, 4),
                "note": r.note,
            }
            for r in records
        ],
    }


def randomized(graph: Graph, seed: int = 0) -> Graph:
    """``graph`` with every float constant replaced by seeded noise of the same shape, type
    and spread (an error artifact must not carry the user's weights)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    consts = {}
    for name, a in graph.constants.items():
        if a.dtype.kind == "f" and a.size:
            spread = float(np.std(a)) or 1.0
            consts[name] = (rng.standard_normal(a.shape) * spread).astype(a.dtype)
        else:
            consts[name] = a
    return dataclasses.replace(graph, constants=consts)


def _error_artifact(
    tmp: Path, ctx: PassContext, report: dict[str, Any], randomize: bool
) -> bytes | None:
    """error_artifact.zip: report, log, config, and the graph as it was when the failing
    pass started (IR text and ONNX, weights randomised with ``randomize_onnx_model``)."""
    from aipusim.compiler.export import to_onnx
    from aipusim.compiler.ir import dump

    buf = io.BytesIO()
    try:
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(REPORT_NAME, json.dumps(report, indent=2, default=str))
            for name in (LOG_NAME, "conf.json", "cli_args.json"):
                if (tmp / name).is_file():
                    zf.write(tmp / name, name)
            graph = ctx.last_graph
            if graph is not None:
                graph = randomized(graph) if randomize else graph
                zf.writestr("last_graph.txt", dump(graph) + "\n")
                zf.writestr("last_graph.onnx", to_onnx(graph).SerializeToString())
    except Exception:  # the artifact is a courtesy; the real error is the one to report
        log.warning("cannot build the error artifact", exc_info=True, extra=_FILE_ONLY)
        return None
    return buf.getvalue()


def failure_dir(out: Path) -> Path:
    """Where a failed compile into ``out`` writes its report when ``out`` holds an earlier
    good compile, which it keeps: ``<out>.failed/`` beside it."""
    return out.with_name(f"{out.name}.failed")


def _holds_good_compile(out: Path) -> bool:
    """Whether ``out`` holds a compile that ended as asked (SUCCEEDED or STOPPED): a failed
    recompile keeps it rather than replace the user's last good build with a report."""
    try:
        data = json.loads((out / REPORT_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("status") in (SUCCEEDED, STOPPED)


def _write_failure(
    tmp: Path, target: Path, report: dict[str, Any], artifact: bytes | None = None
) -> Path | None:
    """Replace ``target`` with a folder holding only the report and the log (and the error
    artifact when asked for), built aside and swapped in like a success: no file of an
    earlier failure stays beside this one. The half-built folder is dropped. Returns
    ``target``, or None when it cannot be written (a warning says why)."""
    log_text = ""
    with contextlib.suppress(OSError):
        log_text = (tmp / LOG_NAME).read_text(encoding="utf-8")
    shutil.rmtree(tmp, ignore_errors=True)
    failed = None
    try:
        failed = temp_folder_beside(target)
        _write_json(failed / REPORT_NAME, report)
        (failed / LOG_NAME).write_text(log_text, encoding="utf-8")
        if artifact is not None:
            (failed / ERROR_ARTIFACT).write_bytes(artifact)
        swap_into_place(failed, target)
    except OSError as exc:
        if failed is not None:
            shutil.rmtree(failed, ignore_errors=True)
        log.warning("cannot write the failure report to %s: %s", target, exc.strerror or exc)
        return None
    return target


__all__ = [
    "ERROR_ARTIFACT",
    "INTERRUPTED",
    "LOG_NAME",
    "REPORT_NAME",
    "SOURCE_REF",
    "STOPPED",
    "SUCCEEDED",
    "CompileResult",
    "compile_model",
    "failure_dir",
    "randomized",
]
