"""A small ONNX graph builder shared by the zoo families.

`GraphBuilder` emits the nodes a PyTorch exporter would emit (Conv + BatchNormalization,
Relu, Clip, Sigmoid*x for SiLU, Resize, Split, ...) with torch-like names, and draws
seeded weights. While it builds, it also runs every backbone op in numpy on a random
calibration batch of the built image size, so that each BatchNormalization gets running
statistics that bring its output to roughly unit scale: the exported graph then has
realistic activation ranges through any depth, as a trained network would, and BN
folding in the compiler sees non-trivial statistics. Calibrating at the built size
matters: border pixels (zero padding) have other statistics than interior ones, so
statistics taken at 64x64 would not normalise a 640x640 run.

Example:
    >>> b = GraphBuilder(input_shape=(1, 3, 32, 32), seed=0, name="demo")
    >>> y = b.conv_bn_act("input", 8, 3, act="relu", conv="conv1", bn="bn1")
    >>> model = b.finish({"features": y})
    >>> [n.op_type for n in model.graph.node]
    ['Conv', 'BatchNormalization', 'Relu']
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import onnx
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper

#: Opset of every zoo model (the compiler imports opset >= 17).
OPSET = 17
#: Prior weight, in samples, of the channel-pooled variance in `_shrunk_variance`.
SHRINK_SAMPLES = 64

Array = np.ndarray
#: Computes an op's calibration output from its input values.
CalibFn = Callable[..., Array]


class GraphBuilder:
    """Builds one ONNX graph node by node; tensors are referred to by name.

    Methods take input tensor names and return the output tensor name. Module names
    (`scope`) give node names like ``/layer1/0/conv1/Conv`` and parameter names like
    ``layer1.0.conv1.weight``, as torch.onnx does.
    """

    def __init__(
        self,
        *,
        input_shape: tuple[int, int, int, int],
        seed: int,
        name: str,
        calib_batch: int = 1,
        input_name: str = "input",
    ) -> None:
        self.input_shape = input_shape
        self.input_name = input_name
        self.name = name
        self.rng = np.random.default_rng(seed)
        calib_rng = np.random.default_rng([seed, 1])
        calib = calib_rng.standard_normal((calib_batch, *input_shape[1:])).astype(np.float32)
        self._nodes: list[onnx.NodeProto] = []
        self._inits: list[onnx.TensorProto] = []
        self._init_names: set[str] = set()
        self._scopes: list[str] = []
        self._used_node_names: set[str] = set()
        self._cached_consts: dict[tuple[str, bytes, tuple[int, ...]], str] = {}
        # Calibration value of each tensor; None once an op leaves the backbone (tail ops
        # whose constants depend on the built input size).
        self.values: dict[str, Array | None] = {input_name: calib}

    # ----------------------------------------------------------------- naming and basics
    @contextlib.contextmanager
    def scope(self, name: str) -> Iterator[None]:
        """Nest the module `name` for the nodes and parameters created inside."""
        self._scopes.append(name)
        try:
            yield
        finally:
            self._scopes.pop()

    def _param_name(self, leaf: str) -> str:
        name = ".".join([*self._scopes, leaf])
        assert name not in self._init_names, f"duplicate parameter {name}"
        return name

    def _node_name(self, op_type: str) -> str:
        base = "/" + "/".join([*self._scopes, op_type])
        name, i = base, 0
        while name in self._used_node_names:
            i += 1
            name = f"{base}_{i}"
        self._used_node_names.add(name)
        return name

    def param(self, leaf: str, array: Array) -> str:
        """A parameter of the current module (``blocks.0.attn.qkv.weight``), float32."""
        return self.initializer(self._param_name(leaf), np.asarray(array, np.float32))

    def channels(self, x: str) -> int:
        """Channel count of the backbone tensor `x` (from its calibration value)."""
        value = self.values[x]
        assert value is not None, f"{x} has no calibration value"
        return int(value.shape[1])

    def initializer(self, name: str, array: Array) -> str:
        """Add a named initializer (a parameter or a constant) and return its name."""
        assert name not in self._init_names, f"duplicate initializer {name}"
        self._inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        self._init_names.add(name)
        self.values[name] = np.asarray(array)
        return name

    def const(self, array: Array | Sequence[float] | float, dtype: type = np.float32) -> str:
        """A shared anonymous constant (shapes, clip bounds, ...), deduplicated by value."""
        arr = np.asarray(array, dtype=dtype)
        key = (arr.dtype.str, arr.tobytes(), arr.shape)
        if key not in self._cached_consts:
            name = f"onnx::Const_{len(self._cached_consts)}"
            self._cached_consts[key] = self.initializer(name, arr)
        return self._cached_consts[key]

    def index(self, value: int) -> str:
        """A 0-d int64 constant: a Gather index that drops its axis (``x[:, 0]``).

        (`const` stores at least one dimension, as the zoo's existing graphs have it.)
        """
        name = f"onnx::Index_{value}"
        if name not in self._init_names:
            self._inits.append(numpy_helper.from_array(np.array(value, np.int64), name))
            self._init_names.add(name)
            self.values[name] = np.array(value, np.int64)
        return name

    def op(
        self,
        op_type: str,
        inputs: Sequence[str],
        calib: CalibFn | None = None,
        n_outputs: int = 1,
        **attrs: object,
    ) -> list[str]:
        """Emit one node; `calib` computes its calibration outputs (None: a tail op)."""
        node_name = self._node_name(op_type)
        outputs = [f"{node_name}_output_{i}" for i in range(n_outputs)]
        self._nodes.append(helper.make_node(op_type, list(inputs), outputs, node_name, **attrs))
        args = [self.values.get(i) for i in inputs if i]
        if calib is not None and all(a is not None for a in args):
            result = calib(*args)
            results = list(result) if n_outputs > 1 else [result]
            for out, value in zip(outputs, results, strict=True):
                self.values[out] = np.asarray(value, dtype=np.float32)
        else:
            for out in outputs:
                self.values[out] = None
        return outputs

    # ------------------------------------------------------------------- parameterised
    def conv(
        self,
        x: str,
        cout: int,
        k: int,
        *,
        stride: int = 1,
        pad: int | None = None,
        groups: int = 1,
        bias: bool = False,
        weight: Array | None = None,
        bias_value: Array | None = None,
    ) -> str:
        """A Conv with He-normal weights (or the given `weight`); `pad` defaults to k//2."""
        cin = self.channels(x) if weight is None else weight.shape[1] * groups
        pad = k // 2 if pad is None else pad
        if weight is None:
            fan_in = cin // groups * k * k
            weight = self.rng.normal(0.0, np.sqrt(2.0 / fan_in), (cout, cin // groups, k, k))
        inputs = [x, self.initializer(self._param_name("weight"), weight.astype(np.float32))]
        if bias:
            if bias_value is None:
                bias_value = self.rng.normal(0.0, 0.01, cout)
            inputs.append(self.initializer(self._param_name("bias"), bias_value.astype(np.float32)))

        def run(xv: Array, wv: Array, bv: Array | None = None) -> Array:
            return _conv2d(xv, wv, bv, stride, pad, groups)

        return self.op(
            "Conv",
            inputs,
            run,
            dilations=[1, 1],
            group=groups,
            kernel_shape=[k, k],
            pads=[pad] * 4,
            strides=[stride, stride],
        )[0]

    def batchnorm(self, x: str, *, eps: float = 1e-5) -> str:
        """A BatchNormalization whose running statistics normalise the calibration batch.

        gamma ~ 1 and a small beta, as trained networks have; the running mean is the
        calibration batch's own and the running variance its shrunk estimate (see
        `_shrunk_variance`), so the output is about unit scale on any input like it.
        """
        xv = self.values[x]
        assert xv is not None, f"{x} has no calibration value"
        c = xv.shape[1]
        mean = xv.mean(axis=(0, 2, 3))
        var = _shrunk_variance(xv)
        gamma = np.clip(self.rng.normal(1.0, 0.2, c), 0.2, None)
        beta = self.rng.normal(0.0, 0.2, c)
        names = [
            self.initializer(self._param_name(leaf), value.astype(np.float32))
            for leaf, value in (
                ("weight", gamma),
                ("bias", beta),
                ("running_mean", mean),
                ("running_var", var),
            )
        ]

        def run(v: Array, g: Array, b: Array, m: Array, s: Array) -> Array:
            shape = (1, -1, 1, 1)
            return (v - m.reshape(shape)) / np.sqrt(s.reshape(shape) + eps) * g.reshape(
                shape
            ) + b.reshape(shape)

        return self.op("BatchNormalization", [x, *names], run, epsilon=eps, momentum=0.9)[0]

    def gemm(self, x: str, nout: int) -> str:
        """A fully connected layer (Gemm, transB=1) with 1/sqrt(fan_in)-scaled weights."""
        xv = self.values[x]
        assert xv is not None and xv.ndim == 2, f"{x} must be a 2-D backbone tensor"
        nin = xv.shape[1]
        w = self.rng.normal(0.0, 1.0 / np.sqrt(nin), (nout, nin)).astype(np.float32)
        b = self.rng.normal(0.0, 0.01, nout).astype(np.float32)
        wn = self.initializer(self._param_name("weight"), w)
        bn = self.initializer(self._param_name("bias"), b)
        return self.op(
            "Gemm", [x, wn, bn], lambda v, wv, bv: v @ wv.T + bv, alpha=1.0, beta=1.0, transB=1
        )[0]

    # ------------------------------------------------------------------- activations
    def relu(self, x: str) -> str:
        return self.op("Relu", [x], lambda v: np.maximum(v, 0))[0]

    def relu6(self, x: str) -> str:
        """ReLU6 the way torch exports it: Clip with min 0 and max 6 inputs."""
        lo, hi = self.const(0.0), self.const(6.0)
        return self.op("Clip", [x, lo, hi], lambda v, a, b: np.clip(v, a, b))[0]

    def sigmoid(self, x: str) -> str:
        return self.op("Sigmoid", [x], _sigmoid)[0]

    def silu(self, x: str) -> str:
        """SiLU as opset-17 exports produce it: x * Sigmoid(x)."""
        return self.mul(x, self.sigmoid(x))

    def act(self, x: str, kind: str | None) -> str:
        """Apply the activation named `kind` ('relu', 'relu6', 'silu' or None)."""
        if kind is None:
            return x
        return {"relu": self.relu, "relu6": self.relu6, "silu": self.silu}[kind](x)

    def conv_bn_act(
        self,
        x: str,
        cout: int,
        k: int,
        *,
        stride: int = 1,
        groups: int = 1,
        act: str | None,
        conv: str,
        bn: str,
        pad: int | None = None,
        eps: float = 1e-5,
        act_scope: str | None = None,
    ) -> str:
        """Conv (module `conv`) + BatchNormalization (module `bn`) + activation (in module
        `act_scope` when given)."""
        with self.scope(conv):
            y = self.conv(x, cout, k, stride=stride, groups=groups, pad=pad)
        with self.scope(bn):
            y = self.batchnorm(y, eps=eps)
        if act_scope is None:
            return self.act(y, act)
        with self.scope(act_scope):
            return self.act(y, act)

    # ----------------------------------------------------------------- elementwise
    def add(self, a: str, b: str) -> str:
        return self.op("Add", [a, b], np.add)[0]

    def mul(self, a: str, b: str) -> str:
        return self.op("Mul", [a, b], np.multiply)[0]

    def sub(self, a: str, b: str) -> str:
        return self.op("Sub", [a, b], np.subtract)[0]

    def div(self, a: str, b: str) -> str:
        return self.op("Div", [a, b], np.divide)[0]

    def pow(self, a: str, b: str) -> str:
        return self.op("Pow", [a, b], np.power)[0]

    # ------------------------------------------------------------------ spatial
    def maxpool(self, x: str, k: int, stride: int, pad: int) -> str:
        def run(v: Array) -> Array:
            vp = np.pad(v, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
            return sliding_window_view(vp, (k, k), axis=(2, 3))[:, :, ::stride, ::stride].max(
                axis=(4, 5)
            )

        return self.op(
            "MaxPool",
            [x],
            run,
            ceil_mode=0,
            dilations=[1, 1],
            kernel_shape=[k, k],
            pads=[pad] * 4,
            strides=[stride, stride],
        )[0]

    def global_avg_pool(self, x: str) -> str:
        return self.op("GlobalAveragePool", [x], lambda v: v.mean(axis=(2, 3), keepdims=True))[0]

    def flatten(self, x: str) -> str:
        return self.op("Flatten", [x], lambda v: v.reshape(v.shape[0], -1), axis=1)[0]

    def resize_nearest2x(self, x: str) -> str:
        """nn.Upsample(scale_factor=2, mode='nearest') as torch exports it."""
        scales = self.const([1.0, 1.0, 2.0, 2.0])
        return self.op(
            "Resize",
            [x, "", scales],
            lambda v, s: v.repeat(2, axis=2).repeat(2, axis=3),
            coordinate_transformation_mode="asymmetric",
            cubic_coeff_a=-0.75,
            mode="nearest",
            nearest_mode="floor",
        )[0]

    # -------------------------------------------------------------------- layout
    def concat(self, xs: Sequence[str], axis: int = 1) -> str:
        return self.op("Concat", list(xs), lambda *vs: np.concatenate(vs, axis=axis), axis=axis)[0]

    def split(self, x: str, sizes: Sequence[int], axis: int = 1) -> list[str]:
        """Split along `axis` into pieces of `sizes` (opset-13 form: sizes as an input)."""
        split = self.const(list(sizes), np.int64)

        def run(v: Array, s: Array) -> list[Array]:
            return np.split(v, np.cumsum(s)[:-1], axis=axis)

        return self.op("Split", [x, split], run, n_outputs=len(sizes), axis=axis)

    def slice(self, x: str, starts: int, ends: int, axis: int) -> str:
        """One-axis Slice with constant bounds (a tail op: no calibration value)."""
        inputs = [x, *(self.const([v], np.int64) for v in (starts, ends, axis, 1))]
        return self.op("Slice", inputs)[0]

    def reshape(self, x: str, shape: Sequence[int]) -> str:
        """Reshape to a constant shape (a tail op: no calibration value)."""
        return self.op("Reshape", [x, self.const(list(shape), np.int64)], allowzero=0)[0]

    def transpose(self, x: str, perm: Sequence[int]) -> str:
        return self.op("Transpose", [x], lambda v: v.transpose(perm), perm=list(perm))[0]

    def softmax(self, x: str, axis: int) -> str:
        def run(v: Array) -> Array:
            e = np.exp(v - v.max(axis=axis, keepdims=True))
            return e / e.sum(axis=axis, keepdims=True)

        return self.op("Softmax", [x], run, axis=axis)[0]

    # ------------------------------------------------------------------- finishing
    def finish(self, outputs: dict[str, str]) -> onnx.ModelProto:
        """Rename the `outputs` tensors to their public names and return the model.

        Output shapes come from ONNX shape inference, so they always match the graph.
        """
        renames = {tensor: public for public, tensor in outputs.items()}
        for node in self._nodes:
            for i, name in enumerate(node.output):
                if name in renames:
                    node.output[i] = renames[name]
            for i, name in enumerate(node.input):
                if name in renames:
                    node.input[i] = renames[name]
        graph = helper.make_graph(
            self._nodes,
            self.name,
            [helper.make_tensor_value_info(self.input_name, TensorProto.FLOAT, self.input_shape)],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
            initializer=self._inits,
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET)],
            producer_name="aipusim.zoo",
            ir_version=8,
        )
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        shapes = {vi.name: vi for vi in inferred.graph.value_info}
        shapes.update({vi.name: vi for vi in inferred.graph.output})
        del model.graph.output[:]
        for name in outputs:
            model.graph.output.append(shapes[name])
        return model


def _shrunk_variance(v: Array) -> Array:
    """Per-channel variance of `v` (N, C, H, W), shrunk towards the mean over channels.

    Deep feature maps have few samples per channel (a 2x2 map at stride 32 of a 64x64
    image), and dividing by a variance estimated from n samples amplifies by
    E[1/chi2_(n-1)] ~ (n-1)/(n-3) on average: x1.4 a layer for n = 8, which compounds to
    1000x through a detector neck. The channel-pooled variance rests on n*C samples, so
    this shrinkage estimate (prior weight SHRINK_SAMPLES) keeps the per-channel spread where
    there is data to support it and the pooled value where there is not. (The registry also
    sizes the calibration batch so the deepest map has enough samples.)
    """
    n = v.shape[0] * v.shape[2] * v.shape[3]
    per_channel = v.var(axis=(0, 2, 3), dtype=np.float64)
    pooled = per_channel.mean()
    return (n * per_channel + SHRINK_SAMPLES * pooled) / (n + SHRINK_SAMPLES)


def _sigmoid(v: Array) -> Array:
    return 1.0 / (1.0 + np.exp(-v))


def _conv2d(x: Array, w: Array, b: Array | None, stride: int, pad: int, groups: int) -> Array:
    """Reference 2-D convolution (NCHW, OIHW) for the calibration pass."""
    cin = x.shape[1]
    cout, cin_g, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho = (xp.shape[2] - kh) // stride + 1
    wo = (xp.shape[3] - kw) // stride + 1
    if groups == cin == cout and cin_g == 1:
        # Depthwise: accumulate the kh*kw shifted planes, cheap and exact.
        y = np.zeros((x.shape[0], cout, ho, wo), dtype=np.float32)
        for i in range(kh):
            for j in range(kw):
                plane = xp[:, :, i : i + stride * ho : stride, j : j + stride * wo : stride]
                y += plane * w[:, 0, i, j].reshape(1, -1, 1, 1)
    else:
        windows = sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]
        cout_g = cout // groups
        parts = []
        for g in range(groups):
            win = windows[:, g * cin_g : (g + 1) * cin_g]
            wg = w[g * cout_g : (g + 1) * cout_g]
            parts.append(np.tensordot(win, wg, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2))
        y = np.concatenate(parts, axis=1)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y.astype(np.float32)
