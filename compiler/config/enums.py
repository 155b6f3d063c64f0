"""The fixed choices of `CompilerConfig` (the enum tables of the config reference).

Each enum is a `StrEnum`, so a member compares equal to its string value and serialises to
JSON/TOML as that plain string.

>>> MulticoreMode("batch") == "batch"
True
"""

from __future__ import annotations

from enum import StrEnum

# The mode is part of the compiled program (model.json), so its one definition is in isa.
from aipusim.isa.program import MulticoreMode


class CompilerMode(StrEnum):
    """What the compiler does with a float model."""

    QUANTIZE_AND_LOWER = "quantize_and_lower"  # quantize, then lower to tasklists
    QUANTIZE_ONLY = "quantize_only"  # stop after quantization; the result runs on the CPU
    LOWER_ONLY = "lower_only"  # lower an already quantized model


class QuantizationScheme(StrEnum):
    """Observers for activations (weights are always per-channel min-max)."""

    PER_TENSOR_HISTOGRAM = "per_tensor_histogram"
    PER_TENSOR_MIN_MAX = "per_tensor_min_max"
    HYBRID_PER_TENSOR_PER_CHANNEL = "hybrid_per_tensor_per_channel"


class HistogramRangeMethod(StrEnum):
    """How a histogram observer picks an activation's range (aipusim extension property
    ``histogram_range_method``; `aipusim.compiler.quant.observers` has the details)."""

    MSE = "mse"  # the lowest estimated int8 MSE
    PERCENTILE = "percentile"  # two-sided percentile (``histogram_percentile``)
    ENTROPY = "entropy"  # KL-divergence search over clipping ranges, TensorRT-style


class DPUAllocationAlgorithm(StrEnum):
    """Register allocator used when lowering DPU (vector unit) programs."""

    TRY_ALL = "try_all"
    GRAPH = "graph"
    LAZY = "lazy"
    BACKJUMP_RECURSIVE = "backjump_recursive"


class GraphCleanerCondition(StrEnum):
    """How the graph cleaner picks the node where host post-processing starts."""

    MAXIMUM_WEIGHT_TENSOR_SIZE = "maximum_weight_tensor_size"
    MAXIMUM_WEIGHT_TENSOR_FIRST_DIMENSION_SIZE = "maximum_weight_tensor_first_dimension_size"


class GraphCleanerNode(StrEnum):
    """ONNX operator type a `GraphCleanerCondition` looks at."""

    MATMUL = "MatMul"
    GEMM = "Gemm"
    CLIP = "Clip"


class ProfilingLevel(StrEnum):
    """Trace line tags (docs/architecture.md §8.2); the value is the tag without its brackets."""

    UNKNOWN = "?"  # a line the profiler does not know; kept and counted
    FRAME = "B"  # one batch item on an instance
    LAYER_BEGIN = "PB"
    LAYER_END = "PE"
    COMPUTE = "K"  # a compute task on MVM, DPU or DWPU
    MEMORY = "M"  # a DMA transfer
    TOKEN = "T"  # a hardware token signal or wait


__all__ = [
    "CompilerMode",
    "DPUAllocationAlgorithm",
    "GraphCleanerCondition",
    "GraphCleanerNode",
    "HistogramRangeMethod",
    "MulticoreMode",
    "ProfilingLevel",
    "QuantizationScheme",
]
