"""The compiler's graph IR: immutable nodes in topological order over named, typed tensors.

A `Graph` is a value: passes never mutate one, they build a new one (with `GraphEditor` or
`dataclasses.replace`). Every value flowing in the graph has a `Tensor` entry (static shape,
dtype); constants (weights, folded shape arithmetic) are read-only numpy arrays. `verify`
checks the invariants every pass must keep, `dump` prints one line per node.

>>> import numpy as np
>>> g = Graph(
...     name="tiny",
...     nodes=(Node("r", Op.RELU, ("x",), ("y",)),),
...     tensors={"x": Tensor("x", (1, 4), DType.FLOAT32), "y": Tensor("y", (1, 4), DType.FLOAT32)},
...     constants={},
...     inputs=("x",),
...     outputs=("y",),
... )
>>> verify(g)
>>> g.producer("y").name, [n.name for n in g.consumers("x")]
('r', ['r'])
>>> print(dump(g).splitlines()[1])
  r: Relu(x[1,4]) -> y[1,4]
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import itertools
import re
import types
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from aipusim.base.mapped import is_mapped


class DType(StrEnum):
    """Element types of tensors (numpy names)."""

    FLOAT32 = "float32"
    FLOAT16 = "float16"
    FLOAT64 = "float64"
    INT8 = "int8"
    UINT8 = "uint8"
    INT16 = "int16"
    UINT16 = "uint16"
    INT32 = "int32"
    UINT32 = "uint32"
    INT64 = "int64"
    UINT64 = "uint64"
    BOOL = "bool"
    STRING = "object"

    @property
    def np(self) -> np.dtype:
        """The numpy dtype of this element type."""
        return np.dtype(self.value)

    @classmethod
    def of(cls, value: np.dtype | np.ndarray | type | str) -> DType:
        """The `DType` of a numpy dtype, array or dtype name.

        >>> DType.of(np.zeros(2, np.int64))
        <DType.INT64: 'int64'>
        """
        dt = value.dtype if isinstance(value, np.ndarray) else np.dtype(value)
        return cls(dt.name if dt.kind != "O" else "object")


class Op(StrEnum):
    """Every operator the compiler knows by name; the value is the ONNX op type.

    Ops outside the enum are imported as `Op.OTHER` (their ONNX type is kept in
    `Node.onnx_type`) so that the cleaner can move them to the host and `validate_operators`
    can name them. Internal ops (no ONNX equivalent) live in the ``aipusim`` domain.
    """

    # MAC-array ops
    CONV = "Conv"
    CONV_TRANSPOSE = "ConvTranspose"
    GEMM = "Gemm"
    MATMUL = "MatMul"
    EINSUM = "Einsum"  # rewritten to Transpose/Reshape + MatMul (`passes.einsum`)
    BATCH_NORM = "BatchNormalization"
    # element-wise and activations
    RELU = "Relu"
    LEAKY_RELU = "LeakyRelu"
    PRELU = "PRelu"
    CLIP = "Clip"
    SIGMOID = "Sigmoid"
    HARD_SIGMOID = "HardSigmoid"
    HARD_SWISH = "HardSwish"
    TANH = "Tanh"
    ERF = "Erf"
    SQRT = "Sqrt"
    POW = "Pow"
    EXP = "Exp"
    LOG = "Log"
    NEG = "Neg"
    RECIPROCAL = "Reciprocal"
    MUL = "Mul"
    ADD = "Add"
    SUB = "Sub"
    DIV = "Div"
    MIN = "Min"
    MAX = "Max"
    SOFTMAX = "Softmax"
    LAYER_NORM = "LayerNormalization"
    REDUCE_MEAN = "ReduceMean"
    REDUCE_MAX = "ReduceMax"
    REDUCE_SUM = "ReduceSum"
    # windows and resampling
    MAX_POOL = "MaxPool"
    AVERAGE_POOL = "AveragePool"
    GLOBAL_AVERAGE_POOL = "GlobalAveragePool"
    GLOBAL_MAX_POOL = "GlobalMaxPool"
    RESIZE = "Resize"
    UPSAMPLE = "Upsample"
    # layout and data movement
    CONCAT = "Concat"
    SPLIT = "Split"
    SLICE = "Slice"
    RESHAPE = "Reshape"
    FLATTEN = "Flatten"
    TRANSPOSE = "Transpose"
    SQUEEZE = "Squeeze"
    UNSQUEEZE = "Unsqueeze"
    IDENTITY = "Identity"
    PAD = "Pad"
    CAST = "Cast"
    # shape arithmetic and host-side post-processing (folded or moved to the host)
    SHAPE = "Shape"
    GATHER = "Gather"
    RANGE = "Range"
    EXPAND = "Expand"
    CONSTANT_OF_SHAPE = "ConstantOfShape"
    CONSTANT = "Constant"
    TILE = "Tile"
    WHERE = "Where"
    EQUAL = "Equal"
    GREATER = "Greater"
    LESS = "Less"
    FLOOR = "Floor"
    CEIL = "Ceil"
    ARG_MAX = "ArgMax"
    TOP_K = "TopK"
    NON_MAX_SUPPRESSION = "NonMaxSuppression"
    NON_ZERO = "NonZero"
    GATHER_ELEMENTS = "GatherElements"
    GATHER_ND = "GatherND"
    # internal ops (domain "aipusim")
    SILU = "SiLU"  # x * sigmoid(x) as one LUT op
    GELU = "Gelu"  # x * Phi(x) (attr approximate: none = erf form, tanh) as one LUT op
    # Softmax over the entries a constant uint8 mask keeps (input 2); the others are 0
    MASKED_SOFTMAX = "MaskedSoftmax"
    OTHER = "Other"  # an ONNX op the compiler does not know; see Node.onnx_type

    @property
    def is_internal(self) -> bool:
        """True for ops that exist only inside the compiler (domain ``aipusim``)."""
        return self in INTERNAL_OPS


#: Domain of the internal ops when exported to ONNX.
INTERNAL_DOMAIN = "aipusim"
#: Attribute of a node a rewrite made from another op (a Gemm lowered to a 1x1 conv): that
#: op's type, the layer's label in reports and traces (``aipu_`` attributes are not exported).
SOURCE_OP_ATTR = "aipu_source_op"
#: Attribute of a channel Concat whose parts the DPU places into their channel slices of the
#: output (`aipusim.compiler.passes.rewrite.place_concat`), row tile by row tile.
PLACE_PARTS_ATTR = "aipu_place_parts"
INTERNAL_OPS: frozenset[Op] = frozenset({Op.SILU, Op.GELU, Op.MASKED_SOFTMAX})

#: Ops that map to the D-IMC matrix-vector array (grouped convs with groups > 1 and
#: channels per group of 1 are depthwise and go to the DWPU instead: see `is_depthwise`).
MVM_OPS: frozenset[Op] = frozenset({Op.CONV, Op.CONV_TRANSPOSE, Op.GEMM, Op.MATMUL})
#: Ops of the depthwise/pooling unit.
DWPU_OPS: frozenset[Op] = frozenset(
    {
        Op.MAX_POOL,
        Op.AVERAGE_POOL,
        Op.GLOBAL_AVERAGE_POOL,
        Op.GLOBAL_MAX_POOL,
        Op.RESIZE,
        Op.UPSAMPLE,
    }
)
#: Non-linear functions the DPU evaluates through a lookup table.
LUT_OPS: frozenset[Op] = frozenset(
    {
        Op.SIGMOID,
        Op.HARD_SIGMOID,
        Op.HARD_SWISH,
        Op.TANH,
        Op.ERF,
        Op.SQRT,
        Op.EXP,
        Op.LOG,
        Op.RECIPROCAL,
        Op.SILU,
        Op.GELU,
    }
)
#: Element-wise arithmetic with two operands (numpy broadcasting).
BINARY_OPS: frozenset[Op] = frozenset(
    {Op.MUL, Op.ADD, Op.SUB, Op.DIV, Op.POW, Op.MIN, Op.MAX, Op.PRELU}
)
#: Ops of the vector unit: requantize, element-wise, activations (LUT), reductions.
DPU_OPS: frozenset[Op] = (
    LUT_OPS
    | BINARY_OPS
    | frozenset(
        {
            Op.RELU,
            Op.LEAKY_RELU,
            Op.CLIP,
            Op.NEG,
            Op.SOFTMAX,
            Op.MASKED_SOFTMAX,
            Op.REDUCE_MEAN,
            Op.REDUCE_MAX,
            Op.REDUCE_SUM,
            Op.BATCH_NORM,
            Op.LAYER_NORM,
        }
    )
)
#: Ops that only move or re-interpret data (addressing and DMA, no arithmetic).
LAYOUT_OPS: frozenset[Op] = frozenset(
    {
        Op.CONCAT,
        Op.SPLIT,
        Op.SLICE,
        Op.RESHAPE,
        Op.FLATTEN,
        Op.TRANSPOSE,
        Op.SQUEEZE,
        Op.UNSQUEEZE,
        Op.IDENTITY,
        Op.PAD,
        Op.CAST,
        # with constant indices / repeats / shapes (validate_operators checks): copies
        Op.GATHER,
        Op.EXPAND,
        Op.TILE,
    }
)
#: Shape arithmetic: folds to constants once input shapes are static (Expand and Tile of
#: an activation with a static target stay, as layout copies).
SHAPE_OPS: frozenset[Op] = frozenset(
    {Op.SHAPE, Op.RANGE, Op.EXPAND, Op.CONSTANT_OF_SHAPE, Op.CONSTANT, Op.TILE}
)
#: Ops whose output shape depends on data values (only the host can run them).
DATA_DEPENDENT_OPS: frozenset[Op] = frozenset({Op.NON_MAX_SUPPRESSION, Op.NON_ZERO})
#: Ops the AIPU can run (the union of its units' groups).
AIPU_OPS: frozenset[Op] = MVM_OPS | DWPU_OPS | DPU_OPS | LAYOUT_OPS


# ----------------------------------------------------------------------------- values

#: An attribute value: scalars, tuples of scalars, a read-only array (tensor attributes)
#: or an opaque ONNX object (sub-graphs of ops the compiler does not interpret).
AttrValue = int | float | str | tuple[int, ...] | tuple[float, ...] | tuple[str, ...] | Any


def frozen_array(array: np.ndarray | Any) -> np.ndarray:
    """A read-only (C-contiguous) view of ``array``: constants are never written in place.
    A view of a weight mapped from its file (`aipusim.base.mapped`), e.g. a transposed one,
    stays that view: a contiguous copy would read the whole weight into memory."""
    if is_mapped(array) and not array.flags.writeable:
        return array
    arr = np.asarray(array, order="C")  # (ascontiguousarray would turn 0-d into 1-d)
    if arr.flags.writeable:
        arr = arr.view()
        arr.flags.writeable = False
    return arr


class Attrs(Mapping[str, AttrValue]):
    """An immutable, hashable mapping of node attributes.

    >>> a = Attrs({"axis": 1, "pads": [0, 1, 0, 1]})
    >>> a["pads"], a.get("group", 1)
    ((0, 1, 0, 1), 1)
    """

    __slots__ = ("_data", "_hash")

    def __init__(self, data: Mapping[str, AttrValue] | Iterable[tuple[str, AttrValue]] = ()):
        items = data.items() if isinstance(data, Mapping) else data
        self._data: dict[str, AttrValue] = {k: _freeze_attr(v) for k, v in sorted(items)}
        self._hash: int | None = None

    def __getitem__(self, key: str) -> AttrValue:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple((k, _hashable(v)) for k, v in self._data.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        if set(self) != set(other):
            return False
        return all(_hashable(self[k]) == _hashable(other[k]) for k in self)

    def __repr__(self) -> str:
        return f"Attrs({self._data!r})"

    def with_(self, **changes: AttrValue) -> Attrs:
        """A copy with some attributes set (``None`` removes one)."""
        data = dict(self._data)
        for key, value in changes.items():
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
        return Attrs(data)


def _freeze_attr(value: AttrValue) -> AttrValue:
    if isinstance(value, np.ndarray):
        return frozen_array(value)
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list | tuple):
        return tuple(_freeze_attr(v) for v in value)
    return value


def _hashable(value: AttrValue) -> object:
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    try:
        hash(value)
    except TypeError:
        return id(value)
    return value


@dataclass(frozen=True, slots=True, eq=False)
class QuantParams:
    """Affine quantization of a tensor: ``real = scale * (q - zero_point)``.

    ``scale`` and ``zero_point`` are scalars (per tensor) or 1-D arrays along ``axis``
    (per channel). ``dtype`` is the integer storage type.
    """

    scale: np.ndarray
    zero_point: np.ndarray
    dtype: DType = DType.INT8
    axis: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", frozen_array(np.asarray(self.scale, np.float32)))
        object.__setattr__(self, "zero_point", frozen_array(np.asarray(self.zero_point, np.int32)))

    @property
    def per_channel(self) -> bool:
        """True when scales vary along `axis`."""
        return self.axis is not None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, QuantParams):
            return NotImplemented
        return (
            self.dtype == other.dtype
            and self.axis == other.axis
            and np.array_equal(self.scale, other.scale)
            and np.array_equal(self.zero_point, other.zero_point)
        )

    def __hash__(self) -> int:
        return hash((self.dtype, self.axis, self.scale.tobytes(), self.zero_point.tobytes()))


@dataclass(frozen=True, slots=True)
class Tensor:
    """A named value: static shape and element type (plus quantization once quantized).

    A dim of -1 is unknown; only tensors downstream of data-dependent ops (host-only
    post-processing such as NMS) may have one.
    """

    name: str
    shape: tuple[int, ...]
    dtype: DType = DType.FLOAT32
    quant: QuantParams | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", DType(self.dtype))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements (-1 if the shape is not static)."""
        return int(np.prod(self.shape, dtype=np.int64)) if self.is_static else -1

    @property
    def is_static(self) -> bool:
        return all(d >= 0 for d in self.shape)

    @property
    def size_bytes(self) -> int:
        return self.size * self.dtype.np.itemsize


@dataclass(frozen=True, slots=True)
class Node:
    """One operator application. Missing optional inputs are the empty string ``""``.

    >>> n = Node("c1", Op.CONV, ("x", "w", ""), ("y",), {"strides": [2, 2]})
    >>> n.attrs["strides"], n.op_type, n.present_inputs
    ((2, 2), 'Conv', ('x', 'w'))
    """

    name: str
    op: Op
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Attrs = field(default_factory=Attrs)
    #: ONNX op type of an `Op.OTHER` node (empty for known ops).
    onnx_type: str = ""
    #: ONNX domain ("" is the default domain; internal ops use `INTERNAL_DOMAIN`).
    domain: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", Op(self.op))
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        if not isinstance(self.attrs, Attrs):
            object.__setattr__(self, "attrs", Attrs(self.attrs))
        if self.op.is_internal and not self.domain:
            object.__setattr__(self, "domain", INTERNAL_DOMAIN)

    @property
    def op_type(self) -> str:
        """The ONNX op type (``onnx_type`` for `Op.OTHER`)."""
        return self.onnx_type if self.op is Op.OTHER else self.op.value

    @property
    def present_inputs(self) -> tuple[str, ...]:
        """Inputs without the empty placeholders of omitted optional inputs."""
        return tuple(i for i in self.inputs if i)

    def attr(self, key: str, default: AttrValue = None) -> AttrValue:
        return self.attrs.get(key, default)

    def with_(self, **changes: Any) -> Node:
        """A copy with fields replaced (``attrs`` may be a plain dict)."""
        return dataclasses.replace(self, **changes)


# ----------------------------------------------------------------------------- graph


def _readonly_map(data: Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(data, types.MappingProxyType):
        return data
    return types.MappingProxyType(dict(data))


@dataclass(frozen=True, eq=False)
class Graph:
    """An immutable dataflow graph; nodes are in topological order.

    ``tensors`` describes every value (graph inputs, constants, node outputs);
    ``constants`` holds the read-only arrays of the constant ones.
    """

    name: str
    nodes: tuple[Node, ...]
    tensors: Mapping[str, Tensor]
    constants: Mapping[str, np.ndarray]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    #: ONNX opset of the default domain the graph's node semantics follow.
    opset: int = 17

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "tensors", _readonly_map(self.tensors))
        consts = {k: frozen_array(v) for k, v in self.constants.items()}
        object.__setattr__(self, "constants", _readonly_map(consts))

    # cached lookups (a Graph never changes, so they never go stale)
    @functools.cached_property
    def _producers(self) -> dict[str, Node]:
        return {out: n for n in self.nodes for out in n.outputs if out}

    @functools.cached_property
    def _consumers(self) -> dict[str, tuple[Node, ...]]:
        acc: dict[str, list[Node]] = {}
        for n in self.nodes:
            for name in dict.fromkeys(n.present_inputs):
                acc.setdefault(name, []).append(n)
        return {k: tuple(v) for k, v in acc.items()}

    @functools.cached_property
    def _by_name(self) -> dict[str, Node]:
        return {n.name: n for n in self.nodes}

    def producer(self, tensor: str) -> Node | None:
        """The node that computes ``tensor`` (None for inputs and constants)."""
        return self._producers.get(tensor)

    def consumers(self, tensor: str) -> tuple[Node, ...]:
        """The nodes that read ``tensor``, in graph order (each node once)."""
        return self._consumers.get(tensor, ())

    def node(self, name: str) -> Node:
        """The node called ``name`` (KeyError if there is none)."""
        return self._by_name[name]

    def has_node(self, name: str) -> bool:
        return name in self._by_name

    def tensor(self, name: str) -> Tensor:
        return self.tensors[name]

    def shape(self, name: str) -> tuple[int, ...]:
        return self.tensors[name].shape

    def is_constant(self, name: str) -> bool:
        return name in self.constants

    def const(self, name: str) -> np.ndarray | None:
        """The array of a constant tensor, or None if ``name`` is not constant."""
        return self.constants.get(name)

    def is_output(self, name: str) -> bool:
        return name in self.outputs

    def with_nodes(self, nodes: Iterable[Node]) -> Graph:
        """The same graph with another node list (tensors/constants unchanged)."""
        return dataclasses.replace(self, nodes=tuple(nodes))

    def edit(self) -> GraphEditor:
        """A `GraphEditor` that builds a modified copy of this graph."""
        return GraphEditor(self)

    def ops(self) -> dict[str, int]:
        """Op type -> count, for summaries and tests."""
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.op_type] = counts.get(n.op_type, 0) + 1
        return counts


def is_depthwise(node: Node, graph: Graph) -> bool:
    """True for a Conv whose every group has one input and one output channel (a DWPU op;
    a channel multiplier above 1 is a grouped conv on the MVM)."""
    if node.op is not Op.CONV:
        return False
    group = int(node.attr("group", 1))
    in_channels = graph.shape(node.inputs[0])[1]
    return group > 1 and group == in_channels == graph.shape(node.outputs[0])[1]


# ----------------------------------------------------------------------------- editing


class GraphEditor:
    """Collects edits of a graph and builds the new, topologically sorted `Graph`.

    >>> g = Graph("g", (Node("r", Op.RELU, ("x",), ("y",)),),
    ...           {"x": Tensor("x", (2,)), "y": Tensor("y", (2,))}, {}, ("x",), ("y",))
    >>> ed = g.edit()
    >>> ed.remove(g.node("r"))
    >>> ed.replace_uses("y", "x")
    >>> h = ed.build()
    >>> h.nodes, h.outputs
    ((), ('x',))
    """

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.nodes: dict[str, Node] = {n.name: n for n in graph.nodes}
        self.tensors: dict[str, Tensor] = dict(graph.tensors)
        self.constants: dict[str, np.ndarray] = dict(graph.constants)
        self.inputs: list[str] = list(graph.inputs)
        self.outputs: list[str] = list(graph.outputs)
        self._renames: dict[str, str] = {}
        self._order = {n.name: i for i, n in enumerate(graph.nodes)}
        self._counter = itertools.count()
        self._names_used: set[str] = set(self.tensors) | set(self.nodes)

    def unique_name(self, hint: str) -> str:
        """A tensor/node name not used in the graph, derived from ``hint``."""
        base = re.sub(r"[^A-Za-z0-9_./:-]", "_", hint) or "t"
        name = base
        while name in self._names_used:
            name = f"{base}_{next(self._counter)}"
        self._names_used.add(name)
        return name

    def add(self, node: Node) -> Node:
        """Add a node (its position is found by the final topological sort)."""
        assert node.name not in self.nodes, f"duplicate node name {node.name}"
        self._names_used.add(node.name)
        self._order.setdefault(node.name, len(self._order))
        self.nodes[node.name] = node
        return node

    def remove(self, node: Node | str) -> None:
        name = node if isinstance(node, str) else node.name
        del self.nodes[name]

    def replace(self, old: Node | str, new: Node) -> None:
        """Put ``new`` in place of ``old`` (keeps its position among equals)."""
        old_name = old if isinstance(old, str) else old.name
        position = self._order.get(old_name, len(self._order))
        del self.nodes[old_name]
        self._order[new.name] = position
        self._names_used.add(new.name)
        self.nodes[new.name] = new

    def add_tensor(self, tensor: Tensor) -> str:
        self._names_used.add(tensor.name)
        self.tensors[tensor.name] = tensor
        return tensor.name

    def new_tensor(
        self,
        hint: str,
        shape: tuple[int, ...],
        dtype: DType = DType.FLOAT32,
        quant: QuantParams | None = None,
    ) -> str:
        """Declare a fresh tensor named after ``hint``; returns its name."""
        return self.add_tensor(Tensor(self.unique_name(hint), shape, dtype, quant))

    def add_constant(self, hint: str, array: np.ndarray, *, exact_name: bool = False) -> str:
        """Add a constant tensor; returns its (unique) name."""
        arr = frozen_array(np.asarray(array))
        name = hint if exact_name else self.unique_name(hint)
        self._names_used.add(name)
        self.constants[name] = arr
        self.tensors[name] = Tensor(name, arr.shape, DType.of(arr))
        return name

    def set_constant(self, name: str, array: np.ndarray) -> None:
        """Turn ``name`` into a constant with value ``array`` (its producer must be removed)."""
        arr = frozen_array(np.asarray(array))
        self.constants[name] = arr
        old = self.tensors.get(name)
        self.tensors[name] = Tensor(name, arr.shape, DType.of(arr), old.quant if old else None)

    def replace_uses(self, old: str, new: str) -> None:
        """Make every consumer of tensor ``old`` (and the graph outputs) read ``new``."""
        self._renames[old] = new
        for name, node in list(self.nodes.items()):
            if old in node.inputs:
                ins = tuple(new if i == old else i for i in node.inputs)
                self.nodes[name] = node.with_(inputs=ins)
        self.outputs = [new if o == old else o for o in self.outputs]

    def build(self, *, prune: bool = True) -> Graph:
        """The edited graph, topologically sorted; with ``prune``, dead nodes and unused
        tensors/constants are dropped (graph inputs always stay)."""
        nodes = _toposort(list(self.nodes.values()), self._order, self.graph.name)
        graph = Graph(
            name=self.graph.name,
            nodes=tuple(nodes),
            tensors=self.tensors,
            constants=self.constants,
            inputs=tuple(self.inputs),
            outputs=tuple(self.outputs),
            opset=self.graph.opset,
        )
        return prune_graph(graph) if prune else graph


def _toposort(nodes: list[Node], order: Mapping[str, int], graph_name: str) -> list[Node]:
    """Stable Kahn sort: among ready nodes, the earlier original position goes first."""
    produced_by: dict[str, str] = {}
    for n in nodes:
        for out in n.outputs:
            if out:
                produced_by[out] = n.name
    deps: dict[str, set[str]] = {}
    users: dict[str, list[str]] = {n.name: [] for n in nodes}
    for n in nodes:
        d = {produced_by[i] for i in n.present_inputs if i in produced_by} - {n.name}
        deps[n.name] = d
        for p in d:
            users[p].append(n.name)
    by_name = {n.name: n for n in nodes}
    key = {n.name: (order.get(n.name, len(order)), n.name) for n in nodes}
    ready = [key[name] for name, d in deps.items() if not d]
    heapq.heapify(ready)
    out: list[Node] = []
    while ready:
        _, name = heapq.heappop(ready)
        out.append(by_name[name])
        for u in users[name]:
            deps[u].discard(name)
            if not deps[u]:
                heapq.heappush(ready, key[u])
    assert len(out) == len(nodes), f"graph {graph_name} has a cycle"
    return out


def prune_graph(graph: Graph) -> Graph:
    """Drop nodes whose outputs nobody uses, and tensors/constants no node or output uses."""
    live: set[str] = set(graph.outputs)
    kept: list[Node] = []
    for n in reversed(graph.nodes):
        if any(o in live for o in n.outputs if o):
            kept.append(n)
            live.update(n.present_inputs)
    kept.reverse()
    used = live | set(graph.inputs) | {o for n in kept for o in n.outputs if o}
    return Graph(
        name=graph.name,
        nodes=tuple(kept),
        tensors={k: v for k, v in graph.tensors.items() if k in used},
        constants={k: v for k, v in graph.constants.items() if k in used},
        inputs=graph.inputs,
        outputs=graph.outputs,
        opset=graph.opset,
    )


def topological_sort(graph: Graph) -> Graph:
    """The same graph with its nodes in a (stable) topological order."""
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    return graph.with_nodes(_toposort(list(graph.nodes), order, graph.name))


# ----------------------------------------------------------------------------- checks

#: op -> (min inputs, max inputs, min outputs, max outputs) counted with "" placeholders.
_ARITY: dict[Op, tuple[int, int, int, int]] = {
    Op.CONV: (2, 3, 1, 1),
    Op.CONV_TRANSPOSE: (2, 3, 1, 1),
    Op.GEMM: (2, 3, 1, 1),
    Op.MATMUL: (2, 2, 1, 1),
    Op.BATCH_NORM: (5, 5, 1, 3),
    Op.CLIP: (1, 3, 1, 1),
    Op.RESIZE: (1, 4, 1, 1),
    Op.UPSAMPLE: (2, 2, 1, 1),
    Op.CONCAT: (1, 1 << 16, 1, 1),
    Op.SPLIT: (1, 2, 1, 1 << 16),
    Op.SLICE: (3, 5, 1, 1),
    Op.RESHAPE: (2, 2, 1, 1),
    Op.PAD: (2, 4, 1, 1),
    Op.SQUEEZE: (1, 2, 1, 1),
    Op.UNSQUEEZE: (2, 2, 1, 1),
    Op.MAX_POOL: (1, 1, 1, 2),
    Op.REDUCE_MEAN: (1, 2, 1, 1),
    Op.REDUCE_MAX: (1, 2, 1, 1),
    Op.REDUCE_SUM: (1, 2, 1, 1),
    Op.WHERE: (3, 3, 1, 1),
    Op.TOP_K: (2, 2, 2, 2),
    Op.LAYER_NORM: (2, 3, 1, 3),
    Op.GATHER: (2, 2, 1, 1),
    Op.EXPAND: (2, 2, 1, 1),
    Op.TILE: (2, 2, 1, 1),
    Op.EINSUM: (1, 1 << 16, 1, 1),
    Op.MASKED_SOFTMAX: (2, 2, 1, 1),
}
for _op in BINARY_OPS:
    _ARITY[_op] = (2, 2, 1, 1)
for _op in (Op.MIN, Op.MAX):
    _ARITY[_op] = (1, 1 << 16, 1, 1)
for _op in LUT_OPS | {
    Op.RELU,
    Op.LEAKY_RELU,
    Op.NEG,
    Op.SOFTMAX,
    Op.AVERAGE_POOL,
    Op.GLOBAL_AVERAGE_POOL,
    Op.GLOBAL_MAX_POOL,
    Op.FLATTEN,
    Op.TRANSPOSE,
    Op.IDENTITY,
    Op.CAST,
    Op.SHAPE,
}:
    _ARITY[_op] = (1, 1, 1, 1)


def _downstream_of_data_dependent(graph: Graph) -> set[str]:
    """Tensors whose shape may depend on data (outputs of NMS-like ops and after)."""
    dyn: set[str] = set()
    for n in graph.nodes:
        if n.op in DATA_DEPENDENT_OPS or any(i in dyn for i in n.present_inputs):
            dyn.update(o for o in n.outputs if o)
    return dyn


def verify(graph: Graph) -> None:
    """Check the IR invariants; a failure is a compiler bug (AssertionError).

    Checked: unique node names; single assignment of tensors; topological order; every
    referenced tensor declared with a known shape, static unless downstream of a
    data-dependent op; constants read-only and matching their declaration; op arity and a
    few op-specific shape rules (Conv weights vs groups, Concat axis, ...).
    """
    assert graph.name, "graph has no name"
    names = [n.name for n in graph.nodes]
    assert len(set(names)) == len(names), (
        f"duplicate node names: {sorted({x for x in names if names.count(x) > 1})}"
    )
    available: set[str] = set(graph.inputs) | set(graph.constants)
    assert not set(graph.inputs) & set(graph.constants), "a graph input is also a constant"
    dynamic_ok = _downstream_of_data_dependent(graph)
    for name, arr in graph.constants.items():
        t = graph.tensors.get(name)
        assert t is not None, f"constant {name} has no tensor entry"
        assert not arr.flags.writeable, f"constant {name} is writeable"
        assert t.shape == arr.shape, f"constant {name}: shape {arr.shape} != declared {t.shape}"
        assert t.dtype == DType.of(arr), f"constant {name}: dtype {arr.dtype} != {t.dtype}"
    for name in graph.inputs:
        assert name in graph.tensors, f"graph input {name} has no tensor entry"
    for t_name, t in graph.tensors.items():
        assert t.name == t_name, f"tensor entry {t_name} is named {t.name}"
    for node in graph.nodes:
        where = f"node {node.name} ({node.op_type})"
        assert isinstance(node.op, Op), f"{where}: op is not an Op"
        if node.op is Op.OTHER:
            assert node.onnx_type, f"{where}: Op.OTHER without onnx_type"
        for i in node.present_inputs:
            assert i in available, f"{where}: input {i} is not produced before use"
        for o in node.outputs:
            if not o:
                continue
            assert o not in available, f"{where}: output {o} is assigned twice"
            available.add(o)
        for t_name in (*node.present_inputs, *(o for o in node.outputs if o)):
            t = graph.tensors.get(t_name)
            assert t is not None, f"{where}: tensor {t_name} is not declared"
            assert t.is_static or t_name in dynamic_ok, (
                f"{where}: tensor {t_name} has non-static shape {t.shape}"
            )
        arity = _ARITY.get(node.op)
        if arity is not None:
            lo_in, hi_in, lo_out, hi_out = arity
            assert lo_in <= len(node.inputs) <= hi_in, f"{where}: {len(node.inputs)} inputs"
            assert lo_out <= len(node.outputs) <= hi_out, f"{where}: {len(node.outputs)} outputs"
            assert all(node.inputs[:lo_in]), f"{where}: a required input is empty"
        _verify_op(graph, node, where)
    for o in graph.outputs:
        assert o in available, f"graph output {o} is never produced"
        assert o in graph.tensors, f"graph output {o} has no tensor entry"


def _verify_op(graph: Graph, node: Node, where: str) -> None:
    if node.op in (Op.CONV, Op.CONV_TRANSPOSE):
        x, w = graph.shape(node.inputs[0]), graph.shape(node.inputs[1])
        group = int(node.attr("group", 1))
        assert len(x) == len(w) >= 3, f"{where}: input rank {len(x)} vs weight rank {len(w)}"
        assert group >= 1, f"{where}: group {group}"
        if node.op is Op.CONV:
            assert x[1] == w[1] * group, f"{where}: Cin {x[1]} != {w[1]}*group {group}"
            assert w[0] % group == 0, f"{where}: Cout {w[0]} not divisible by group {group}"
        else:
            assert x[1] == w[0], f"{where}: Cin {x[1]} != weight dim0 {w[0]}"
        if len(node.inputs) > 2 and node.inputs[2]:
            out_channels = w[0] if node.op is Op.CONV else w[1] * group
            assert graph.shape(node.inputs[2]) == (out_channels,), f"{where}: bias shape"
    elif node.op is Op.CONCAT:
        rank = len(graph.shape(node.outputs[0]))
        axis = int(node.attr("axis", 0))
        assert -rank <= axis < rank, f"{where}: axis {axis} out of range for rank {rank}"
        ax = axis % rank
        total = sum(graph.shape(i)[ax] for i in node.present_inputs)
        if graph.tensor(node.outputs[0]).is_static:
            assert total == graph.shape(node.outputs[0])[ax], f"{where}: concat size"
    elif node.op is Op.BATCH_NORM:
        c = graph.shape(node.inputs[0])[1]
        for i in node.inputs[1:]:
            assert graph.shape(i) == (c,), f"{where}: parameter {i} is not ({c},)"
    elif node.op in (Op.RELU, Op.SIGMOID, Op.SILU, Op.GELU, Op.HARD_SWISH, Op.HARD_SIGMOID):
        assert graph.shape(node.inputs[0]) == graph.shape(node.outputs[0]), (
            f"{where}: element-wise op changes the shape"
        )
    elif node.op in BINARY_OPS - {Op.PRELU}:
        shapes = [graph.shape(i) for i in node.inputs]
        out = graph.shape(node.outputs[0])
        if all(d >= 0 for sh in (*shapes, out) for d in sh):
            try:
                expected = tuple(np.broadcast_shapes(*shapes))
            except ValueError:
                raise AssertionError(f"{where}: operands {shapes} do not broadcast") from None
            assert expected == out, f"{where}: output {out} != broadcast {expected}"
    elif node.op is Op.TRANSPOSE:
        rank = len(graph.shape(node.inputs[0]))
        perm = tuple(node.attr("perm", tuple(reversed(range(rank)))))
        assert sorted(perm) == list(range(rank)), f"{where}: perm {perm} for rank {rank}"
        x = graph.shape(node.inputs[0])
        assert tuple(x[p] for p in perm) == graph.shape(node.outputs[0]), f"{where}: shape"
    elif node.op in (Op.RESHAPE, Op.FLATTEN, Op.SQUEEZE, Op.UNSQUEEZE):
        x, y = graph.tensor(node.inputs[0]), graph.tensor(node.outputs[0])
        if x.is_static and y.is_static:
            assert x.size == y.size, f"{where}: {x.shape} -> {y.shape} changes the size"
    elif node.op in (Op.SOFTMAX, Op.MASKED_SOFTMAX, Op.LAYER_NORM):
        rank = len(graph.shape(node.inputs[0]))
        axis = int(node.attr("axis", -1))
        assert -rank <= axis < rank, f"{where}: axis {axis} for rank {rank}"
        if node.op is Op.MASKED_SOFTMAX:
            x, keep = graph.shape(node.inputs[0]), graph.shape(node.inputs[1])
            assert np.broadcast_shapes(x, keep) == x, f"{where}: mask {keep} for {x}"
            assert graph.shape(node.outputs[0]) == x, f"{where}: softmax changes the shape"
        if node.op is Op.LAYER_NORM:
            x = graph.shape(node.inputs[0])
            assert graph.shape(node.outputs[0]) == x, f"{where}: LayerNorm changes the shape"
    elif node.op is Op.GEMM:
        a, b = graph.shape(node.inputs[0]), graph.shape(node.inputs[1])
        assert len(a) == 2 and len(b) == 2, f"{where}: Gemm operands must be 2-D"
        k_a = a[0] if node.attr("transA", 0) else a[1]
        k_b = b[1] if node.attr("transB", 0) else b[0]
        assert k_a == k_b, f"{where}: inner dims {k_a} != {k_b}"
    elif node.op is Op.MATMUL:
        a, b = graph.shape(node.inputs[0]), graph.shape(node.inputs[1])
        if len(a) >= 1 and len(b) >= 2 and a[-1] >= 0:
            assert a[-1] == b[-2], f"{where}: inner dims {a[-1]} != {b[-2]}"


# ----------------------------------------------------------------------------- dump


def _fmt_shape(shape: tuple[int, ...]) -> str:
    return "[" + ",".join("?" if d < 0 else str(d) for d in shape) + "]"


def _fmt_attr(value: AttrValue) -> str:
    if isinstance(value, np.ndarray):
        if value.size <= 8:
            return np.array2string(value.reshape(-1), separator=",")
        return f"<{value.dtype}{_fmt_shape(value.shape)}>"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return "(" + ",".join(_fmt_attr(v) for v in value) + ")"
    if isinstance(value, int | str):
        return str(value)
    return f"<{type(value).__name__}>"


def _fmt_quant(q: QuantParams | None) -> str:
    if q is None:
        return ""
    if q.per_channel:
        return f"{{q per-channel axis {q.axis}}}"
    return f"{{q s={float(q.scale.reshape(-1)[0]):.4g} z={int(q.zero_point.reshape(-1)[0])}}}"


def dump(graph: Graph) -> str:
    """A readable text form: a header, one line per node (inputs with shapes, non-float
    types, constants marked ``=const``, quantization ``{q s=.. z=..}``), the outputs.

    Example line: ``  conv1: Conv(x[1,3,8,8], w[4,3,3,3]=const) -> y[1,4,8,8] {pads=(1,1,1,1)}``
    """

    def ref(name: str) -> str:
        if not name:
            return "_"
        t = graph.tensors.get(name)
        shape = _fmt_shape(t.shape) if t else "[??]"
        dtype = "" if t is None or t.dtype is DType.FLOAT32 else f":{t.dtype}"
        const = "=const" if name in graph.constants else ""
        return f"{name}{shape}{dtype}{const}{_fmt_quant(t.quant if t else None)}"

    ins = ", ".join(ref(i) for i in graph.inputs)
    lines = [f"graph {graph.name} (opset {graph.opset}) inputs: {ins}"]
    for n in graph.nodes:
        attrs = " ".join(f"{k}={_fmt_attr(v)}" for k, v in n.attrs.items())
        attrs = f" {{{attrs}}}" if attrs else ""
        outs = ", ".join(ref(o) for o in n.outputs)
        lines.append(
            f"  {n.name}: {n.op_type}({', '.join(ref(i) for i in n.inputs)}) -> {outs}{attrs}"
        )
    lines.append("outputs: " + ", ".join(ref(o) for o in graph.outputs))
    return "\n".join(lines)


__all__ = [
    "AIPU_OPS",
    "BINARY_OPS",
    "DATA_DEPENDENT_OPS",
    "DPU_OPS",
    "DWPU_OPS",
    "INTERNAL_DOMAIN",
    "INTERNAL_OPS",
    "LAYOUT_OPS",
    "LUT_OPS",
    "MVM_OPS",
    "PLACE_PARTS_ATTR",
    "SHAPE_OPS",
    "SOURCE_OP_ATTR",
    "Attrs",
    "DType",
    "Graph",
    "GraphEditor",
    "Node",
    "Op",
    "QuantParams",
    "Tensor",
    "dump",
    "frozen_array",
    "is_depthwise",
    "prune_graph",
    "topological_sort",
    "verify",
]
