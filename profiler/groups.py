"""Layers in a few groups a legend can show: the first part of their ONNX names
(``/layer2/1/conv1/Conv`` is in ``layer2``), in network order, and contiguous runs of
those when there are more than a legend holds.

>>> names = ["/conv1/Conv", "/layer1/0/conv1/Conv", "/layer1/0/Add", "/layer2/0/conv1/Conv"]
>>> layer_groups(names)
{'/conv1/Conv': 'conv1', '/layer1/0/conv1/Conv': 'layer1', '/layer1/0/Add': 'layer1', \
'/layer2/0/conv1/Conv': 'layer2'}
>>> sorted(set(layer_groups([f"/model.{i}/conv/Conv" for i in range(22)], most=4).values()))
['model.0 - model.5', 'model.12 - model.17', 'model.18 - model.21', 'model.6 - model.11']
"""

from __future__ import annotations

import math
from collections.abc import Iterable

#: Label of the tasks that belong to no layer (host transfers, barriers).
NO_LAYER = "(no layer)"
#: Most groups a legend shows; more are merged into contiguous runs.
MOST_GROUPS = 10


def group_of(name: str) -> str:
    """The group of layer ``name``: the first part of its path (the name itself when it
    has none); `NO_LAYER` for the empty name."""
    parts = [p for p in name.split("/") if p]
    return parts[0] if parts else NO_LAYER


def layer_groups(names: Iterable[str], most: int = MOST_GROUPS) -> dict[str, str]:
    """Layer name -> the legend label of its group, for ``names`` in network order (the
    order they first appear). With more than ``most`` groups, runs of neighbouring groups
    share a label ``first - last``."""
    ordered = list(dict.fromkeys(names))
    groups = list(dict.fromkeys(group_of(n) for n in ordered if group_of(n) != NO_LAYER))
    label = {g: g for g in groups}
    if len(groups) > most:
        size = math.ceil(len(groups) / most)
        for start in range(0, len(groups), size):
            run = groups[start : start + size]
            text = run[0] if len(run) == 1 else f"{run[0]} - {run[-1]}"
            label.update(dict.fromkeys(run, text))
    return {n: label.get(group_of(n), NO_LAYER) for n in ordered}


__all__ = ["MOST_GROUPS", "NO_LAYER", "group_of", "layer_groups"]
