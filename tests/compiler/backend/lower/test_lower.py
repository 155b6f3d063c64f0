"""Pass 6, lower: every op on the unit docs/architecture.md §5 (stage 6) lists."""

from __future__ import annotations

import numpy as np
import pytest
from backend_helpers import front_graph

from aipusim.base.errors import UnsupportedOperatorError
from aipusim.compiler.backend.lower.layer import LayerUnit
from aipusim.compiler.backend.lower.units import lower_graph
from aipusim.compiler.ir import Graph, Node, Op, Tensor
from aipusim.isa.tasks import DwpuKind, LutKind


def _graph(
    nodes: list[Node],
    tensors: dict[str, tuple[int, ...]],
    consts: dict[str, np.ndarray],
    outputs: tuple[str, ...],
) -> Graph:
    ts = {k: Tensor(k, v) for k, v in tensors.items()}
    ts.update({k: Tensor(k, v.shape) for k, v in consts.items()})
    return Graph("g", tuple(nodes), ts, consts, ("x",), outputs)


def test_units_of_a_small_network() -> None:
    w = np.zeros((16, 8, 3, 3), np.float32)
    dw = np.zeros((16, 1, 3, 3), np.float32)
    g = _graph(
        [
            Node("conv", Op.CONV, ("x", "w"), ("a",), {"kernel_shape": [3, 3], "pads": [1] * 4}),
            Node("relu", Op.RELU, ("a",), ("b",)),
            Node("dw", Op.CONV, ("b", "dw"), ("c",), {"group": 16, "pads": [1] * 4}),
            Node("pool", Op.MAX_POOL, ("c",), ("d",), {"kernel_shape": [2, 2], "strides": [2, 2]}),
            Node("add", Op.ADD, ("d", "d"), ("e",)),
            Node("flat", Op.FLATTEN, ("e",), ("f",)),
        ],
        {
            "x": (1, 8, 8, 8),
            "a": (1, 16, 8, 8),
            "b": (1, 16, 8, 8),
            "c": (1, 16, 8, 8),
            "d": (1, 16, 4, 4),
            "e": (1, 16, 4, 4),
            "f": (1, 256),
        },
        {"w": w, "dw": dw},
        ("f",),
    )
    layers = {p.name: p for p in lower_graph(g)}
    assert layers["conv"].unit is LayerUnit.MVM
    assert layers["conv"].lut is LutKind.RELU and layers["conv"].fused == ("relu",)
    assert "relu" not in layers  # fused into the conv's output stream
    assert layers["dw"].unit is LayerUnit.DWPU and layers["dw"].dwpu_kind is DwpuKind.DWCONV
    assert layers["pool"].dwpu_kind is DwpuKind.MAXPOOL
    assert layers["add"].unit is LayerUnit.DPU
    # memory holds the 4x4 pixels channels-last: flattening them reorders the bytes
    assert layers["flat"].unit is LayerUnit.DMA
    assert layers["conv"].weight_bytes == w.size  # int8


def test_unsupported_ops_are_named_all_at_once() -> None:
    g = _graph(
        [
            Node("nms", Op.OTHER, ("x",), ("a",), onnx_type="Foo"),
            # (two activations map onto the MVM or the DPU: tests/.../test_attention.py)
            Node("mm", Op.MATMUL, ("w", "a"), ("b",)),
        ],
        {"x": (4, 4), "a": (4, 4), "b": (4, 4)},
        {"w": np.ones((4, 4), np.float32)},
        ("b",),
    )
    with pytest.raises(
        UnsupportedOperatorError, match=r"2 cannot: nms \(Foo\), mm \(MatMul with a constant first"
    ):
        lower_graph(g)


def test_pword_pad_is_an_alias_and_keeps_the_real_input_channels() -> None:
    layers = lower_graph(front_graph("resnet18", 64))
    first_conv = next(p for p in layers if p.unit is LayerUnit.MVM)
    assert first_conv.geometry.cin == 3 and first_conv.is_first
    pads = [p for p in layers if p.op == "Pad"]
    assert pads and all(p.unit is LayerUnit.ALIAS for p in pads)


def test_every_zoo_model_lowers() -> None:
    for name in ("tiny_cnn", "mobilenetv2", "yolov8n"):
        layers = lower_graph(front_graph(name, 64))
        assert any(p.unit is LayerUnit.MVM for p in layers)
        assert sum(p.macs for p in layers) > 0
