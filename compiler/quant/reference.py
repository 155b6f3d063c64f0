"""The int8 CPU reference: runs a `QuantizedGraph` the way the AIPU computes it.

int8 activations and weights, int32 accumulation (exact, see `kernels`), fixed-point
requantize with round-half-up shifts, 256-entry LUTs for non-linear functions, integer
rescaling for element-wise ops. Float inputs are quantized with the input's parameters
(an int8 array is taken as already quantized); outputs are dequantized unless ``raw``.

Example:
    >>> import numpy as np
    >>> from aipusim.compiler.ir import Graph, Node, Op, Tensor
    >>> from aipusim.compiler.quant.data import random_calibration
    >>> from aipusim.compiler.quant.quantize import quantize_graph
    >>> g = Graph("g", (Node("r", Op.RELU, ("x",), ("y",)),),
    ...           {"x": Tensor("x", (1, 4)), "y": Tensor("y", (1, 4))}, {}, ("x",), ("y",))
    >>> q = quantize_graph(g, random_calibration({"x": (1, 4)}, samples=4))
    >>> y = run_int8(q, {"x": np.array([[-1.0, 0.0, 0.5, 1.0]], np.float32)})["y"]
    >>> bool(np.allclose(y, [[0.0, 0.0, 0.5, 1.0]], atol=0.02))
    True
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from aipusim.base.errors import QuantizationError
from aipusim.compiler.ir import DType, Graph, Node, Op, QuantParams
from aipusim.compiler.quant import kernels as K
from aipusim.compiler.quant import opsupport as S
from aipusim.compiler.quant.quantize import QStep, QuantizedGraph
from aipusim.compiler.quant.scheme import dequantize_values, quantize_values
from aipusim.isa import fp_kernels as FK
from aipusim.isa.float18 import FloatFormat

Array = np.ndarray


def _chan(v: np.ndarray, ndim: int, axis: int = 1) -> np.ndarray:
    """A per-tensor scalar or a per-channel vector shaped to broadcast along ``axis``."""
    v = np.asarray(v)
    if v.size == 1:
        return v.reshape(())
    shape = [1] * ndim
    shape[axis] = v.size
    return v.reshape(shape)


def _fixed(v: np.ndarray, mult: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """``(v * m + 2**(n-1)) >> n`` elementwise (int64)."""
    m = np.asarray(mult, np.int64)
    n = np.asarray(shift, np.int64)
    return (v.astype(np.int64) * m + (np.int64(1) << (n - 1))) >> n


class _Int8Runner:
    def __init__(self, qg: QuantizedGraph) -> None:
        self.qg = qg
        self.g: Graph = qg.graph

    def qp(self, name: str) -> QuantParams:
        return self.qg.qparams(name)

    def zp(self, name: str, ndim: int) -> np.ndarray:
        return _chan(self.qp(name).zero_point.astype(np.int64), ndim)

    def const(self, name: str) -> Array:
        arr = self.g.const(name)
        assert arr is not None, name
        return arr

    def centred(self, name: str, x: Array) -> Array:
        return x.astype(np.int64) - self.zp(name, x.ndim)

    # ------------------------------------------------------------------ kernels
    def mac(self, node: Node, step: QStep, x: Array) -> Array:
        p = step.params
        out = node.outputs[0]
        zo = self.qp(out).zero_point.astype(np.int64)
        xin = node.inputs[0]
        if node.op is Op.BATCH_NORM:
            xc = self.centred(xin, x)
            acc = xc * _chan(p["weight_q"].astype(np.int64), x.ndim)
            return self._requant(acc, p, zo)
        w = self.const(p["weight"])
        if node.op is Op.CONV:
            win = S.conv_window(node, self.g)
            xc = x.astype(np.float32) - _chan(self.qp(xin).zero_point.astype(np.float32), x.ndim)
            acc = K.conv_accumulate(
                xc,
                w,
                strides=win.strides,
                pads=win.pads,
                dilations=win.dilations,
                group=int(node.attr("group", 1)),
                out_hw=win.out_hw,
                acc_dtype=np.float64,
            )
            return self._requant(np.rint(acc).astype(np.int64), p, zo)
        if node.op is Op.CONV_TRANSPOSE:
            win = S.conv_transpose_window(node, self.g)
            xc = x.astype(np.float32) - np.float32(self.qp(xin).zero_point)
            acc = K.conv_transpose_accumulate(
                xc,
                w,
                strides=win.strides,
                pads=win.pads,
                dilations=win.dilations,
                group=int(node.attr("group", 1)),
                out_hw=win.out_hw,
                acc_dtype=np.float64,
            )
            return self._requant(np.rint(acc).astype(np.int64), p, zo)
        wf = w.astype(np.float32)
        if node.op is Op.GEMM and int(p["weight_axis"]) == 0:
            wf = wf.T
        xc = x.astype(np.float32) - np.float32(self.qp(xin).zero_point)
        acc = np.rint(K.exact_int_matmul(xc, wf)).astype(np.int64)
        shape = acc.shape
        res = self._requant(acc.reshape(-1, shape[-1], 1), p, zo)
        return res.reshape(shape)

    def _requant(self, acc: Array, p: Mapping, zo: np.ndarray) -> Array:
        shape = acc.shape
        a3 = acc.reshape(shape[0], shape[1], -1)
        c = shape[1]
        zo_c = np.broadcast_to(zo, (c,))
        return K.requantize(a3, p["bias"], p["mult"], p["shift"], zo_c).reshape(shape)

    def share(self, node: Node, step: QStep, x: list[Array]) -> list[Array]:
        op = node.op
        if op in S.LAYOUT_EXEC_OPS:
            pad = int(step.params.get("pad_value", 0))
            return S.run_layout(node, self.g, x, pad)
        if op is Op.MAX_POOL:
            win = S.window_attrs(node, self.g.shape(node.inputs[0]), self.g.shape(node.outputs[0]))
            return [K.max_pool(x[0], win.kernel, win.strides, win.pads, win.dilations, win.out_hw)]
        if op is Op.GLOBAL_MAX_POOL:
            return [x[0].max(axis=(2, 3), keepdims=True)]
        if op is Op.REDUCE_MAX:
            keep = bool(node.attr("keepdims", 1))
            return [x[0].max(axis=S.reduce_axes(node, self.g), keepdims=keep)]
        if op in (Op.RESIZE, Op.UPSAMPLE):
            in_shape, out_shape = self.g.shape(node.inputs[0]), self.g.shape(node.outputs[0])
            y = x[0]
            for ax in S.resized_axes(in_shape, out_shape):
                idx = S.resize_nearest_index(node, self.g, ax, in_shape[ax], out_shape[ax])
                y = np.take(y, idx, axis=ax)
            return [y]
        raise S.unsupported(node, "no sharing kernel")

    def rescale(self, node: Node, step: QStep, x: list[Array]) -> Array:
        ins = node.present_inputs
        out = node.outputs[0]
        zo = int(self.qp(out).zero_point)
        mults = step.params["mults"]
        shift = int(step.params["shift"])
        terms = [
            (xi.astype(np.int64) - int(self.qp(name).zero_point)) * np.int64(m)
            for name, xi, m in zip(ins, x, mults, strict=True)
        ]
        sat = K.saturate_int16 if self.qp(out).dtype is DType.INT16 else K.saturate_int8
        if node.op in (Op.ADD, Op.SUB):
            return sat(K.rounding_shift(terms[0] + terms[1], shift) + zo)
        each = [sat(K.rounding_shift(t, shift) + zo) for t in terms]
        if node.op is Op.CONCAT:
            return np.concatenate(each, axis=int(node.attr("axis")))
        fn = np.minimum if node.op is Op.MIN else np.maximum
        res = each[0]
        for e in each[1:]:
            res = fn(res, e)
        return res

    def matmul(self, node: Node, step: QStep, x: list[Array]) -> Array:
        """Two activations: exact integer sums of (a - za) * b (b has zero point 0, as an
        IMC weight), then one requantize (as `mul`)."""
        a = self.centred(node.inputs[0], x[0])
        prod = K.exact_int_batch_matmul(a, x[1].astype(np.int64))
        zo = int(self.qp(node.outputs[0]).zero_point)
        return K.saturate_int8(_fixed(prod, step.params["mult"][0], step.params["shift"][0]) + zo)

    def fp_op(self, node: Node, step: QStep, x: list[Array]) -> Array:
        """The DPU float kinds (`fp_kernels`)."""
        p = step.params
        fmt = FloatFormat(*(int(v) for v in p["fp_format"]))
        zo = int(self.qp(node.outputs[0]).zero_point)
        names = [i for i in node.present_inputs if i]
        if step.kind == "layernorm":
            return FK.layer_norm_int(x[0], int(self.qp(names[0]).zero_point), p, zo, fmt)
        za, zb = (int(self.qp(n).zero_point) for n in names[:2])
        fn = FK.div_int if step.kind == "div_fp" else FK.pow_int
        return fn(x[0], za, x[1], zb, p, zo, fmt)

    def gather(self, node: Node, step: QStep, x: list[Array]) -> Array:
        """An int8 table (stored on the output's grid) looked up by integer indices."""
        return S.gather(node, self.g, x)

    def mul(self, node: Node, step: QStep, x: list[Array]) -> Array:
        a, b = (self.centred(n, v) for n, v in zip(node.inputs, x, strict=True))
        prod = a * b
        zo = int(self.qp(node.outputs[0]).zero_point)
        v = _fixed(prod, step.params["mult"][0], step.params["shift"][0]) + zo
        return K.saturate_int8(v)

    def mean(self, node: Node, step: QStep, x: Array) -> Array:
        xc = self.centred(node.inputs[0], x)
        if node.op is Op.GLOBAL_AVERAGE_POOL:
            s = xc.sum(axis=(2, 3), keepdims=True)
        else:
            keep = bool(node.attr("keepdims", 1))
            s = xc.sum(axis=S.reduce_axes(node, self.g), keepdims=keep)
        zo = int(self.qp(node.outputs[0]).zero_point)
        return K.saturate_int8(_fixed(s, step.params["mult"][0], step.params["shift"][0]) + zo)

    def pool_avg(self, node: Node, step: QStep, x: Array) -> Array:
        win = S.window_attrs(node, self.g.shape(node.inputs[0]), self.g.shape(node.outputs[0]))
        sums, count = K.pool_sum(
            self.centred(node.inputs[0], x),
            win.kernel,
            win.strides,
            win.pads,
            win.out_hw,
            count_include_pad=bool(node.attr("count_include_pad", 0)),
            acc_dtype=np.int64,
        )
        m = step.params["mult"][count - 1]
        n = step.params["shift"][count - 1]
        zo = int(self.qp(node.outputs[0]).zero_point)
        return K.saturate_int8(_fixed(sums, m, n) + zo)

    def resize_linear(self, node: Node, step: QStep, x: Array) -> Array:
        in_shape, out_shape = self.g.shape(node.inputs[0]), self.g.shape(node.outputs[0])
        axes = S.resized_axes(in_shape, out_shape)
        coords = [
            S.resize_linear_coords(node, self.g, ax, in_shape[ax], out_shape[ax]) for ax in axes
        ]
        v = K.resize_linear_int(self.centred(node.inputs[0], x), coords, axes)
        zo = int(self.qp(node.outputs[0]).zero_point)
        return K.saturate_int8(_fixed(v, step.params["mult"][0], step.params["shift"][0]) + zo)

    def softmax(self, node: Node, step: QStep, x: Array) -> Array:
        axis = int(node.attr("axis", -1))
        v = x.astype(np.int64)
        keep = None
        if node.op is Op.MASKED_SOFTMAX:  # masked entries: out of the max, exp 0
            keep = np.broadcast_to(self.qg.graph.const(node.inputs[1]).astype(bool), x.shape)
            v = np.where(keep, v, K.QMIN)
        d = v - v.max(axis=axis, keepdims=True)
        e = step.params["exp_table"][d + 255]
        if keep is not None:
            e = np.where(keep, e, 0)
        total = e.sum(axis=axis, keepdims=True)
        zo = int(self.qp(node.outputs[0]).zero_point)
        return K.saturate_int8(K.rounding_shift((e * step.params["recip"]) // total, 16) + zo)

    # ------------------------------------------------------------------ driver
    def node(self, node: Node, x: list[Array]) -> list[Array]:
        step = self.qg.steps[node.name]
        kind = step.kind
        if kind == "share":
            return self.share(node, step, x)
        if kind == "mac":
            return [self.mac(node, step, x[0])]
        if kind == "matmul":
            return [self.matmul(node, step, x)]
        if kind in ("layernorm", "div_fp", "pow_fp"):
            return [self.fp_op(node, step, x)]
        if kind == "gather":
            return [self.gather(node, step, x)]
        if kind == "clamp":
            lo = _chan(step.params["lo"], x[0].ndim)
            hi = _chan(step.params["hi"], x[0].ndim)
            return [np.clip(x[0], lo, hi).astype(np.int8)]
        if kind == "lut":
            return [K.apply_lut(x[0], step.params["table"])]
        if kind == "rescale":
            return [self.rescale(node, step, x)]
        if kind == "mul":
            return [self.mul(node, step, x)]
        if kind == "mean":
            return [self.mean(node, step, x[0])]
        if kind == "pool_avg":
            return [self.pool_avg(node, step, x[0])]
        if kind == "resize_linear":
            return [self.resize_linear(node, step, x[0])]
        if kind == "softmax":
            return [self.softmax(node, step, x[0])]
        raise AssertionError(f"unknown step kind {kind} of node {node.name}")


def _inputs_for(node: Node, qg: QuantizedGraph) -> list[str]:
    """Inputs the integer kernel reads: activations, and int8 operands of element-wise ops."""
    g = qg.graph
    kind = qg.steps[node.name].kind
    names = []
    operand_kinds = ("rescale", "mul", "div_fp", "pow_fp", "gather")
    for i in node.present_inputs:
        if not g.is_constant(i) or (kind in operand_kinds and g.tensor(i).quant is not None):
            names.append(i)
    return names


def run_int8(
    qgraph: QuantizedGraph,
    inputs: Mapping[str, Array],
    *,
    raw: bool = False,
    keep_all: bool = False,
) -> dict[str, Array]:
    """Run the quantized graph; float outputs (int8 with ``raw``; every tensor with
    ``keep_all``, dequantized unless ``raw``)."""
    g = qgraph.graph
    runner = _Int8Runner(qgraph)
    values: dict[str, Array] = {}
    for name in g.inputs:
        if name not in inputs:
            raise QuantizationError(f"input {name} is missing (graph inputs: {list(g.inputs)})")
        arr = np.asarray(inputs[name])
        if arr.shape != g.shape(name):
            raise QuantizationError(
                f"input {name} must have shape {g.shape(name)}, not {arr.shape}"
            )
        if g.tensor(name).quant is None:  # integer inputs (indices) are not quantized
            arr = arr.astype(g.tensor(name).dtype.np)
        elif arr.dtype != np.int8:
            q = runner.qp(name)
            arr = quantize_values(arr.astype(np.float64), q.scale, q.zero_point, q.axis)
        values[name] = arr
    last: dict[str, int] = {}
    for step, node in enumerate(g.nodes):
        for i in node.present_inputs:
            last[i] = step
    outputs = set(g.outputs)
    for step, node in enumerate(g.nodes):
        names = _inputs_for(node, qgraph)
        args = [values[i] if i in values else runner.const(i) for i in names]
        results = runner.node(node, args)
        for name, arr in zip([o for o in node.outputs if o], results, strict=False):
            values[name] = arr
        if not keep_all:
            for i in names:
                if last.get(i) == step and i not in outputs:
                    values.pop(i, None)
    wanted = values if keep_all else {o: values[o] for o in g.outputs}
    if raw:
        return dict(wanted)
    out = {}
    for name, arr in wanted.items():
        q = g.tensor(name).quant
        if q is None or name in g.constants:
            continue
        out[name] = dequantize_values(arr, q.scale, q.zero_point, q.axis)
    return out


__all__ = ["run_int8"]
