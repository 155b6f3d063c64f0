"""Compiler configuration: `CompilerConfig`, its property table, files and overrides.

>>> from aipusim.compiler.config import CompilerConfig
>>> CompilerConfig(aipu_cores=4, resources=1.0).aipu_cores_used
4
"""

from aipusim.compiler.config.arch_check import check_against_arch
from aipusim.compiler.config.compiler_config import CompilerConfig, canonical_name
from aipusim.compiler.config.enums import (
    CompilerMode,
    DPUAllocationAlgorithm,
    GraphCleanerCondition,
    GraphCleanerNode,
    HistogramRangeMethod,
    MulticoreMode,
    ProfilingLevel,
    QuantizationScheme,
)
from aipusim.compiler.config.files import (
    dumps_json,
    dumps_toml,
    load_config,
    read_data_file,
    save_config,
)
from aipusim.compiler.config.overrides import parse_assignment, parse_assignments
from aipusim.compiler.config.spec import Kind, Prop, Section
from aipusim.compiler.config.table import ALIASES, PROPERTIES

__all__ = [
    "ALIASES",
    "PROPERTIES",
    "CompilerConfig",
    "CompilerMode",
    "DPUAllocationAlgorithm",
    "GraphCleanerCondition",
    "GraphCleanerNode",
    "HistogramRangeMethod",
    "Kind",
    "MulticoreMode",
    "ProfilingLevel",
    "Prop",
    "QuantizationScheme",
    "Section",
    "canonical_name",
    "check_against_arch",
    "dumps_json",
    "dumps_toml",
    "load_config",
    "parse_assignment",
    "parse_assignments",
    "read_data_file",
    "save_config",
]
