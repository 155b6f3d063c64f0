"""The back end's typed IR: what each back-end pass takes and gives (docs/architecture.md §5).

Every stage is a frozen dataclass that extends the one before it with what its pass
decided, so a pass's signature says what it needs and what it adds (``fuse_residual``
and ``fuse_dpu_chains`` add nothing: they rewrite the layers, as a front-end pass rewrites
the graph):

    Graph --lower--> Lowered --fuse_residual--> Fused --fuse_dpu_chains--> Fused --tile-->
          Tiled --multicore--> Distributed --imc--> Mapped --pack--> Packed --memplan-->
          Placed --schedule--> Scheduled --estimate--> Estimated --emit--> Emitted

Per-layer decisions are tuples aligned with ``layers``. A stage never changes what an
earlier one decided, except where a pass documents a retry (multicore may re-tile with
``tiling_depth`` 1, memplan re-tiles and re-maps the layers that do not fit): it then
returns the new tilings or mappings in its own stage. ``dump()`` gives the stage as text
(``--dump-after``); ``verify()`` checks its invariants and raises `AssertionError` on a
compiler bug (the tests run it after every pass).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aipusim.compiler.backend.common.layout import CoreLayout, Split
from aipusim.compiler.backend.common.target import Target
from aipusim.compiler.backend.estimate.costs import LayerEstimate, PlanCost
from aipusim.compiler.backend.imc.plan import LayerMapping
from aipusim.compiler.backend.lower.layer import LayerPlan, LayerUnit
from aipusim.compiler.backend.memplan.buffers import MemPlan, verify_memplan
from aipusim.compiler.backend.pack.blobs import LayerConstants
from aipusim.compiler.backend.schedule.steps import Schedule
from aipusim.compiler.backend.tile.tiler import FusionGroup, Tiling
from aipusim.compiler.ir import Graph
from aipusim.compiler.quant.quantize import QuantizedGraph


@dataclass(frozen=True)
class Lowered:
    """Pass ``lower``: every node of the quantized graph on the unit that runs it."""

    graph: Graph
    #: The quantized graph's integer program (its `QStep` per node), None when the back
    #: end runs on a float graph (timing only: no constants image can be built).
    program: QuantizedGraph | None
    #: The arch, knobs, cost model and multicore mode this stage was built for (multicore
    #: may lower ``tiling_depth``; later passes read it here, not from the context).
    target: Target
    layers: tuple[LayerPlan, ...]

    def index_of(self, name: str) -> int:
        """Position of the layer called ``name``."""
        for i, layer in enumerate(self.layers):
            if layer.name == name:
                return i
        raise KeyError(name)

    def dump(self) -> str:
        lines = [f"# back end: {len(self.layers)} layers of {self.graph.name}"]
        for i, layer in enumerate(self.layers):
            lines.append(f"layer {i} {layer.name} ({layer.op}) on {layer.unit.value}")
            lines.append(f"  in {list(layer.inputs)} -> out {list(layer.outputs)}")
            detail = []
            if layer.geometry is not None:
                g = layer.geometry
                detail.append(
                    f"cin={g.cin} cout={g.cout} k={g.kh}x{g.kw} s={g.stride_h}x{g.stride_w} "
                    f"in={g.in_h}x{g.in_w} out={g.out_h}x{g.out_w} groups={g.groups}"
                )
            if layer.dpu_kind is not None:
                detail.append(f"dpu={layer.dpu_kind.value}")
            if layer.dwpu_kind is not None:
                detail.append(f"dwpu={layer.dwpu_kind.value}")
            if layer.lut.value != "none":
                detail.append(f"lut={layer.lut.value}")
            if layer.fused:
                detail.append(f"fused={list(layer.fused)}")
            if layer.residual:
                detail.append(f"residual add {layer.residual} of {layer.inputs[1]}")
            if layer.then.value != "none":
                detail.append(f"then {layer.then.value} {layer.fused[0]}")
            if layer.runtime is not None:
                rt = layer.runtime
                detail.append(f"run-time weights: {rt.heads} x ({rt.m}x{rt.k} @ {rt.k}x{rt.n})")
            if layer.matmul_choice is not None:
                detail.append(f"matmul on {layer.matmul_choice.unit}")
            detail.append(f"macs={layer.macs}")
            lines.append("  " + " ".join(detail))
        return "\n".join(lines)

    def verify(self) -> None:
        names = [layer.name for layer in self.layers]
        assert len(set(names)) == len(names), "layer names must be unique"
        known = set(self.graph.inputs)
        for layer in self.layers:
            missing = [t for t in layer.inputs if t not in known]
            assert not missing, f"{layer.name} reads {missing} before anything writes them"
            if layer.unit in (LayerUnit.MVM, LayerUnit.DWPU):
                assert layer.geometry is not None, f"{layer.name}: no window geometry"
            known.update(layer.outputs)


@dataclass(frozen=True)
class Fused(Lowered):
    """Passes ``fuse_residual`` and ``fuse_dpu_chains``: residual Adds (and their
    activations) folded into the MVM layers writing one of their operands
    (`aipusim.compiler.backend.lower.residual`), element-wise DPU ops and their activations into
    one DPU layer (`aipusim.compiler.backend.lower.dpu_chain`)."""


@dataclass(frozen=True)
class Tiled(Lowered):
    """Pass ``tile``: each layer's L1 tiling and the depth-first fusion groups."""

    tilings: tuple[Tiling, ...]
    groups: tuple[FusionGroup, ...]

    def dump(self) -> str:
        lines = [super().dump(), "# tiling"]
        for g in self.groups:
            names = [self.layers[i].name for i in g.layers]
            lines.append(f"group {g.index}: {names} h_tiles={g.h_tiles}")
        for layer, t in zip(self.layers, self.tilings, strict=True):
            lines.append(
                f"  {layer.name}: h={t.h_tiles} oc={t.oc_tiles} slots={t.slots} "
                f"l1={t.l1_bytes} B (in {list(t.in_tile_bytes)}, out {t.out_tile_bytes}, "
                f"psum {t.psum_bytes}, weights {t.weight_stage_bytes})"
            )
        return "\n".join(lines)

    def verify(self) -> None:
        super().verify()
        assert len(self.tilings) == len(self.layers), "a tiling per layer"
        order = [i for g in self.groups for i in g.layers]
        assert order == list(range(len(self.layers))), "groups cover the layers in order"
        for g in self.groups:
            assert all(self.tilings[i].group == g.index for i in g.layers), "group index"


@dataclass(frozen=True)
class Distributed(Tiled):
    """Pass ``multicore``: how the instance spreads over its cores."""

    layout: CoreLayout

    def dump(self) -> str:
        lay = self.layout
        lines = [
            super().dump(),
            f"# multicore: {lay.mode} on {lay.cores} core(s)"
            + (f", weight fetch {lay.weight_fetch_bw:.1f} B/cycle" if lay.weight_fetch_bw else "")
            + (f" ({lay.multicast_fetch_bw:.1f} multicast)" if lay.multicast_fetch_bw else ""),
        ]
        if lay.cooperative:
            for i, layer in enumerate(self.layers):
                lines.append(f"  {layer.name}: split {lay.splits.get(i, Split.NONE).value}")
        if lay.pipeline:
            for g in self.groups:
                lines.append(f"  group {g.index}: stage {lay.core_of_group.get(g.index, 0)}")
        return "\n".join(lines)

    def verify(self) -> None:
        super().verify()
        assert self.layout.cores == self.target.cores, "layout spans the cores"


@dataclass(frozen=True)
class Mapped(Distributed):
    """Pass ``imc``: every MVM layer's IMC mappings (None for the other layers)."""

    mappings: tuple[LayerMapping | None, ...]

    def dump(self) -> str:
        lines = [super().dump(), "# imc"]
        for layer, m in zip(self.layers, self.mappings, strict=True):
            if m is None:
                continue
            w = m.whole
            lines.append(
                f"  {layer.name}: rows={w.rows_needed} blocks={w.row_blocks}x{w.col_blocks} "
                f"icr={w.icr} swicr={w.swicr} vectors={w.vectors} weights={w.weight_bytes} B"
            )
            for t in m.tiles:
                tm = t.mapping
                lines.append(
                    f"    part {t.part} tile {t.oc_tile} cout {t.cout_lo}..{t.cout_hi}: "
                    f"icr={tm.icr} sets={tm.weight_sets} vectors={tm.vectors}"
                )
        return "\n".join(lines)

    def verify(self) -> None:
        super().verify()
        assert len(self.mappings) == len(self.layers), "a mapping slot per layer"
        for layer, m in zip(self.layers, self.mappings, strict=True):
            is_mvm = layer.unit is LayerUnit.MVM
            assert (m is not None) == is_mvm, f"{layer.name}: mapping iff MVM"


@dataclass(frozen=True)
class Packed(Mapped):
    """Pass ``pack``: every layer's constant bytes (`constants.LayerConstants`)."""

    constants: tuple[LayerConstants, ...]

    def dump(self) -> str:
        lines = [super().dump(), "# constants"]
        for layer, c in zip(self.layers, self.constants, strict=True):
            if c.nbytes:
                note = f" (incomplete: {c.incomplete})" if c.incomplete else ""
                lines.append(
                    f"  {layer.name}: weights {len(c.weights)} B, params {len(c.params)} B, "
                    f"operand {len(c.operand)} B{note}"
                )
        return "\n".join(lines)

    def verify(self) -> None:
        super().verify()
        assert len(self.constants) == len(self.layers), "constants per layer"
        for c, m in zip(self.constants, self.mappings, strict=True):
            if m is not None and m.tiles:
                assert len(c.blocks) == sum(len(t.mapping.blocks) for t in m.tiles)


@dataclass(frozen=True)
class Placed(Packed):
    """Pass ``memplan``: every buffer in a pool at an address."""

    memory: MemPlan

    def dump(self) -> str:
        lines = [super().dump(), f"# memory plan (attempt {self.memory.attempts})"]
        for buf in sorted(self.memory.buffers.values(), key=lambda b: (str(b.pool), b.addr)):
            lines.append(
                f"  {buf.name}: {buf.kind.value} {buf.size_bytes} B in {buf.pool} core "
                f"{buf.core} at {buf.addr:#x}, steps {buf.start}..{buf.end}"
            )
        return "\n".join(lines)

    def verify(self) -> None:
        super().verify()
        verify_memplan(self.memory)


@dataclass(frozen=True)
class Scheduled(Placed):
    """Pass ``schedule``: every core's tasks in order, with their hardware tokens."""

    schedule: Schedule

    @property
    def tasks(self) -> dict[int, list[Any]]:
        return self.schedule.tasks

    def dump(self) -> str:
        from aipusim.isa.tasklist import Tasklist
        from aipusim.isa.text import disassemble

        lines = [super().dump(), "# schedule"]
        for core, tasks in sorted(self.schedule.tasks.items()):
            lines.append(disassemble(Tasklist(core, tuple(tasks))))
        return "\n".join(lines)

    def verify(self) -> None:
        super().verify()
        from aipusim.isa.check import check_tasklists
        from aipusim.isa.tasklist import Tasklist

        lists = [Tasklist(c, tuple(t)) for c, t in sorted(self.schedule.tasks.items())]
        report = check_tasklists(lists, self.target.arch)
        assert report.ok, [p.message for p in report.errors][:3]


@dataclass(frozen=True)
class Estimated(Scheduled):
    """Pass ``estimate``: what each layer's tasks cost, from the one cost model."""

    estimates: tuple[LayerEstimate, ...]
    #: Frame tasks of no layer (the host handshakes ``input``/``output``), by name.
    other_estimates: Mapping[str, LayerEstimate]
    #: The INIT tasks (constants on chip, resident weights), all layers together.
    init: LayerEstimate
    #: Each layer's planned cycles on one core: its units' work with the weight fetches
    #: and loads compute does not hide (`estimate.plan_cost`; what the report calls the
    #: layer's estimated cycles).
    planned: tuple[PlanCost, ...]

    def dump(self) -> str:
        lines = [super().dump(), "# estimate (busy cycles per frame, per unit over the cores)"]
        for layer, e in zip(self.layers, self.estimates, strict=True):
            lines.append(f"  {layer.name}: {e.by_unit()}, {e.energy_pj:.0f} pJ")
        lines.append(f"  INIT: {self.init.by_unit()}")
        return "\n".join(lines)

    def verify(self) -> None:
        super().verify()
        assert len(self.estimates) == len(self.layers), "an estimate per layer"


@dataclass(frozen=True)
class Emitted(Estimated):
    """Pass ``emit``: the ``compiled_model/`` files, by path relative to the output dir."""

    #: each file's bytes, or the path it was written to (`emit_files` ``write_dir``)
    files: Mapping[str, bytes | Path]

    def dump(self) -> str:
        lines = [super().dump(), "# files"]
        lines += [
            f"  {name}: {data.stat().st_size if isinstance(data, Path) else len(data)} bytes"
            for name, data in sorted(self.files.items())
        ]
        return "\n".join(lines)

    def verify(self) -> None:
        super().verify()
        assert any(name.endswith("model.json") for name in self.files), "model.json emitted"


#: The stage each back-end pass gives, in pipeline order (both fusion passes give `Fused`).
STAGES: tuple[type[Lowered], ...] = (
    Lowered,
    Fused,
    Fused,
    Tiled,
    Distributed,
    Mapped,
    Packed,
    Placed,
    Scheduled,
    Estimated,
    Emitted,
)

__all__ = [
    "STAGES",
    "Distributed",
    "Emitted",
    "Estimated",
    "Fused",
    "Lowered",
    "Mapped",
    "Packed",
    "Placed",
    "Scheduled",
    "Tiled",
]
