"""Decoder-only language models (Llama geometry), as the two ONNX graphs exporters write.

A generation runs two graphs with the same weights:

- **prefill** takes the prompt, ``input_ids`` and ``position_ids`` [batch, S], and returns
  ``logits`` [batch, S, vocab] and the key/value cache of every layer,
  ``present.{i}.key`` / ``present.{i}.value`` [batch, kv_heads, S, head_dim];
- **decode** takes one new token per sequence ([batch, 1]) and the cache so far,
  ``past_key_values.{i}.key`` / ``.value`` [batch, kv_heads, P, head_dim], and returns the
  logits of that token and the cache grown by one position (P + 1).

Shapes are static (the compiler plans memory for one shape): a prefill graph is built for
a prompt length, a decode graph for a past length. Each layer is what ``torch.onnx`` writes
for Hugging Face's ``LlamaForCausalLM`` (eager attention):

    RMSNorm (Pow, ReduceMean, Add eps, Sqrt, Div, Mul, Mul by the gain) ->
    q/k/v MatMul -> Reshape [B, S, heads, head_dim] -> Transpose (0, 2, 1, 3) ->
    RoPE: cos/sin rows Gathered by position_ids, x * cos + rotate_half(x) * sin, where
    rotate_half is Slice, Neg, Concat -> (decode: Concat of the past along the sequence) ->
    GQA: each KV head Expanded to its query group, Reshape -> MatMul(q, kᵀ) -> Mul by
    head_dim**-0.5 -> Add the causal mask (prefill) -> Softmax -> MatMul(., v) ->
    Transpose, Reshape, o MatMul -> residual Add ->
    RMSNorm -> SiLU(gate MatMul) * up MatMul -> down MatMul -> residual Add

then a final RMSNorm and the LM head, a MatMul by the transposed token embedding (tied
weights: the one initializer feeds the embedding Gather and the head). RoPE tables use the
Llama 3 frequency scaling and hold ``positions`` rows (the longest context the graph
serves). There is no attention-mask input: every sequence of a batch has the same length.

Weights are seeded N(0, 0.02) as Hugging Face initialises Llama, RMSNorm gains 1.

Example:
    >>> m = build_decoder("tiny_decoder", graph=DecoderGraph.DECODE, past=8)
    >>> [i.name for i in m.graph.input][:3]
    ['input_ids', 'position_ids', 'past_key_values.0.key']
    >>> DECODERS["llama_1b"].param_count()
    1235814400
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, external_data_helper, helper, numpy_helper

from aipusim.base.errors import ZooError
from aipusim.base.fileio import output_path
from aipusim.zoo.builder import OPSET

#: The additive mask value above the diagonal, as Hugging Face fills it (float32's lowest):
#: exp() of it underflows to 0 in Softmax.
MASKED = float(np.finfo(np.float32).min)


class DecoderGraph(StrEnum):
    """Which of the two graphs of a generation."""

    PREFILL = "prefill"
    DECODE = "decode"


@dataclass(frozen=True)
class Llama3Rope:
    """Llama 3's RoPE frequency scaling (long wavelengths stretched by ``factor``, short
    ones kept, a smooth blend between)."""

    factor: float = 32.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_positions: int = 8192

    def scale(self, inv_freq: np.ndarray) -> np.ndarray:
        """``inv_freq`` after the scaling."""
        wavelength = 2 * math.pi / inv_freq
        low_wavelength = self.original_positions / self.low_freq_factor
        high_wavelength = self.original_positions / self.high_freq_factor
        smooth = (self.original_positions / wavelength - self.low_freq_factor) / (
            self.high_freq_factor - self.low_freq_factor
        )
        blended = (1 - smooth) * inv_freq / self.factor + smooth * inv_freq
        out = np.where(wavelength > low_wavelength, inv_freq / self.factor, inv_freq)
        middle = (wavelength >= high_wavelength) & (wavelength <= low_wavelength)
        return np.where(middle, blended, out)


@dataclass(frozen=True)
class DecoderSize:
    """The geometry of one decoder, and where its figures come from."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    rope_theta: float
    rope_scaling: Llama3Rope | None
    source: str
    rms_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def param_count(self) -> int:
        """Parameters, the tied embedding counted once (published figures count so)."""
        kv = self.kv_heads * self.head_dim
        attention = 2 * self.hidden * self.hidden + 2 * self.hidden * kv
        mlp = 3 * self.hidden * self.ffn
        per_layer = attention + mlp + 2 * self.hidden  # (two RMSNorm gains)
        return self.layers * per_layer + self.vocab * self.hidden + self.hidden

    def inv_freq(self) -> np.ndarray:
        """RoPE's inverse frequencies, one per pair of a head's dimensions."""
        exponents = np.arange(0, self.head_dim, 2, dtype=np.float64) / self.head_dim
        inv = 1.0 / self.rope_theta**exponents
        return self.rope_scaling.scale(inv) if self.rope_scaling is not None else inv


#: Decoders the zoo builds, by name.
DECODERS: dict[str, DecoderSize] = {
    d.name: d
    for d in (
        DecoderSize(
            name="llama_1b", layers=16, hidden=2048, heads=32, kv_heads=8, ffn=8192,
            vocab=128256, rope_theta=500000.0, rope_scaling=Llama3Rope(),
            source="meta-llama/Llama-3.2-1B config.json; 1.24 B parameters (model card), "
            "1,235,814,400 with the embedding tied to the LM head",
        ),
        DecoderSize(
            name="tiny_decoder", layers=4, hidden=256, heads=8, kv_heads=2, ffn=1024,
            vocab=2048, rope_theta=500000.0, rope_scaling=Llama3Rope(),
            source="aipusim (test model): llama_1b's structure (GQA 4:1, SiLU gating, "
            "RMSNorm, Llama 3 RoPE, tied embedding) at 4 layers, hidden 256, vocab 2048",
        ),
    )
}  # fmt: skip


def decoder_names() -> list[str]:
    """Names of the zoo's decoders, sorted."""
    return sorted(DECODERS)


def decoder_size(name: str) -> DecoderSize:
    """The geometry of decoder ``name``; `ZooError` naming the known ones if unknown."""
    if name not in DECODERS:
        raise ZooError(f"decoder must be one of {', '.join(decoder_names())}, not {name!r}")
    return DECODERS[name]


class _Graph:
    """Nodes and initializers of one graph, with torch-like node names."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._consts: dict[tuple[str, bytes, tuple[int, ...]], str] = {}
        self._count = 0

    def op(self, op_type: str, inputs: list[str], scope: str, **attrs: object) -> str:
        self._count += 1
        out = f"{scope}/{op_type}_{self._count}_output_0"
        self.nodes.append(
            helper.make_node(
                op_type, inputs, [out], name=f"{scope}/{op_type}_{self._count}", **attrs
            )
        )
        return out

    def init(self, name: str, array: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def const(self, values: object, dtype: type = np.int64) -> str:
        array = np.asarray(values, dtype=dtype)
        key = (array.dtype.str, array.tobytes(), array.shape)
        if key not in self._consts:
            self._consts[key] = self.init(f"onnx::Constant_{len(self._consts)}", array)
        return self._consts[key]


class _Decoder:
    """Builds one graph of ``size`` with seeded weights (the same for both graphs)."""

    def __init__(
        self,
        size: DecoderSize,
        seed: int,
        positions: int,
        shared: dict[str, onnx.TensorProto] | None = None,
    ) -> None:
        self.size = size
        self.rng = np.random.default_rng(seed)
        self.g = _Graph()
        self.positions = positions
        self.shared = shared or {}

    def from_shared(self, name: str, shape: tuple[int, ...]) -> bool:
        """Point initializer ``name`` at the shared weights file, if it is there."""
        given = self.shared.get(name)
        if given is None:
            return False
        # a reference into the weights file of an earlier graph: no second copy
        if tuple(given.dims) != shape:
            raise ZooError(
                f"shared weight {name} must have the shape {list(shape)}, not "
                f"{list(given.dims)} (another decoder's graph?)"
            )
        tensor = onnx.TensorProto()
        tensor.CopyFrom(given)
        self.g.inits.append(tensor)
        return True

    def weight(self, name: str, shape: tuple[int, ...]) -> str:
        if self.from_shared(name, shape):
            return name
        return self.g.init(name, self.rng.normal(0.0, 0.02, shape).astype(np.float32))

    def table(self, name: str, array: np.ndarray) -> str:
        return name if self.from_shared(name, array.shape) else self.g.init(name, array)

    def rms_norm(self, x: str, name: str, scope: str) -> str:
        g, eps = self.g, self.size.rms_eps
        gain = self.table(name, np.ones(self.size.hidden, np.float32))
        square = g.op("Pow", [x, g.const(2.0, np.float32)], scope)
        mean = g.op("ReduceMean", [square], scope, axes=[-1], keepdims=1)
        root = g.op("Sqrt", [g.op("Add", [mean, g.const(eps, np.float32)], scope)], scope)
        inv = g.op("Div", [g.const(1.0, np.float32), root], scope)
        return g.op("Mul", [gain, g.op("Mul", [x, inv], scope)], scope)

    def heads(self, x: str, count: int, batch: int, tokens: int, scope: str) -> str:
        """[B, S, count * head_dim] -> [B, count, S, head_dim]."""
        shape = self.g.const([batch, tokens, count, self.size.head_dim])
        return self.g.op("Transpose", [self.g.op("Reshape", [x, shape], scope)], scope,
                         perm=[0, 2, 1, 3])  # fmt: skip

    def rope(self, x: str, cos: str, sin: str, scope: str) -> str:
        g, half = self.g, self.size.head_dim // 2
        first = g.op("Slice", [x, g.const([0]), g.const([half]), g.const([-1])], scope)
        second = g.op(
            "Slice", [x, g.const([half]), g.const([self.size.head_dim]), g.const([-1])], scope
        )
        rotated = g.op("Concat", [g.op("Neg", [second], scope), first], scope, axis=-1)
        return g.op(
            "Add",
            [g.op("Mul", [x, cos], scope), g.op("Mul", [rotated, sin], scope)],
            scope,
        )

    def repeat_kv(self, x: str, batch: int, length: int, scope: str) -> str:
        """[B, kv, T, d] -> [B, heads, T, d]: each KV head serves its query group."""
        s, g = self.size, self.g
        group = s.heads // s.kv_heads
        grown = g.op(
            "Expand",
            [g.op("Unsqueeze", [x, g.const([2])], scope),
             g.const([batch, s.kv_heads, group, length, s.head_dim])],
            scope,
        )  # fmt: skip
        return g.op("Reshape", [grown, g.const([batch, s.heads, length, s.head_dim])], scope)

    def build(self, graph: DecoderGraph, batch: int, tokens: int, past: int) -> onnx.ModelProto:
        s, g = self.size, self.g
        kv_dim = s.kv_heads * s.head_dim
        inputs = [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, tokens]),
            helper.make_tensor_value_info("position_ids", TensorProto.INT64, [batch, tokens]),
        ]
        outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                                 [batch, tokens, s.vocab])]  # fmt: skip
        cache_shape = [batch, s.kv_heads, past + tokens, s.head_dim]
        embed = self.weight("model.embed_tokens.weight", (s.vocab, s.hidden))
        x = g.op("Gather", [embed, "input_ids"], "/model/embed_tokens", axis=0)
        angles = np.outer(np.arange(self.positions), s.inv_freq())
        angles = np.concatenate([angles, angles], axis=-1)
        cos_table = self.table("model.rotary_emb.cos_cached", np.cos(angles).astype(np.float32))
        sin_table = self.table("model.rotary_emb.sin_cached", np.sin(angles).astype(np.float32))
        rope_scope = "/model/rotary_emb"
        cos, sin = (
            g.op("Unsqueeze", [g.op("Gather", [t, "position_ids"], rope_scope, axis=0),
                               g.const([1])], rope_scope)
            for t in (cos_table, sin_table)
        )  # fmt: skip
        mask = None
        if tokens > 1:
            # a query attends the whole past and the prompt up to itself
            causal = np.triu(np.full((tokens, past + tokens), MASKED, np.float32), past + 1)
            mask = g.init("model.causal_mask", causal)
        for i in range(s.layers):
            scope, prefix = f"/model/layers.{i}", f"model.layers.{i}"
            h = self.rms_norm(x, f"{prefix}.input_layernorm.weight", scope + "/input_layernorm")
            att = scope + "/self_attn"
            proj = {
                name: g.op("MatMul", [h, self.weight(f"{prefix}.self_attn.{name}_proj.weight",
                                                     (s.hidden, width))], att)
                for name, width in (("q", s.hidden), ("k", kv_dim), ("v", kv_dim))
            }  # fmt: skip
            q = self.rope(self.heads(proj["q"], s.heads, batch, tokens, att), cos, sin, att)
            k = self.rope(self.heads(proj["k"], s.kv_heads, batch, tokens, att), cos, sin, att)
            v = self.heads(proj["v"], s.kv_heads, batch, tokens, att)
            if graph is DecoderGraph.DECODE:
                past_shape = [batch, s.kv_heads, past, s.head_dim]
                for kind in ("key", "value"):
                    inputs.append(helper.make_tensor_value_info(
                        f"past_key_values.{i}.{kind}", TensorProto.FLOAT, past_shape))  # fmt: skip
                k = g.op("Concat", [f"past_key_values.{i}.key", k], att, axis=2)
                v = g.op("Concat", [f"past_key_values.{i}.value", v], att, axis=2)
            for kind, tensor in (("key", k), ("value", v)):
                g.nodes.append(helper.make_node("Identity", [tensor], [f"present.{i}.{kind}"]))
                outputs.append(helper.make_tensor_value_info(
                    f"present.{i}.{kind}", TensorProto.FLOAT, cache_shape))  # fmt: skip
            length = past + tokens
            k_all = self.repeat_kv(k, batch, length, att)
            v_all = self.repeat_kv(v, batch, length, att)
            scores = g.op("MatMul", [q, g.op("Transpose", [k_all], att, perm=[0, 1, 3, 2])], att)
            scores = g.op("Mul", [scores, g.const(s.head_dim**-0.5, np.float32)], att)
            if mask is not None:
                scores = g.op("Add", [scores, mask], att)
            probs = g.op("Softmax", [scores], att, axis=-1)
            context = g.op("Transpose", [g.op("MatMul", [probs, v_all], att)], att,
                           perm=[0, 2, 1, 3])  # fmt: skip
            context = g.op("Reshape", [context, g.const([batch, tokens, s.hidden])], att)
            out = self.weight(f"{prefix}.self_attn.o_proj.weight", (s.hidden, s.hidden))
            x = g.op("Add", [x, g.op("MatMul", [context, out], att)], scope)
            h = self.rms_norm(
                x, f"{prefix}.post_attention_layernorm.weight", scope + "/post_attention_layernorm"
            )
            mlp = scope + "/mlp"
            gate = g.op("MatMul", [h, self.weight(f"{prefix}.mlp.gate_proj.weight",
                                                  (s.hidden, s.ffn))], mlp)  # fmt: skip
            up = g.op("MatMul", [h, self.weight(f"{prefix}.mlp.up_proj.weight",
                                                (s.hidden, s.ffn))], mlp)  # fmt: skip
            act = g.op("Mul", [gate, g.op("Sigmoid", [gate], mlp)], mlp)  # SiLU
            down = self.weight(f"{prefix}.mlp.down_proj.weight", (s.ffn, s.hidden))
            x = g.op("Add", [x, g.op("MatMul", [g.op("Mul", [act, up], mlp), down], mlp)], scope)
        x = self.rms_norm(x, "model.norm.weight", "/model/norm")
        head = g.op("Transpose", [embed], "/lm_head", perm=[1, 0])  # (tied weights)
        g.nodes.append(helper.make_node("MatMul", [x, head], ["logits"], name="/lm_head/MatMul"))
        model = helper.make_model(
            helper.make_graph(g.nodes, f"{s.name}_{graph.value}", inputs, outputs),
            opset_imports=[helper.make_opsetid("", OPSET)],
            producer_name="aipusim.zoo",
        )
        # Moved in one at a time, each original dropped once copied: make_graph and
        # make_model each copy what they are given, three copies of llama_1b's 5 GB at once
        inits, g.inits = g.inits, []
        inits.reverse()
        while inits:
            model.graph.initializer.append(inits.pop())
        return model


def build_decoder(
    name: str,
    *,
    graph: DecoderGraph | str = DecoderGraph.PREFILL,
    tokens: int | None = None,
    past: int = 0,
    batch: int = 1,
    positions: int = 4096,
    seed: int = 0,
    shared: onnx.ModelProto | None = None,
) -> onnx.ModelProto:
    """One graph of decoder ``name`` (`DECODERS`) with seeded weights, the same for the
    prefill and decode graphs of one ``seed``.

    ``tokens``: the prompt length of a prefill graph (default 128); a decode graph takes one
    token. ``past``: the cache length a decode graph takes (prefill: 0). ``positions``: the
    RoPE table's rows, the longest context (past + tokens) the graph serves. ``shared``:
    a graph of the same decoder written by `save_graph` (loaded without its external
    data); the weights it holds in `WEIGHTS_FILE` are pointed at, not drawn again (a
    llama_1b graph then costs kilobytes, not gigabytes), so the new graph must be saved
    into the same folder.

    Example:
        >>> m = build_decoder("tiny_decoder", tokens=16)
        >>> [o.name for o in m.graph.output][:2]
        ['logits', 'present.0.key']
    """
    size = decoder_size(name)
    try:
        kind = DecoderGraph(graph)
    except ValueError:
        raise ZooError(f"graph must be prefill or decode, not {graph!r}") from None
    if kind is DecoderGraph.DECODE:
        if tokens not in (None, 1):
            raise ZooError(f"tokens of a decode graph must be 1, not {tokens}")
        tokens = 1
        if past < 1:
            raise ZooError(f"past of a decode graph must be an integer >= 1, not {past}")
    else:
        tokens = 128 if tokens is None else tokens
        if past != 0:
            raise ZooError(f"past of a prefill graph must be 0, not {past}")
    for what, value in (("tokens", tokens), ("batch", batch), ("positions", positions)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ZooError(f"{what} must be an integer >= 1, not {value!r}")
    if past + tokens > positions:
        raise ZooError(
            f"past + tokens must be at most positions ({positions}), not {past + tokens}"
        )
    external = (
        {t.name: t for t in shared.graph.initializer if t.data_location == TensorProto.EXTERNAL}
        if shared is not None
        else None
    )
    return _Decoder(size, seed, positions, external).build(kind, batch, tokens, past)


#: File names of a decoder written by `save_decoder`: the two graphs and the weights they
#: share (stored once, each graph pointing into the file as ONNX external data).
PREFILL_FILE = "prefill.onnx"
DECODE_FILE = "decode.onnx"
WEIGHTS_FILE = "weights.bin"
#: Initializers at least this large go into the shared weights file.
EXTERNAL_MIN_BYTES = 1024


def save_decoder(prefill: onnx.ModelProto, decode: onnx.ModelProto, directory: Path) -> int:
    """Write the two graphs into ``directory`` with their weights once, in `WEIGHTS_FILE`
    (a 1B-parameter model is over protobuf's 2 GB per file and would be stored twice);
    the bytes written. Each file is written under a temporary name and renamed into place
    when all three are written: a failure leaves none of them (nor a folder it made).

    ``onnx.load(directory / PREFILL_FILE)`` reads it back with its weights.
    """
    made = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    try:
        with (
            output_path(directory / WEIGHTS_FILE) as weights_tmp,
            output_path(directory / PREFILL_FILE) as prefill_tmp,
            output_path(directory / DECODE_FILE) as decode_tmp,
        ):
            written = _write_shared((prefill, decode), weights_tmp)
            for model, path in ((prefill, prefill_tmp), (decode, decode_tmp)):
                blob = model.SerializeToString()
                path.write_bytes(blob)
                written += len(blob)
    except BaseException:
        if made:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    return written


def save_graph(model: onnx.ModelProto, directory: Path, filename: str) -> Path:
    """Write one graph as ``directory/filename`` with its large initializers in
    `WEIGHTS_FILE` in ``directory`` (replaced), for `build_decoder`'s ``shared`` to point
    at; a graph that holds only such references is written alone. The path written.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> first = save_graph(build_decoder("tiny_decoder", tokens=4), folder, "p.onnx")
        >>> ref = onnx.load(str(first), load_external_data=False)
        >>> d = build_decoder("tiny_decoder", graph="decode", past=9, shared=ref)
        >>> len(save_graph(d, folder, "d.onnx").read_bytes()) < 2**20
        True
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / filename
    inline = any(len(t.raw_data) >= EXTERNAL_MIN_BYTES for t in model.graph.initializer)
    pointing = any(t.data_location == TensorProto.EXTERNAL for t in model.graph.initializer)
    if inline and pointing:
        raise ZooError(
            f"graph {filename} must hold its large weights either inline or in the shared "
            "file, not both (build it with shared= for every large weight)"
        )
    with output_path(path) as tmp:
        if inline:
            with output_path(directory / WEIGHTS_FILE) as weights_tmp:
                _write_shared((model,), weights_tmp)
        tmp.write_bytes(model.SerializeToString())
    return path


def _write_shared(models: tuple[onnx.ModelProto, ...], path: Path) -> int:
    """Move the large initializers of ``models`` into the file ``path`` (each weight once,
    every graph pointing at it as `WEIGHTS_FILE`); its size."""
    placed: dict[str, tuple[int, bytes]] = {}
    with open(path, "wb") as data:
        for model in models:
            for tensor in model.graph.initializer:
                raw = tensor.raw_data
                if len(raw) < EXTERNAL_MIN_BYTES:
                    continue
                if tensor.name not in placed:
                    placed[tensor.name] = (data.tell(), raw)
                    data.write(raw)
                offset, first = placed[tensor.name]
                if first != raw:
                    raise ZooError(
                        f"decoder graphs must share the weight {tensor.name}, not hold two "
                        "different ones"
                    )
                external_data_helper.set_external_data(tensor, WEIGHTS_FILE, offset, len(raw))
                tensor.ClearField("raw_data")
                tensor.data_location = onnx.TensorProto.EXTERNAL
        return data.tell()


__all__ = [
    "DECODERS",
    "DECODE_FILE",
    "PREFILL_FILE",
    "WEIGHTS_FILE",
    "DecoderGraph",
    "DecoderSize",
    "Llama3Rope",
    "build_decoder",
    "decoder_names",
    "decoder_size",
    "save_decoder",
    "save_graph",
]
