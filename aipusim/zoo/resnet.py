"""ResNet-18 and ResNet-50 v1.5, with torchvision's topology and parameter names.

v1.5 puts the stride of a downsampling bottleneck on its 3x3 conv (torchvision's choice),
which is what makes ResNet-50 4.09 GMACs rather than v1's 3.86.

Example:
    >>> from aipusim.zoo.builder import GraphBuilder
    >>> b = GraphBuilder(input_shape=(1, 3, 64, 64), seed=0, name="resnet18")
    >>> sorted(resnet18(b))
    ['logits']
"""

from __future__ import annotations

from aipusim.zoo.builder import GraphBuilder

NUM_CLASSES = 1000
#: Output channels of the four stages (before the bottleneck expansion).
STAGE_WIDTHS = (64, 128, 256, 512)


def _basic_block(b: GraphBuilder, x: str, width: int, stride: int) -> str:
    y = b.conv_bn_act(x, width, 3, stride=stride, act="relu", conv="conv1", bn="bn1")
    y = b.conv_bn_act(y, width, 3, act=None, conv="conv2", bn="bn2")
    return b.relu(b.add(y, _shortcut(b, x, width, stride)))


def _bottleneck(b: GraphBuilder, x: str, width: int, stride: int) -> str:
    out = width * 4
    y = b.conv_bn_act(x, width, 1, act="relu", conv="conv1", bn="bn1")
    y = b.conv_bn_act(y, width, 3, stride=stride, act="relu", conv="conv2", bn="bn2")
    y = b.conv_bn_act(y, out, 1, act=None, conv="conv3", bn="bn3")
    return b.relu(b.add(y, _shortcut(b, x, out, stride)))


def _shortcut(b: GraphBuilder, x: str, out: int, stride: int) -> str:
    if stride == 1 and b.channels(x) == out:
        return x
    with b.scope("downsample"):
        return b.conv_bn_act(x, out, 1, stride=stride, act=None, conv="0", bn="1")


def _resnet(b: GraphBuilder, blocks: tuple[int, ...], bottleneck: bool) -> dict[str, str]:
    x = b.conv_bn_act(b.input_name, 64, 7, stride=2, act="relu", conv="conv1", bn="bn1")
    with b.scope("maxpool"):
        x = b.maxpool(x, 3, 2, 1)
    block = _bottleneck if bottleneck else _basic_block
    for stage, (n, width) in enumerate(zip(blocks, STAGE_WIDTHS, strict=True), start=1):
        with b.scope(f"layer{stage}"):
            for i in range(n):
                with b.scope(str(i)):
                    x = block(b, x, width, 2 if i == 0 and stage > 1 else 1)
    with b.scope("avgpool"):
        x = b.global_avg_pool(x)
    x = b.flatten(x)
    with b.scope("fc"):
        x = b.gemm(x, NUM_CLASSES)
    return {"logits": x}


def resnet18(b: GraphBuilder) -> dict[str, str]:
    """ResNet-18: basic blocks [2, 2, 2, 2]; 1.82 GMACs at 224x224."""
    return _resnet(b, (2, 2, 2, 2), bottleneck=False)


def resnet50(b: GraphBuilder) -> dict[str, str]:
    """ResNet-50 v1.5: bottlenecks [3, 4, 6, 3], stride on the 3x3; 4.09 GMACs at 224."""
    return _resnet(b, (3, 4, 6, 3), bottleneck=True)
