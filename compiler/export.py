"""Graph IR -> ONNX: for dumping core/host graphs and for checking rewrites numerically.

Internal ops (``aipusim`` domain) are expanded into standard ONNX ops, so every exported
model runs in ``onnx.reference.ReferenceEvaluator`` and onnxruntime.

>>> import numpy as np
>>> from aipusim.compiler.ir import DType, Graph, Node, Op, Tensor
>>> g = Graph("g", (Node("s", Op.SILU, ("x",), ("y",)),),
...           {"x": Tensor("x", (2,)), "y": Tensor("y", (2,))}, {}, ("x",), ("y",))
>>> [n.op_type for n in to_onnx(g).graph.node]
['Sigmoid', 'Mul']
>>> run_onnx(to_onnx(g), {"x": np.zeros(2, np.float32)})["y"].tolist()
[0.0, 0.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from aipusim.base.mapped import release
from aipusim.compiler.ir import DType, Graph, Node, Op

#: Attributes the compiler adds to LUT nodes (``simplify_mac_before_after_lut``):
#: y = out_scale * f(in_scale * x + in_bias) + out_bias. Exported as explicit Mul/Add.
LUT_AFFINE_ATTRS = ("aipu_in_scale", "aipu_in_bias", "aipu_out_scale", "aipu_out_bias")


def onnx_elem_type(dtype: DType) -> int:
    """The ONNX TensorProto element type of a `DType`."""
    return helper.np_dtype_to_tensor_dtype(dtype.np)


def _onnx_attrs(node: Node) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in node.attrs.items():
        if key.startswith("aipu_"):
            continue
        if isinstance(value, np.ndarray):
            out[key] = numpy_helper.from_array(np.ascontiguousarray(value))
        elif isinstance(value, tuple):
            out[key] = list(value)
        else:
            out[key] = value
    return out


def node_to_onnx(node: Node, inputs: list[str], outputs: list[str], name: str) -> onnx.NodeProto:
    """One IR node as an ONNX NodeProto (``aipu_*`` attributes dropped)."""
    raw = {k: v for k, v in node.attrs.items() if isinstance(v, onnx.AttributeProto)}
    attrs = {k: v for k, v in _onnx_attrs(node).items() if k not in raw}
    proto = helper.make_node(
        node.op_type, inputs, outputs, name=name, domain=node.domain or None, **attrs
    )
    for key, attr in raw.items():
        copy = onnx.AttributeProto()
        copy.CopyFrom(attr)
        copy.name = key
        proto.attribute.append(copy)
    return proto


def _expand(node: Node, graph: Graph, extra_inits: list[onnx.TensorProto]) -> list[onnx.NodeProto]:
    """The ONNX nodes computing ``node`` (more than one for internal ops and LUT affines)."""
    inputs, outputs = list(node.inputs), list(node.outputs)
    pre: list[onnx.NodeProto] = []
    post: list[onnx.NodeProto] = []
    dtype = graph.tensor(outputs[0]).dtype.np if node.outputs[0] in graph.tensors else np.float32

    def const(suffix: str, value: float) -> str:
        name = f"{node.name}/{suffix}"
        extra_inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    x = inputs[0]
    for attr, op in (("aipu_in_scale", "Mul"), ("aipu_in_bias", "Add")):
        if attr in node.attrs:
            tmp = f"{node.name}/{attr}_out"
            pre.append(helper.make_node(op, [x, const(attr, node.attrs[attr])], [tmp]))
            x = tmp
    inputs[0] = x
    y = outputs[0]
    body_out = y
    chain = [(a, op) for a, op in (("aipu_out_scale", "Mul"), ("aipu_out_bias", "Add"))]
    chain = [c for c in chain if c[0] in node.attrs]
    if chain:
        body_out = f"{node.name}/lut_out"
        cur = body_out
        for i, (attr, op) in enumerate(chain):
            nxt = y if i == len(chain) - 1 else f"{node.name}/{attr}_out"
            post.append(helper.make_node(op, [cur, const(attr, node.attrs[attr])], [nxt]))
            cur = nxt
    if node.op is Op.SILU:
        sig = f"{node.name}/sigmoid"
        body = [
            helper.make_node("Sigmoid", [inputs[0]], [sig], name=f"{node.name}/Sigmoid"),
            helper.make_node("Mul", [inputs[0], sig], [body_out], name=node.name),
        ]
    elif node.op is Op.GELU:
        body = _gelu_nodes(node, inputs[0], body_out, const)
    elif node.op is Op.MASKED_SOFTMAX:
        # the masked entries as -inf: exp() gives exactly 0 for them
        keep, filled = f"{node.name}/keep_bool", f"{node.name}/masked"
        where = [keep, inputs[0], const("fill", -np.inf)]
        axis = int(node.attr("axis", -1))
        body = [
            helper.make_node("Cast", [inputs[1]], [keep], name=f"{node.name}/Cast", to=9),
            helper.make_node("Where", where, [filled], name=f"{node.name}/Where"),
            helper.make_node("Softmax", [filled], [body_out], name=node.name, axis=axis),
        ]
    else:
        body = [node_to_onnx(node, inputs, [body_out, *outputs[1:]], node.name)]
    for i, p in enumerate(pre + post):
        if not p.name:
            p.name = f"{node.name}/affine{i}"
    return pre + body + post


#: `to_onnx(..., external_min_bytes=...)`: the external-data location of constants left out.
IN_MEMORY = "aipusim-in-memory"


def _initializer(name: str, value: np.ndarray, external_min_bytes: int | None) -> onnx.TensorProto:
    arr = np.asarray(value)
    if external_min_bytes is None or arr.nbytes < external_min_bytes:
        return numpy_helper.from_array(arr, name)
    # A stub naming the tensor's type and shape; its data is handed to the runtime apart
    # (onnxruntime's add_external_initializers), so the weights are never serialized.
    stub = onnx.TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(arr.dtype))
    stub.dims.extend(arr.shape)
    stub.data_location = onnx.TensorProto.EXTERNAL
    for key, val in (("location", IN_MEMORY), ("offset", "0"), ("length", str(arr.nbytes))):
        stub.external_data.add(key=key, value=val)
    return stub


def _gelu_nodes(node: Node, x: str, y: str, const: Callable[[str, float], str]) -> list:
    """GELU in standard ops: 0.5 x (1 + erf(x / sqrt 2)), or with the tanh approximation
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    p = f"{node.name}/gelu"

    def mk(op: str, ins: list[str], out: str) -> onnx.NodeProto:
        return helper.make_node(op, ins, [out], name=f"{out}_{op}")

    if str(node.attr("approximate", "none")) == "tanh":
        nodes = [
            mk("Mul", [x, x], f"{p}/x2"),
            mk("Mul", [f"{p}/x2", x], f"{p}/x3"),
            mk("Mul", [f"{p}/x3", const("c", 0.044715)], f"{p}/cx3"),
            mk("Add", [x, f"{p}/cx3"], f"{p}/inner"),
            mk("Mul", [f"{p}/inner", const("k", math.sqrt(2.0 / math.pi))], f"{p}/arg"),
            mk("Tanh", [f"{p}/arg"], f"{p}/phi"),
        ]
    else:
        nodes = [
            mk("Mul", [x, const("rsqrt2", 1.0 / math.sqrt(2.0))], f"{p}/arg"),
            mk("Erf", [f"{p}/arg"], f"{p}/phi"),
        ]
    return [
        *nodes,
        mk("Add", [f"{p}/phi", const("one", 1.0)], f"{p}/onep"),
        mk("Mul", [x, f"{p}/onep"], f"{p}/xp"),
        mk("Mul", [f"{p}/xp", const("half", 0.5)], y),
    ]


def to_onnx(
    graph: Graph, *, producer: str = "aipusim", external_min_bytes: int | None = None
) -> onnx.ModelProto:
    """Export ``graph`` as an ONNX model (initializers for constants, value_info for every
    intermediate tensor).

    ``external_min_bytes``: constants of at least that many bytes are left out, as
    external-data stubs located at `IN_MEMORY` (for a runtime given their values apart).
    """
    extra: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []
    for n in graph.nodes:
        nodes.extend(_expand(n, graph, extra))

    def vinfo(name: str) -> onnx.ValueInfoProto:
        t = graph.tensor(name)
        dims = [d if d >= 0 else None for d in t.shape]
        return helper.make_tensor_value_info(name, onnx_elem_type(t.dtype), dims)

    inits = [_initializer(name, a, external_min_bytes) for name, a in graph.constants.items()]
    io = set(graph.inputs) | set(graph.outputs)
    value_info = [
        vinfo(o) for n in graph.nodes for o in n.outputs if o and o not in io and o in graph.tensors
    ]
    g = helper.make_graph(
        nodes,
        graph.name,
        [vinfo(i) for i in graph.inputs],
        [vinfo(o) for o in graph.outputs],
        initializer=inits + extra,
        value_info=value_info,
    )
    domains = {n.domain for n in nodes if n.domain not in ("", "ai.onnx")}
    opsets = [helper.make_opsetid("", graph.opset)] + [helper.make_opsetid(d, 1) for d in domains]
    model = helper.make_model(g, opset_imports=opsets, producer_name=producer)
    # IR version matched to the opset, so older runtimes accept the file.
    model.ir_version = min(model.ir_version, 10 if graph.opset <= 21 else model.ir_version)
    return model


#: A graph whose constants take more bytes than this is saved with them in a data file
#: beside the model (`save_onnx`). Far above any vision model's host graphs (kilobytes);
#: llama_1b's preprocess graph holds its 1.05 GB embedding table.
EXTERNAL_DATA_MIN_BYTES = 256 << 20


def save_onnx(graph: Graph, path: Path) -> None:
    """Write ``graph`` as the ONNX file ``path``. Up to `EXTERNAL_DATA_MIN_BYTES` of
    constants it is the one file `to_onnx` makes; beyond, the constants of at least 1 KiB
    go into ``<path>.data`` (ONNX external data, which ``onnx.load`` reads back), written
    straight from the arrays: no serialized copy of the weights is made in memory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if sum(a.nbytes for a in graph.constants.values()) <= EXTERNAL_DATA_MIN_BYTES:
        onnx.save(to_onnx(graph), str(path))
        return
    model = to_onnx(graph, external_min_bytes=1024)
    data = path.with_name(f"{path.name}.data")
    offset = 0
    with open(data, "wb") as fh:
        for stub in model.graph.initializer:
            if stub.data_location != onnx.TensorProto.EXTERNAL:
                continue
            arr = graph.constants[stub.name]
            for block in _le_blocks(arr):
                fh.write(memoryview(block).cast("B"))
                release(arr)  # a mapped table's pages: one block's worth resident at a time
            del stub.external_data[:]
            for key, val in (("location", data.name), ("offset", str(offset)),
                             ("length", str(arr.nbytes))):  # fmt: skip
                stub.external_data.add(key=key, value=val)
            offset += arr.nbytes
    onnx.save(model, str(path))


def _le_blocks(arr: np.ndarray, rows_bytes: int = 64 << 20) -> Iterator[np.ndarray]:
    """``arr`` as C-ordered little-endian blocks along its first axis (a block at a time:
    a non-contiguous view is not copied whole)."""
    le = arr.dtype.newbyteorder("<")
    if arr.ndim == 0:
        yield np.ascontiguousarray(arr.reshape(1), le)
        return
    rows = max(1, rows_bytes // max(1, arr.nbytes // max(1, arr.shape[0])))
    for i in range(0, arr.shape[0], rows):
        yield np.ascontiguousarray(arr[i : i + rows], le)


def run_onnx(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate ``model`` with the ONNX reference runtime; output name -> array."""
    from onnx.reference import ReferenceEvaluator

    names = [o.name for o in model.graph.output]
    values = ReferenceEvaluator(model).run(None, dict(feeds))
    return dict(zip(names, values, strict=True))


def run_graph(graph: Graph, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate an IR graph through its ONNX export (the fp32 reference of a graph)."""
    return run_onnx(to_onnx(graph), feeds)


__all__ = [
    "IN_MEMORY",
    "LUT_AFFINE_ATTRS",
    "node_to_onnx",
    "onnx_elem_type",
    "run_graph",
    "run_onnx",
    "save_onnx",
    "to_onnx",
]
