"""aipusim: a performance, power and profiling model of a 4-core Metis-class AIPU.

Compile a model, run its int8 reference, simulate it and profile the run:

    >>> import aipusim, numpy as np
    >>> m = aipusim.compile("tiny_cnn", inputs={"input": aipusim.InputInfo((1, 3, 32, 32))})
    >>> m(np.zeros((1, 3, 32, 32), np.float32)).shape
    (1, 10)
    >>> r = m.simulate(frames=2)
    >>> r.fps > 0
    True
    >>> aipusim.load_arch().peak_tops
    209.7152

Every public name loads its module on first use: ``import aipusim`` imports nothing else
of the package, so ``import aipusim.profiler`` (or any other package) does not pull in the
arch, the compiler or the simulator, and the CLI starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aipusim.base import __version__
from aipusim.base.lazy import lazy_names

if TYPE_CHECKING:
    from aipusim.api.compiled import CompiledModel, compile, load, simulate
    from aipusim.api.inputs import InputInfo, ShapeBounds
    from aipusim.api.leip import (
        CompileOptimizations,
        CompileOptions,
        GraphOptimization,
        KernelOptimization,
        Layout,
        compile_,
    )
    from aipusim.api.optlevels import OPTIMIZATION_LEVELS
    from aipusim.api.results import SimResult
    from aipusim.api.sources import config_for
    from aipusim.arch import Arch, load_arch
    from aipusim.base.errors import AipuSimError
    from aipusim.compiler.config import CompilerConfig, load_config
    from aipusim.llm.job import LlmResult, run_llm
    from aipusim.profiler import load_trace
    from aipusim.simulator.detail import DETAILED_PARTS
    from aipusim.simulator.detail.l1 import BankedL1, L1Access, compare_l1_with_ports

#: Public name -> module that defines it (imported on first access).
_LAZY = {
    "AipuSimError": "aipusim.base.errors",
    "Arch": "aipusim.arch",
    "load_arch": "aipusim.arch",
    "CompiledModel": "aipusim.api.compiled",
    "compile": "aipusim.api.compiled",
    "load": "aipusim.api.compiled",
    "simulate": "aipusim.api.compiled",
    "CompilerConfig": "aipusim.compiler.config",
    "load_config": "aipusim.compiler.config",
    "config_for": "aipusim.api.sources",
    "run_llm": "aipusim.llm.job",
    "LlmResult": "aipusim.llm.job",
    "InputInfo": "aipusim.api.inputs",
    "ShapeBounds": "aipusim.api.inputs",
    "CompileOptimizations": "aipusim.api.leip",
    "CompileOptions": "aipusim.api.leip",
    "GraphOptimization": "aipusim.api.leip",
    "KernelOptimization": "aipusim.api.leip",
    "Layout": "aipusim.api.leip",
    "compile_": "aipusim.api.leip",
    "OPTIMIZATION_LEVELS": "aipusim.api.optlevels",
    "load_trace": "aipusim.profiler",
    "SimResult": "aipusim.api.results",
    "DETAILED_PARTS": "aipusim.simulator.detail",
    "BankedL1": "aipusim.simulator.detail.l1",
    "L1Access": "aipusim.simulator.detail.l1",
    "compare_l1_with_ports": "aipusim.simulator.detail.l1",
}


__getattr__ = lazy_names(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "DETAILED_PARTS",
    "OPTIMIZATION_LEVELS",
    "AipuSimError",
    "Arch",
    "BankedL1",
    "CompileOptimizations",
    "CompileOptions",
    "CompiledModel",
    "CompilerConfig",
    "GraphOptimization",
    "InputInfo",
    "KernelOptimization",
    "L1Access",
    "Layout",
    "LlmResult",
    "ShapeBounds",
    "SimResult",
    "__version__",
    "compare_l1_with_ports",
    "compile",
    "compile_",
    "config_for",
    "load",
    "load_arch",
    "load_config",
    "load_trace",
    "run_llm",
    "simulate",
]
