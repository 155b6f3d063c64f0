"""The two-graph form of a decoder-only language model, as the LLM flow takes it.

A generation runs a **prefill** graph once on the prompt and a **decode** graph once per
new token, with the same weights. What each must hold (the form ``torch.onnx`` and Hugging
Face Optimum write for a causal LM, with static shapes):

=============  ==================================  ======================================
               prefill (prompt of S tokens)        decode (one token, P tokens cached)
=============  ==================================  ======================================
inputs         ``input_ids`` [B, S] int64,         ``input_ids`` [B, 1] int64,
               ``position_ids`` [B, S] int64       ``position_ids`` [B, 1] int64,
                                                   ``past_key_values.{i}.key`` and
                                                   ``.value`` [B, KV, P, D] float, i < L
outputs        ``logits`` [B, S, V],               ``logits`` [B, 1, V],
               ``present.{i}.key`` and ``.value``  ``present.{i}.key`` and ``.value``
               [B, KV, S, D], i < L                [B, KV, P + 1, D], i < L
=============  ==================================  ======================================

L layers, KV key/value heads of D dimensions, a vocabulary of V. No ``attention_mask``
input: the sequences of a batch have one length. The two graphs hold the same weights
(initializers of the same names, shapes and types).

Past and present pair by name: layer ``i``'s ``present.{i}.key`` is
``past_key_values.{i}.key`` grown by the step's rows, and the decode graph must say so
the way exporters write it, a Concat whose first input is the past, on the token axis 2
(through Identity nodes, if any); likewise ``.value``. That Concat is what the compiler
keeps in DDR and grows in place (`cache_state`, `append_in_place`). Anything else (a
missing or extra layer, a present made another way or from another layer's past) is
refused by name.

Example:
    >>> from aipusim.zoo import build_decoder
    >>> pair = check_decoder_pair(build_decoder("tiny_decoder", tokens=16),
    ...                           build_decoder("tiny_decoder", graph="decode", past=16))
    >>> pair.layers, pair.kv_heads, pair.head_dim, pair.prompt_tokens, pair.past_tokens
    (4, 2, 32, 16, 16)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import onnx.numpy_helper

from aipusim.base.errors import DecoderGraphError
from aipusim.compiler.backend.lower.layout_dma import physical_axes

_CACHE = re.compile(r"^(past_key_values|present)\.(\d+)\.(key|value)$")
_INT64 = onnx.TensorProto.INT64


@dataclass(frozen=True)
class DecoderPair:
    """What a checked prefill/decode pair says about the model and its two shapes."""

    layers: int
    kv_heads: int
    head_dim: int
    vocab: int
    batch: int
    prompt_tokens: int
    past_tokens: int
    #: Values of the weights (the matrices and tables the two graphs share).
    weight_params: int

    def kv_bytes_per_token(self, bytes_per_value: int = 1) -> int:
        """Bytes one token adds to the cache (keys and values of every layer)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * bytes_per_value


def is_cache_input(name: str) -> bool:
    """True for a decode graph's cache input, ``past_key_values.{i}.key`` / ``.value``.

    >>> is_cache_input("past_key_values.3.value"), is_cache_input("present.3.value")
    (True, False)
    """
    match = _CACHE.match(name)
    return match is not None and match[1] == "past_key_values"


def cache_state(graph: Any) -> dict[str, str]:
    """``{past input: present output}`` of a decode graph as the chip runs it (an IR
    `Graph`): each ``past_key_values.{i}.{kind}`` input and the graph output that the
    Concat appending the step's rows to it writes (the present, whatever the host names
    it). The pair is the state a generation keeps in DDR between steps; empty for other
    graphs."""
    out: dict[str, str] = {}
    outputs = set(graph.outputs)
    for node in graph.nodes:
        if node.op_type != "Concat" or not node.inputs or not is_cache_input(node.inputs[0]):
            continue
        grown = node.outputs[0]
        if grown not in outputs:  # (before the cleaner: an Identity names the output)
            names = [
                c.outputs[0]
                for c in graph.consumers(grown)
                if c.op_type == "Identity" and c.outputs[0] in outputs
            ]
            grown = names[0] if names else grown
        if node.inputs[0] in graph.inputs and grown in outputs:
            out[node.inputs[0]] = grown
    return out


def append_in_place(graph: Any) -> dict[str, str]:
    """The ``{past input: present output}`` pairs of `cache_state` that a step can grow in
    place: the present's buffer starts with the past's bytes as they are, so the step
    writes only the new token's rows after them (docs/architecture.md §5).

    That holds when the past is the first part of the present in memory order: the
    Concat's axis is the outermost in memory with more than one element (a 4-D cache
    ``[B, KV, T, D]`` lies ``[B, T, D, KV]``, so one sequence, ``B = 1``, keeps its tokens
    one after the other), and past and present lie on one grid (the bytes carry
    unchanged). A batch of several sequences in one graph (``B > 1``) interleaves them:
    its present is written whole, the past copied.
    """
    out: dict[str, str] = {}
    cache = cache_state(graph)
    for node in graph.nodes:
        if node.op_type != "Concat" or not node.inputs or node.inputs[0] not in cache:
            continue
        past, grown = node.inputs[0], node.outputs[0]
        shape = tuple(graph.shape(grown))
        axis = int(node.attr("axis", 0)) % len(shape)
        order = physical_axes(shape)
        outer = math.prod(shape[a] for a in order[: order.index(axis)])
        q_past, q_grown = graph.tensor(past).quant, graph.tensor(grown).quant
        same_grid = (q_past is None) == (q_grown is None) and (
            q_past is None
            or (
                q_past.dtype is q_grown.dtype
                and np.array_equal(q_past.scale, q_grown.scale)
                and np.array_equal(q_past.zero_point, q_grown.zero_point)
            )
        )
        # (the Concat must write the graph output itself: an Identity between them would
        # give the output a buffer of its own)
        if outer == 1 and same_grid and cache[past] == grown:
            out[past] = grown
    return out


def pin_cache_grids(
    decode: onnx.ModelProto, grids: Mapping[str, tuple[float, int]]
) -> onnx.ModelProto:
    """A copy of ``decode`` whose ``past_key_values.{i}.{kind}`` inputs carry the int8 grid
    (scale, zero point) that ``grids`` gives ``present.{i}.{kind}`` (the grids of the
    compile that wrote the cache), as ONNX quantization annotations. The compiler keeps an
    annotated input's grid, and a decode graph's present shares its past's
    (`aipusim.compiler.quant.quantize.calibrate`): the cache's bytes go from one step to
    the next as they are, each step appending its new rows on the same grid.

    >>> from aipusim.zoo import build_decoder
    >>> d = build_decoder("tiny_decoder", graph="decode", past=4)
    >>> grids = {f"present.{i}.{k}": (0.01, 0) for i in range(4) for k in ("key", "value")}
    >>> len(pin_cache_grids(d, grids).graph.quantization_annotation)
    8
    """
    out = onnx.ModelProto()
    out.CopyFrom(decode)
    g = out.graph
    past = [v.name for v in g.input if is_cache_input(v.name)]
    for name in past:
        present = "present." + name.removeprefix("past_key_values.")
        if present not in grids:
            raise DecoderGraphError(
                f"grids must give {present} (the grid of {name}), not only "
                f"{', '.join(sorted(grids)) or 'none'}"
            )
        scale, zero = grids[present]
        names = {"SCALE_TENSOR": f"{name}/grid_scale", "ZERO_POINT_TENSOR": f"{name}/grid_zero"}
        g.initializer.append(
            onnx.numpy_helper.from_array(np.array(scale, np.float32), names["SCALE_TENSOR"])
        )
        g.initializer.append(
            onnx.numpy_helper.from_array(np.array(zero, np.int8), names["ZERO_POINT_TENSOR"])
        )
        note = onnx.TensorAnnotation(tensor_name=name)
        for key, value in names.items():
            note.quant_parameter_tensor_names.add(key=key, value=value)
        g.quantization_annotation.append(note)
    return out


def _shape(value: onnx.ValueInfoProto, graph: str) -> tuple[int, ...]:
    dims = value.type.tensor_type.shape.dim
    texts = [str(d.dim_value) if d.HasField("dim_value") else d.dim_param or "?" for d in dims]
    if any(not d.HasField("dim_value") for d in dims):
        raise DecoderGraphError(
            f"{graph} graph {value.name} must have a static shape, not [{', '.join(texts)}]"
        )
    return tuple(int(d.dim_value) for d in dims)


def _cache(values: list[onnx.ValueInfoProto], prefix: str, graph: str) -> dict[int, dict]:
    """``{layer: {"key": shape, "value": shape}}`` of the cache tensors named ``prefix``."""
    layers: dict[int, dict[str, tuple[int, ...]]] = {}
    for value in values:
        match = _CACHE.match(value.name)
        if match and match[1] == prefix:
            layers.setdefault(int(match[2]), {})[match[3]] = _shape(value, graph)
    for layer, kinds in sorted(layers.items()):
        for kind in ("key", "value"):
            if kind not in kinds:
                other = "value" if kind == "key" else "key"
                raise DecoderGraphError(
                    f"{graph} graph must have {prefix}.{layer}.{kind} beside "
                    f"{prefix}.{layer}.{other}, not only the {other}"
                )
    if sorted(layers) != list(range(len(layers))):
        missing = sorted(set(range(max(layers, default=-1) + 1)) - set(layers))
        raise DecoderGraphError(
            f"{graph} graph must have {prefix} tensors for layers 0 to {max(layers)}, not "
            f"without layer {missing[0]}"
        )
    return layers


def _io(graph: onnx.GraphProto, kind: str) -> tuple[dict, dict, dict, dict]:
    """Token inputs, logits, the past and the present of ``graph`` (named ``kind``)."""
    inputs = {v.name: v for v in graph.input}
    initializers = {t.name for t in graph.initializer}
    inputs = {n: v for n, v in inputs.items() if n not in initializers}
    outputs = {v.name: v for v in graph.output}
    for name in ("input_ids", "position_ids"):
        if name not in inputs:
            raise DecoderGraphError(
                f"{kind} graph must have an input {name} (int64 [batch, tokens]), not "
                f"only {', '.join(sorted(inputs)) or 'none'}"
            )
        elem = inputs[name].type.tensor_type.elem_type
        if elem != _INT64:
            raise DecoderGraphError(
                f"{kind} graph input {name} must be int64, not "
                f"{onnx.helper.tensor_dtype_to_np_dtype(elem) if elem else 'untyped'}"
            )
    if "attention_mask" in inputs:
        raise DecoderGraphError(
            f"{kind} graph must not take an attention_mask input (the sequences of a batch "
            "have one length); export it without one"
        )
    extra = sorted(
        n for n in inputs if n not in ("input_ids", "position_ids") and not _CACHE.match(n)
    )
    if extra:
        raise DecoderGraphError(
            f"{kind} graph inputs must be input_ids, position_ids and past_key_values.N.key/"
            f".value, not also {', '.join(extra)}"
        )
    if "logits" not in outputs:
        raise DecoderGraphError(f"{kind} graph must have an output logits, not none")
    tokens = {n: _shape(inputs[n], kind) for n in ("input_ids", "position_ids")}
    logits = _shape(outputs["logits"], kind)
    return (
        tokens,
        {"logits": logits},
        _cache(list(inputs.values()), "past_key_values", kind),
        _cache(list(outputs.values()), "present", kind),
    )


def _appended(graph: onnx.GraphProto) -> dict[str, tuple[str, int]]:
    """``{graph output: (first input, axis)}`` of the outputs a Concat makes (through
    Identity nodes): how a decode graph's present names the past it grows."""
    producer = {o: n for n in graph.node for o in n.output}
    out: dict[str, tuple[str, int]] = {}
    for value in graph.output:
        node = producer.get(value.name)
        while node is not None and node.op_type == "Identity":
            node = producer.get(node.input[0])
        if node is None or node.op_type != "Concat" or not node.input:
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        rank = len(value.type.tensor_type.shape.dim)
        out[value.name] = (node.input[0], axis % rank if rank else axis)
    return out


#: Operators whose initializer operands are a model's weights (the tied LM head reads the
#: embedding through a Transpose).
_WEIGHT_READERS = frozenset({"MatMul", "Gemm", "Gather", "Transpose", "Conv"})


def _weights(graph: onnx.GraphProto) -> dict[str, tuple[int, tuple[int, ...]]]:
    """``{name: (type, dims)}`` of the initializers that weight-reading operators take."""
    read = {i for n in graph.node if n.op_type in _WEIGHT_READERS for i in n.input}
    return {
        t.name: (t.data_type, tuple(t.dims))
        for t in graph.initializer
        if t.name in read and len(t.dims) >= 2
    }


def check_decoder_pair(prefill: onnx.ModelProto, decode: onnx.ModelProto) -> DecoderPair:
    """Check that ``prefill`` and ``decode`` are the two graphs of one decoder (the table
    above); what they say, else `DecoderGraphError` naming the first thing that is not."""
    tokens, logits, past, present = _io(prefill.graph, "prefill")
    if past:
        raise DecoderGraphError(
            "prefill graph must not take past_key_values inputs (it starts the cache), not "
            f"{len(past)} layers of them"
        )
    batch, prompt = tokens["input_ids"]
    if not present:
        raise DecoderGraphError("prefill graph must return present.N.key/.value, not none")
    shapes = {s for kinds in present.values() for s in kinds.values()}
    if len(shapes) != 1:
        raise DecoderGraphError(
            f"prefill graph present tensors must all have one shape, not {sorted(shapes)}"
        )
    (cache_shape,) = shapes
    if len(cache_shape) != 4 or cache_shape[0] != batch or cache_shape[2] != prompt:
        raise DecoderGraphError(
            f"prefill graph present tensors must be [batch {batch}, kv_heads, tokens "
            f"{prompt}, head_dim], not {list(cache_shape)}"
        )
    _, kv_heads, _, head_dim = cache_shape
    vocab = logits["logits"][-1]
    if logits["logits"] != (batch, prompt, vocab) or tokens["position_ids"] != (batch, prompt):
        raise DecoderGraphError(
            f"prefill graph logits and position_ids must be [{batch}, {prompt}, vocab] and "
            f"[{batch}, {prompt}], not {list(logits['logits'])} and "
            f"{list(tokens['position_ids'])}"
        )
    d_tokens, d_logits, d_past, d_present = _io(decode.graph, "decode")
    if d_tokens["input_ids"] != (batch, 1) or d_tokens["position_ids"] != (batch, 1):
        raise DecoderGraphError(
            f"decode graph input_ids and position_ids must be [{batch}, 1], not "
            f"{list(d_tokens['input_ids'])} and {list(d_tokens['position_ids'])}"
        )
    if d_logits["logits"] != (batch, 1, vocab):
        raise DecoderGraphError(
            f"decode graph logits must be [{batch}, 1, {vocab}], not {list(d_logits['logits'])}"
        )
    for layer in sorted(set(d_past) | set(d_present) | set(present)):
        for name, table in (("past_key_values", d_past), ("present", d_present)):
            if layer not in table:
                raise DecoderGraphError(
                    f"decode graph must have {name}.{layer}.key and .value (the prefill graph "
                    f"has {len(present)} layers), not none for layer {layer}"
                )
    past_shapes = {s for kinds in d_past.values() for s in kinds.values()}
    (past_shape,) = past_shapes if len(past_shapes) == 1 else (None,)
    if past_shape is None or past_shape[:2] + past_shape[3:] != (batch, kv_heads, head_dim):
        raise DecoderGraphError(
            f"decode graph past_key_values must all be [{batch}, {kv_heads}, past, "
            f"{head_dim}], not {sorted(past_shapes)}"
        )
    past_tokens = past_shape[2]
    grown = (batch, kv_heads, past_tokens + 1, head_dim)
    for layer, kinds in sorted(d_present.items()):
        for kind, shape in kinds.items():
            if shape != grown:
                raise DecoderGraphError(
                    f"decode graph present.{layer}.{kind} must be the past grown by one token, "
                    f"{list(grown)}, not {list(shape)}"
                )
    appended = _appended(decode.graph)
    for layer, kinds in sorted(d_present.items()):
        for kind in kinds:
            past, grown_name = f"past_key_values.{layer}.{kind}", f"present.{layer}.{kind}"
            got = appended.get(grown_name)
            if got != (past, 2):
                what = (
                    "made by another operator"
                    if got is None
                    else f"{got[0]} grown on axis {got[1]}"
                )
                raise DecoderGraphError(
                    f"decode graph {grown_name} must be {past} grown by the step's rows (a "
                    f"Concat of it first, on the token axis 2), not {what}"
                )
    weights, d_weights = _weights(prefill.graph), _weights(decode.graph)
    differ = sorted(
        n for n in (set(weights) | set(d_weights)) if weights.get(n) != d_weights.get(n)
    )
    if differ:
        raise DecoderGraphError(
            f"prefill and decode graphs must hold the same weights, not differ in {differ[0]}"
            + (f" (and {len(differ) - 1} more)" if len(differ) > 1 else "")
        )
    return DecoderPair(
        layers=len(present),
        kv_heads=kv_heads,
        head_dim=head_dim,
        vocab=vocab,
        batch=batch,
        prompt_tokens=prompt,
        past_tokens=past_tokens,
        weight_params=sum(math.prod(dims) for _, dims in weights.values()),
    )


__all__ = [
    "DecoderPair",
    "append_in_place",
    "cache_state",
    "check_decoder_pair",
    "is_cache_input",
    "pin_cache_grids",
]
