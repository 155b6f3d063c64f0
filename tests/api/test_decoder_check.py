"""tiny_decoder executed on data: prefill, then decode steps carrying the KV cache, each
step bit-exact against the int8 reference; the cache on one grid and in DDR."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from aipusim.api.decoder_check import MODES, check_decoder_steps
from aipusim.api.functional_check import load_reference
from aipusim.base.errors import ConfigError, DecoderGraphError, OnnxImportError
from aipusim.compiler.decoder import (
    append_in_place,
    cache_state,
    is_cache_input,
    pin_cache_grids,
)
from aipusim.compiler.importer import import_model
from aipusim.compiler.ir import QuantParams
from aipusim.isa.program import load_program_tables
from aipusim.isa.tasks import DmaCopy, Phase, Pool
from aipusim.zoo import DecoderGraph, build_decoder


def _decode(past: int = 4) -> onnx.ModelProto:
    return build_decoder("tiny_decoder", graph=DecoderGraph.DECODE, past=past, positions=64)


def _cache_concats(folder: Path) -> list:
    """The Concats of a compiled decode graph that append to its KV cache."""
    graph = load_reference(folder).graph
    state = cache_state(graph)
    return [n for n in graph.nodes if n.op_type == "Concat" and n.inputs[0] in state]


def _grids(scale: float = 0.02, zero: int = 0) -> dict[str, tuple[float, int]]:
    return {f"present.{i}.{k}": (scale, zero) for i in range(4) for k in ("key", "value")}


def test_prefill_and_a_decode_step_carry_the_cache_bit_exact(tmp_path: Path) -> None:
    run = check_decoder_steps("tiny_decoder", prompt=4, steps=1, workdir=tmp_path)
    assert [s.graph for s in run.steps] == ["prefill", "decode"], run.text()
    assert run.bit_exact, run.text()
    decode = run.steps[1]
    assert decode.past_tokens == 4 and set(decode.mismatches) >= {"logits", "present.3.value"}
    # the decode compile: the cache in DDR, its bytes per token in the report
    folder = tmp_path / "1core-decode1" / "compiled_model"
    report = json.loads((folder / "report.json").read_text())["kv_cache"]
    row = 2 * 32  # one token of one layer's keys (2 KV heads x 32 dimensions), int8
    per_token = report["bytes_per_token"]
    assert (per_token["kv_read"], per_token["kv_write"]) == (8 * 4 * row, 8 * row)
    # grown in place: the step writes the new token's rows only, not the whole cache
    assert report["present_written_bytes"] == 8 * row
    assert all(t["in_place"] for t in report["tensors"])
    assert per_token["weights"] > 4_000_000 and per_token["activations"] > 0
    assert {(t["past_pool"], t["present_pool"]) for t in report["tensors"]} == {("ddr", "ddr")}
    program = json.loads((folder / "model.json").read_text())
    # one buffer per pair: the past at its start, the present over it and one row more
    io = {b["name"]: b for b in program["memory"]["io"]}
    for t in report["tensors"]:
        past, present = io[t["past"]], io[t["present"]]
        assert past["addr"] == present["addr"] and past["slots"] == present["slots"] == 1
        assert present["bytes"] - past["bytes"] == row
    # the tasks: the Concats appending to the cache read no DDR in a frame and write the
    # new rows there, right after the past
    # (each Concat's past, read once: loading the reference is most of this test's time)
    past_of = {n.name: n.inputs[0] for n in _cache_concats(folder)}
    _, tasklists = load_program_tables(folder)
    appends = [
        t for table in tasklists.values() for t in table.to_tasks()
        if t.phase is Phase.FRAME and t.layer in past_of
    ]  # fmt: skip
    ddr_in = [t for t in appends if isinstance(t, DmaCopy) and t.src_pool is Pool.DDR]
    ddr_out = [t for t in appends if isinstance(t, DmaCopy) and t.dst_pool is Pool.DDR]
    assert not ddr_in and sum(t.bytes for t in ddr_out) == per_token["kv_write"]
    assert {t.dst_addr - io[past_of[t.layer]]["addr"] for t in ddr_out} == {4 * row}
    # over the host link: the token's embedding row and its RoPE rows in, the logits out
    assert (program["instance"]["input_bytes"], program["instance"]["output_bytes"]) == (
        256 + 2 * 32,
        2048,
    )
    io = program["memory"]["io"]
    cached = {t["past"] for t in report["tensors"]} | {t["present"] for t in report["tensors"]}
    assert {b["pool"] for b in io if b["name"] in cached} == {"ddr"}
    assert len(cached) == 16


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_prefill_and_four_decode_steps_are_bit_exact(mode: str, tmp_path: Path) -> None:
    run = check_decoder_steps("tiny_decoder", prompt=8, steps=4, mode=mode, workdir=tmp_path)
    assert len(run.steps) == 5 and run.bit_exact, run.text()


def test_a_bad_mode_or_step_count_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="mode must be one of 1core, batch, cooperative, not 'x'"):
        check_decoder_steps(mode="x", workdir=tmp_path)
    with pytest.raises(ConfigError, match="steps must be an integer >= 1, not 0"):
        check_decoder_steps(steps=0, workdir=tmp_path)


def test_the_cache_pairs_of_a_decode_graph() -> None:
    graph = import_model(_decode())
    state = cache_state(graph)
    assert sorted(state) == sorted(i for i in graph.inputs if is_cache_input(i))
    assert len(state) == 8 and set(state.values()) <= set(graph.outputs)
    assert cache_state(import_model(build_decoder("tiny_decoder", tokens=4))) == {}


def _chip_form(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with each present written by its Concat itself, as the compiler's graph
    has it once the cleaner moved the naming Identity nodes to the host."""
    outputs = {v.name for v in model.graph.output}
    named = {
        n.input[0]: n
        for n in model.graph.node
        if n.op_type == "Identity" and n.output[0] in outputs
    }
    renamed = {}
    for node in model.graph.node:
        if node.op_type == "Concat" and node.output[0] in named:
            identity = named[node.output[0]]
            renamed[node.output[0]] = identity.output[0]
            node.output[0] = identity.output[0]
            model.graph.node.remove(identity)
    for node in model.graph.node:
        node.input[:] = [renamed.get(i, i) for i in node.input]
    return model


def test_one_sequence_grows_its_cache_in_place_several_do_not() -> None:
    # [B, KV, T, D] lies [B, T, D, KV]: one sequence keeps its past as the present's start
    graph = import_model(_chip_form(_decode()))
    assert append_in_place(graph) == cache_state(graph) and len(cache_state(graph)) == 8
    batch = build_decoder("tiny_decoder", graph=DecoderGraph.DECODE, past=4, batch=2, positions=64)
    assert append_in_place(import_model(_chip_form(batch))) == {}  # the sequences interleave
    # a present an Identity names has a buffer of its own: not grown in place
    assert append_in_place(import_model(_decode())) == {}

    # quantized: past and present on one grid keep the bytes; on two they cannot
    def on_grids(zero_point: int) -> dict[str, str]:
        present = cache_state(graph)["past_key_values.1.key"]
        tensors = dict(graph.tensors)
        for name, zp in (("past_key_values.1.key", zero_point), (present, 0)):
            q = QuantParams(np.float32(0.02), np.int64(zp))
            tensors[name] = dataclasses.replace(tensors[name], quant=q)
        return append_in_place(dataclasses.replace(graph, tensors=tensors))

    assert "past_key_values.1.key" in on_grids(0)
    assert "past_key_values.1.key" not in on_grids(3)


def test_a_pinned_cache_input_keeps_its_grid_through_import() -> None:
    graph = import_model(pin_cache_grids(_decode(), _grids(0.02, 0)))
    q = graph.tensor("past_key_values.2.value").quant
    assert q is not None and float(q.scale) == pytest.approx(0.02) and int(q.zero_point) == 0
    assert graph.tensor("input_ids").quant is None


def test_pinning_needs_every_present_grid() -> None:
    grids = _grids()
    del grids["present.1.key"]
    with pytest.raises(DecoderGraphError, match=r"grids must give present\.1\.key"):
        pin_cache_grids(_decode(), grids)


def test_an_annotation_must_name_a_graph_input_with_a_scalar_grid() -> None:
    model = pin_cache_grids(_decode(), _grids())
    model.graph.quantization_annotation[0].tensor_name = "logits"
    with pytest.raises(OnnxImportError, match="must name a graph input, not `logits`"):
        import_model(model)
    model = pin_cache_grids(_decode(), _grids())
    zero = next(t for t in model.graph.initializer if t.name.endswith("/grid_zero"))
    zero.CopyFrom(onnx.numpy_helper.from_array(np.array(0, np.int32), zero.name))
    with pytest.raises(OnnxImportError, match="positive scale and an int8 zero point"):
        import_model(model)
