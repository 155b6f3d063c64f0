"""Pass 7, tile: fit each layer's working set into the L1 budget (docs/architecture.md §5).

A layer is split along output rows H first (each input tile carries the halo rows its
window needs), then along output channels. Candidates are tried in that order, at most
``max_tiling_attempts`` of them; ``force_h_tiling`` / ``force_oc_tiling`` fix the factors.
The working set counts the input and output tiles (twice when the tiles are software
pipelined: ``pipeline_spatial_tiles`` / ``pipeline_channel_tiles``), int32 partial sums
when a layer has several row blocks, and the L1 staging of streamed weights unless
``ignore_weight_buffers``.

``tiling_depth`` > 1 fuses chains of up to that many layers depth-first: a fusion group
runs tile by tile through all its layers, so its intermediate tensors exist only as L1
tiles and never travel to L2 or DDR. ``dfs_search_constraint`` caps how many group lengths
the search evaluates at each start (1: greedy, take the longest that fits).

>>> from aipusim.arch import load_arch
>>> from aipusim.compiler import CompilerConfig
>>> budget_of_l1(Target.of(CompilerConfig(), load_arch()))
3670016
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from aipusim.base.errors import TilingError
from aipusim.compiler.backend.common.target import Target
from aipusim.compiler.backend.imc.mapper import ImcMapping, ImcOptions, map_layer
from aipusim.compiler.backend.lower.layer import (
    LayerPlan,
    LayerUnit,
    is_runtime,
    is_shortcut,
    memory_rows,
)
from aipusim.compiler.backend.tile.regions import (
    max_tile_rows,
    out_rows,
    runtime_shared,
    splittable_rows,
)

#: Bytes of one int32 partial sum.
PSUM_BYTES = 4


@dataclass(frozen=True)
class Tiling:
    """How one layer is cut. Sizes are bytes of ONE buffer slot."""

    h_tiles: int
    oc_tiles: int
    slots: int  # buffers per tile stream (2 = double buffered)
    in_tile_bytes: tuple[int, ...]
    out_tile_bytes: int
    psum_bytes: int
    weight_stage_bytes: int
    group: int  # fusion group index
    block_bytes: int = 0  # largest IMC weight block of one channel tile (MVM)
    out_rows: int = 0  # the most output rows one tile computes (halo rows included)
    fused_input: bool = False  # input is an intermediate of the group (L1 tile only)
    fused_output: bool = False  # output is an intermediate of the group

    @property
    def tiles(self) -> int:
        return self.h_tiles * self.oc_tiles

    @property
    def l1_bytes(self) -> int:
        ins = sum(self.in_tile_bytes) * self.slots
        return ins + self.out_tile_bytes * self.slots + self.psum_bytes + self.weight_stage_bytes


@dataclass(frozen=True)
class FusionGroup:
    """Layers run together tile by tile (depth-first); ``intermediates`` never leave L1."""

    index: int
    layers: tuple[int, ...]  # indices into the layer list
    h_tiles: int
    intermediates: tuple[str, ...] = ()


def budget_of_l1(target: Target) -> int:
    """L1 bytes per core the compiler may use: size used minus reserve, capped by the
    ``l1_constraint``; never more than the arch's budget."""
    knobs = target.knobs
    budget = min(knobs.l1_size_used - knobs.l1_size_reserved, target.arch.l1.budget_bytes)
    if knobs.l1_constraint is not None:
        budget = min(budget, knobs.l1_constraint)
    return budget


def psum_bytes(rows: int, out_w: int, mapping: ImcMapping) -> int:
    """Bytes of the int32 partial sums of ``rows`` output rows: every vector of the rows
    (``ceil(out_w / icr)`` per row) times the widest block's columns (ICR copies too)."""
    return PSUM_BYTES * rows * math.ceil(out_w / mapping.icr) * mapping.cols_used_max


@dataclass(frozen=True)
class TilePlan:
    """The tile pass's result: a tiling per layer and the fusion groups in order."""

    tilings: tuple[Tiling, ...]
    groups: tuple[FusionGroup, ...]


class Tiler:
    """Chooses tilings and fusion groups for a lowered layer list.

    ``at_least`` maps a layer index to the (row, channel) tile counts a memory-plan retry
    asks for at least; such a layer is tiled alone (no fusion)."""

    def __init__(
        self,
        layers: Sequence[LayerPlan],
        target: Target,
        graph: Any,
        at_least: Mapping[int, tuple[int, int]] | None = None,
    ) -> None:
        self.layers = layers
        config = self.cfg = target.knobs
        self.arch = target.arch
        self.cost = target.cost
        self.graph = graph
        self.at_least = dict(at_least or {})
        self.budget = budget_of_l1(target)
        self.imc_opts = ImcOptions.from_config(config)
        self.double_buffer_weights = (
            config.imc_double_buffer_pipeline or config.imc_double_buffer_sequential
        )

    # -- one layer ---------------------------------------------------------------------
    def working_set(
        self,
        layer: LayerPlan,
        h: int,
        oc: int,
        rows: tuple[int, int] | None = None,
    ) -> Tiling:
        """The tiling of ``layer`` cut in ``h`` row tiles and ``oc`` channel tiles;
        ``rows``: the most output and input rows one tile has (default: the layer's own
        row tiles, `regions.max_tile_rows`; a fusion group passes its halo rows)."""
        pipelined = (h > 1 and self.cfg.pipeline_spatial_tiles) or (
            oc > 1 and self.cfg.pipeline_channel_tiles
        )
        slots = 2 if pipelined else 1
        if rows is None:
            outs, ins = max_tile_rows([layer], h)
            rows = (outs[0], ins[0])
        rows_out, rows_in = rows
        geo = layer.geometry
        out_total = out_rows(layer)
        out_row_bytes = -(-sum(layer.out_bytes) // max(1, out_total))
        if geo is not None:
            c_t = math.ceil(geo.cout / oc)
            out_tile = -(-rows_out * out_row_bytes * c_t // max(1, geo.cout))
        else:
            out_tile = rows_out * out_row_bytes
        in_tiles = tuple(
            self.in_tile(layer, k, rows_out if is_shortcut(layer, k) else rows_in, oc)
            for k in range(len(layer.in_bytes))
        )
        psum = 0
        stage = 0
        block = 0
        if layer.unit is LayerUnit.MVM:
            # an output-channel tile maps its own (narrower) weight blocks; the row blocks
            # (partial sums when there are several) do not depend on the channels
            sub = replace(geo, cout=math.ceil(geo.cout / oc))
            tile_map = map_layer(
                sub, self.cost, self.imc_opts, first_layer=layer.is_first,
                residual=bool(layer.residual),
            )  # fmt: skip
            if tile_map.row_blocks > 1:
                psum = psum_bytes(rows_out, geo.out_w, tile_map)
            block = max(b.weight_bytes for b in tile_map.blocks)
            # run-time weights load from the input tile itself: nothing to stage
            if not self.cfg.ignore_weight_buffers and not is_runtime(layer):
                stage = block * (2 if self.double_buffer_weights else 1)
        return Tiling(
            h, oc, slots, in_tiles, out_tile, psum, stage, group=-1, block_bytes=block,
            out_rows=rows_out,
        )  # fmt: skip

    def in_tile(self, layer: LayerPlan, k: int, rows_in: int, oc: int) -> int:
        """Bytes of one tile of input ``k``: its rows the tile reads (a depthwise layer's
        channel tile reads its channels only); an operand broadcast over the output (not
        cut in rows) whole."""
        size = layer.in_bytes[k]
        name = layer.inputs[k]
        geo = layer.geometry
        if is_runtime(layer):  # rows are heads
            if runtime_shared(layer, k, size):
                return size
            return -(-size // max(1, geo.in_h)) * rows_in
        total = geo.src_rows if geo is not None else memory_rows(self.graph.shape(name))
        if is_shortcut(layer, k):  # laid out as the output: its rows are output rows
            total = geo.out_h
        if geo is None and total != layer.rows:
            return size  # a broadcast operand: every tile reads all of it
        row_bytes = -(-size // max(1, total))
        nbytes = min(size, rows_in * row_bytes)
        if layer.unit is LayerUnit.DWPU and oc > 1:
            nbytes = -(-nbytes * math.ceil(geo.cout / oc) // max(1, geo.cout))
        return max(1, nbytes)

    def tile_layer(self, index: int) -> Tiling:
        """The first tiling that fits: rows are split while the row-dependent part of the
        working set is what overflows, then output channels (which also shrink the weight
        blocks); at most ``max_tiling_attempts`` candidates."""
        layer = self.layers[index]
        if layer.unit in (LayerUnit.ALIAS, LayerUnit.DMA):
            return Tiling(1, 1, 1, (), 0, 0, 0, group=-1)
        out_h = out_rows(layer)
        cout = layer.geometry.cout if layer.geometry else 1
        h_ok = splittable_rows(layer)
        # (run-time weights are cut by heads only: each head's operand loads whole)
        oc_ok = layer.unit in (LayerUnit.MVM, LayerUnit.DWPU) and cout > 1 and not is_runtime(layer)
        forced = self.cfg.force_h_tiling is not None or self.cfg.force_oc_tiling is not None
        if forced:
            h = min(self.cfg.force_h_tiling or 1, out_h) if h_ok else 1
            oc = min(self.cfg.force_oc_tiling or 1, cout) if oc_ok else 1
        else:
            # a memplan retry asks for finer tiles than the first choice
            min_h, min_oc = self.at_least.get(index, (1, 1))
            h = min(out_h, min_h) if h_ok else 1
            oc = min(cout, min_oc) if oc_ok else 1
        tried = []
        for _ in range(self.cfg.max_tiling_attempts):
            t = self.working_set(layer, h, oc)
            tried.append(t)
            if t.l1_bytes <= self.budget:
                return t
            if forced:
                break
            if h_ok and h < out_h and t.weight_stage_bytes < self.budget:
                h = min(out_h, h * 2)
            elif oc_ok and oc < cout:
                oc = min(cout, oc * 2)
            else:
                break
        best = min(tried, key=lambda t: t.l1_bytes)
        raise TilingError(
            f"layer {layer.name} ({layer.op}) must fit the L1 budget of {self.budget} bytes; "
            f"after {len(tried)} tiling attempts (max_tiling_attempts="
            f"{self.cfg.max_tiling_attempts}) the smallest working set is {best.l1_bytes} "
            f"bytes at h_tiles={best.h_tiles}, oc_tiles={best.oc_tiles}"
        )

    # -- fusion groups -------------------------------------------------------------------
    def chain_next(self, i: int) -> int | None:
        """The index of the layer that alone consumes layer i's only output, if adjacent."""
        a = self.layers[i]
        if i + 1 >= len(self.layers) or len(a.outputs) != 1:
            return None
        b = self.layers[i + 1]
        out = a.outputs[0]
        fusable = (LayerUnit.MVM, LayerUnit.DWPU, LayerUnit.DPU)
        if a.unit not in fusable or b.unit not in fusable:
            return None
        if not (splittable_rows(a) and splittable_rows(b)):
            return None
        if i in self.at_least or i + 1 in self.at_least:
            return None
        # (a fused residual add reads its shortcut besides the chained tile)
        if b.inputs[:1] != (out,) or (len(b.inputs) > 1 and not b.residual):
            return None
        if out in b.inputs[1:] or self.graph.is_output(out) or len(self.graph.consumers(out)) != 1:
            return None
        return i + 1

    def group_tiling(self, idxs: list[int]) -> list[Tiling] | None:
        """Common H tiling of a fusion group, or None when no candidate fits."""
        last = self.layers[idxs[-1]]
        out_h = out_rows(last)
        h = 1
        for attempt in range(self.cfg.max_tiling_attempts):
            del attempt
            tilings = self._group_at(idxs, h)
            if sum(t.l1_bytes for t in tilings) <= self.budget:
                return tilings
            if h >= out_h:
                return None
            h = min(out_h, h * 2)
        return None

    def _group_at(self, idxs: list[int], h: int) -> list[Tiling]:
        layers = [self.layers[i] for i in idxs]
        outs, ins = max_tile_rows(layers, h)
        out = []
        for k, i in enumerate(idxs):
            t = self.working_set(self.layers[i], h, 1, rows=(outs[k], ins[k]))
            fused_in, fused_out = k > 0, k < len(idxs) - 1
            # a fused input is the previous layer's output tile: count it once (there); a
            # residual add's shortcut still has its own tile
            ins_k = t.in_tile_bytes
            if fused_in:
                ins_k = (0, *ins_k[1:]) if len(ins_k) > 1 else ()
            out.append(
                replace(t, in_tile_bytes=ins_k, fused_input=fused_in, fused_output=fused_out)
            )
        return out

    def run(self) -> TilePlan:
        groups: list[FusionGroup] = []
        tilings: list[Tiling | None] = [None] * len(self.layers)
        depth = self.cfg.tiling_depth
        i = 0
        while i < len(self.layers):
            chain = [i]
            while len(chain) < depth:
                nxt = self.chain_next(chain[-1])
                if nxt is None:
                    break
                chain.append(nxt)
            chosen: tuple[list[int], list[Tiling]] | None = None
            if len(chain) > 1:
                lengths = list(range(len(chain), 1, -1))
                if self.cfg.dfs_search_constraint is not None:
                    lengths = lengths[: self.cfg.dfs_search_constraint]
                best_saved = -1
                for n in lengths:
                    candidate = self.group_tiling(chain[:n])
                    if candidate is None:
                        continue
                    saved = sum(self.layers[j].out_bytes[0] for j in chain[: n - 1])
                    if saved > best_saved:
                        best_saved, chosen = saved, (chain[:n], candidate)
            if chosen is None:
                chosen = ([i], [self.tile_layer(i)])
            idxs, chosen_tilings = chosen
            g = FusionGroup(
                len(groups),
                tuple(idxs),
                chosen_tilings[0].h_tiles,
                tuple(self.layers[j].outputs[0] for j in idxs[:-1]),
            )
            for j, t in zip(idxs, chosen_tilings, strict=True):
                tilings[j] = replace(t, group=g.index)
            groups.append(g)
            i = idxs[-1] + 1
        assert all(t is not None for t in tilings), "every layer is in a group"
        return TilePlan(tuple(t for t in tilings if t is not None), tuple(groups))


def tile_layers(layers: Sequence[LayerPlan], target: Target, graph: Any) -> TilePlan:
    """The tiling of every layer and the fusion groups in order."""
    return Tiler(layers, target, graph).run()


__all__ = [
    "PSUM_BYTES",
    "FusionGroup",
    "TilePlan",
    "Tiler",
    "Tiling",
    "budget_of_l1",
    "tile_layers",
]
