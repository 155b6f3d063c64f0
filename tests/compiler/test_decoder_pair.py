"""The two-graph decoder form: a zoo pair is accepted and described; each way a pair can
break the form is refused by name."""

from __future__ import annotations

import re
from collections.abc import Callable

import onnx
import pytest
from onnx import TensorProto, helper

from aipusim.base.errors import DecoderGraphError
from aipusim.compiler.decoder import check_decoder_pair
from aipusim.zoo import DecoderGraph, build_decoder
from aipusim.zoo.decoder import DECODERS


def _pair(**kw: int) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    prefill = build_decoder("tiny_decoder", tokens=8, batch=kw.get("batch", 1))
    decode = build_decoder("tiny_decoder", graph=DecoderGraph.DECODE, past=kw.get("past", 8),
                           batch=kw.get("batch", 1))  # fmt: skip
    return prefill, decode


def test_a_zoo_pair_is_described() -> None:
    pair = check_decoder_pair(*_pair(batch=2, past=20))
    size = DECODERS["tiny_decoder"]
    assert (pair.layers, pair.kv_heads, pair.head_dim, pair.vocab) == (4, 2, 32, size.vocab)
    assert (pair.batch, pair.prompt_tokens, pair.past_tokens) == (2, 8, 20)
    # every weight matrix once (the tied embedding read twice), plus the RoPE tables
    rope_tables = 2 * 4096 * size.head_dim
    assert pair.weight_params == size.param_count() - (2 * size.layers + 1) * size.hidden + (
        rope_tables
    )
    assert pair.kv_bytes_per_token() == 2 * 4 * 2 * 32


def _drop_output(name: str) -> Callable[[onnx.ModelProto], None]:
    def edit(model: onnx.ModelProto) -> None:
        kept = [o for o in model.graph.output if o.name != name]
        del model.graph.output[:]
        model.graph.output.extend(kept)

    return edit


def _add_input(name: str, elem: int = TensorProto.INT64) -> Callable[[onnx.ModelProto], None]:
    def edit(model: onnx.ModelProto) -> None:
        model.graph.input.append(helper.make_tensor_value_info(name, elem, [1, 1]))

    return edit


def _rename_init(old: str, new: str) -> Callable[[onnx.ModelProto], None]:
    def edit(model: onnx.ModelProto) -> None:
        for t in model.graph.initializer:
            if t.name == old:
                t.name = new
        for n in model.graph.node:
            n.input[:] = [new if i == old else i for i in n.input]

    return edit


def _retype_input(name: str, elem: int) -> Callable[[onnx.ModelProto], None]:
    def edit(model: onnx.ModelProto) -> None:
        next(i for i in model.graph.input if i.name == name).type.tensor_type.elem_type = elem

    return edit


def _append_to(present: str, past: str, axis: int = 2) -> Callable[[onnx.ModelProto], None]:
    """The Concat behind ``present`` appends to ``past`` on ``axis`` instead."""

    def edit(model: onnx.ModelProto) -> None:
        producer = {o: n for n in model.graph.node for o in n.output}
        node = producer[present]
        while node.op_type == "Identity":
            node = producer[node.input[0]]
        node.input[0] = past
        next(a for a in node.attribute if a.name == "axis").i = axis

    return edit


def _not_appended(present: str) -> Callable[[onnx.ModelProto], None]:
    """``present`` computed from the new rows only (no Concat with the past)."""

    def edit(model: onnx.ModelProto) -> None:
        producer = {o: n for n in model.graph.node for o in n.output}
        identity = producer[present]
        concat = producer[identity.input[0]]
        identity.input[0] = concat.input[1]

    return edit


def _drop_layer(prefix: str, layer: int) -> Callable[[onnx.ModelProto], None]:
    """Every graph input and output of ``prefix``.``layer``.* left out."""

    def edit(model: onnx.ModelProto) -> None:
        for values in (model.graph.input, model.graph.output):
            kept = [v for v in values if not v.name.startswith(f"{prefix}.{layer}.")]
            del values[:]
            values.extend(kept)

    return edit


def _dynamic_input(model: onnx.ModelProto) -> None:
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "sequence"


@pytest.mark.parametrize(
    ("graph", "edit", "message"),
    [
        ("decode", _drop_output("present.2.value"),
         "decode graph must have present.2.value beside present.2.key, not only the key"),
        ("decode", _drop_output("present.3.key"),
         "decode graph must have present.3.key beside present.3.value, not only the value"),
        ("prefill", _add_input("attention_mask"),
         "prefill graph must not take an attention_mask input"),
        ("decode", _add_input("use_cache_branch"),
         "decode graph inputs must be input_ids, position_ids and past_key_values.N.key/.value,"
         " not also use_cache_branch"),
        ("prefill", _rename_init("model.layers.1.mlp.up_proj.weight", "up"),
         "prefill and decode graphs must hold the same weights, not differ in "
         "model.layers.1.mlp.up_proj.weight (and 1 more)"),
        ("prefill", _dynamic_input,
         "prefill graph input_ids must have a static shape, not [1, sequence]"),
        ("prefill", _drop_output("logits"), "prefill graph must have an output logits, not none"),
        ("decode", _retype_input("position_ids", TensorProto.INT32),
         "decode graph input position_ids must be int64, not int32"),
        # past and present pair by name, and the present must grow that very past
        ("decode", _drop_layer("present", 3),
         "decode graph must have present.3.key and .value (the prefill graph has 4 layers), "
         "not none for layer 3"),
        ("decode", _drop_layer("present", 1),
         "decode graph must have present tensors for layers 0 to 3, not without layer 1"),
        ("decode", _drop_layer("past_key_values", 2),
         "decode graph must have past_key_values tensors for layers 0 to 3, not without "
         "layer 2"),
        ("decode", _append_to("present.1.key", "past_key_values.2.key"),
         "decode graph present.1.key must be past_key_values.1.key grown by the step's rows "
         "(a Concat of it first, on the token axis 2), not past_key_values.2.key grown on "
         "axis 2"),
        ("decode", _append_to("present.0.value", "past_key_values.0.value", axis=3),
         "decode graph present.0.value must be past_key_values.0.value grown by the step's "
         "rows (a Concat of it first, on the token axis 2), not past_key_values.0.value "
         "grown on axis 3"),
        ("decode", _not_appended("present.2.value"),
         "decode graph present.2.value must be past_key_values.2.value grown by the step's "
         "rows (a Concat of it first, on the token axis 2), not made by another operator"),
    ],
)  # fmt: skip
def test_a_broken_pair_is_refused_by_name(
    graph: str, edit: Callable[[onnx.ModelProto], None], message: str
) -> None:
    prefill, decode = _pair()
    edit(prefill if graph == "prefill" else decode)
    with pytest.raises(DecoderGraphError, match=re.escape(message)):
        check_decoder_pair(prefill, decode)


def test_graphs_swapped_or_of_other_batches_are_refused() -> None:
    prefill, decode = _pair()
    with pytest.raises(DecoderGraphError, match="prefill graph must not take past_key_values"):
        check_decoder_pair(decode, prefill)
    other = build_decoder("tiny_decoder", graph=DecoderGraph.DECODE, past=8, batch=2)
    with pytest.raises(
        DecoderGraphError,
        match=re.escape("decode graph input_ids and position_ids must be [1, 1], not [2, 1]"),
    ):
        check_decoder_pair(prefill, other)
