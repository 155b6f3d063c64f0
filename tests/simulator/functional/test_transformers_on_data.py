"""Issue 18's small graphs on data: each compiles to a complete program (no
``functional_gaps``) and its functional run is bit-exact against the int8 reference.

These cover the DPU's reduction kinds over rows and over whole tensors (LayerNorm, Softmax
over the channels, the height or the last axis), its float18 kinds (Div and Pow of two
tensors), a Gather, a class token (a Concat of a constant into the int16 stream), products
of two activations on the DPU and on the MVM with run-time weights (heads interleaved as
the channels of channels-last tensors), as the compiler lays them out, and the INIT weight
loads that read weights the
INIT copy put in L1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import onnx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compiler"))
from transformer_models import OP_GRAPHS, encoder

import aipusim
from aipusim.api.functional_check import chip_inputs, compare
from aipusim.isa.program import load_program
from aipusim.isa.tasks import DmaCopy, Mvm, WeightLoad
from aipusim.simulator import simulate

#: ``einsum_qk``'s product of two activations is small enough to run on the DPU; the masked
#: attentions' Softmax reads its keep mask as the task's second operand.
COMPLETE = (
    "layernorm_op",
    "norm_over_channels_unfused",
    "div_of_tensors",
    "pow_of_tensors",
    "softmax_axis1",
    "softmax_axis2",
    "softmax_last_axis",
    "gather_class_token",
    "einsum_qk",
    "class_token",
    "masked_attention_add",
    "masked_attention_where",
    "masked_attention_bias",
)


def check_bit_exact(model: onnx.ModelProto, tmp_path: Path) -> None:
    folder = aipusim.compile(model, output_dir=tmp_path).compiled_dir()
    extra = json.loads((folder / "model.json").read_text())["extra"]
    assert extra["functional_gaps"] == {}
    chip, how = chip_inputs(folder)
    check = compare(simulate(folder, frames=1, functional=True, inputs=chip), folder, chip, how)
    assert check.bit_exact, check.text()


@pytest.mark.parametrize("name", COMPLETE)
def test_small_transformer_graph_is_bit_exact(name: str, tmp_path: Path) -> None:
    check_bit_exact(OP_GRAPHS[name][0](), tmp_path)


def test_a_two_layer_encoder_with_attention_on_the_dpu_is_bit_exact(tmp_path: Path) -> None:
    # 4 tokens, 2 heads of 8: attention's products are small enough for the DPU
    check_bit_exact(encoder(tokens=4, d=16, heads=2), tmp_path)


def test_a_two_layer_encoder_with_attention_on_the_mvm_is_bit_exact(tmp_path: Path) -> None:
    # 32 tokens, 2 heads of 32: each head's operand is written into a weight set at run time
    model = encoder(tokens=32, d=64, heads=2)
    check_bit_exact(model, tmp_path)
    _, tasklists = load_program(tmp_path / "compiled_model")
    loads = [t for t in tasklists[0] if isinstance(t, WeightLoad) and t.src_rows]
    assert len(loads) == 2 * 2 * 2  # 2 layers x 2 products x 2 heads, one block each


def test_cooperative_attention_with_some_interleaved_heads_per_core_is_bit_exact(
    tmp_path: Path,
) -> None:
    # ViT-B/16's case at a small size: 12 heads of 16 interleaved as the channels of
    # channels-last tensors, cut over 4 cores (3 heads each: not a cut of memory rows)
    model = encoder(tokens=32, d=192, heads=12, ln_forms=("op",), gelu_forms=("erf",))
    config = {"multicore_mode": "cooperative", "aipu_cores_used": 4, "resources_used": 1.0}
    folder = aipusim.compile(model, config, output_dir=tmp_path).compiled_dir()
    extra = json.loads((folder / "model.json").read_text())["extra"]
    assert extra["functional_gaps"] == {}
    chip, how = chip_inputs(folder)
    check = compare(simulate(folder, frames=1, functional=True, inputs=chip), folder, chip, how)
    assert check.bit_exact, check.text()
    _, tasklists = load_program(folder)
    moves = {}
    for core, tasks in tasklists.items():
        loads = [t for t in tasks if isinstance(t, WeightLoad) and t.src_rows]
        # 2 products x 3 heads, each head's operand read with the 3 heads of the tile
        assert [t.src_pitch for t in loads] == [3] * 6, core
        mvms = [t for t in tasks if isinstance(t, Mvm) and t.offset_fill]
        assert {(t.in_chan_pitch, t.out_chan_pitch) for t in mvms} == {(3, 3)}, core
        products = {t.layer for t in loads}
        moves[core] = [
            (t.rows, t.bytes, t.src_stride, t.dst_stride, t.src_addr, t.dst_addr)
            for t in tasks
            if isinstance(t, DmaCopy) and t.layer in products and t.rows > 1  # (not constants)
        ]
    # per product: two operands gathered (runs of 3 of the 12 heads), the result stored back
    # into its 3 of 12 heads; Q, K^T and V: 32 x 16 elements, the scores 32 x 32
    shapes = [(512, 12, 3), (512, 12, 3), (1024, 3, 12), (1024, 12, 3), (512, 12, 3), (512, 3, 12)]
    assert [(r, s, d) for r, _, s, d, _, _ in moves[0]] == shapes
    assert [n for _, n, *_ in moves[0]] == [3 * r for r, _, _ in shapes]
    for core in (1, 2, 3):  # each core's heads start 3 bytes after the previous core's
        for mine, first in zip(moves[core], moves[0], strict=True):
            gathered = mine[2] == 12
            at = 4 if gathered else 5
            assert mine[:4] == first[:4] and mine[at] - first[at] == 3 * core
