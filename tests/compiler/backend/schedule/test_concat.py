"""A channel Concat of activations by placement (`place_concat`, `Scheduler.concat_tile`):
the Concat stays one node and one DPU layer whose parts are each one rescale written into
their channel slice of the output, row tile by row tile; no pads, no Adds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from backend_helpers import onnx_model
from onnx import helper, numpy_helper

import aipusim
from aipusim.api.functional_check import chip_inputs, compare
from aipusim.compiler import CompilerConfig
from aipusim.compiler.ir import PLACE_PARTS_ATTR, Op
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.pipeline import FRONT, run_pipeline
from aipusim.isa import params as P
from aipusim.isa.program import load_program
from aipusim.isa.tasks import DpuKind, DpuOp
from aipusim.simulator import simulate

#: The parts' channels: three 1x1 convs of the same 8 channels with weights of unlike
#: magnitudes, so each part lies on its own int8 grid.
PARTS = (("a", 4, 0.1), ("b", 8, 1.0), ("c", 4, 0.3))
SIDE = 6
CHANNELS = sum(c for _, c, _ in PARTS)


def three_part_concat() -> onnx.ModelProto:
    """input [1, 8, 6, 6] -> a 3x3 conv -> 1x1 convs a (4), b (8), c (4) -> Concat ``cat``
    [1, 16, 6, 6] -> a 1x1 conv to 8 channels (so the Concat is not the graph's tail, which
    is left to the host)."""
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((8, 8, 3, 3)) * 0.2).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w0")]
    nodes = [helper.make_node("Conv", ["input", "w0"], ["x"], name="conv_in", pads=[1, 1, 1, 1])]
    for name, c, scale in PARTS:
        w = (rng.standard_normal((c, 8, 1, 1)) * scale).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{name}"))
        nodes.append(helper.make_node("Conv", ["x", f"w{name}"], [name], name=f"conv_{name}"))
    nodes.append(helper.make_node("Concat", ["a", "b", "c"], ["cat"], name="cat", axis=1))
    w = (rng.standard_normal((8, CHANNELS, 1, 1)) * 0.2).astype(np.float32)
    inits.append(numpy_helper.from_array(w, "wo"))
    nodes.append(helper.make_node("Conv", ["cat", "wo"], ["out"], name="conv_out"))
    return onnx_model("cat3", nodes, inits, [1, 8, SIDE, SIDE], [1, 8, SIDE, SIDE])


def compiled(tmp_path: Path, **config: object) -> Path:
    return aipusim.compile(three_part_concat(), config, output_dir=tmp_path).compiled_dir()


def concat_tasks(folder: Path) -> dict[int, list[DpuOp]]:
    _, tasklists = load_program(folder)
    return {
        c: [t for t in ts if t.layer == "cat" and isinstance(t, DpuOp)]
        for c, ts in tasklists.items()
    }


def test_the_concat_stays_one_node_marked_for_placement_without_pads_or_adds() -> None:
    seen = {}
    ctx = PassContext(CompilerConfig())
    run_pipeline(three_part_concat(), ctx, passes=FRONT, after_pass=seen.__setitem__)
    graph = seen["rewrite_concat_to_resadd"].graph
    cat = graph.node("cat")
    assert cat.op is Op.CONCAT and cat.inputs == ("a", "b", "c")
    assert cat.attr(PLACE_PARTS_ATTR) == 1
    assert not [n.name for n in graph.nodes if n.op in (Op.PAD, Op.ADD)]
    # the parts are on unlike grids: the concat's step has three unlike multipliers
    mults = seen["quantize"].steps["cat"].params["mults"]
    assert len(set(np.asarray(mults).tolist())) == 3


def test_each_part_is_one_rescale_into_its_channel_slice(tmp_path: Path) -> None:
    folder = compiled(tmp_path)
    extra = json.loads((folder / "model.json").read_text())["extra"]
    assert extra["layer_ops"]["cat"] == "Concat"
    # no pad or add layers; (the next conv's PWORD padding of its input is an alias)
    assert sorted(k for k in extra["layer_ops"] if k.startswith("cat")) == ["cat", "cat/pword_pad"]
    assert extra["functional_gaps"] == {}
    tasks = concat_tasks(folder)[0]
    assert [t.kind for t in tasks] == [DpuKind.RESCALE] * 3
    pixels = SIDE * SIDE
    assert [t.elements for t in tasks] == [pixels * 4, pixels * 8, pixels * 4]
    assert [t.row_len for t in tasks] == [4, 8, 4]  # a pixel's channels of the part
    assert [t.in_row_pitch for t in tasks] == [4, 8, 4]  # the part's pixels, packed
    assert [t.out_row_pitch for t in tasks] == [CHANNELS] * 3  # the output's pixels
    # the parts start at channels 0, 4 and 12 of the output; one SCALAR record each
    assert [t.out_addr - tasks[0].out_addr for t in tasks] == [0, 4, 12]
    step = P.SCALAR.itemsize
    assert [t.param_addr - tasks[0].param_addr for t in tasks] == [0, step, 2 * step]


def test_row_tiles_place_their_rows_of_each_part(tmp_path: Path) -> None:
    tasks = concat_tasks(compiled(tmp_path, force_h_tiling=3))[0]
    assert [(t.tile, t.elements) for t in tasks] == [
        (tile, 2 * SIDE * c) for tile in range(3) for c in (4, 8, 4)
    ]
    first = tasks[:3]
    for tile in (1, 2):
        mine = tasks[3 * tile : 3 * tile + 3]
        # every tile writes its slices of its own 2 output rows, as the first one does
        assert [t.out_addr - mine[0].out_addr for t in mine] == [0, 4, 12]
        # the parts are read in place in L1: 2 rows of 6 pixels further per tile
        assert [t.in_addr0 - f.in_addr0 for t, f in zip(mine, first, strict=True)] == [
            tile * 2 * SIDE * c for c in (4, 8, 4)
        ]


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"force_h_tiling": 3},
        {"multicore_mode": "cooperative", "aipu_cores_used": 4, "resources_used": 1.0},
    ],
    ids=["whole", "row_tiles", "cooperative"],
)
def test_a_placed_concat_is_bit_exact(config: dict, tmp_path: Path) -> None:
    folder = compiled(tmp_path, **config)
    assert json.loads((folder / "model.json").read_text())["extra"]["functional_gaps"] == {}
    chip, how = chip_inputs(folder)
    check = compare(simulate(folder, frames=1, functional=True, inputs=chip), folder, chip, how)
    assert check.bit_exact, check.text()
    # every part's every element placed once, over the tiles and cores that share them
    tasks = [t for ts in concat_tasks(folder).values() for t in ts]
    assert sum(t.elements for t in tasks) == SIDE * SIDE * CHANNELS
