"""ONNX -> per-core tasklists (docs/architecture.md §5).

>>> from aipusim.compiler import CompilerConfig
>>> CompilerConfig(aipu_cores=1, resources=0.25).resources_used
0.25
"""

from aipusim.base.lazy import lazy_names
from aipusim.compiler.config import (
    CompilerConfig,
    CompilerMode,
    DPUAllocationAlgorithm,
    GraphCleanerCondition,
    GraphCleanerNode,
    MulticoreMode,
    ProfilingLevel,
    QuantizationScheme,
    load_config,
)

__all__ = [
    "CompilerConfig",
    "CompilerMode",
    "DPUAllocationAlgorithm",
    "GraphCleanerCondition",
    "GraphCleanerNode",
    "MulticoreMode",
    "ProfilingLevel",
    "QuantizationScheme",
    "load_config",
]

# The graph half is re-exported lazily: importing it pulls in onnx and numpy, which the
# config-only users of this package (``aipusim compile --help``, config files) never need.
_LAZY = {
    "CompileResult": "aipusim.compiler.driver",
    "compile_model": "aipusim.compiler.driver",
    "Graph": "aipusim.compiler.ir",
    "Node": "aipusim.compiler.ir",
    "Op": "aipusim.compiler.ir",
    "Tensor": "aipusim.compiler.ir",
    "dump": "aipusim.compiler.ir",
    "verify": "aipusim.compiler.ir",
    "import_model": "aipusim.compiler.importer",
    "to_onnx": "aipusim.compiler.export",
    "PassContext": "aipusim.compiler.passes.context",
    "PIPELINE": "aipusim.compiler.pipeline",
    "run_pipeline": "aipusim.compiler.pipeline",
}
__all__ += list(_LAZY)


__getattr__ = lazy_names(__name__, _LAZY, globals())
