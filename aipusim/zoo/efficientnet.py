"""EfficientNet-B0 (224x224) with torchvision's topology and parameter names.

MBConv blocks: optional 1x1 expansion, depthwise 3x3/5x5 with stride, squeeze-excite
(GlobalAveragePool -> Conv reduce -> SiLU -> Conv expand -> Sigmoid -> Mul), 1x1 linear
projection, residual when the shape is kept. SiLU exports as x * Sigmoid(x).

Example:
    >>> from aipusim.zoo.builder import GraphBuilder
    >>> b = GraphBuilder(input_shape=(1, 3, 64, 64), seed=0, name="effb0")
    >>> sorted(efficientnet_b0(b))
    ['logits']
"""

from __future__ import annotations

from aipusim.zoo.builder import GraphBuilder

NUM_CLASSES = 1000
#: (expansion, kernel, first stride, output channels, repeats) of the seven B0 stages.
STAGES = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
          (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1))  # fmt: skip
STEM_CHANNELS = 32
HEAD_CHANNELS = 1280
#: Squeeze-excite reduces to a quarter of the block's *input* channels (torchvision).
SE_RATIO = 4


def _conv_bn_silu(
    b: GraphBuilder, x: str, cout: int, k: int, stride: int = 1, groups: int = 1
) -> str:
    """torchvision's Conv2dNormActivation: children 0 (conv), 1 (bn), 2 (SiLU)."""
    return b.conv_bn_act(x, cout, k, stride=stride, groups=groups, act="silu", conv="0", bn="1")


def _squeeze_excite(b: GraphBuilder, x: str, squeeze: int) -> str:
    channels = b.channels(x)
    s = b.global_avg_pool(x)
    with b.scope("fc1"):
        s = b.conv(s, squeeze, 1, bias=True)
    s = b.silu(s)
    with b.scope("fc2"):
        s = b.conv(s, channels, 1, bias=True)
    return b.mul(b.sigmoid(s), x)


def _mbconv(b: GraphBuilder, x: str, expand: int, k: int, stride: int, cout: int) -> str:
    cin = b.channels(x)
    hidden = cin * expand
    with b.scope("block"):
        y, idx = x, 0
        if expand != 1:
            with b.scope(str(idx)):
                y = _conv_bn_silu(b, y, hidden, 1)
            idx += 1
        with b.scope(str(idx)):
            y = _conv_bn_silu(b, y, hidden, k, stride=stride, groups=hidden)
        with b.scope(str(idx + 1)):
            y = _squeeze_excite(b, y, max(1, cin // SE_RATIO))
        with b.scope(str(idx + 2)):
            y = b.conv_bn_act(y, cout, 1, act=None, conv="0", bn="1")
    return b.add(y, x) if stride == 1 and cin == cout else y


def efficientnet_b0(b: GraphBuilder) -> dict[str, str]:
    """EfficientNet-B0: 0.39 GMACs at 224x224, 5.3 M parameters."""
    with b.scope("features"):
        with b.scope("0"):
            x = _conv_bn_silu(b, b.input_name, STEM_CHANNELS, 3, stride=2)
        for stage, (expand, k, stride, cout, repeats) in enumerate(STAGES, start=1):
            with b.scope(str(stage)):
                for i in range(repeats):
                    with b.scope(str(i)):
                        x = _mbconv(b, x, expand, k, stride if i == 0 else 1, cout)
        with b.scope(str(len(STAGES) + 1)):
            x = _conv_bn_silu(b, x, HEAD_CHANNELS, 1)
    with b.scope("avgpool"):
        x = b.global_avg_pool(x)
    x = b.flatten(x)
    with b.scope("classifier"), b.scope("1"):
        x = b.gemm(x, NUM_CLASSES)
    return {"logits": x}
