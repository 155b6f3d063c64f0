"""`tensor_parallel`: which layers of a cooperative decode step keep their channel parts on
their cores and which MVM layer is split by input channels (one reduction)."""

from __future__ import annotations

from dataclasses import replace

from aipusim.compiler.backend.common.layout import Split
from aipusim.compiler.backend.lower.layer import ConvGeometry, LayerPlan, LayerUnit
from aipusim.compiler.backend.multicore.split import tensor_parallel
from aipusim.isa.tasks import DpuKind

HIDDEN, FFN = 16, 64


def _mvm(name: str, x: str, out: str, cin: int, cout: int) -> LayerPlan:
    geo = ConvGeometry(cin, cout, 1, 1, 1, 1, 1, 1, 1, 1)
    return LayerPlan(name, "MatMul", LayerUnit.MVM, (x,), (out,), (cin,), (cout,), geometry=geo)


def _dpu(name: str, kind: DpuKind, ins: tuple[str, ...], out: str) -> LayerPlan:
    return LayerPlan(
        name, kind.value, LayerUnit.DPU, ins, (out,), (FFN,) * len(ins), (FFN,), dpu_kind=kind,
        rowwise=True,
    )  # fmt: skip


def _ffn(extra_reader: bool = False) -> list[LayerPlan]:
    layers = [
        _mvm("gate", "h", "g", HIDDEN, FFN),
        LayerPlan("g_alias", "Reshape", LayerUnit.ALIAS, ("g",), ("g2",), (FFN,), (FFN,)),
        _dpu("silu", DpuKind.LUT, ("g2",), "a"),
        _mvm("up", "h", "u", HIDDEN, FFN),
        _dpu("mul", DpuKind.MUL, ("a", "u"), "m"),
        _mvm("down", "m", "y", FFN, HIDDEN),
    ]
    if extra_reader:  # something else reads the SiLU's output whole
        layers.append(_dpu("peek", DpuKind.LUT, ("a",), "p"))
    return layers


def test_the_ffn_keeps_its_columns_on_their_cores() -> None:
    layers = _ffn()
    splits = {0: Split.CHANNELS, 3: Split.CHANNELS, 5: Split.CHANNELS}
    out, local = tensor_parallel(layers, splits, {"y"}, cores=4)
    assert [out.get(i, Split.NONE) for i in range(len(layers))] == [
        Split.CHANNELS, Split.NONE, Split.CHANNELS, Split.CHANNELS, Split.CHANNELS, Split.INPUTS,
    ]  # fmt: skip
    assert local == {"g", "g2", "a", "u", "m"}


def test_a_part_another_layer_reads_whole_is_exchanged_as_before() -> None:
    layers = _ffn(extra_reader=True)
    splits = {0: Split.CHANNELS, 3: Split.CHANNELS, 5: Split.CHANNELS}
    out, local = tensor_parallel(layers, splits, {"y", "p"}, cores=4)
    # the SiLU's output is read whole elsewhere: the SiLU and the gate before it stay as
    # they were (their outputs exchanged); gate * up still runs on each core's columns
    # (reading its part of the SiLU's exchanged output) and feeds the down projection
    assert [out.get(i, Split.NONE) for i in range(len(layers))] == [
        Split.CHANNELS, Split.NONE, Split.NONE, Split.CHANNELS, Split.CHANNELS, Split.INPUTS,
        Split.NONE,
    ]  # fmt: skip
    assert local == {"u", "m"}


def test_not_a_decode_step_layer_keeps_its_split() -> None:
    layers = _ffn()
    wide = [
        x if x.geometry is None else replace(x, geometry=replace(x.geometry, out_w=8))
        for x in layers
    ]
    splits = {0: Split.CHANNELS, 3: Split.CHANNELS, 5: Split.CHANNELS}
    # eight tokens (a prefill's rows): no channel part is one run of bytes
    assert tensor_parallel(wide, splits, {"y"}, cores=4) == (splits, frozenset())
