"""Pass ``imc``: the IMC mapping of every MVM layer, decided once for the whole program.

The tiler and the multicore split ask `imc.map_layer` what a candidate would cost; this pass
records the mappings the program will really use, after both have decided: for each MVM
layer, the layer mapped whole (its weight image, the report) and the mapping of every
(core part, output-channel tile) pair the schedule emits. Later passes (memory plan,
schedule, estimate, report) read these and never map again.

Per part and channel tile, a layer is mapped on the channels it computes (a split by input
channels: on the input channels of its part, `Split.INPUTS`); a cooperative
row split is mapped on one core's share of the rows when its weights are fetched every
frame (the replicated image must then be fetched by every core), never wider than the
whole layer's factor, which sizes its weight buffers. An MVM layer with run-time weights
(attention) is mapped per head; its operand is written by frame `WeightLoad`s.

>>> from aipusim.compiler.backend.lower.layer import ConvGeometry
>>> from aipusim.compiler.backend.common.layout import CoreLayout
>>> from aipusim.arch import load_arch
>>> geo = ConvGeometry(64, 600, 1, 1, 1, 1, 8, 8, 8, 8)
>>> from aipusim.isa.cost import cost_model
>>> m = map_tiles(geo, False, 2, 0, CoreLayout(), ImcOptions(), cost_model(load_arch()))
>>> [(t.oc_tile, t.cout_lo, t.cout_hi, t.mapping.col_blocks) for t in m]
[(0, 0, 300, 1), (1, 300, 600, 1)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from aipusim.compiler.backend.common.layout import CoreLayout, Split
from aipusim.compiler.backend.common.target import Target
from aipusim.compiler.backend.imc.mapper import ImcMapping, ImcOptions, map_layer
from aipusim.compiler.backend.lower.attention import head_mapping
from aipusim.compiler.backend.lower.layer import ConvGeometry, LayerPlan, LayerUnit
from aipusim.compiler.backend.tile.regions import part_range
from aipusim.compiler.backend.tile.tiler import Tiling
from aipusim.isa.cost import CostModel


@dataclass(frozen=True)
class TileMapping:
    """The mapping of one core part x one output-channel tile of a layer."""

    part: int
    oc_tile: int
    cout_lo: int  # output channels covered, of the core part's channels
    cout_hi: int
    mapping: ImcMapping


@dataclass(frozen=True)
class LayerMapping:
    """An MVM layer's IMC mappings: ``whole`` (the layer at once, or one head of a run-time
    operand) and ``tiles``, every (part, channel tile) the schedule emits, by part."""

    whole: ImcMapping
    tiles: tuple[TileMapping, ...]

    def of_part(self, part: int) -> tuple[TileMapping, ...]:
        """The channel tiles of one core part, in order."""
        return tuple(t for t in self.tiles if t.part == part)

    @property
    def largest_block_bytes(self) -> int:
        """The largest weight block any tile loads (sizes the L1 weight staging)."""
        blocks = [b.weight_bytes for t in self.tiles for b in t.mapping.blocks]
        return max(blocks or [b.weight_bytes for b in self.whole.blocks])


def map_tiles(
    geo: ConvGeometry,
    first_layer: bool,
    oc_tiles: int,
    layer_index: int,
    layout: CoreLayout,
    opts: ImcOptions,
    cost: CostModel,
    whole: ImcMapping | None = None,
    residual: bool = False,
) -> tuple[TileMapping, ...]:
    """The mapping of every (core part, channel tile) of one layer (see the module doc;
    ``residual``: a residual add is fused on its output stream, `imc.map_layer`)."""
    split = layout.splits.get(layer_index, Split.NONE)
    parts = layout.cores if split is not Split.NONE else 1
    fetch_bw = layout.fetch_bw(split)
    out = []
    for part in range(parts):
        cout = geo.cout
        if split is Split.CHANNELS:
            lo, hi = part_range(geo.cout, parts, part)
            cout = hi - lo
            if cout <= 0:
                continue  # more cores than channels: this core has none
        part_opts, out_h, cin = opts, geo.out_h, geo.cin
        if split is Split.INPUTS:  # this core's rows of the weights, every output channel
            lo, hi = part_range(geo.cin, parts, part)
            cin = hi - lo
            if cin <= 0:
                continue
        if split is Split.ROWS and fetch_bw:
            out_h = -(-geo.out_h // layout.cores)
            if opts.icrx_force == -1 and whole is not None:
                part_opts = replace(opts, icrx_max_factor=min(opts.icrx_max_factor, whole.icr))
        for oi in range(oc_tiles):
            lo, hi = part_range(cout, oc_tiles, oi)
            if hi <= lo:
                continue  # more channel tiles than channels
            sub = replace(geo, cout=hi - lo, out_h=out_h, cin=cin)
            m = map_layer(
                sub, cost, part_opts, first_layer=first_layer, fetch_bw=fetch_bw, residual=residual
            )
            out.append(TileMapping(part, oi, lo, hi, m))
    return tuple(out)


def map_whole(
    layer: LayerPlan, layer_index: int, layout: CoreLayout, opts: ImcOptions, cost: CostModel
) -> ImcMapping:
    """The layer mapped whole. A cooperative row split whose weights are fetched every frame
    takes the factor of one core's share of the rows (never wider): the layer was mapped for
    all its rows, where compute outweighs the fetch of a wide replicated image, but a core
    computing a share of the rows still fetches all of it."""
    geo = layer.geometry
    assert geo is not None, layer.name
    split = layout.splits.get(layer_index, Split.NONE)
    fetch_bw = layout.fetch_bw(split)
    residual = bool(layer.residual)
    whole = map_layer(
        geo, cost, opts, first_layer=layer.is_first, fetch_bw=fetch_bw, residual=residual
    )
    narrow = layout.cooperative and fetch_bw and split is Split.ROWS
    if not narrow or opts.icrx_force != -1 or whole.icr == 1:
        return whole
    capped = replace(opts, icrx_max_factor=whole.icr)
    share = replace(geo, out_h=-(-geo.out_h // layout.cores))
    r = map_layer(share, cost, capped, first_layer=layer.is_first, fetch_bw=fetch_bw).icr
    if r == whole.icr:
        return whole
    return map_layer(geo, cost, replace(opts, icrx_force=r), first_layer=layer.is_first)


def plan_mappings(
    layers: Sequence[LayerPlan],
    tilings: Sequence[Tiling],
    layout: CoreLayout,
    target: Target,
) -> tuple[LayerMapping | None, ...]:
    """The `LayerMapping` of every MVM layer (None for the others), index-aligned."""
    opts, cost = ImcOptions.from_config(target.knobs), target.cost
    out: list[LayerMapping | None] = []
    for i, (layer, tiling) in enumerate(zip(layers, tilings, strict=True)):
        if layer.unit is not LayerUnit.MVM or layer.geometry is None:
            out.append(None)
        elif layer.runtime is not None:
            out.append(LayerMapping(head_mapping(layer.runtime, cost, opts), ()))
        else:
            whole = map_whole(layer, i, layout, opts, cost)
            tiles = map_tiles(
                layer.geometry, layer.is_first, tiling.oc_tiles, i, layout, opts, cost, whole,
                residual=bool(layer.residual),
            )  # fmt: skip
            out.append(LayerMapping(whole, tiles))
    return tuple(out)


__all__ = [
    "LayerMapping",
    "TileMapping",
    "map_tiles",
    "map_whole",
    "part_range",
    "plan_mappings",
]
