"""CompilerConfig: the property table, defaults, checks on construction and assignment."""

from __future__ import annotations

import math

import pytest

from aipusim.base.errors import ConfigError
from aipusim.compiler.config import (
    PROPERTIES,
    CompilerConfig,
    CompilerMode,
    Kind,
    MulticoreMode,
    ProfilingLevel,
    QuantizationScheme,
    Section,
    parse_assignment,
    parse_assignments,
)

# The defaults as printed in the vendor's config reference (one row per property; the
# reference lists quantization_debug twice, with the same default). Properties shown
# without a default ("—") are null.
REFERENCE_DEFAULTS: dict[str, object] = {
    "compiler_mode": "quantize_and_lower",
    "quantization_scheme": "per_tensor_histogram",
    "quantize_dw_channel_wise": False,
    "onnx_opset_version": 17,
    "quantization_debug": False,
    "remove_io_quantization": False,
    "quantized_graph_export": True,
    "apply_pword_padding": True,
    "rewrite_concat_to_resadd": True,
    "rewrite_dense_to_conv2d": True,
    "remove_io_padding_and_layout_transform": True,
    "apply_arithmetic_simplification": True,
    "simplify_mac_before_after_lut": True,
    "validate_operators": True,
    "run_graph_cleaner": True,
    "graph_cleaner_split_pre_post_processing": True,
    "graph_cleaner_condition": None,
    "graph_cleaner_node": None,
    "graph_cleaner_threshold": 0,
    "graph_cleaner_dump_core_onnx": None,
    "graph_cleaner_dump_full_opt_onnx": None,
    "remove_layout_transform_from_preamble": False,
    "aipu_cores_used": 1,
    "multicore_mode": "multiprocess",
    "pipeline_spatial_tiles": True,
    "pipeline_channel_tiles": True,
    "inter_operator_async": True,
    "use_list_scheduler": False,
    "unroll_prologue_epilogue": False,
    "use_hw_tokens": True,
    "group_ifdw_tasks": False,
    "double_buffer": True,
    "host_processes_used": 1,
    "max_memplan_attempts": 5,
    "max_tiling_attempts": 8,
    "force_h_tiling": None,
    "force_oc_tiling": None,
    "tiling_depth": 1,
    "dfs_search_constraint": None,
    "enable_buffer_promotion": True,
    "split_buffer_promotion": False,
    "io_memory_pool": "global.ddr",
    "constant_memory_pool": "global.ddr",
    "workspace_memory_pool": "global.ddr",
    "l1_constraint": None,
    "l2_constraint": None,
    "ddr_constraint": None,
    "l1_size_used": 4194304,
    "l2_size_used": 33554432,
    "ddr_size_used": 1073741824,
    "use_sysdma": False,
    "dma_dual_channel": True,
    "page_memory": True,
    "elf_in_ddr": True,
    "stream_tasklist": True,
    "dpu_constants_home": "global.l2",
    "mvm_utilization_limit": 1.0,
    "enable_icr": True,
    "icrx_force": -1,
    "icrx_parallel_block_threshold": 4,
    "icrx_max_factor": 8,
    "enable_swicr": True,
    "imc_double_buffer_pipeline": False,
    "imc_double_buffer_sequential": False,
    "dpu_allocation_algorithm": "try_all",
    "softmax_neutral_value": -100000.0,
    "output_dir": None,
    "remove_output_dir": False,
    "model_name": "",
    "save_error_artifact": False,
    "randomize_onnx_model": True,
    "frequency": 800000000,
    "resources_used": 1.0,
    "input_dmabuf": False,
    "output_dmabuf": False,
    "profiling_levels": [],
    "profiling_drop_percentile": 0.25,
    "trace_tvm_passes": False,
    "propagate_span_information": True,
    "model_debug_save_dir": None,
    "compiler_dir": None,
    "runtime_dir": None,
    "device_dir": None,
    "l1_size_reserved": 524288,
    "l2_size_reserved": 1245184,
    "l2_size_reserved_tasklist": 1048576,
    "ddr_size_max": 1073741824,
    "ddr_size_reserved": 33554432,
    "l1_virtual_address": 206175207424,
    "l1_core0_physical_address": 402653184,
    "dpu_instructions_home": "default",
    "dwpu_instructions_home": "default",
    "ignore_weight_buffers": True,
}


#: The aipusim-only properties (not in the reference) and their defaults.
EXTENSION_DEFAULTS = {"histogram_range_method": "mse", "histogram_percentile": 99.99}


def test_the_table_has_the_93_reference_properties_with_their_defaults() -> None:
    reference = {k: v for k, v in CompilerConfig().to_dict().items() if k in REFERENCE_DEFAULTS}
    assert reference == REFERENCE_DEFAULTS
    assert list(reference) == list(REFERENCE_DEFAULTS)  # reference order
    extensions = {n: p.default for n, p in PROPERTIES.items() if p.extension}
    assert extensions == EXTENSION_DEFAULTS
    assert len(PROPERTIES) == 93 + len(EXTENSION_DEFAULTS)


def test_extension_properties_say_so_and_are_checked() -> None:
    for name in EXTENSION_DEFAULTS:
        assert PROPERTIES[name].doc.startswith("aipusim extension:")
    config = CompilerConfig(histogram_range_method="entropy", histogram_percentile=99.9)
    assert config.histogram_range_method == "entropy"
    with pytest.raises(
        ConfigError, match=r"histogram_percentile must be a number in \(50\.0, 100\.0\], not 120"
    ):
        config.histogram_percentile = 120
    with pytest.raises(
        ConfigError,
        match="histogram_range_method must be one of mse, percentile, entropy, not 'kl'",
    ):
        config.histogram_range_method = "kl"


def test_every_property_is_documented_and_its_default_is_valid() -> None:
    for prop in PROPERTIES.values():
        assert prop.doc and prop.doc.endswith("."), prop.name
        assert prop.coerce(prop.default) == prop.default, prop.name
        assert prop.default is None or not prop.nullable or prop.kind is not Kind.PATH
    assert {p.section for p in PROPERTIES.values()} == set(Section)


def test_nullable_properties_default_to_null() -> None:
    # Saving TOML drops nulls; that is lossless only if every nullable default is null.
    assert all(p.default is None for p in PROPERTIES.values() if p.nullable)


def test_enums_are_str_enums_with_reference_values() -> None:
    assert [m.value for m in MulticoreMode] == [
        "multiprocess",
        "multithread",
        "batch",
        "cooperative",
        "pipeline",
    ]
    assert CompilerConfig().compiler_mode is CompilerMode.QUANTIZE_AND_LOWER
    assert [m.value for m in ProfilingLevel] == ["?", "B", "PB", "PE", "K", "M", "T"]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("aipu_cores_used", 5, "aipu_cores_used must be an integer 1-4, not 5"),
        ("aipu_cores_used", 0, "aipu_cores_used must be an integer 1-4, not 0"),
        ("aipu_cores_used", 2.5, "aipu_cores_used must be an integer 1-4, not 2.5"),
        ("aipu_cores_used", True, "aipu_cores_used must be an integer 1-4, not true"),
        ("aipu_cores_used", "2", "aipu_cores_used must be an integer 1-4, not '2'"),
        (
            "frequency",
            10_000_000,
            r"frequency must be an integer 20000000-800000000 \(Hz\), not 10000000",
        ),
        ("frequency", 900e6, "frequency must be an integer 20000000-800000000"),
        ("resources_used", 0.3, r"resources_used must be a number in \(0.0, 1.0\] in steps of"),
        ("resources_used", 0.0, r"resources_used must be .*, not 0.0"),
        ("resources_used", 1.25, r"resources_used must be .*, not 1.25"),
        ("mvm_utilization_limit", 0.1, "mvm_utilization_limit must be a number 0.125-1.0"),
        ("mvm_utilization_limit", math.nan, "mvm_utilization_limit must be a number"),
        ("onnx_opset_version", 16, "onnx_opset_version must be an integer >= 17, not 16"),
        ("icrx_force", 0, "icrx_force must be an integer 1-8 or -1, not 0"),
        ("icrx_max_factor", 1, "icrx_max_factor must be an integer 2-8, not 1"),
        ("enable_icr", 1, r"enable_icr must be a boolean \(true or false\), not 1"),
        ("enable_icr", "true", "enable_icr must be a boolean"),
        ("multicore_mode", "batched", "multicore_mode must be one of multiprocess, .*"),
        ("multicore_mode", "batched", "did you mean `batch`"),
        ("graph_cleaner_node", "matmul", "did you mean `MatMul`"),
        ("io_memory_pool", "global.l3", "io_memory_pool must be one of global.ddr, global.l2"),
        ("dpu_constants_home", "global.l1", "dpu_constants_home must be one of global.ddr, gl"),
        ("dpu_instructions_home", "l1", "dpu_instructions_home must be one of default, l2"),
        ("profiling_levels", "B", "profiling_levels must be a list of distinct values"),
        ("profiling_levels", ["B", "X"], "profiling_levels must be a list"),
        ("profiling_levels", ["B", "[B]"], "profiling_levels lists 'B' twice"),
        ("profiling_drop_percentile", 50, r"profiling_drop_percentile must be a number in \[0"),
        ("output_dir", "", "output_dir must be a non-empty path string or null"),
        ("model_name", None, "model_name must be a string, not null"),
        ("force_h_tiling", 0, "force_h_tiling must be an integer >= 1 or null, not 0"),
        ("tiling_depth", None, "tiling_depth must be an integer >= 1, not null"),
    ],
)
def test_bad_values_name_the_property_the_value_and_what_is_valid(
    name: str, value: object, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        CompilerConfig(**{name: value})
    config = CompilerConfig()
    with pytest.raises(ConfigError, match=message):
        setattr(config, name, value)
    assert config == CompilerConfig()  # a rejected assignment changes nothing


def test_values_are_normalised() -> None:
    config = CompilerConfig(
        frequency=4e8,
        mvm_utilization_limit=1,
        multicore_mode="batch",
        profiling_levels=["[B]", "K"],
        output_dir=__import__("pathlib").Path("out"),
        resources_used=0.1 + 0.15,
    )
    assert config.frequency == 400_000_000 and isinstance(config.frequency, int)
    assert config.mvm_utilization_limit == 1.0 and isinstance(config.mvm_utilization_limit, float)
    assert config.multicore_mode is MulticoreMode.BATCH
    assert config.profiling_levels == (ProfilingLevel.FRAME, ProfilingLevel.COMPUTE)
    assert config.output_dir == "out"
    assert config.resources_used == 0.25
    assert config.to_dict()["profiling_levels"] == ["B", "K"]


def test_short_python_form_of_the_reference() -> None:
    config = CompilerConfig(
        aipu_cores=4, resources=1.0, ptq_scheme="per_tensor_min_max", save_error_artifact=True
    )
    assert config.aipu_cores_used == 4
    assert config.resources_used == 1.0
    assert config.quantization_scheme is QuantizationScheme.PER_TENSOR_MIN_MAX
    assert config.save_error_artifact is True
    with pytest.raises(ConfigError, match="aipu_cores_used is given twice"):
        CompilerConfig(aipu_cores=2, aipu_cores_used=2)


def test_unknown_names_are_errors_with_a_suggestion() -> None:
    with pytest.raises(ConfigError, match="unknown compiler config property `aipu_core_used`; "):
        CompilerConfig(aipu_core_used=2)
    with pytest.raises(ConfigError, match="did you mean `aipu_cores_used`"):
        CompilerConfig().aipu_core_used = 2
    with pytest.raises(AttributeError, match="did you mean `frequency`"):
        _ = CompilerConfig().frequncy
    with pytest.raises(ConfigError, match=r"unknown compiler config property `zzz`$"):
        CompilerConfig(zzz=1)


def test_reference_example_assignments() -> None:
    config = CompilerConfig()
    config.aipu_cores_used = 4
    config.multicore_mode = "batch"
    assert (config.aipu_cores_used, config.multicore_mode) == (4, "batch")


def test_each_core_needs_a_quarter_of_the_resources() -> None:
    with pytest.raises(
        ConfigError,
        match=r"resources_used must be at least 0.25 per core \(aipu_cores_used = 4 needs "
        r">= 1.0\), not 0.5",
    ):
        CompilerConfig(aipu_cores_used=4, resources_used=0.5)
    config = CompilerConfig(aipu_cores_used=1, resources_used=0.25)
    with pytest.raises(ConfigError, match="resources_used must be at least"):
        config.aipu_cores_used = 2
    assert config.aipu_cores_used == 1
    config.update(aipu_cores_used=3, resources_used=0.75)
    assert (config.aipu_cores_used, config.resources_used) == (3, 0.75)


@pytest.mark.parametrize("mode", list(MulticoreMode))
def test_every_mode_is_allowed_with_one_core_and_with_four(mode: MulticoreMode) -> None:
    assert CompilerConfig(multicore_mode=mode, aipu_cores_used=1).multicore_mode is mode
    assert CompilerConfig(multicore_mode=mode, aipu_cores_used=4).aipu_cores_used == 4


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"icrx_max_factor": 4, "icrx_force": 6}, r"icrx_force must be -1 or at most icrx_max"),
        ({"graph_cleaner_condition": "maximum_weight_tensor_size"}, "graph_cleaner_node must"),
        ({"graph_cleaner_node": "Gemm"}, "graph_cleaner_condition must be set"),
        ({"l1_size_used": 524288}, r"l1_size_used must be larger than l1_size_reserved"),
        (
            {"l2_size_used": 1245184 + 4 * 1048576, "aipu_cores_used": 4},
            r"l2_size_used must be larger than .* \(5439488\), not 5439488",
        ),
        ({"ddr_size_used": 2 * 1073741824}, "ddr_size_used must be at most ddr_size_max"),
        ({"ddr_size_used": 33554432}, "ddr_size_used must be larger than ddr_size_reserved"),
    ],
)
def test_cross_field_rules(values: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        CompilerConfig(**values)


def test_cleaner_condition_and_node_together_are_fine() -> None:
    config = CompilerConfig(
        graph_cleaner_condition="maximum_weight_tensor_size", graph_cleaner_node="Gemm"
    )
    assert config.graph_cleaner_node == "Gemm"


def test_copy_replace_equality_and_repr() -> None:
    base = CompilerConfig(aipu_cores_used=2)
    other = base.replace(frequency=400_000_000)
    assert base.frequency == 800_000_000 and other.frequency == 400_000_000
    assert base != other and base == base.copy()
    assert repr(base) == "CompilerConfig(aipu_cores_used=2)"
    assert base.changed() == {"aipu_cores_used": 2}
    assert base.to_dict(only_changed=True) == {"aipu_cores_used": 2}
    assert dict(base)["aipu_cores_used"] == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("aipu_cores_used=4", ("aipu_cores_used", 4)),
        ("aipu-cores-used = 3", ("aipu_cores_used", 3)),
        ("aipu_cores=2", ("aipu_cores_used", 2)),
        ("frequency=400e6", ("frequency", 400_000_000)),
        ("frequency=400_000_000", ("frequency", 400_000_000)),
        ("l1_virtual_address=0x3001000000", ("l1_virtual_address", 206175207424)),
        ("enable_icr=false", ("enable_icr", False)),
        ("enable_icr=Yes", ("enable_icr", True)),
        ("mvm_utilization_limit=0.5", ("mvm_utilization_limit", 0.5)),
        ("force_h_tiling=null", ("force_h_tiling", None)),
        ("force_h_tiling=4", ("force_h_tiling", 4)),
        ("multicore_mode=pipeline", ("multicore_mode", MulticoreMode.PIPELINE)),
        ("model_name='my net'", ("model_name", "my net")),
        ("model_name=", ("model_name", "")),
        ("profiling_levels=[B], [K]", ("profiling_levels", ("B", "K"))),
        ("profiling_levels=", ("profiling_levels", ())),
    ],
)
def test_set_text_is_typed_through_the_table(text: str, expected: tuple[str, object]) -> None:
    assert parse_assignment(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("aipu_cores_used", r"--set must be given as key=value, not 'aipu_cores_used'"),
        ("=4", "--set must be given as key=value"),
        ("aipu_cores_used=5", "aipu_cores_used must be an integer 1-4, not 5"),
        ("aipu_cores_used=four", "aipu_cores_used must be an integer 1-4, not 'four'"),
        ("enable_icr=maybe", r"enable_icr must be a boolean \(true or false\), not 'maybe'"),
        ("mvm_utilization_limit=half", "mvm_utilization_limit must be a number"),
        ("tiling_depth=null", "tiling_depth must be an integer >= 1, not 'null'"),
        ("frequncy=4e8", "did you mean `frequency`"),
    ],
)
def test_bad_set_text(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_assignment(text)


def test_later_set_wins() -> None:
    assert parse_assignments(["tiling_depth=2", "tiling_depth=6"]) == {"tiling_depth": 6}


def test_pickle_and_deepcopy_keep_the_values() -> None:
    import copy
    import pickle

    config = CompilerConfig(aipu_cores_used=4, profiling_levels=["B"], force_h_tiling=2)
    assert pickle.loads(pickle.dumps(config)) == config
    clone = copy.deepcopy(config)
    assert clone == config and clone is not config
    clone.tiling_depth = 3
    assert config.tiling_depth == 1
