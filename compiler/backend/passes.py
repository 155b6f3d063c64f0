"""The back-end passes in the pipeline's form ``(Graph, PassContext) -> Graph``.

`aipusim.compiler.pipeline` lists them by ``module:function`` name after the front end. The
graph passes through unchanged; the back end's state (layers, tilings, memory plan,
schedule) lives in ``ctx.results["backend"]``, and `emit_pass` leaves the
``compiled_model/`` files in ``ctx.files`` for the driver to write atomically.
"""

from __future__ import annotations

from typing import Any

from aipusim.compiler.backend import run as _run
from aipusim.compiler.backend.emit import emit_files
from aipusim.compiler.ir import Graph

#: Key of the back-end state in ``PassContext.results``.
RESULT_KEY = "backend"


def _state(graph: Graph, ctx: Any) -> _run.BackendState:
    state = ctx.results.get(RESULT_KEY)
    if state is None:
        state = _run.BackendState(graph, ctx.config, ctx.get_arch(), source=graph)
    return state


def _wrap(fn: Any, name: str) -> Any:
    def pass_fn(graph: Graph, ctx: Any) -> Graph:
        ctx.results[RESULT_KEY] = fn(_state(graph, ctx))
        return graph

    pass_fn.__name__ = f"{name}_pass"
    pass_fn.__doc__ = f"The back-end pass ``{name}`` (see `aipusim.compiler.backend.run`)."
    return pass_fn


lower_pass = _wrap(_run.pass_lower, "lower")
imc_pass = _wrap(_run.pass_imc, "imc")
tile_pass = _wrap(_run.pass_tile, "tile")
estimate_pass = _wrap(_run.pass_estimate, "estimate")
multicore_pass = _wrap(_run.pass_multicore, "multicore")
memplan_pass = _wrap(_run.pass_memplan, "memplan")
schedule_pass = _wrap(_run.pass_schedule, "schedule")


def emit_pass(graph: Graph, ctx: Any) -> Graph:
    """Put the ``compiled_model/`` files into ``ctx.files``."""
    state = ctx.results[RESULT_KEY]
    request = getattr(ctx, "request", None)
    model_id = getattr(request, "model_id", None)
    ctx.files.update(emit_files(state, model_id=model_id))
    return graph


__all__ = [
    "RESULT_KEY",
    "emit_pass",
    "estimate_pass",
    "imc_pass",
    "lower_pass",
    "memplan_pass",
    "multicore_pass",
    "schedule_pass",
    "tile_pass",
]
