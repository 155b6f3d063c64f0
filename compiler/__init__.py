"""ONNX -> per-core tasklists (DESIGN.md §4).

>>> from aipusim.compiler import CompilerConfig
>>> CompilerConfig(aipu_cores=1, resources=0.25).resources_used
0.25
"""

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
