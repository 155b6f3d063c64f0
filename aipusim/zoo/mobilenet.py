"""MobileNetV2 (width 1.0, 224x224) with torchvision's topology and parameter names.

Inverted residuals: 1x1 expand (ReLU6), 3x3 depthwise (ReLU6), 1x1 linear projection,
residual add when the shape is kept. ReLU6 exports as Clip(0, 6).

Example:
    >>> from aipusim.zoo.builder import GraphBuilder
    >>> b = GraphBuilder(input_shape=(1, 3, 64, 64), seed=0, name="mnv2")
    >>> sorted(mobilenetv2(b))
    ['logits']
"""

from __future__ import annotations

from aipusim.zoo.builder import GraphBuilder

NUM_CLASSES = 1000
#: (expansion t, output channels c, repeats n, first stride s) of the seven stages.
STAGES = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
          (6, 160, 3, 2), (6, 320, 1, 1))  # fmt: skip
STEM_CHANNELS = 32
LAST_CHANNELS = 1280


def _conv_bn_relu6(
    b: GraphBuilder, x: str, cout: int, k: int, stride: int = 1, groups: int = 1
) -> str:
    """torchvision's Conv2dNormActivation: children 0 (conv), 1 (bn), 2 (ReLU6)."""
    return b.conv_bn_act(x, cout, k, stride=stride, groups=groups, act="relu6", conv="0", bn="1")


def _inverted_residual(b: GraphBuilder, x: str, cout: int, stride: int, expand: int) -> str:
    cin = b.channels(x)
    hidden = cin * expand
    with b.scope("conv"):
        y, idx = x, 0
        if expand != 1:
            with b.scope(str(idx)):
                y = _conv_bn_relu6(b, y, hidden, 1)
            idx += 1
        with b.scope(str(idx)):
            y = _conv_bn_relu6(b, y, hidden, 3, stride=stride, groups=hidden)
        y = b.conv_bn_act(y, cout, 1, act=None, conv=str(idx + 1), bn=str(idx + 2))
    return b.add(x, y) if stride == 1 and cin == cout else y


def mobilenetv2(b: GraphBuilder) -> dict[str, str]:
    """MobileNetV2 1.0: 0.30 GMACs at 224x224, 3.5 M parameters."""
    with b.scope("features"):
        with b.scope("0"):
            x = _conv_bn_relu6(b, b.input_name, STEM_CHANNELS, 3, stride=2)
        index = 1
        for expand, cout, repeats, stride in STAGES:
            for i in range(repeats):
                with b.scope(str(index)):
                    x = _inverted_residual(b, x, cout, stride if i == 0 else 1, expand)
                index += 1
        with b.scope(str(index)):
            x = _conv_bn_relu6(b, x, LAST_CHANNELS, 1)
    x = b.global_avg_pool(x)
    x = b.flatten(x)
    with b.scope("classifier"), b.scope("1"):
        x = b.gemm(x, NUM_CLASSES)
    return {"logits": x}
