"""LEIP-style compilation: `CompileOptions` and `compile_(model, output_path, options)`.

The options of the LEIP compile API, mapped onto this toolkit:

- ``layout`` (NCHW | NHWC): the layout the compiled model takes its 4-D inputs in (ONNX
  models are NCHW; for NHWC a Transpose in front goes to the host pre-processing);
- ``target``: must be the AIPU (``"aipu"``); anything else is refused with the list of
  supported targets. ``target_host``: the host pre/post graphs run on the CPU (``None``,
  ``"cpu"`` or ``"llvm"``);
- ``model_id``: stored in ``compiled_model/model.json`` (a UUID when absent);
- ``crc_check``: CRC32 of every artifact recorded; `aipusim.load` verifies them;
- ``force_int8``: AIPU weights are int8 in every compile (the API compiles with
  ``quantize_and_lower`` only), so this is always satisfied; it is recorded;
- ``legacy_artifacts``: also write ``legacy/`` with three files: ``deploy_lib.tar`` (the
  tasklists), ``deploy_graph.json`` (program and I/O manifest), ``deploy_param.npz``
  (the quantized model's arrays: int8 weights, int32 biases, requantization parameters);
- ``optimization.kernel.level`` 1-4: the optimization level (`aipusim.api.optlevels`);
  ``optimization.graph.iterations`` n >= 1: how many fusion-group lengths the depth-first
  tiling search tries per start (``dfs_search_constraint``); 0 leaves it unbounded.

>>> opts = CompileOptions(layout="NCHW", target="aipu", crc_check=True,
...                       optimization=CompileOptimizations(kernel=KernelOptimization(level=2)))
>>> opts.optimization.kernel.level
2
>>> CompileOptions(target="cuda")
Traceback (most recent call last):
...
aipusim.base.errors.ConfigError: target must be one of aipu, not 'cuda'
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from aipusim.api.compiled import TARGET, BuildOptions, CompiledModel, compile_with
from aipusim.api.legacy import write_legacy_artifacts
from aipusim.api.optlevels import check_level
from aipusim.base.errors import ConfigError

#: Targets the compiler can generate code for.
SUPPORTED_TARGETS = (TARGET,)
#: Hosts the pre/post graphs can run on (the ONNX reference runtime on the CPU).
SUPPORTED_HOSTS = ("cpu", "llvm")


class Layout(StrEnum):
    """Layout the model's input shapes are written in."""

    NCHW = "NCHW"
    NHWC = "NHWC"


@dataclass(frozen=True)
class KernelOptimization:
    """Kernel-level optimization: ``level`` 1-4 (see `aipusim.api.optlevels`)."""

    level: int = 3

    def __post_init__(self) -> None:
        check_level(self.level, "KernelOptimization level")


@dataclass(frozen=True)
class GraphOptimization:
    """Graph-level optimization: ``iterations`` bounds the depth-first fusion search
    (fusion lengths tried per start); 0 leaves it unbounded."""

    iterations: int = 0

    def __post_init__(self) -> None:
        it = self.iterations
        if isinstance(it, bool) or not isinstance(it, int) or it < 0:
            raise ConfigError(f"GraphOptimization iterations must be an integer >= 0, not {it!r}")


@dataclass(frozen=True)
class CompileOptimizations:
    """Optimizations of a compile: kernel level and optional graph optimization."""

    kernel: KernelOptimization = field(default_factory=KernelOptimization)
    graph: GraphOptimization | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kernel, KernelOptimization):
            raise ConfigError(
                f"kernel must be a KernelOptimization, not {type(self.kernel).__name__}"
            )
        if self.graph is not None and not isinstance(self.graph, GraphOptimization):
            raise ConfigError(
                f"graph must be a GraphOptimization or None, not {type(self.graph).__name__}"
            )


def _check_target(target: Any) -> str:
    kind = str(target).strip().split()[0].lower() if str(target).strip() else ""
    if kind not in SUPPORTED_TARGETS:
        raise ConfigError(f"target must be one of {', '.join(SUPPORTED_TARGETS)}, not {target!r}")
    return kind


@dataclass(frozen=True)
class CompileOptions:
    """Options of `compile_` (the LEIP ``CompileOptions``; see the module doc)."""

    layout: Layout | str = Layout.NCHW
    target: str = TARGET
    target_host: str | None = None
    model_id: str | None = None
    crc_check: bool = False
    force_int8: bool = False
    legacy_artifacts: bool = False
    optimization: CompileOptimizations = field(default_factory=CompileOptimizations)

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "layout", Layout(str(self.layout).upper()))
        except ValueError:
            valid = ", ".join(v.value for v in Layout)
            raise ConfigError(f"layout must be one of {valid}, not {self.layout!r}") from None
        object.__setattr__(self, "target", _check_target(self.target))
        host = self.target_host
        if host is not None and str(host).strip().split()[0].lower() not in SUPPORTED_HOSTS:
            raise ConfigError(
                f"target_host must be None or one of {', '.join(SUPPORTED_HOSTS)} (the host "
                f"graphs run on the CPU), not {host!r}"
            )
        if self.model_id is not None and (not isinstance(self.model_id, str) or not self.model_id):
            raise ConfigError(f"model_id must be a non-empty string or None, not {self.model_id!r}")
        for name in ("crc_check", "force_int8", "legacy_artifacts"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ConfigError(f"{name} must be True or False, not {value!r}")
        if not isinstance(self.optimization, CompileOptimizations):
            raise ConfigError(
                "optimization must be a CompileOptimizations, "
                f"not {type(self.optimization).__name__}"
            )

    def build_options(self) -> BuildOptions:
        """The options `aipusim.api.compiled.compile_with` takes."""
        graph = self.optimization.graph
        return BuildOptions(
            layout=str(self.layout),
            target_host=self.target_host,
            model_id=self.model_id,
            crc_check=self.crc_check,
            force_int8=self.force_int8,
            legacy_artifacts=self.legacy_artifacts,
            graph_iterations=graph.iterations if graph is not None and graph.iterations else None,
        )


def compile_(
    model: Any,
    output_path: str | os.PathLike[str],
    options: CompileOptions | None = None,
    *,
    config: Any = None,
    inputs: Any = None,
) -> CompiledModel:
    """Compile ``model`` into ``output_path`` with LEIP-style ``options``; returns the
    `CompiledModel` (LEIP returns nothing; the artifacts are in ``output_path`` either way).

    >>> import tempfile, aipusim
    >>> out = tempfile.mkdtemp() + "/tiny"
    >>> m = compile_("tiny_cnn", out, CompileOptions(crc_check=True, model_id="tiny-1"))
    >>> aipusim.load(out).name
    'tiny_cnn'
    """
    options = options or CompileOptions()
    if not isinstance(options, CompileOptions):
        raise ConfigError(f"options must be a CompileOptions, not {type(options).__name__}")
    return compile_with(
        model,
        config,
        inputs=inputs,
        output_dir=output_path,
        optimization_level=options.optimization.kernel.level,
        options=options.build_options(),
    )


__all__ = [
    "SUPPORTED_HOSTS",
    "SUPPORTED_TARGETS",
    "CompileOptimizations",
    "CompileOptions",
    "GraphOptimization",
    "KernelOptimization",
    "Layout",
    "compile_",
    "write_legacy_artifacts",
]
