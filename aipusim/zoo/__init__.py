"""The model zoo: ONNX models built in code, with seeded random weights.

Classifiers (ResNet-18/50, MobileNetV2, EfficientNet-B0), vision transformers (DeiT-Tiny,
ViT-B/16), detectors (YOLOv5s, YOLOv8n, with their box-decoding tails) and a tiny CNN,
exported the way torch.onnx exports them (Conv + BatchNormalization or LayerNormalization,
opset 17, input named ``input``). Decoder-only language models (``llama_1b``,
``tiny_decoder``) are built apart, as a prefill and a decode graph (`build_decoder`).

Example:
    >>> import aipusim.zoo as zoo
    >>> model = zoo.build("mobilenetv2")  # at its published 224 x 224; input_size= for others
    >>> round(zoo.count_macs(model) / 1e9, 2)
    0.3
"""

from __future__ import annotations

from aipusim.zoo.decoder import DecoderGraph, build_decoder, decoder_names
from aipusim.zoo.macs import count_macs, count_params
from aipusim.zoo.registry import ZooEntry, build, info, names

__all__ = [
    "DecoderGraph",
    "ZooEntry",
    "build",
    "build_decoder",
    "count_macs",
    "count_params",
    "decoder_names",
    "info",
    "names",
]
