"""One model compiled for many hardware descriptions: its front end once, its back end per arch.

The front end (import, graph passes, quantization) reads nothing of the arch numbers the
studies move (timings, bandwidths, energies, ports); the back end (tiling, IMC mapping,
multicore split, memory plan, schedule, emit) plans with the cost model of the arch it is
given. `Retargeter` keeps the front end's graph and runs the back end for each arch, which
is what the sensitivity study and the calibration need (a ResNet-50 front end takes seconds,
its back end a fraction of one).

>>> from aipusim.arch import load_arch
>>> import tempfile, pathlib
>>> r = Retargeter("tiny_cnn", input_size=32)
>>> out = pathlib.Path(tempfile.mkdtemp())
>>> lists = r.compile(load_arch(overrides={"l1.port_bytes_per_cycle": 32}), out / "half")
>>> sorted(lists), (out / "half" / "compiled_model" / "model.json").is_file()
(['compiled_model/core0.tasklist'], True)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx

from aipusim import zoo
from aipusim.api.sources import config_for
from aipusim.arch import load_arch
from aipusim.base.errors import ConfigError
from aipusim.compiler.backend.run import run_backend
from aipusim.compiler.config.files import load_config
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.pipeline import FRONT, run_pipeline
from aipusim.compiler.quant import read_quantized_model


class Retargeter:
    """``model`` (a zoo name or an ONNX file, at ``input_size`` for zoo models) through the
    front end once, with ``config`` (default: the model's built-in config) on ``arch``
    (default: the bundled arch file)."""

    def __init__(
        self,
        model: str,
        config: Any = None,
        *,
        input_size: int | None = None,
        arch: Any = None,
    ) -> None:
        # lazy: aipusim.run.job loads pandas, not otherwise loaded here
        from aipusim.run.job import resolve_model

        source = resolve_model(model, input_size)
        self.model = source.name
        self.config = config if config is not None else config_for(model)
        arch = arch if arch is not None else load_arch()
        if source.path is not None:
            proto = onnx.load(str(source.path))
        else:
            proto = zoo.build(model, input_size=input_size) if input_size else zoo.build(model)
        ctx = PassContext(self.config, arch=arch)
        self.graph = run_pipeline(proto, ctx, passes=FRONT).graph

    @classmethod
    def from_compiled(cls, compiled: str | Path, *, arch: Any = None) -> Retargeter:
        """The front end of an earlier compile: the output folder of `aipusim compile` (or
        its ``compiled_model/``), from its quantized model and ``conf.json``; the passes up
        to quantization are not run again."""
        root = Path(compiled)
        if root.name == "compiled_model":
            root = root.parent
        manifest = root / "compiled_model" / "reference" / "quantized_model_manifest.json"
        conf = root / "conf.json"
        for needed in (manifest, conf):
            if not needed.is_file():
                raise ConfigError(
                    f"{str(root)!r} must be the output folder of a compile (with "
                    f"{needed.relative_to(root)}), not a folder without it"
                )
        self = cls.__new__(cls)
        self.config = load_config(conf)
        qgraph = read_quantized_model(manifest)
        self.model = qgraph.graph.name
        ctx = PassContext(self.config, arch=arch if arch is not None else load_arch())
        self.graph = run_pipeline(qgraph, ctx, passes=FRONT, start_after="quantize").graph
        return self

    def compile(self, arch: Any, out_dir: str | Path, config: Any = None) -> dict[str, bytes]:
        """Run the back end on ``arch`` (with ``config``, default: the front end's; it may
        change what only the back end reads, such as the multicore mode) and write
        ``out_dir/compiled_model/``; the emitted tasklists, by file name (to tell whether the
        arch changed the compiler's decisions)."""
        config = config if config is not None else self.config
        ir = run_backend(self.graph, config, arch, Path(out_dir), model_name=self.model)
        return {k: v for k, v in ir.files.items() if k.endswith(".tasklist")}


__all__ = ["Retargeter"]
