"""Vision transformers: DeiT-Tiny and ViT-B/16, as timm's VisionTransformer exports them.

The graph is what ``torch.onnx.export(timm.create_model(...), opset_version=17)`` writes:
a 16x16 stride-16 patch Conv, flatten + transpose to tokens, the class token concatenated
(an Expand of a parameter), position embeddings added, then ``depth`` pre-norm blocks:

    LayerNormalization -> qkv MatMul + Add -> Reshape [1, N, 3, heads, dh] ->
    Transpose (2, 0, 3, 1, 4) -> Gather 0/1/2 (q, k, v) -> MatMul(q, Transpose(k)) ->
    Mul by dh**-0.5 -> Softmax -> MatMul(., v) -> Transpose -> Reshape -> proj MatMul + Add
    -> residual Add -> LayerNormalization -> fc1 -> GELU (Div/Erf/Add/Mul/Mul) -> fc2 ->
    residual Add

and a final LayerNormalization, the class token taken with Gather(axis 1, index 0) and the
head as a Gemm. Q·Kᵀ and attention·V are MatMuls of two activations, the MLP's GELU is the
erf form in five element-wise ops: the compiler must recognise and map all of them.

Weights are seeded: linear layers N(0, 1/fan_in) (activations keep unit scale through the
blocks, as in a trained network, so attention is neither uniform nor one-hot), small biases,
LayerNorm gains near 1, class token and position embeddings N(0, 0.02) as timm initialises.

Example:
    >>> from aipusim.zoo.builder import GraphBuilder
    >>> b = GraphBuilder(input_shape=(1, 3, 32, 32), seed=0, name="deit_tiny")
    >>> sorted(deit_tiny(b))
    ['logits']
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aipusim.zoo.builder import GraphBuilder

NUM_CLASSES = 1000
PATCH = 16
#: timm's LayerNorm epsilon in ViTs.
LN_EPS = 1e-6


@dataclass(frozen=True)
class VitSize:
    """Width, depth, heads and MLP ratio of one ViT variant."""

    dim: int
    depth: int
    heads: int
    mlp_ratio: int = 4


DEIT_TINY = VitSize(dim=192, depth=12, heads=3)
VIT_BASE = VitSize(dim=768, depth=12, heads=12)


class _Vit:
    def __init__(self, b: GraphBuilder, size: VitSize) -> None:
        self.b = b
        self.size = size
        self.batch, _, h, w = b.input_shape
        self.tokens = (h // PATCH) * (w // PATCH) + 1

    def i64(self, values: list[int]) -> str:
        return self.b.const(values, np.int64)

    def linear(self, x: str, din: int, dout: int, name: str) -> str:
        """torch.nn.Linear on a 3-D input: MatMul by the (stored transposed, [din, dout])
        weight, then Add of the bias, as torch.onnx exports it."""
        rng = self.b.rng
        with self.b.scope(name):
            w = self.b.param("weight", rng.normal(0.0, 1.0 / math.sqrt(din), (din, dout)))
            bias = self.b.param("bias", rng.normal(0.0, 0.02, dout))
            return self.b.op("Add", [bias, self.b.op("MatMul", [x, w])[0]])[0]

    def layer_norm(self, x: str, name: str) -> str:
        d, rng = self.size.dim, self.b.rng
        with self.b.scope(name):
            gamma = self.b.param("weight", np.clip(rng.normal(1.0, 0.1, d), 0.5, None))
            beta = self.b.param("bias", rng.normal(0.0, 0.05, d))
            return self.b.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=LN_EPS)[0]

    def gelu(self, x: str) -> str:
        """nn.GELU() at opset 17: x * 0.5 * (1 + erf(x / sqrt(2))), five nodes."""
        b = self.b
        erf = b.op("Erf", [b.op("Div", [x, b.const(math.sqrt(2.0))])[0]])[0]
        one = b.op("Add", [erf, b.const(1.0)])[0]
        return b.op("Mul", [b.op("Mul", [x, one])[0], b.const(0.5)])[0]

    def attention(self, x: str) -> str:
        d, heads, n = self.size.dim, self.size.heads, self.tokens
        dh = d // heads
        b = self.b
        with b.scope("attn"):
            qkv = self.linear(x, d, 3 * d, "qkv")
            qkv = b.op("Reshape", [qkv, self.i64([self.batch, n, 3, heads, dh])], allowzero=0)[0]
            qkv = b.op("Transpose", [qkv], perm=[2, 0, 3, 1, 4])[0]
            q, k, v = (b.op("Gather", [qkv, b.index(i)], axis=0)[0] for i in range(3))
            kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])[0]
            scores = b.op("Mul", [b.op("MatMul", [q, kt])[0], b.const(dh**-0.5)])[0]
            attn = b.op("Softmax", [scores], axis=-1)[0]
            ctx = b.op("Transpose", [b.op("MatMul", [attn, v])[0]], perm=[0, 2, 1, 3])[0]
            ctx = b.op("Reshape", [ctx, self.i64([self.batch, n, d])], allowzero=0)[0]
            return self.linear(ctx, d, d, "proj")

    def block(self, x: str, i: int) -> str:
        d, hidden = self.size.dim, self.size.dim * self.size.mlp_ratio
        with self.b.scope(f"blocks.{i}"):
            x = self.b.op("Add", [x, self.attention(self.layer_norm(x, "norm1"))])[0]
            with self.b.scope("mlp"):
                h = self.linear(self.layer_norm(x, "norm2"), d, hidden, "fc1")
                h = self.linear(self.gelu(h), hidden, d, "fc2")
            return self.b.op("Add", [x, h])[0]

    def build(self) -> dict[str, str]:
        b, d, rng = self.b, self.size.dim, self.b.rng
        with b.scope("patch_embed"), b.scope("proj"):
            fan_in = 3 * PATCH * PATCH
            w = b.param("weight", rng.normal(0.0, math.sqrt(2.0 / fan_in), (d, 3, PATCH, PATCH)))
            bias = b.param("bias", rng.normal(0.0, 0.02, d))
            x = b.op("Conv", [b.input_name, w, bias], dilations=[1, 1], group=1,
                     kernel_shape=[PATCH, PATCH], pads=[0, 0, 0, 0],
                     strides=[PATCH, PATCH])[0]  # fmt: skip
        x = b.op("Reshape", [x, self.i64([self.batch, d, self.tokens - 1])], allowzero=0)[0]
        x = b.op("Transpose", [x], perm=[0, 2, 1])[0]
        cls = b.initializer("cls_token", rng.normal(0.0, 0.02, (1, 1, d)).astype(np.float32))
        cls = b.op("Expand", [cls, self.i64([self.batch, 1, d])])[0]
        x = b.op("Concat", [cls, x], axis=1)[0]
        pos = b.initializer(
            "pos_embed", rng.normal(0.0, 0.02, (1, self.tokens, d)).astype(np.float32)
        )
        x = b.op("Add", [x, pos])[0]
        for i in range(self.size.depth):
            x = self.block(x, i)
        x = self.layer_norm(x, "norm")
        x = b.op("Gather", [x, b.index(0)], axis=1)[0]
        with b.scope("head"):
            w = b.param("weight", rng.normal(0.0, 1.0 / math.sqrt(d), (NUM_CLASSES, d)))
            bias = b.param("bias", rng.normal(0.0, 0.01, NUM_CLASSES))
            x = b.op("Gemm", [x, w, bias], alpha=1.0, beta=1.0, transB=1)[0]
        return {"logits": x}


def deit_tiny(b: GraphBuilder) -> dict[str, str]:
    """DeiT-Tiny/16: width 192, 12 blocks of 3 heads; 1.26 GMACs, 5.7 M parameters at 224."""
    return _Vit(b, DEIT_TINY).build()


def vit_b16(b: GraphBuilder) -> dict[str, str]:
    """ViT-B/16: width 768, 12 blocks of 12 heads; 17.6 GMACs, 86.6 M parameters at 224."""
    return _Vit(b, VIT_BASE).build()
