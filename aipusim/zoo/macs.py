"""Count multiply-accumulates and parameters of any ONNX model from its graph.

MACs come from the compute-heavy ops only (what papers and ultralytics' GFLOPs count):
Conv (grouped and depthwise included: Cout*Ho*Wo*kh*kw*Cin/groups per image),
ConvTranspose, Gemm and MatMul. Shapes come from ONNX shape inference, so the model needs
static input shapes. Nodes inside control-flow subgraphs (If/Loop) are not counted.

Example:
    >>> from aipusim.zoo import build
    >>> count_macs(build("tiny_cnn"))
    6472320
"""

from __future__ import annotations

import math

import onnx

from aipusim.base.errors import OnnxImportError

#: Ops whose MACs are counted.
MAC_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})
#: Inputs that hold trainable parameters (weights, biases, BN scale/shift) per op type.
_PARAM_INPUTS = {
    "Conv": (1, 2),
    "ConvTranspose": (1, 2),
    "Gemm": (1, 2),
    "MatMul": (0, 1),
    "BatchNormalization": (1, 2),
    "LayerNormalization": (1, 2),
}
#: Ops whose constant inputs are parameters when torch names them after a module (a bias
#: Add of a Linear, a transformer's class token and position embeddings); anonymous
#: constants (``onnx::...``: scales, anchors, grids) are not.
_NAMED_PARAM_OPS = frozenset({"Add", "Mul", "Concat", "Expand"})


#: Initializers larger than this are declared by shape only for shape inference (small ones,
#: such as Reshape targets, are values inference needs).
_LIGHT_ELEMENTS = 4096


def _weightless(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose large initializers are typed inputs instead: shape inference needs
    their shapes, not their values, and serialising 87 M weights costs seconds."""
    g = model.graph
    declared = {vi.name for vi in g.input}
    big = [t for t in g.initializer if math.prod(t.dims) > _LIGHT_ELEMENTS]
    small = [t for t in g.initializer if math.prod(t.dims) <= _LIGHT_ELEMENTS]
    inputs = list(g.input) + [
        onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
        for t in big
        if t.name not in declared
    ]
    light = onnx.helper.make_graph(list(g.node), g.name, inputs, list(g.output), initializer=small)
    out = onnx.helper.make_model(light, opset_imports=list(model.opset_import))
    out.ir_version = model.ir_version
    return out


def _static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...] | None]:
    try:
        graph = onnx.shape_inference.infer_shapes(_weightless(model)).graph
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as exc:
        raise OnnxImportError(f"model shapes cannot be inferred: {exc}") from exc
    shapes: dict[str, tuple[int, ...] | None] = {}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        tensor_type = vi.type.tensor_type
        if not tensor_type.HasField("shape"):
            shapes[vi.name] = None
            continue
        dims = tensor_type.shape.dim
        static = all(d.HasField("dim_value") for d in dims)
        shapes[vi.name] = tuple(d.dim_value for d in dims) if static else None
    for init in model.graph.initializer:
        shapes[init.name] = tuple(init.dims)
    return shapes


def _node_macs(node: onnx.NodeProto, shape: dict[str, tuple[int, ...] | None]) -> int:
    def need(tensor: str) -> tuple[int, ...]:
        value = shape.get(tensor)
        if value is None:
            raise OnnxImportError(
                f"cannot count MACs of node {node.name!r} ({node.op_type}): the shape of "
                f"{tensor!r} is unknown; the model needs static input shapes"
            )
        return value

    if node.op_type == "Conv":
        # weight [Cout, Cin/groups, k...]: every output element costs Cin/groups*prod(k).
        return math.prod(need(node.output[0])) * math.prod(need(node.input[1])[1:])
    if node.op_type == "ConvTranspose":
        # weight [Cin, Cout/groups, k...]: every input element is scattered to that many.
        return math.prod(need(node.input[0])) * math.prod(need(node.input[1])[1:])
    if node.op_type == "Gemm":
        a = need(node.input[0])
        trans_a = next((attr.i for attr in node.attribute if attr.name == "transA"), 0)
        return math.prod(need(node.output[0])) * (a[0] if trans_a else a[1])
    if node.op_type == "MatMul":
        return math.prod(need(node.output[0])) * need(node.input[0])[-1]
    return 0


def count_macs(model: onnx.ModelProto) -> int:
    """Multiply-accumulates of one inference (Conv, ConvTranspose, Gemm, MatMul)."""
    shapes = _static_shapes(model)
    return sum(_node_macs(n, shapes) for n in model.graph.node if n.op_type in MAC_OPS)


def count_params(model: onnx.ModelProto) -> int:
    """Trainable parameters: the initializers that are weights or biases of Conv,
    ConvTranspose, Gemm and MatMul, BatchNormalization and LayerNormalization scale/shift,
    and named (not ``onnx::``) constants of Add/Mul/Concat/Expand (as PyTorch counts;
    running statistics and other constants are not parameters).

    Example:
        >>> from aipusim.zoo import build
        >>> count_params(build("tiny_cnn"))
        26522
    """
    sizes = {init.name: math.prod(init.dims) for init in model.graph.initializer}
    params: set[str] = set()
    for node in model.graph.node:
        for index in _PARAM_INPUTS.get(node.op_type, ()):
            if index < len(node.input) and node.input[index] in sizes:
                params.add(node.input[index])
        if node.op_type in _NAMED_PARAM_OPS:
            params.update(i for i in node.input if i in sizes and not i.startswith("onnx::"))
    return sum(sizes[name] for name in params)
