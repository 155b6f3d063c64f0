"""Cooperative mode: activations that stay in L1, one copy per core, exchanged core to core.

A tensor qualifies when a compute layer (MVM, DWPU, DPU with constant weights) writes it and
only such layers read it: the memory plan then gives it a buffer at the same L1 offset on
every core (falling back to L2/DDR when the cores' L1 cannot hold it), each core computes
its part (rows or a channel slice) into its own copy and multicasts that part into the
copies of the cores that read it (`DmaCopy.dst_core_mask`, L1 -> L1s). The next layer
reads its input from its own L1. Graph outputs (the host reads them), the inputs and
outputs of layout moves (one core runs them) and of aliases stay in L2/DDR.

Which cores need a part (`part_destinations`): a layer split by rows reads only the rows
of its windows (`regions.input_rows`), so a row part goes to a neighbour only where the
neighbour's window reaches into it (the halo); a layer split by channels, or not split,
reads every row (a layer not split runs on the first core only).

>>> part_destinations([[(0, 5), (3, 8)]], 0, (0, 4))
{1: (3, 4)}
"""

from __future__ import annotations

from collections.abc import Sequence

from aipusim.compiler.backend.lower.layer import LayerPlan, LayerUnit

#: Units whose layers read and write their tensors through the tile code that knows about
#: per-core copies (`tiles.TileEmitter`).
_COMPUTE_UNITS = frozenset({LayerUnit.MVM, LayerUnit.DWPU, LayerUnit.DPU})


def _computes(layer: LayerPlan) -> bool:
    return layer.unit in _COMPUTE_UNITS and layer.runtime is None


def host_read_tensors(layers: Sequence[LayerPlan], outputs: Sequence[str]) -> set[str]:
    """The tensors the host reads: the graph ``outputs`` and the sources of the aliases
    (a final Reshape) they are."""
    host_read = set(outputs)
    for layer in reversed(layers):
        if layer.unit is LayerUnit.ALIAS and host_read & set(layer.outputs):
            host_read.update(layer.inputs)
    return host_read


def l1_exchange_tensors(layers: Sequence[LayerPlan], host_read: set[str]) -> frozenset[str]:
    """The activations of a cooperative program that may live in L1 on every core (module
    docstring); ``host_read``: tensors the host reads (graph outputs and their sources).

    >>> a = LayerPlan("a", "Relu", LayerUnit.DPU, ("x",), ("t",), (1,), (1,))
    >>> b = LayerPlan("b", "Relu", LayerUnit.DPU, ("t",), ("y",), (1,), (1,))
    >>> sorted(l1_exchange_tensors([a, b], {"y"}))
    ['t']
    """
    made = {o for layer in layers if _computes(layer) for o in layer.outputs}
    refused = {t for layer in layers if not _computes(layer) for t in layer.inputs}
    return frozenset(made - refused - host_read)


def part_destinations(
    needs: Sequence[Sequence[tuple[int, int]]], core: int, rows: tuple[int, int]
) -> dict[int, tuple[int, int]]:
    """The rows of ``core``'s part ``rows`` each other core reads, one range per core (a
    core that reads none of it is left out); ``needs[k][c]``: the input rows reader ``k``
    reads on core ``c`` (``(0, 0)``: none)."""
    out: dict[int, tuple[int, int]] = {}
    for c in range(len(needs[0]) if needs else 0):
        if c == core:
            continue
        spans = [(max(rows[0], n[c][0]), min(rows[1], n[c][1])) for n in needs]
        spans = [(a, b) for a, b in spans if a < b]
        if spans:
            out[c] = (min(a for a, _ in spans), max(b for _, b in spans))
    return out


__all__ = ["host_read_tensors", "l1_exchange_tensors", "part_destinations"]
