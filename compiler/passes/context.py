"""`PassContext`: what a pass may read besides the graph, and where it leaves side results.

>>> from aipusim.compiler.config import CompilerConfig
>>> ctx = PassContext(CompilerConfig())
>>> ctx.config.run_graph_cleaner, ctx.pword_channels
(True, 64)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    import onnx

    from aipusim.arch import Arch
    from aipusim.compiler.config import CompilerConfig
    from aipusim.compiler.ir import Graph

log = logging.getLogger("aipusim.compiler")


@dataclass
class PassContext:
    """Shared state of one compilation.

    ``config`` and ``arch`` are read-only inputs. Passes leave side results here:
    ``host_graphs`` (the cleaner's ``preprocess``/``postprocess`` graphs), ``files`` (extra
    artifacts by relative path, written by the driver into the output folder) and
    ``results`` (free-form, e.g. the quantizer's manifest) keyed by pass name.
    """

    config: CompilerConfig
    arch: Arch | None = None
    #: Layout of the model's input tensor as the user described it (NCHW or NHWC).
    input_layout: str = "NCHW"
    #: Calibration/other inputs a pass needs from the request (imageset, transform, ...).
    request: Any = None
    host_graphs: dict[str, Graph] = field(default_factory=dict)
    files: dict[str, bytes | onnx.ModelProto | Graph] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    #: The folder the output is built in (the driver's, swapped into place at the end):
    #: the emit pass writes ``compiled_model/`` there file by file instead of leaving the
    #: files in ``files`` (a large model's do not all fit in memory at once).
    write_dir: Path | None = None
    log: logging.Logger = log
    #: The pipeline's `PassRecord` of every pass so far (kept when a pass fails).
    records: list[Any] = field(default_factory=list)
    #: Set by the pipeline when a pass raises: its name and the compilation status code.
    failed_pass: str | None = None
    failed_status: str | None = None
    #: The graph after the last pass that finished (what an error artifact shows).
    last_graph: Graph | None = None

    def get_arch(self) -> Arch:
        """The hardware description (loaded from the default TOML when none was given)."""
        if self.arch is None:
            from aipusim.arch import load_arch

            self.arch = load_arch()
        return self.arch

    @property
    def pword_channels(self) -> int:
        """PWORD: the MVM input-channel granule (from the arch description)."""
        return int(self.get_arch().mvm.pword_channels)


__all__ = ["PassContext"]
