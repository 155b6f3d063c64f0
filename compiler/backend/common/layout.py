"""How one compiled instance spreads over its cores: the input of memplan and schedule.

`multicore.core_layout` builds it from the multicore mode (docs/architecture.md §5):

- single core (any mode with ``aipu_cores_used = 1``): everything on core 0.
- ``batch`` (and ``multiprocess``/``multithread`` with several cores, which run as a batch):
  every core runs the whole model on its own frame; activations, I/O and tiles exist once
  per core, constants once (weights multicast from one fetch).
- ``cooperative``: every layer is split over the cores (output channels or rows, by the
  cost model); activations between compute layers live in L1, a copy per core, each core
  multicasting its part to the cores that read it (`exchange`); the others in L2/DDR;
  barriers only where tokens cannot order the cores (`barriers`).
- ``pipeline``: contiguous stages of fusion groups, one stage per core; tensors crossing a
  stage live in L2/DDR; L2/DDR buffers are not reused within a frame (stages work on
  different frames at the same time).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from aipusim.isa.program import MulticoreMode


class Split(StrEnum):
    NONE = "none"
    CHANNELS = "channels"
    ROWS = "rows"
    #: tensor parallel (cooperative decode): each core multiplies its share of the input
    #: channels by its rows of the weights into int32 partial sums of every output channel;
    #: one DPU task on the first core sums the parts and requantizes (`multicore.split`)
    INPUTS = "inputs"
    #: cooperative decode: each core runs its own heads of a per-head attention layer on
    #: the DPU (Q·Kᵀ, its scale, softmax, P·V): the first ``heads / cores`` on core 0 and
    #: so on (`multicore.split.head_parallel`), every operand read at its heads' offset
    HEADS = "heads"


@dataclass(frozen=True)
class CoreLayout:
    cores: int = 1
    #: The mode the instance runs in (`target.Target.effective_mode`).
    mode: MulticoreMode = MulticoreMode.MULTIPROCESS
    core_of_group: dict[int, int] = field(default_factory=dict)  # pipeline stages
    shared_tensors: set[str] = field(default_factory=set)  # must live in L2/DDR
    splits: dict[int, Split] = field(default_factory=dict)  # cooperative: per layer index
    #: cooperative: per layer index, the estimated cycles per core of each split weighed
    split_cycles: dict[int, dict[str, int]] = field(default_factory=dict)
    #: cooperative: activations that may live in L1, a copy per core (`exchange`)
    l1_exchange: frozenset[str] = frozenset()
    #: Bytes per cycle of one core's per-frame weight fetch when the cores share streamed
    #: weights (`multicore.weight_fetch_bw`); None when no such fetch exists.
    weight_fetch_bw: float | None = None
    #: Bytes per cycle of one per-frame weight fetch multicast into every core's L1 (a
    #: cooperative row split's; `multicore.multicast_fetch_bw`); None when no such fetch
    #: exists.
    multicast_fetch_bw: float | None = None
    #: cooperative decode graph (`aipusim.compiler.decoder.cache_state`): every core moves
    #: its share of each layout copy between L2/DDR buffers (the KV cache's appends, GQA
    #: expansions and transposes) instead of core 0 moving it all (`schedule.tiles`)
    shared_copies: bool = False
    #: cooperative decode, tensor parallel: tensors each core computes and reads only its
    #: own channel part of (an FFN's hidden columns), never exchanged (`multicore.split`)
    local_tensors: frozenset[str] = frozenset()
    #: cooperative decode, attention split by heads: per layer index the query heads of its
    #: tensors (`Split.HEADS`; core k takes block k, `regions.part_range`)
    heads: dict[int, int] = field(default_factory=dict)

    def fetch_bw(self, split: Split) -> float | None:
        """Bytes per cycle of the per-frame fetch of a layer split ``split`` (None: its
        weights are not streamed): a cooperative row split's cores load the same weights,
        fetched once and multicast, so that one fetch has the path to itself; otherwise
        each core fetches its own weights (`weight_fetch_bw`).

        >>> CoreLayout(4, MulticoreMode.COOPERATIVE, weight_fetch_bw=16.0,
        ...            multicast_fetch_bw=64.0).fetch_bw(Split.ROWS)
        64.0
        """
        if self.cooperative and split is Split.ROWS:
            return self.multicast_fetch_bw
        return self.weight_fetch_bw

    @property
    def replicate(self) -> bool:
        """Batch on several cores: per-core copies of the frame data."""
        return self.cores > 1 and self.mode is MulticoreMode.BATCH

    @property
    def cooperative(self) -> bool:
        """Cooperative on several cores: every layer split over the cores."""
        return self.cores > 1 and self.mode is MulticoreMode.COOPERATIVE

    @property
    def pipeline(self) -> bool:
        """Pipeline on several cores: one stage of fusion groups per core."""
        return self.cores > 1 and self.mode is MulticoreMode.PIPELINE

    def group_cores(self, group: int) -> list[int]:
        """Cores that execute (part of) fusion group ``group``."""
        if self.replicate or self.cooperative:
            return list(range(self.cores))
        return [self.core_of_group.get(group, 0)]

    @property
    def all_cores(self) -> list[int]:
        return list(range(self.cores))


__all__ = ["CoreLayout", "Split"]
