"""The zoo registry: model name -> builder, default input shape, published MACs.

Example:
    >>> info("resnet50").published_gmacs
    4.09
    >>> names()[:2]
    ['deit_tiny', 'efficientnet_b0']
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import onnx

from aipusim.base.errors import ZooError
from aipusim.zoo.builder import GraphBuilder
from aipusim.zoo.efficientnet import efficientnet_b0
from aipusim.zoo.mobilenet import mobilenetv2
from aipusim.zoo.resnet import resnet18, resnet50
from aipusim.zoo.tiny import tiny_cnn
from aipusim.zoo.vit import deit_tiny, vit_b16
from aipusim.zoo.yolo import yolov5s, yolov8n

#: Samples per channel the calibration batch gives the deepest feature map at least: with
#: fewer, BatchNorm variances are under-estimated often enough that activations grow
#: layer after layer (see `aipusim.zoo.builder._shrunk_variance`).
MIN_CALIB_SAMPLES = 128


@dataclass(frozen=True)
class ZooEntry:
    """What the zoo knows about one model before building it.

    `input_shape` is the default NCHW shape (batch 1); `published_gmacs` is the
    multiply-accumulate count of the original publication at that size (None for models
    of our own), with `source` saying where the figure comes from.
    """

    name: str
    input_shape: tuple[int, int, int, int]
    published_gmacs: float | None
    source: str
    description: str


@dataclass(frozen=True)
class _Spec:
    entry: ZooEntry
    family: Callable[[GraphBuilder], dict[str, str]]
    #: Height and width must be multiples of this (the largest stride of a detector).
    size_multiple: int
    #: Smallest height/width for which every feature map keeps at least one pixel.
    min_size: int
    #: Total downsampling of the deepest feature map.
    max_stride: int = 32


def _entry(name: str, size: int, gmacs: float | None, source: str, description: str) -> ZooEntry:
    return ZooEntry(name, (1, 3, size, size), gmacs, source, description)


_SPECS: dict[str, _Spec] = {
    spec.entry.name: spec
    for spec in (
        _Spec(
            _entry(
                "resnet18", 224, 1.82,
                "He et al. 2016 (CVPR), Table 1: 1.8e9 FLOPs (multiply-adds); torchvision 1.82",
                "ResNet-18, basic blocks, ImageNet 1000 classes",
            ),
            resnet18, 1, 32,
        ),
        _Spec(
            _entry(
                "resnet50", 224, 4.09,
                "torchvision ResNet50_Weights.IMAGENET1K_V1 (v1.5, stride on 3x3): 4.09 GFLOPS"
                " (multiply-adds)",
                "ResNet-50 v1.5, bottlenecks, ImageNet 1000 classes",
            ),
            resnet50, 1, 32,
        ),
        _Spec(
            _entry(
                "mobilenetv2", 224, 0.30,
                "Sandler et al. 2018 (CVPR), Table 4: 300M multiply-adds (width 1.0, 224)",
                "MobileNetV2 1.0, inverted residuals, ReLU6 as Clip(0,6)",
            ),
            mobilenetv2, 1, 32,
        ),
        _Spec(
            _entry(
                "efficientnet_b0", 224, 0.39,
                "Tan & Le 2019 (ICML), Table 2: 0.39B FLOPS (multiply-adds)",
                "EfficientNet-B0, MBConv with squeeze-excite, SiLU as x*Sigmoid(x)",
            ),
            efficientnet_b0, 1, 32,
        ),
        _Spec(
            _entry(
                "yolov5s", 640, 8.25,
                "ultralytics/yolov5 v6.x README: 16.5 GFLOPs at 640 (2 FLOPs per MAC)",
                "YOLOv5s v6.x detector, C3/SPPF/PANet, 3 anchors x 80 classes, decode tail",
            ),
            yolov5s, 32, 32,
        ),
        _Spec(
            _entry(
                "yolov8n", 640, 4.35,
                "ultralytics YOLOv8 docs: 8.7 GFLOPs at 640 (2 FLOPs per MAC)",
                "YOLOv8n detector, C2f/SPPF/PAN, anchor-free DFL head, 80 classes, decode tail",
            ),
            yolov8n, 32, 32,
        ),
        _Spec(
            _entry(
                "deit_tiny", 224, 1.26,
                "Touvron et al. 2021 (ICML), Table 1: DeiT-Ti 1.3 GFLOPs; timm/fvcore 1.26 G"
                " multiply-adds at 224",
                "DeiT-Tiny/16 vision transformer, 12 blocks x 3 heads, width 192, GELU (erf)",
            ),
            deit_tiny, 16, 16, max_stride=16,
        ),
        _Spec(
            _entry(
                "vit_b16", 224, 17.6,
                "Dosovitskiy et al. 2021 (ICLR) ViT-B/16; timm/fvcore: 17.6 G multiply-adds"
                " at 224 (86.6 M parameters)",
                "ViT-B/16 vision transformer, 12 blocks x 12 heads, width 768, GELU (erf)",
            ),
            vit_b16, 16, 16, max_stride=16,
        ),
        _Spec(
            _entry("tiny_cnn", 32, None, "aipusim (test model)", "tiny CNN for fast tests"),
            tiny_cnn, 1, 8, max_stride=4,
        ),
    )
}  # fmt: skip


def names() -> list[str]:
    """Names of the zoo models, sorted."""
    return sorted(_SPECS)


def _spec(name: str) -> _Spec:
    if name not in _SPECS:
        raise ZooError(f"zoo model must be one of {', '.join(names())}, not {name!r}")
    return _SPECS[name]


def info(name: str) -> ZooEntry:
    """The registry entry of `name`; `ZooError` listing the known names if unknown."""
    return _spec(name).entry


def _resolve_size(spec: _Spec, input_size: int | tuple[int, int] | None) -> tuple[int, int]:
    if input_size is None:
        return spec.entry.input_shape[2], spec.entry.input_shape[3]
    if isinstance(input_size, int):
        sizes: list[object] = [input_size, input_size]
    else:
        sizes = list(input_size) if isinstance(input_size, tuple | list) else []
    ints = [v for v in sizes if isinstance(v, int) and not isinstance(v, bool)]
    valid = (
        len(sizes) == 2
        and len(ints) == 2
        and all(v >= spec.min_size and v % spec.size_multiple == 0 for v in ints)
    )
    if not valid:
        rule = f"integers >= {spec.min_size}"
        if spec.size_multiple > 1:
            rule += f" and multiples of {spec.size_multiple}"
        raise ZooError(
            f"input_size of {spec.entry.name} must be one size or (height, width), "
            f"{rule}, not {input_size!r}"
        )
    return ints[0], ints[1]


def build(
    name: str,
    *,
    input_size: int | tuple[int, int] | None = None,
    batch: int = 1,
    seed: int = 0,
) -> onnx.ModelProto:
    """Build zoo model `name` as an opset-17 ONNX model with seeded random weights.

    The graph input is ``input`` [batch, 3, H, W] float32; `input_size` (one side or
    (H, W)) defaults to the published size. The same arguments give identical bytes.

    Example:
        >>> m = build("tiny_cnn", input_size=16)
        >>> m.graph.input[0].name, m.graph.output[0].name
        ('input', 'logits')
    """
    spec = _spec(name)
    height, width = _resolve_size(spec, input_size)
    for label, value in (("batch", batch), ("seed", seed)):
        lowest = 1 if label == "batch" else 0
        if not isinstance(value, int) or isinstance(value, bool) or value < lowest:
            raise ZooError(f"{label} must be an integer >= {lowest}, not {value!r}")
    deepest = math.ceil(height / spec.max_stride) * math.ceil(width / spec.max_stride)
    builder = GraphBuilder(
        input_shape=(batch, 3, height, width),
        seed=seed,
        name=name,
        calib_batch=math.ceil(MIN_CALIB_SAMPLES / deepest),
    )
    model = builder.finish(spec.family(builder))
    model.doc_string = f"aipusim zoo {name} (seed {seed}): {spec.entry.description}"
    return model
