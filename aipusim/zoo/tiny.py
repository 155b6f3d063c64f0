"""A tiny CNN (32x32, 10 classes) for fast tests of the whole tool chain.

It still has every feature the compiler must handle in the big models: Conv + BN + ReLU,
a strided conv, a residual Add, MaxPool, a 1x1 conv, GlobalAveragePool, Flatten, Gemm.

Example:
    >>> from aipusim.zoo.builder import GraphBuilder
    >>> b = GraphBuilder(input_shape=(1, 3, 32, 32), seed=0, name="tiny_cnn")
    >>> sorted(tiny_cnn(b))
    ['logits']
"""

from __future__ import annotations

from aipusim.zoo.builder import GraphBuilder

NUM_CLASSES = 10


def tiny_cnn(b: GraphBuilder) -> dict[str, str]:
    """conv3x3(16) -> conv3x3/2(32) -> residual block(32) -> maxpool -> conv1x1(64) -> fc."""
    x = b.conv_bn_act(b.input_name, 16, 3, act="relu", conv="conv1", bn="bn1")
    x = b.conv_bn_act(x, 32, 3, stride=2, act="relu", conv="conv2", bn="bn2")
    with b.scope("block"):
        y = b.conv_bn_act(x, 32, 3, act="relu", conv="conv1", bn="bn1")
        y = b.conv_bn_act(y, 32, 3, act=None, conv="conv2", bn="bn2")
        x = b.relu(b.add(y, x))
    with b.scope("pool"):
        x = b.maxpool(x, 2, 2, 0)
    x = b.conv_bn_act(x, 64, 1, act="relu", conv="conv3", bn="bn3")
    x = b.flatten(b.global_avg_pool(x))
    with b.scope("fc"):
        x = b.gemm(x, NUM_CLASSES)
    return {"logits": x}
