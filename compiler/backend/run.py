"""Run the back-end passes without the driver (tests, benchmarks, notebooks).

`run_backend` takes a graph that went through the front end (quantized or not: the back
end needs only shapes and int8 sizes) and runs the back half of the pipeline's pass list
(`aipusim.compiler.pipeline.BACK`) over it, the same functions the driver runs.

>>> from aipusim.compiler.pipeline import BACK
>>> [p.name for p in BACK]  # doctest: +NORMALIZE_WHITESPACE
['lower', 'fuse_residual', 'fuse_dpu_chains', 'tile', 'multicore', 'imc', 'pack', 'memplan',
 'schedule', 'estimate', 'emit']
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aipusim.arch import Arch
from aipusim.compiler.backend.common.ir import Emitted
from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.passes.context import PassContext


def run_backend(
    graph_or_qgraph: Any,
    config: CompilerConfig,
    arch: Arch,
    out_dir: str | Path | None = None,
    *,
    model_name: str | None = None,
) -> Emitted:
    """Every back-end pass over ``graph_or_qgraph``; the ``compiled_model/`` files are
    written under ``out_dir`` when given."""
    from aipusim.compiler.pipeline import BACK

    if model_name is not None:
        config = config.copy()
        config.model_name = model_name
    ctx = PassContext(config, arch=arch)
    ir: Any = graph_or_qgraph
    for p in BACK:
        ir = p.run(ir, ctx)
    assert isinstance(ir, Emitted)
    if out_dir is not None:
        for rel, data in ir.files.items():
            path = Path(out_dir) / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    return ir


__all__ = ["run_backend"]
