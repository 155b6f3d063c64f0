"""The zoo's decoders: the Llama geometry's parameter count, the prefill and decode graphs
against a numpy forward pass, and the cache carried from one graph to the other."""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from aipusim.base.errors import ZooError
from aipusim.zoo.decoder import DECODERS, MASKED, DecoderGraph, build_decoder

TINY = DECODERS["tiny_decoder"]


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    onnx.checker.check_model(model)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _run(model: onnx.ModelProto, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = _session(model)
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feed), strict=True))


def _reference_logits(model: onnx.ModelProto, ids: np.ndarray) -> np.ndarray:
    """Llama's forward pass written out in numpy from the graph's weights (prefill)."""
    w = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    s, n = TINY, ids.shape[1]
    d, group = s.head_dim, s.heads // s.kv_heads

    def norm(x: np.ndarray, gain: np.ndarray) -> np.ndarray:
        return gain * x / np.sqrt((x * x).mean(-1, keepdims=True) + s.rms_eps)

    angles = np.outer(np.arange(n), s.inv_freq())  # [n, d/2]
    cos, sin = np.cos(angles), np.sin(angles)

    def rope(x: np.ndarray) -> np.ndarray:  # x [heads, n, d]: pairs (i, i + d/2) rotated
        a, b = x[..., : d // 2], x[..., d // 2 :]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)

    x = w["model.embed_tokens.weight"][ids[0]]
    for i in range(s.layers):
        p = f"model.layers.{i}"
        h = norm(x, w[f"{p}.input_layernorm.weight"])
        q = (h @ w[f"{p}.self_attn.q_proj.weight"]).reshape(n, s.heads, d).transpose(1, 0, 2)
        k = (h @ w[f"{p}.self_attn.k_proj.weight"]).reshape(n, s.kv_heads, d).transpose(1, 0, 2)
        v = (h @ w[f"{p}.self_attn.v_proj.weight"]).reshape(n, s.kv_heads, d).transpose(1, 0, 2)
        q, k = rope(q), rope(k)
        heads = []
        for head in range(s.heads):
            kv = head // group
            scores = q[head] @ k[kv].T / np.sqrt(d)
            scores[np.triu_indices(n, 1)] = -np.inf
            probs = np.exp(scores - scores.max(-1, keepdims=True))
            heads.append((probs / probs.sum(-1, keepdims=True)) @ v[kv])
        x = x + np.concatenate(heads, axis=-1) @ w[f"{p}.self_attn.o_proj.weight"]
        h = norm(x, w[f"{p}.post_attention_layernorm.weight"])
        gate = h @ w[f"{p}.mlp.gate_proj.weight"]
        up = h @ w[f"{p}.mlp.up_proj.weight"]
        x = x + (gate / (1 + np.exp(-gate)) * up) @ w[f"{p}.mlp.down_proj.weight"]
    return norm(x, w["model.norm.weight"]) @ w["model.embed_tokens.weight"].T


def test_the_1b_geometry_has_the_published_parameter_count() -> None:
    # Llama-3.2-1B: 1.24 B on its model card; 1,235,814,400 with the tied embedding
    assert DECODERS["llama_1b"].param_count() == 1_235_814_400
    assert DECODERS["llama_1b"].head_dim == 64


def test_the_graph_holds_the_parameters_its_geometry_counts() -> None:
    model = build_decoder("tiny_decoder", tokens=4)
    params = sum(
        numpy_helper.to_array(t).size
        for t in model.graph.initializer
        if t.name.startswith("model.") and "rotary_emb" not in t.name and "mask" not in t.name
    )
    assert params == TINY.param_count()


def test_prefill_matches_a_numpy_forward_pass() -> None:
    ids = np.random.default_rng(3).integers(0, TINY.vocab, (1, 10))
    model = build_decoder("tiny_decoder", tokens=10)
    got = _run(model, {"input_ids": ids, "position_ids": np.arange(10)[None]})["logits"][0]
    want = _reference_logits(model, ids)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * np.abs(want).max())


def test_decode_with_the_prefill_cache_gives_the_longer_prefill() -> None:
    """Prefill S tokens, then decode token S+1 from the cache: its logits and cache are
    those of a prefill of all S+1 tokens (the positions, the mask and the cache agree)."""
    n = 12
    ids = np.random.default_rng(1).integers(0, TINY.vocab, (2, n + 1))
    positions = np.tile(np.arange(n + 1), (2, 1))
    first = _run(build_decoder("tiny_decoder", tokens=n, batch=2),
                 {"input_ids": ids[:, :n], "position_ids": positions[:, :n]})  # fmt: skip
    feed = {"input_ids": ids[:, n:], "position_ids": positions[:, n:]}
    feed |= {f"past_key_values{k[len('present') :]}": v for k, v in first.items() if k != "logits"}
    step = _run(build_decoder("tiny_decoder", graph=DecoderGraph.DECODE, past=n, batch=2), feed)
    whole = _run(build_decoder("tiny_decoder", tokens=n + 1, batch=2),
                 {"input_ids": ids, "position_ids": positions})  # fmt: skip
    scale = np.abs(whole["logits"]).max()
    np.testing.assert_allclose(step["logits"][:, 0], whole["logits"][:, -1], atol=1e-5 * scale)
    for i in range(TINY.layers):
        assert step[f"present.{i}.key"].shape == (2, TINY.kv_heads, n + 1, TINY.head_dim)
        np.testing.assert_allclose(step[f"present.{i}.value"], whole[f"present.{i}.value"],
                                   atol=1e-5)  # fmt: skip
    # the prompt's logits do not see the token after it
    np.testing.assert_array_equal(first["logits"], whole["logits"][:, :n])


def test_the_causal_mask_is_float32s_lowest() -> None:
    model = build_decoder("tiny_decoder", tokens=3)
    mask = next(t for t in model.graph.initializer if t.name == "model.causal_mask")
    assert numpy_helper.to_array(mask).tolist() == [
        [0, MASKED, MASKED],
        [0, 0, MASKED],
        [0, 0, 0],
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "llama_7b"}, "decoder must be one of llama_1b, tiny_decoder, not 'llama_7b'"),
        ({"graph": "encode"}, "graph must be prefill or decode, not 'encode'"),
        ({"graph": "decode", "past": 0}, "past of a decode graph must be an integer >= 1, not 0"),
        ({"graph": "decode", "past": 4, "tokens": 2}, "tokens of a decode graph must be 1, not 2"),
        ({"past": 3}, "past of a prefill graph must be 0, not 3"),
        ({"tokens": 0}, "tokens must be an integer >= 1, not 0"),
        ({"tokens": 9, "positions": 8}, "past + tokens must be at most positions (8), not 9"),
    ],
)
def test_bad_arguments_are_named(kwargs: dict, message: str) -> None:
    kwargs = {"name": "tiny_decoder", **kwargs}
    with pytest.raises(ZooError, match=re.escape(message)):
        build_decoder(kwargs.pop("name"), **kwargs)


def test_graphs_of_different_weights_are_not_saved_as_a_pair(tmp_path) -> None:
    from aipusim.zoo.decoder import save_decoder

    prefill = build_decoder("tiny_decoder", tokens=4, seed=0)
    decode = build_decoder("tiny_decoder", graph=DecoderGraph.DECODE, past=4, seed=1)
    with pytest.raises(ZooError, match=re.escape("must share the weight model.embed_tokens")):
        save_decoder(prefill, decode, tmp_path / "pair")
    assert list(tmp_path.iterdir()) == []  # nothing half written, not even the folder
