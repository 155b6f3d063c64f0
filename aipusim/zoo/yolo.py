"""YOLOv5s (v6.x) and YOLOv8n at 640x640, following the ultralytics topologies.

Both end in the box-decoding tail that ultralytics' ONNX export keeps in the graph (and
that the compiler's graph cleaner moves to the host):

- YOLOv5s: per scale, 1x1 conv to 3 anchors x 85, Reshape/Transpose, Sigmoid, Split
  into xy/wh/conf, ``xy = (2*xy + grid) * stride``, ``wh = (2*wh)**2 * anchor_grid``,
  Concat, Reshape; the scales concatenated -> ``output0`` [N, 25200, 85].
- YOLOv8n: decoupled head (box branch 4*16 DFL logits, class branch 80), per-scale Concat
  and Reshape, Concat over scales, Split box/cls, DFL (Reshape, Transpose, Softmax, 1x1
  conv with fixed 0..15 weights), dist2bbox against constant anchor points (Slice, Sub,
  Add, Div, Concat), Mul by the stride row, Concat with Sigmoid class scores ->
  ``output0`` [N, 84, 8400].

Grids, anchor points and strides are constants of the built input size, as in a real
export at a fixed image size.

Example:
    >>> from aipusim.zoo.builder import GraphBuilder
    >>> b = GraphBuilder(input_shape=(1, 3, 64, 64), seed=0, name="yolov8n")
    >>> sorted(yolov8n(b))
    ['output0']
"""

from __future__ import annotations

import math

import numpy as np

from aipusim.zoo.builder import GraphBuilder

NUM_CLASSES = 80
STRIDES = (8, 16, 32)
#: YOLOv5 anchors (w, h in pixels) for P3/8, P4/16, P5/32.
V5_ANCHORS = (((10, 13), (16, 30), (33, 23)),
              ((30, 61), (62, 45), (59, 119)),
              ((116, 90), (156, 198), (373, 326)))  # fmt: skip
#: Distribution focal loss bins per box side (YOLOv8).
REG_MAX = 16
#: ultralytics' BatchNorm2d(eps=0.001).
BN_EPS = 1e-3
#: The image size ultralytics' bias priors are written for.
PRIOR_IMAGE_SIZE = 640


# ------------------------------------------------------------------------ shared blocks
def _conv(b: GraphBuilder, x: str, cout: int, k: int, s: int = 1, p: int | None = None) -> str:
    """ultralytics ``Conv``: Conv2d(bias=False) + BatchNorm2d + SiLU, 'same' padding."""
    return b.conv_bn_act(
        x, cout, k, stride=s, pad=p, act="silu", conv="conv", bn="bn", eps=BN_EPS, act_scope="act"
    )


def _bottleneck(b: GraphBuilder, x: str, cout: int, shortcut: bool, k1: int) -> str:
    """Bottleneck with e=1.0 (as inside C3 and C2f): cv1 k1xk1, cv2 3x3, optional add."""
    with b.scope("cv1"):
        y = _conv(b, x, cout, k1)
    with b.scope("cv2"):
        y = _conv(b, y, cout, 3)
    return b.add(x, y) if shortcut and b.channels(x) == cout else y


def _sppf(b: GraphBuilder, x: str, cout: int, k: int = 5) -> str:
    """SPPF: cv1 to half width, three chained k x k max pools, concat of four, cv2."""
    with b.scope("cv1"):
        y = _conv(b, x, b.channels(x) // 2, 1)
    pooled = [y]
    with b.scope("m"):
        for _ in range(3):
            pooled.append(b.maxpool(pooled[-1], k, 1, k // 2))
    y = b.concat(pooled)
    with b.scope("cv2"):
        return _conv(b, y, cout, 1)


def _upsample(b: GraphBuilder, x: str, layer: int) -> str:
    with b.scope(f"model.{layer}"):
        return b.resize_nearest2x(x)


def _concat(b: GraphBuilder, xs: list[str], layer: int) -> str:
    with b.scope(f"model.{layer}"):
        return b.concat(xs)


def _layer_conv(
    b: GraphBuilder, x: str, layer: int, cout: int, k: int, s: int = 1, p: int | None = None
) -> str:
    with b.scope(f"model.{layer}"):
        return _conv(b, x, cout, k, s, p)


def _grid_hw(b: GraphBuilder, stride: int) -> tuple[int, int]:
    _, _, h, w = b.input_shape
    return h // stride, w // stride


# ---------------------------------------------------------------------------- YOLOv5s
def _c3(b: GraphBuilder, x: str, layer: int, cout: int, n: int, shortcut: bool = True) -> str:
    """C3: cv1 -> n bottlenecks, cv2 in parallel, concat, cv3."""
    hidden = cout // 2
    with b.scope(f"model.{layer}"):
        with b.scope("cv1"):
            y = _conv(b, x, hidden, 1)
        with b.scope("m"):
            for i in range(n):
                with b.scope(str(i)):
                    y = _bottleneck(b, y, hidden, shortcut, k1=1)
        with b.scope("cv2"):
            z = _conv(b, x, hidden, 1)
        y = b.concat([y, z])
        with b.scope("cv3"):
            return _conv(b, y, cout, 1)


def _v5_detect(b: GraphBuilder, feats: list[str], layer: int) -> str:
    batch = b.input_shape[0]
    n_out = NUM_CLASSES + 5
    n_anchors = len(V5_ANCHORS[0])
    per_scale = []
    with b.scope(f"model.{layer}"):
        for i, (x, stride, anchors) in enumerate(zip(feats, STRIDES, V5_ANCHORS, strict=True)):
            ny, nx = _grid_hw(b, stride)
            # ultralytics' _initialize_biases: objectness and class priors per stride.
            bias = b.rng.normal(0.0, 0.01, (n_anchors, n_out))
            bias[:, 4] += math.log(8 / (PRIOR_IMAGE_SIZE / stride) ** 2)
            bias[:, 5:] += math.log(0.6 / (NUM_CLASSES - 0.99))
            with b.scope("m"), b.scope(str(i)):
                y = b.conv(x, n_anchors * n_out, 1, bias=True, bias_value=bias.reshape(-1))
            y = b.reshape(y, [batch, n_anchors, n_out, ny, nx])
            y = b.transpose(y, [0, 1, 3, 4, 2])
            y = b.sigmoid(y)
            xy, wh, conf = b.split(y, [2, 2, NUM_CLASSES + 1], axis=4)
            yv, xv = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
            grid = np.stack((xv, yv), 2).astype(np.float32) - 0.5
            grid = np.broadcast_to(grid, (1, n_anchors, ny, nx, 2))
            anchor_grid = np.broadcast_to(
                np.asarray(anchors, np.float32).reshape(1, n_anchors, 1, 1, 2),
                (1, n_anchors, ny, nx, 2),
            )
            two = b.const(2.0)
            xy = b.mul(b.add(b.mul(xy, two), b.const(grid)), b.const(float(stride)))
            wh = b.mul(b.pow(b.mul(wh, two), two), b.const(anchor_grid))
            y = b.concat([xy, wh, conf], axis=4)
            per_scale.append(b.reshape(y, [batch, n_anchors * ny * nx, n_out]))
        return b.concat(per_scale, axis=1)


def yolov5s(b: GraphBuilder) -> dict[str, str]:
    """YOLOv5s v6.x (depth 0.33, width 0.50): 16.5 GFLOPs = 8.25 GMACs at 640x640."""
    x0 = _layer_conv(b, b.input_name, 0, 32, 6, 2, p=2)
    x1 = _layer_conv(b, x0, 1, 64, 3, 2)
    x2 = _c3(b, x1, 2, 64, 1)
    x3 = _layer_conv(b, x2, 3, 128, 3, 2)
    x4 = _c3(b, x3, 4, 128, 2)
    x5 = _layer_conv(b, x4, 5, 256, 3, 2)
    x6 = _c3(b, x5, 6, 256, 3)
    x7 = _layer_conv(b, x6, 7, 512, 3, 2)
    x8 = _c3(b, x7, 8, 512, 1)
    with b.scope("model.9"):
        x9 = _sppf(b, x8, 512)
    x10 = _layer_conv(b, x9, 10, 256, 1)
    x12 = _concat(b, [_upsample(b, x10, 11), x6], 12)
    x13 = _c3(b, x12, 13, 256, 1, shortcut=False)
    x14 = _layer_conv(b, x13, 14, 128, 1)
    x16 = _concat(b, [_upsample(b, x14, 15), x4], 16)
    p3 = _c3(b, x16, 17, 128, 1, shortcut=False)
    x19 = _concat(b, [_layer_conv(b, p3, 18, 128, 3, 2), x14], 19)
    p4 = _c3(b, x19, 20, 256, 1, shortcut=False)
    x22 = _concat(b, [_layer_conv(b, p4, 21, 256, 3, 2), x10], 22)
    p5 = _c3(b, x22, 23, 512, 1, shortcut=False)
    return {"output0": _v5_detect(b, [p3, p4, p5], 24)}


# ---------------------------------------------------------------------------- YOLOv8n
def _c2f(b: GraphBuilder, x: str, layer: int, cout: int, n: int, shortcut: bool) -> str:
    """C2f: cv1 to 2c, Split in two, n bottlenecks chained on the second half, concat of
    all (2 + n) pieces, cv2."""
    c = cout // 2
    with b.scope(f"model.{layer}"):
        with b.scope("cv1"):
            y = _conv(b, x, 2 * c, 1)
        pieces = b.split(y, [c, c])
        with b.scope("m"):
            for i in range(n):
                with b.scope(str(i)):
                    pieces.append(_bottleneck(b, pieces[-1], c, shortcut, k1=3))
        y = b.concat(pieces)
        with b.scope("cv2"):
            return _conv(b, y, cout, 1)


def _v8_branch(b: GraphBuilder, x: str, hidden: int, cout: int, bias: np.ndarray) -> str:
    with b.scope("0"):
        y = _conv(b, x, hidden, 3)
    with b.scope("1"):
        y = _conv(b, y, hidden, 3)
    with b.scope("2"):
        return b.conv(y, cout, 1, bias=True, bias_value=bias)


def _v8_anchors(b: GraphBuilder) -> tuple[np.ndarray, np.ndarray]:
    """ultralytics make_anchors(offset 0.5), transposed: points [2, A], strides [1, A]."""
    points, strides = [], []
    for stride in STRIDES:
        ny, nx = _grid_hw(b, stride)
        sy, sx = np.meshgrid(np.arange(ny) + 0.5, np.arange(nx) + 0.5, indexing="ij")
        points.append(np.stack((sx, sy), -1).reshape(-1, 2))
        strides.append(np.full((ny * nx, 1), stride))
    return (
        np.concatenate(points).T.astype(np.float32),
        np.concatenate(strides).T.astype(np.float32),
    )


def _v8_detect(b: GraphBuilder, feats: list[str], layer: int) -> str:
    batch = b.input_shape[0]
    n_out = NUM_CLASSES + 4 * REG_MAX
    box_hidden = max(16, b.channels(feats[0]) // 4, 4 * REG_MAX)
    cls_hidden = max(b.channels(feats[0]), min(NUM_CLASSES, 100))
    flat = []
    with b.scope(f"model.{layer}"):
        for i, (x, stride) in enumerate(zip(feats, STRIDES, strict=True)):
            # ultralytics' Detect.bias_init: box logits 1.0, class prior by stride.
            box_bias = np.ones(4 * REG_MAX)
            cls_prior = math.log(5 / NUM_CLASSES / (PRIOR_IMAGE_SIZE / stride) ** 2)
            cls_bias = np.full(NUM_CLASSES, cls_prior)
            with b.scope("cv2"), b.scope(str(i)):
                box = _v8_branch(b, x, box_hidden, 4 * REG_MAX, box_bias)
            with b.scope("cv3"), b.scope(str(i)):
                cls = _v8_branch(b, x, cls_hidden, NUM_CLASSES, cls_bias)
            flat.append(b.reshape(b.concat([box, cls]), [batch, n_out, -1]))
        y = b.concat(flat, axis=2)
        box, cls = b.split(y, [4 * REG_MAX, NUM_CLASSES], axis=1)
        n_anchors = sum(h * w for h, w in (_grid_hw(b, s) for s in STRIDES))
        with b.scope("dfl"):
            d = b.reshape(box, [batch, 4, REG_MAX, n_anchors])
            d = b.transpose(d, [0, 2, 1, 3])
            d = b.softmax(d, axis=1)
            with b.scope("conv"):
                bins = np.arange(REG_MAX, dtype=np.float32).reshape(1, REG_MAX, 1, 1)
                d = b.conv(d, 1, 1, weight=bins)
            d = b.reshape(d, [batch, 4, n_anchors])
        points, strides = _v8_anchors(b)
        anchor_points = b.const(points[None])
        lt = b.slice(d, 0, 2, axis=1)
        rb = b.slice(d, 2, 4, axis=1)
        x1y1 = b.sub(anchor_points, lt)
        x2y2 = b.add(anchor_points, rb)
        c_xy = b.div(b.add(x1y1, x2y2), b.const(2.0))
        wh = b.sub(x2y2, x1y1)
        dbox = b.mul(b.concat([c_xy, wh]), b.const(strides))
        return b.concat([dbox, b.sigmoid(cls)])


def yolov8n(b: GraphBuilder) -> dict[str, str]:
    """YOLOv8n (depth 0.33, width 0.25): 8.7 GFLOPs = 4.35 GMACs at 640x640."""
    x0 = _layer_conv(b, b.input_name, 0, 16, 3, 2)
    x1 = _layer_conv(b, x0, 1, 32, 3, 2)
    x2 = _c2f(b, x1, 2, 32, 1, shortcut=True)
    x3 = _layer_conv(b, x2, 3, 64, 3, 2)
    x4 = _c2f(b, x3, 4, 64, 2, shortcut=True)
    x5 = _layer_conv(b, x4, 5, 128, 3, 2)
    x6 = _c2f(b, x5, 6, 128, 2, shortcut=True)
    x7 = _layer_conv(b, x6, 7, 256, 3, 2)
    x8 = _c2f(b, x7, 8, 256, 1, shortcut=True)
    with b.scope("model.9"):
        x9 = _sppf(b, x8, 256)
    x11 = _concat(b, [_upsample(b, x9, 10), x6], 11)
    x12 = _c2f(b, x11, 12, 128, 1, shortcut=False)
    x14 = _concat(b, [_upsample(b, x12, 13), x4], 14)
    p3 = _c2f(b, x14, 15, 64, 1, shortcut=False)
    x17 = _concat(b, [_layer_conv(b, p3, 16, 64, 3, 2), x12], 17)
    p4 = _c2f(b, x17, 18, 128, 1, shortcut=False)
    x20 = _concat(b, [_layer_conv(b, p4, 19, 128, 3, 2), x9], 20)
    p5 = _c2f(b, x20, 21, 256, 1, shortcut=False)
    return {"output0": _v8_detect(b, [p3, p4, p5], 22)}
