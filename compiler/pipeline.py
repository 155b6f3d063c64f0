"""The compiler as a named list of passes, top to bottom in one place (docs/architecture.md §5).

``import`` turns the ONNX model into a `Graph`. The front end (`FRONT`) is passes
``(Graph, PassContext) -> Graph``; the back end (`BACK`) takes the graph through the typed
stages of `aipusim.compiler.backend.common.ir` (``lower``: Graph -> Lowered, ``tile``: Lowered ->
Tiled, ... ``emit``: Estimated -> Emitted). A pass with a ``knob`` runs only when that
`CompilerConfig` flag is true; no pass is ever skipped for any other reason: a pass that
raises stops the compilation with the pass named.

>>> [p.name for p in FRONT][:4]
['rewrite_einsum', 'fuse_layernorm', 'fuse_gelu', 'fuse_attention_mask']
>>> [p.name for p in BACK][:4]
['lower', 'fuse_residual', 'fuse_dpu_chains', 'tile']
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import onnx

from aipusim.base.errors import AipuSimError, ConfigError
from aipusim.compiler.backend import passes as backend
from aipusim.compiler.importer import import_model
from aipusim.compiler.ir import Graph, dump, verify
from aipusim.compiler.passes.arith import arithmetic_simplification
from aipusim.compiler.passes.attention_mask import fuse_attention_mask
from aipusim.compiler.passes.bn_fold import fold_batchnorm
from aipusim.compiler.passes.cleaner import graph_cleaner
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.passes.einsum import einsum_to_matmul
from aipusim.compiler.passes.gelu import fuse_gelu
from aipusim.compiler.passes.layernorm import fuse_layernorm
from aipusim.compiler.passes.prelu import decompose_prelu
from aipusim.compiler.passes.rewrite import (
    concat_to_resadd,
    dense_to_conv2d,
    mac_around_lut,
    place_concat,
    pword_padding,
)
from aipusim.compiler.passes.simplify import fold_constants
from aipusim.compiler.passes.validate import validate_operators
from aipusim.compiler.quant import quantize_pass
from aipusim.compiler.quant.quantize import QuantizedGraph

#: A pass: its input IR (a `Graph` or a back-end stage) and the context -> its output IR.
PassFn = Callable[[Any, PassContext], Any]


class Stage(StrEnum):
    """Compiler stages; each maps to the status code a failure in it reports."""

    IMPORT = "import"
    CLEAN = "clean"
    SIMPLIFY = "simplify"
    QUANTIZE = "quantize"
    REWRITE = "rewrite"
    MIDEND = "midend"  # back end: lower, IMC mapping, tiling
    TIR = "tir"  # back end: memory planning, scheduling
    RUNTIME = "runtime"  # back end: tasklists and compiled_model files

    @property
    def status(self) -> str:
        """The reference's compilation status code for an unexpected failure here."""
        return _STAGE_STATUS[self]


_STAGE_STATUS = {
    Stage.IMPORT: "ONNX_GRAPH_CLEANER_ERROR",
    Stage.CLEAN: "ONNX_GRAPH_CLEANER_ERROR",
    Stage.SIMPLIFY: "QTOOLS_ERROR",
    Stage.QUANTIZE: "QTOOLS_ERROR",
    Stage.REWRITE: "LOWER_FRONTEND_ERROR",
    Stage.MIDEND: "LOWER_MIDEND_ERROR",
    Stage.TIR: "LOWER_TIR_ERROR",
    Stage.RUNTIME: "TIR_TO_RUNTIME_ERROR",
}


@dataclass(frozen=True)
class Pass:
    """One named pass: its function, its stage, and the config flag that switches it (None:
    always on)."""

    name: str
    fn: PassFn
    stage: Stage
    knob: str | None = None

    def enabled(self, ctx: PassContext) -> bool:
        return self.knob is None or bool(getattr(ctx.config, self.knob))

    def run(self, ir: Any, ctx: PassContext) -> Any:
        """The pass's output IR for ``ir``."""
        return self.fn(ir, ctx)


#: Stages 2-5 of docs/architecture.md §5, in order.
FRONT: tuple[Pass, ...] = (
    # Pattern rewrites first: before the graph cleaner, so that a LayerNorm, GELU or masked
    # Softmax ending the graph is one op and not split between the AIPU and the host's
    # tail (Sqrt, Div, Mul, ... are host-suited tail ops on their own), and before
    # arithmetic simplification changes the spelling they match.
    Pass("rewrite_einsum", einsum_to_matmul, Stage.SIMPLIFY),
    Pass("fuse_layernorm", fuse_layernorm, Stage.SIMPLIFY),
    Pass("fuse_gelu", fuse_gelu, Stage.SIMPLIFY),
    Pass("fuse_attention_mask", fuse_attention_mask, Stage.SIMPLIFY),
    Pass("graph_cleaner", graph_cleaner, Stage.CLEAN),
    Pass("fold_constants", fold_constants, Stage.SIMPLIFY),
    Pass("fold_batchnorm", fold_batchnorm, Stage.SIMPLIFY),
    Pass(
        "arithmetic_simplification",
        arithmetic_simplification,
        Stage.SIMPLIFY,
        "apply_arithmetic_simplification",
    ),
    # before the operator check: a PRelu with constant slopes becomes ops with int8 kernels
    Pass("decompose_prelu", decompose_prelu, Stage.SIMPLIFY),
    # the operator check also runs before calibration, so that a model with several
    # unsupported ops gets them all named at once instead of the quantizer's first complaint
    Pass("check_operators", validate_operators, Stage.SIMPLIFY, "validate_operators"),
    Pass("quantize", quantize_pass, Stage.QUANTIZE),
    Pass("rewrite_dense_to_conv2d", dense_to_conv2d, Stage.REWRITE, "rewrite_dense_to_conv2d"),
    # before the pad-and-add rewrite, which then takes only the Concats placement cannot
    Pass("place_concat", place_concat, Stage.REWRITE),
    Pass("rewrite_concat_to_resadd", concat_to_resadd, Stage.REWRITE, "rewrite_concat_to_resadd"),
    Pass("apply_pword_padding", pword_padding, Stage.REWRITE, "apply_pword_padding"),
    Pass(
        "simplify_mac_before_after_lut",
        mac_around_lut,
        Stage.REWRITE,
        "simplify_mac_before_after_lut",
    ),
    Pass("validate_operators", validate_operators, Stage.REWRITE, "validate_operators"),
)
#: Stages 6-10 of docs/architecture.md §5 (the back half, `aipusim.compiler.backend`), each from one
#: typed stage of `aipusim.compiler.backend.common.ir` to the next.
BACK: tuple[Pass, ...] = (
    Pass("lower", backend.lower, Stage.MIDEND),
    Pass("fuse_residual", backend.fuse_residual, Stage.MIDEND),
    Pass("fuse_dpu_chains", backend.fuse_dpu_chains, Stage.MIDEND),
    Pass("tile", backend.tile, Stage.MIDEND),
    Pass("multicore", backend.multicore, Stage.MIDEND),
    Pass("imc", backend.imc, Stage.MIDEND),
    Pass("pack", backend.pack, Stage.MIDEND),
    Pass("memplan", backend.memplan, Stage.TIR),
    Pass("schedule", backend.schedule, Stage.TIR),
    Pass("estimate", backend.estimate, Stage.TIR),
    Pass("emit", backend.emit, Stage.RUNTIME),
)
#: The whole compiler.
PIPELINE: tuple[Pass, ...] = FRONT + BACK
#: Name of the import step (not in the lists: it makes the graph the passes take).
IMPORT = "import"


def pass_names(passes: Iterable[Pass] = PIPELINE) -> list[str]:
    """Names usable with ``dump_after`` / ``stop_after`` (``import`` included)."""
    return [IMPORT, *(p.name for p in passes)]


#: Status of a compilation stopped by a bug in a pass (not the vendor reference's: its
#: codes name where bad input was found; this one names a failure of aipusim itself).
INTERNAL_ERROR = "INTERNAL_ERROR"


@dataclass
class PassRecord:
    """What one pass did: wall time (seconds, from the start of the pipeline too) and the
    size of its IR before/after (graph nodes, or back-end layers); ``ran`` is False for a
    pass switched off by its knob or skipped by ``start_after``."""

    name: str
    stage: str
    ran: bool
    start_s: float = 0.0
    seconds: float = 0.0
    nodes_before: int = 0
    nodes_after: int = 0
    note: str = ""


@dataclass
class PipelineResult:
    """The final IR (the graph for a front-end run, a back-end stage otherwise), the context
    (host graphs, files, results), per-pass records and the IR dumps asked for (pass name ->
    text)."""

    ir: Any
    context: PassContext
    records: list[PassRecord] = field(default_factory=list)
    dumps: dict[str, str] = field(default_factory=dict)

    @property
    def graph(self) -> Graph:
        """The AIPU graph after the last pass (a later stage carries the one it holds)."""
        return _graph_of(self.ir)

    @property
    def pass_seconds(self) -> dict[str, float]:
        return {r.name: r.seconds for r in self.records if r.ran}


def _graph_of(ir: Any) -> Graph:
    """The graph a pass's output holds (a `Graph` is its own)."""
    return ir if isinstance(ir, Graph) else ir.graph


def dump_ir(ir: Any) -> str:
    """The text form of any pass's output: a `Graph`, a quantized graph (the graph and the
    kind of each node's integer step) or a back-end stage."""
    if isinstance(ir, Graph):
        return dump(ir)
    if isinstance(ir, QuantizedGraph):
        kinds = "\n".join(f"  {name}: {step.kind}" for name, step in ir.steps.items())
        return f"{dump(ir.graph)}\n# integer program\n{kinds}"
    return ir.dump()


def verify_ir(ir: Any) -> None:
    """Check the invariants of any pass's output (`AssertionError` on a compiler bug)."""
    if isinstance(ir, Graph):
        verify(ir)
    elif isinstance(ir, QuantizedGraph):
        verify(ir.graph)
        missing = [n.name for n in ir.graph.nodes if n.name not in ir.steps]
        assert not missing, f"nodes without an integer step: {missing}"
    else:
        ir.verify()


def _size(ir: Any) -> int:
    return len(ir.layers) if hasattr(ir, "layers") else len(_graph_of(ir).nodes)


def _check_names(names: Collection[str], passes: Iterable[Pass], what: str) -> None:
    valid = pass_names(passes)
    unknown = [n for n in names if n not in valid and n != "all"]
    if unknown:
        raise ConfigError(
            f"{what} must name passes ({', '.join(valid)} or all), not {', '.join(unknown)}"
        )


def run_pipeline(
    model: str | os.PathLike[str] | onnx.ModelProto | Graph | QuantizedGraph,
    ctx: PassContext,
    *,
    input_shape: tuple[int, ...] | None = None,
    passes: Iterable[Pass] = PIPELINE,
    dump_after: Collection[str] = (),
    stop_after: str | None = None,
    after_pass: Callable[[str, Any], None] | None = None,
    source_name: str | None = None,
    start_after: str | None = None,
    model_checked: bool = False,
    external_dir: str | os.PathLike[str] | None = None,
) -> PipelineResult:
    """Import ``model`` and run ``passes`` over it.

    ``model`` may also be an IR `Graph` that already went through the passes up to
    ``start_after`` (a quantized model): it is not imported and those passes are skipped.
    ``model_checked``: ``model`` is a proto from `load_model`, handed over (not copied or
    checked again by the import); ``external_dir`` is its folder when it was read with its
    large external tensors left in their files (`aipusim.compiler.importer.read_model`).
    ``dump_after`` names passes (or ``all``) whose output IR is dumped as text;
    ``stop_after`` ends the run after that pass; ``after_pass(name, ir)`` is called after
    every pass that ran (the tests run `verify_ir` there). On an exception the failing pass
    and its status code (the error's own, or `INTERNAL_ERROR` for one that is not an
    `AipuSimError`) are left in ``ctx.failed_pass`` / ``ctx.failed_status``.
    """
    passes = tuple(passes)
    _check_names(dump_after, passes, "dump_after")
    if stop_after is not None:
        _check_names([stop_after], passes, "stop_after")
    records: list[PassRecord] = ctx.records
    dumps: dict[str, str] = {}
    t0 = time.perf_counter()

    def finish(name: str, stage: Stage, start: float, before: int, ir: Any) -> None:
        records.append(
            PassRecord(
                name,
                stage.value,
                True,
                start - t0,
                time.perf_counter() - start,
                before,
                _size(ir),
            )
        )
        ctx.last_graph = _graph_of(ir)
        if "all" in dump_after or name in dump_after:
            dumps[name] = dump_ir(ir)
        if after_pass is not None:
            after_pass(name, ir)

    if start_after is not None:
        _check_names([start_after], passes, "start_after")
    start = time.perf_counter()
    ir: Any
    if isinstance(model, Graph | QuantizedGraph):
        # An IR graph that already went through the passes up to ``start_after`` (the
        # quantized model of a quantize-only run): no import.
        ir = model
    else:
        try:
            ir = import_model(
                model,
                input_shape=input_shape,
                layout=ctx.input_layout,
                target_opset=int(ctx.config.onnx_opset_version),
                source_name=source_name,
                checked=model_checked,
                external_dir=external_dir,
            )
        except Exception as exc:
            _fail(ctx, IMPORT, Stage.IMPORT, exc)
            raise
    finish(IMPORT, Stage.IMPORT, start, 0, ir)
    if stop_after == IMPORT:
        return PipelineResult(ir, ctx, records, dumps)
    skipping = start_after is not None and start_after != IMPORT
    for p in passes:
        if skipping:
            note = f"already applied to the input (run starts after {start_after})"
            records.append(PassRecord(p.name, p.stage.value, False, note=note))
            skipping = p.name != start_after
            if p.name == stop_after:
                break
            continue
        if not p.enabled(ctx):
            records.append(PassRecord(p.name, p.stage.value, False, note="switched off"))
            ctx.log.info("pass %s skipped: switched off by %s", p.name, p.knob)
        else:
            start = time.perf_counter()
            before = _size(ir)
            try:
                ir = p.run(ir, ctx)
            except Exception as exc:
                _fail(ctx, p.name, p.stage, exc)
                raise
            finish(p.name, p.stage, start, before, ir)
            ctx.log.info("pass %s: %d -> %d", p.name, before, _size(ir))
        if p.name == stop_after:
            break
    return PipelineResult(ir, ctx, records, dumps)


def _fail(ctx: PassContext, name: str, stage: Stage, exc: BaseException) -> None:
    ctx.failed_pass = name
    ctx.failed_status = exc.status if isinstance(exc, AipuSimError) else INTERNAL_ERROR


__all__ = [
    "BACK",
    "FRONT",
    "IMPORT",
    "INTERNAL_ERROR",
    "PIPELINE",
    "Pass",
    "PassFn",
    "PassRecord",
    "PipelineResult",
    "Stage",
    "dump_ir",
    "pass_names",
    "run_pipeline",
    "verify_ir",
]
