"""What the back end compiles for: the arch, the knobs it reads, one cost model, the mode.

`Target.of` builds it once, in the ``lower`` pass, from the `CompilerConfig` and the
`Arch`; every later stage carries it (`ir.Lowered.target`) and every back-end function
that needs a knob, the arch or a cost takes it, instead of an untyped config and an arch
besides. It is frozen: a pass that changes a knob (multicore re-tiling with
``tiling_depth`` 1) hands the next stages a new one (`Target.with_knobs`).

It holds, decided once:

- `Knobs`: the config properties the back end reads, typed;
- ``cost``: the one `CostModel` at the compiled clock (``frequency``) and
  ``mvm_utilization_limit``, which every decision and estimate asks;
- ``mode``: the configured `MulticoreMode`; ``effective_mode``: the mode the instance
  really runs in (`aipusim.isa.program.effective_mode`: a Batch-1 mode on several cores
  runs as a batch); ``frames_per_start``: the frames one start carries.

`emit` copies the `Program`'s fields from it.

>>> from aipusim.arch import load_arch
>>> from aipusim.compiler import CompilerConfig
>>> t = Target.of(CompilerConfig(aipu_cores_used=4, resources_used=1.0), load_arch())
>>> t.mode, t.effective_mode, t.frames_per_start, t.cost.freq_hz
(<MulticoreMode.MULTIPROCESS: 'multiprocess'>, <MulticoreMode.BATCH: 'batch'>, 4, 800000000)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aipusim.arch import Arch
from aipusim.isa.cost import CostModel, cost_model
from aipusim.isa.program import MulticoreMode, effective_mode, frames_per_start

if TYPE_CHECKING:
    from aipusim.compiler.config import CompilerConfig


@dataclass(frozen=True)
class Knobs:
    """The compiler config properties the back end reads (`CompilerConfig` documents each;
    ``compiler/backend/README.md`` says what each does here)."""

    # multicore and scheduling
    aipu_cores_used: int
    multicore_mode: MulticoreMode
    resources_used: float
    pipeline_spatial_tiles: bool
    pipeline_channel_tiles: bool
    inter_operator_async: bool
    use_list_scheduler: bool
    unroll_prologue_epilogue: bool
    use_hw_tokens: bool
    group_ifdw_tasks: bool
    double_buffer: bool
    host_processes_used: int
    # tiling and memory planning
    max_memplan_attempts: int
    max_tiling_attempts: int
    force_h_tiling: int | None
    force_oc_tiling: int | None
    tiling_depth: int
    dfs_search_constraint: int | None
    # memory hierarchy and layout
    enable_buffer_promotion: bool
    split_buffer_promotion: bool
    io_memory_pool: str
    constant_memory_pool: str
    workspace_memory_pool: str
    l1_constraint: int | None
    l2_constraint: int | None
    ddr_constraint: int | None
    l1_size_used: int
    l2_size_used: int
    ddr_size_used: int
    l1_size_reserved: int
    l2_size_reserved: int
    l2_size_reserved_tasklist: int
    ddr_size_reserved: int
    ignore_weight_buffers: bool
    use_sysdma: bool
    dma_dual_channel: bool
    page_memory: bool
    elf_in_ddr: bool
    stream_tasklist: bool
    dpu_constants_home: str
    # IMC and MVM
    mvm_utilization_limit: float
    apply_pword_padding: bool
    enable_icr: bool
    icrx_force: int
    icrx_parallel_block_threshold: int
    icrx_max_factor: int
    enable_swicr: bool
    imc_double_buffer_pipeline: bool
    imc_double_buffer_sequential: bool
    # hardware, runtime and output
    frequency: int
    input_dmabuf: bool
    output_dmabuf: bool
    profiling_levels: tuple[str, ...]
    model_name: str

    @classmethod
    def of(cls, config: CompilerConfig) -> Knobs:
        """The knobs of a `CompilerConfig`, read once."""
        values = {f.name: getattr(config, f.name) for f in dataclasses.fields(cls)}
        values["profiling_levels"] = tuple(values["profiling_levels"])
        return cls(**values)


@dataclass(frozen=True)
class Target:
    """The arch, the knobs, the cost model and the multicore mode of one compile (see the
    module docstring)."""

    arch: Arch
    knobs: Knobs
    cost: CostModel
    mode: MulticoreMode
    effective_mode: MulticoreMode
    frames_per_start: int

    @classmethod
    def of(cls, config: CompilerConfig | Knobs, arch: Arch) -> Target:
        """The target of ``config`` (a `CompilerConfig` or `Knobs`) on ``arch``."""
        knobs = config if isinstance(config, Knobs) else Knobs.of(config)
        cores = knobs.aipu_cores_used
        return cls(
            arch=arch,
            knobs=knobs,
            cost=cost_model(arch, int(knobs.frequency), float(knobs.mvm_utilization_limit)),
            mode=MulticoreMode(knobs.multicore_mode),
            effective_mode=effective_mode(knobs.multicore_mode, cores),
            frames_per_start=frames_per_start(knobs.multicore_mode, cores),
        )

    @property
    def cores(self) -> int:
        """Cores of one instance (``aipu_cores_used``)."""
        return self.knobs.aipu_cores_used

    def with_knobs(self, **changes: Any) -> Target:
        """The same target with some knobs changed (everything derived is built again)."""
        return Target.of(dataclasses.replace(self.knobs, **changes), self.arch)


__all__ = ["Knobs", "Target"]
