"""Every `CompilerConfig` property, declared once (reference: compiler-config-reference).

The reference lists 94 rows; ``quantization_debug`` appears twice (quantization and
profiling), so there are 93 distinct properties. Defaults are the reference's; properties the
reference shows without a default (the paths) default to ``None``. Ranges not stated by the
reference are the smallest that make sense (sizes and attempt counts >= 1) and say so in
their ``doc``. ``perf=True`` marks the properties that change simulated time or energy;
``quant=True`` those that change the quantized model (the quantization cache's key).
``extension=True`` marks the aipusim-only properties (not in the reference; each says so in
its ``doc``): ``histogram_range_method`` and ``histogram_percentile``.

>>> sum(not p.extension for p in PROPERTIES.values()), len(PROPERTIES)
(93, 95)
>>> PROPERTIES["aipu_cores_used"].valid_text()
'an integer 1-4'
"""

from __future__ import annotations

from types import MappingProxyType

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
from aipusim.compiler.config.spec import Kind, Prop, Section

# Memory pool names as the reference spells them.
POOLS = ("global.ddr", "global.l2", "global.l1")
DPU_CONSTANT_HOMES = ("global.ddr", "global.l2")
INSTRUCTION_HOMES = ("default", "l2")

_B, _I, _F, _S, _P, _E, _L = (
    Kind.BOOL,
    Kind.INT,
    Kind.FLOAT,
    Kind.STR,
    Kind.PATH,
    Kind.ENUM,
    Kind.ENUM_LIST,
)

_ROWS: tuple[Prop, ...] = (
    # -- quantization ------------------------------------------------------------------
    Prop("compiler_mode", _E, CompilerMode.QUANTIZE_AND_LOWER, Section.QUANTIZATION,
         "Quantize and lower, stop after quantization, or lower an already quantized model.",
         enum=CompilerMode),
    Prop("quantization_scheme", _E, QuantizationScheme.PER_TENSOR_HISTOGRAM,
         Section.QUANTIZATION, "Observer used to pick activation scales.",
         enum=QuantizationScheme, quant=True),
    Prop("histogram_range_method", _E, HistogramRangeMethod.MSE, Section.QUANTIZATION,
         "aipusim extension: how histogram observers (the histogram and hybrid schemes) "
         "pick an activation's range: lowest estimated MSE, percentile or entropy (KL).",
         enum=HistogramRangeMethod, extension=True, quant=True),
    Prop("histogram_percentile", _F, 99.99, Section.QUANTIZATION,
         "aipusim extension: percent of an activation's values kept inside its range on "
         "each side when histogram_range_method is percentile.",
         minimum=50, maximum=100, exclusive_minimum=True, extension=True, quant=True),
    Prop("quantize_dw_channel_wise", _B, False, Section.QUANTIZATION,
         "Give depthwise convolutions one scale per channel instead of one per tensor.",
         quant=True),
    Prop("onnx_opset_version", _I, 17, Section.QUANTIZATION,
         "Opset the model is converted to before import.", minimum=17),
    Prop("quantization_debug", _B, False, Section.QUANTIZATION,
         "Write the quantized model out so its accuracy can be inspected."),
    Prop("remove_io_quantization", _B, False, Section.QUANTIZATION,
         "Drop the quantize/dequantize steps at the model inputs and outputs.", perf=True,
         quant=True),
    Prop("quantized_graph_export", _B, True, Section.QUANTIZATION,
         "Write the quantized graph as JSON next to the quantized model."),
    # -- graph transformations -----------------------------------------------------------
    Prop("apply_pword_padding", _B, True, Section.GRAPH_TRANSFORMATIONS,
         "Round input channels up to the hardware word (PWORD) the MVM consumes.", perf=True),
    Prop("rewrite_concat_to_resadd", _B, True, Section.GRAPH_TRANSFORMATIONS,
         "Express Concat as pad, shift and add, since there is no concat unit.", perf=True),
    Prop("rewrite_dense_to_conv2d", _B, True, Section.GRAPH_TRANSFORMATIONS,
         "Turn dense (Gemm/MatMul) layers into 1x1 convolutions.", perf=True),
    Prop("remove_io_padding_and_layout_transform", _B, True, Section.GRAPH_TRANSFORMATIONS,
         "Leave input padding and layout changes to the host pipeline.", perf=True),
    Prop("apply_arithmetic_simplification", _B, True, Section.GRAPH_TRANSFORMATIONS,
         "Fold and merge arithmetic; may change results in the last bits.", perf=True),
    Prop("simplify_mac_before_after_lut", _B, True, Section.GRAPH_TRANSFORMATIONS,
         "Merge scale/offset arithmetic next to a lookup-table activation into the table.",
         perf=True),
    Prop("validate_operators", _B, True, Section.GRAPH_TRANSFORMATIONS,
         "Check up front that every operator can run on some unit."),
    # -- graph cleaner -----------------------------------------------------------------
    Prop("run_graph_cleaner", _B, True, Section.GRAPH_CLEANER,
         "Move host pre/post-processing out of the graph that runs on the AIPU.", perf=True),
    Prop("graph_cleaner_split_pre_post_processing", _B, True, Section.GRAPH_CLEANER,
         "Clean pre-processing and post-processing in two separate passes."),
    Prop("graph_cleaner_condition", _E, None, Section.GRAPH_CLEANER,
         "Rule that picks the node where the host part starts.", perf=True, nullable=True,
         enum=GraphCleanerCondition),
    Prop("graph_cleaner_node", _E, None, Section.GRAPH_CLEANER,
         "Operator type the cleaner rule looks at.", perf=True, nullable=True,
         enum=GraphCleanerNode),
    Prop("graph_cleaner_threshold", _I, 0, Section.GRAPH_CLEANER,
         "Threshold of the cleaner rule (a tensor size, so never negative).", perf=True,
         minimum=0),
    Prop("graph_cleaner_dump_core_onnx", _P, None, Section.GRAPH_CLEANER,
         "File name for the cleaned core graph (debugging).", nullable=True),
    Prop("graph_cleaner_dump_full_opt_onnx", _P, None, Section.GRAPH_CLEANER,
         "File name for the whole optimised graph after cleaning (debugging).", nullable=True),
    Prop("remove_layout_transform_from_preamble", _B, False, Section.GRAPH_CLEANER,
         "Drop leading transpose/reshape ops of NHWC models.", perf=True),
    # -- multi-core and scheduling -----------------------------------------------------
    Prop("aipu_cores_used", _I, 1, Section.MULTICORE,
         "Cores one compiled instance spans.", perf=True, minimum=1, maximum=4),
    Prop("multicore_mode", _E, MulticoreMode.MULTIPROCESS, Section.MULTICORE,
         "How the cores share work: instances, batch, cooperative or pipeline.", perf=True,
         enum=MulticoreMode),
    Prop("pipeline_spatial_tiles", _B, True, Section.MULTICORE,
         "Overlap load, compute and store of consecutive height tiles.", perf=True),
    Prop("pipeline_channel_tiles", _B, True, Section.MULTICORE,
         "Overlap load, compute and store of consecutive output-channel tiles.", perf=True),
    Prop("inter_operator_async", _B, True, Section.MULTICORE,
         "Let an operator start before the previous one has fully finished.", perf=True),
    Prop("use_list_scheduler", _B, False, Section.MULTICORE,
         "Order tasks by critical path with unit occupancy in mind.", perf=True),
    Prop("unroll_prologue_epilogue", _B, False, Section.MULTICORE,
         "Unroll pipeline fill and drain so they overlap with neighbours.", perf=True),
    Prop("use_hw_tokens", _B, True, Section.MULTICORE,
         "Synchronise units with hardware tokens rather than control-core polling.",
         perf=True),
    Prop("group_ifdw_tasks", _B, False, Section.MULTICORE,
         "Issue IMC weight loads (IFDW) early so weight sets are ready sooner.", perf=True),
    Prop("double_buffer", _B, True, Section.MULTICORE,
         "Overlap host-device transfers of the next frame with compute.", perf=True),
    Prop("host_processes_used", _I, 1, Section.MULTICORE,
         "Host processes that feed the device (at least one).", perf=True, minimum=1),
    # -- tiling and memory planning ------------------------------------------------------
    Prop("max_memplan_attempts", _I, 5, Section.TILING,
         "How often the memory planner retries with tighter tiling.", minimum=1),
    Prop("max_tiling_attempts", _I, 8, Section.TILING,
         "How many tilings are tried per operator before giving up.", minimum=1),
    Prop("force_h_tiling", _I, None, Section.TILING,
         "Split every operator into this many height tiles.", perf=True, nullable=True,
         minimum=1),
    Prop("force_oc_tiling", _I, None, Section.TILING,
         "Split every operator into this many output-channel tiles.", perf=True,
         nullable=True, minimum=1),
    Prop("tiling_depth", _I, 1, Section.TILING,
         "Consecutive operators fused depth-first (1 = off, 6 = typical).", perf=True,
         minimum=1),
    Prop("dfs_search_constraint", _I, None, Section.TILING,
         "Bound on the depth-first fusion search (1 for very large graphs).", perf=True,
         nullable=True, minimum=1),
    # -- memory hierarchy ----------------------------------------------------------------
    Prop("enable_buffer_promotion", _B, True, Section.MEMORY,
         "Move buffers up from DDR to L2 to L1 while they fit.", perf=True),
    Prop("split_buffer_promotion", _B, False, Section.MEMORY,
         "Promote to L1 and to L2 in two passes with depth-first scheduling between.",
         perf=True),
    Prop("io_memory_pool", _S, "global.ddr", Section.MEMORY,
         "Where input/output buffers start out.", perf=True, choices=POOLS),
    Prop("constant_memory_pool", _S, "global.ddr", Section.MEMORY,
         "Where constant buffers (weights, biases) start out.", perf=True, choices=POOLS),
    Prop("workspace_memory_pool", _S, "global.ddr", Section.MEMORY,
         "Where intermediate activation buffers start out.", perf=True, choices=POOLS),
    Prop("l1_constraint", _I, None, Section.MEMORY,
         "Cap on the L1 bytes the compiler may use.", perf=True, nullable=True, minimum=1,
         unit="bytes"),
    Prop("l2_constraint", _I, None, Section.MEMORY,
         "Cap on the L2 bytes the compiler may use.", perf=True, nullable=True, minimum=1,
         unit="bytes"),
    Prop("ddr_constraint", _I, None, Section.MEMORY,
         "Cap on the DDR bytes the compiler may use.", perf=True, nullable=True, minimum=1,
         unit="bytes"),
    Prop("l1_size_used", _I, 4194304, Section.MEMORY,
         "L1 bytes per core available to the compiler.", perf=True, minimum=1, unit="bytes"),
    Prop("l2_size_used", _I, 33554432, Section.MEMORY,
         "L2 bytes available to the compiler.", perf=True, minimum=1, unit="bytes"),
    Prop("ddr_size_used", _I, 1073741824, Section.MEMORY,
         "DDR bytes available to the compiler.", perf=True, minimum=1, unit="bytes"),
    Prop("use_sysdma", _B, False, Section.MEMORY,
         "Fetch weights DDR -> L2 with the system DMA; core DMA then does L2 -> L1.",
         perf=True),
    Prop("dma_dual_channel", _B, True, Section.MEMORY,
         "Use both channels of each core DMA.", perf=True),
    Prop("page_memory", _B, True, Section.MEMORY,
         "Allocate L2/DDR in pages to limit fragmentation.", perf=True),
    Prop("elf_in_ddr", _B, True, Section.MEMORY,
         "Keep the program image in DDR instead of L2.", perf=True),
    Prop("stream_tasklist", _B, True, Section.MEMORY,
         "Load the tasklist in chunks while it runs instead of all up front.", perf=True),
    Prop("dpu_constants_home", _S, "global.l2", Section.MEMORY,
         "Memory that holds DPU constants (LUTs, scales).", perf=True,
         choices=DPU_CONSTANT_HOMES),
    # -- IMC and MVM ---------------------------------------------------------------------
    Prop("mvm_utilization_limit", _F, 1.0, Section.IMC,
         "Share of the MVM array kept active; lower trades speed for power.", perf=True,
         minimum=0.125, maximum=1.0),
    Prop("enable_icr", _B, True, Section.IMC,
         "Replicate weights of narrow layers across idle columns (in-core replication).",
         perf=True),
    Prop("icrx_force", _I, -1, Section.IMC,
         "Use this replication factor everywhere; -1 lets the compiler choose.", perf=True,
         minimum=1, maximum=8, special=(-1,)),
    Prop("icrx_parallel_block_threshold", _I, 4, Section.IMC,
         "Replicate only layers that use at most this many parallel IMC blocks.", perf=True,
         minimum=1, maximum=4),
    Prop("icrx_max_factor", _I, 8, Section.IMC,
         "Largest replication factor along the image X direction.", perf=True, minimum=2,
         maximum=8),
    Prop("enable_swicr", _B, True, Section.IMC,
         "Replicate along rows for first layers with few input channels (subword ICR).",
         perf=True),
    Prop("imc_double_buffer_pipeline", _B, False, Section.IMC,
         "Load the next weight set while computing, inside pipelined sections.", perf=True),
    Prop("imc_double_buffer_sequential", _B, False, Section.IMC,
         "Load the next weight set while computing, inside sequential sections.", perf=True),
    Prop("dpu_allocation_algorithm", _E, DPUAllocationAlgorithm.TRY_ALL, Section.IMC,
         "Register allocator for DPU programs.", enum=DPUAllocationAlgorithm),
    Prop("softmax_neutral_value", _F, -100000.0, Section.IMC,
         "Value fed to softmax for padding lanes; must drive their output to zero."),
    # -- output and paths ------------------------------------------------------------------
    Prop("output_dir", _P, None, Section.OUTPUT,
         "Folder for compiler outputs (the CLI's -o).", nullable=True),
    Prop("remove_output_dir", _B, False, Section.OUTPUT,
         "Delete the output folder before compiling."),
    Prop("model_name", _S, "", Section.OUTPUT,
         "Name used in logs and to pick model-specific presets."),
    Prop("save_error_artifact", _B, False, Section.OUTPUT,
         "On failure, zip the lowered model and the error for a bug report."),
    Prop("randomize_onnx_model", _B, True, Section.OUTPUT,
         "Replace weights with random values in the error zip."),
    # -- hardware and runtime ------------------------------------------------------------
    Prop("frequency", _I, 800000000, Section.HARDWARE,
         "AIPU clock in Hz.", perf=True, minimum=20_000_000, maximum=800_000_000, unit="Hz"),
    Prop("resources_used", _F, 1.0, Section.HARDWARE,
         "Share of on-chip memory an instance may use, in quarters.", perf=True, minimum=0,
         exclusive_minimum=True, maximum=1, step=0.25),
    Prop("input_dmabuf", _B, False, Section.HARDWARE,
         "Hand inputs to the device through DMA buffers (no extra host copy).", perf=True),
    Prop("output_dmabuf", _B, False, Section.HARDWARE,
         "Take outputs from the device through DMA buffers (no extra host copy).",
         perf=True),
    # -- profiling and debugging -----------------------------------------------------------
    Prop("profiling_levels", _L, (), Section.PROFILING,
         "Trace tags to record; each one adds trace-writing cost.", perf=True,
         enum=ProfilingLevel),
    Prop("profiling_drop_percentile", _F, 0.25, Section.PROFILING,
         "Percent of samples dropped at each end before statistics (0.25 = 0.25 %).",
         minimum=0, maximum=50, exclusive_maximum=True),
    Prop("trace_tvm_passes", _B, False, Section.PROFILING,
         "Record pass start/end times into pass_dependency_graph.json."),
    Prop("propagate_span_information", _B, True, Section.PROFILING,
         "Keep source-node names attached through every pass."),
    Prop("model_debug_save_dir", _P, None, Section.PROFILING,
         "Folder for intermediate models kept for debugging.", nullable=True),
    # -- internal paths --------------------------------------------------------------------
    Prop("compiler_dir", _P, None, Section.INTERNAL_PATHS,
         "Root of the compiler installation.", nullable=True),
    Prop("runtime_dir", _P, None, Section.INTERNAL_PATHS,
         "Root of the runtime installation.", nullable=True),
    Prop("device_dir", _P, None, Section.INTERNAL_PATHS,
         "Folder with device resources.", nullable=True),
    # -- memory layout constants -----------------------------------------------------------
    Prop("l1_size_reserved", _I, 524288, Section.MEMORY_LAYOUT,
         "L1 bytes per core kept for the system.", perf=True, minimum=0, unit="bytes"),
    Prop("l2_size_reserved", _I, 1245184, Section.MEMORY_LAYOUT,
         "L2 bytes kept for the system.", perf=True, minimum=0, unit="bytes"),
    Prop("l2_size_reserved_tasklist", _I, 1048576, Section.MEMORY_LAYOUT,
         "L2 bytes kept per core for its tasklist.", perf=True, minimum=0, unit="bytes"),
    Prop("ddr_size_max", _I, 1073741824, Section.MEMORY_LAYOUT,
         "Total DDR bytes the device exposes.", minimum=1, unit="bytes"),
    Prop("ddr_size_reserved", _I, 33554432, Section.MEMORY_LAYOUT,
         "DDR bytes kept for the system.", perf=True, minimum=0, unit="bytes"),
    Prop("l1_virtual_address", _I, 206175207424, Section.MEMORY_LAYOUT,
         "Address at which a core sees its own L1.", minimum=0),
    Prop("l1_core0_physical_address", _I, 402653184, Section.MEMORY_LAYOUT,
         "Physical address of core 0's L1 (the simulator has no virtual memory).", minimum=0),
    Prop("dpu_instructions_home", _S, "default", Section.MEMORY_LAYOUT,
         "Where DPU programs are stored.", perf=True, choices=INSTRUCTION_HOMES),
    Prop("dwpu_instructions_home", _S, "default", Section.MEMORY_LAYOUT,
         "Where DWPU programs are stored.", perf=True, choices=INSTRUCTION_HOMES),
    Prop("ignore_weight_buffers", _B, True, Section.MEMORY_LAYOUT,
         "Leave weight buffers out when choosing tiling factors.", perf=True),
)  # fmt: skip

#: name -> property, in reference order.
PROPERTIES: MappingProxyType[str, Prop] = MappingProxyType({p.name: p for p in _ROWS})
assert len(PROPERTIES) == len(_ROWS), "a property is declared twice"

#: Short keyword names of the reference's Python example -> property names.
ALIASES: MappingProxyType[str, str] = MappingProxyType(
    {
        "aipu_cores": "aipu_cores_used",
        "resources": "resources_used",
        "ptq_scheme": "quantization_scheme",
    }
)

__all__ = ["ALIASES", "DPU_CONSTANT_HOMES", "INSTRUCTION_HOMES", "POOLS", "PROPERTIES"]
