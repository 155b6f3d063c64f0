"""Pass 1, import: ONNX file -> checked, statically shaped `Graph` (docs/architecture.md §5).

Steps: load (external data only from inside the model's folder), ``onnx.checker``, opset
conversion to at least ``onnx_opset_version``, Constant nodes to constants, dynamic input dims
fixed from the given input shape, shape inference, and folding of static shape arithmetic
(Shape, Gather, Range, Expand, ConstantOfShape, Cast ... on constants) until every tensor
has a static shape.

>>> from aipusim.compiler.importer import import_model
>>> graph = import_model("model.onnx", input_shape=(1, 3, 224, 224))  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference, version_converter

from aipusim.base.errors import OnnxImportError, UnsupportedOperatorError
from aipusim.base.mapped import mapped_array
from aipusim.compiler.ir import (
    DATA_DEPENDENT_OPS,
    DType,
    Graph,
    Node,
    Op,
    QuantParams,
    Tensor,
    prune_graph,
)

log = logging.getLogger(__name__)

#: Oldest opset the importer accepts: onnx.version_converter upgrades opsets 7-10 (older
#: models need adapters the converter lacks, e.g. Upsample's width/height attributes of opset 1).
MIN_SOURCE_OPSET = 7
#: Opsets below this one resize with asymmetric coordinates (Upsample-7/9, Resize-10), which
#: the converter's Resize adapter does not carry over (see `_keep_old_resize_semantics`).
_ASYMMETRIC_RESIZE_BEFORE = 11
#: Constants larger than this many elements are not produced by folding (guards memory).
MAX_FOLD_ELEMENTS = 1 << 26
#: Ops never folded even with constant inputs (non-deterministic or with sub-graphs).
_NO_FOLD = frozenset(
    {
        "RandomNormal",
        "RandomUniform",
        "RandomNormalLike",
        "RandomUniformLike",
        "Multinomial",
        "Bernoulli",
        "If",
        "Loop",
        "Scan",
        "NonMaxSuppression",
    }
)


class Layout(StrEnum):
    """Memory layout of a 4-D image tensor, as ``--input-data-layout`` names it."""

    NCHW = "NCHW"
    NHWC = "NHWC"


# ----------------------------------------------------------------------------- loading


def _external_locations(model: onnx.ModelProto) -> list[tuple[str, onnx.TensorProto]]:
    from onnx.external_data_helper import _get_all_tensors

    out = []
    for t in _get_all_tensors(model):
        if t.data_location == TensorProto.EXTERNAL:
            info = {e.key: e.value for e in t.external_data}
            out.append((info.get("location", ""), t))
    return out


def external_files(model: onnx.ModelProto) -> list[str]:
    """The external-data files ``model`` reads, relative to its folder, each once."""
    return list(dict.fromkeys(location for location, _ in _external_locations(model)))


def _check_external_data(model: onnx.ModelProto, base: Path, path: Path) -> None:
    """Every external-data file must be a regular file inside ``base`` and long enough."""
    base_resolved = base.resolve()
    for location, tensor in _external_locations(model):
        target = (base / location).resolve()
        if os.path.isabs(location) or not target.is_relative_to(base_resolved):
            raise OnnxImportError(
                f"external data of tensor `{tensor.name}` in `{path}` must stay inside the "
                f"model's folder `{base}`, not `{location}`"
            )
        if not target.is_file():
            raise OnnxImportError(
                f"external data file `{location}` of tensor `{tensor.name}` in `{path}` "
                "does not exist"
            )
        info = {e.key: e.value for e in tensor.external_data}
        offset = int(info.get("offset", 0) or 0)
        length = info.get("length")
        size = target.stat().st_size
        if length is not None and offset + int(length) > size:
            raise OnnxImportError(
                f"external data of tensor `{tensor.name}` needs bytes {offset}..."
                f"{offset + int(length)} of `{location}`, which has only {size}"
            )


def load_model(path: str | os.PathLike[str]) -> onnx.ModelProto:
    """Read and check an ONNX file (external data confined to its folder).

    Raises `OnnxImportError` naming the file for: a missing path, a non-ONNX file, external
    data outside the model folder, a checker failure.
    """
    return read_model(path)[0]


#: The last whole-model file (no external data) `read_model` read and checked in this
#: process: ``(its identity, its bytes)``. A sweep worker compiles the same file point
#: after point; while the file is the same (`_identity`), it is neither read nor checked
#: again, only parsed (each compile gets a proto of its own: the import changes it).
_last_read: tuple[tuple[object, ...], bytes] | None = None


def file_identity(p: Path) -> tuple[object, ...] | None:
    """What tells that a file is unchanged: its resolved path, device, inode, size and
    modification time in nanoseconds (None when it cannot be read)."""
    try:
        st = p.stat()
        return (str(p.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        return None


def read_model(
    path: str | os.PathLike[str], *, load_external: bool = True
) -> tuple[onnx.ModelProto, bool]:
    """`load_model`, and whether the file keeps tensors as external data (a copy of the
    file alone is then not the whole model).

    ``load_external=False`` reads in only the external tensors of at most
    `_LIGHT_INIT_ELEMENTS` elements (shape constants and the like, which inference and
    folding read); the larger ones stay in their file, for `import_model` (given the
    model's folder as ``external_dir``) to map rather than read: llama_1b's 4.95 GB of
    weights are then never all in memory at once."""
    global _last_read
    p = Path(path)
    if not p.is_file():
        raise OnnxImportError(f"model `{p}` must be an ONNX file, but it is not a file")
    identity = file_identity(p)
    if identity is not None and _last_read is not None and _last_read[0] == identity:
        # the very file read and checked before: its bytes parse to a fresh proto
        return onnx.load_model_from_string(_last_read[1]), False
    try:
        data = p.read_bytes()
        model = onnx.load_model_from_string(data)
    except Exception as exc:
        raise OnnxImportError(f"model `{p}` is not an ONNX model ({_first_line(exc)})") from None
    if not model.graph.node and not model.graph.output:
        raise OnnxImportError(f"model `{p}` is not an ONNX model (no graph)")
    external = bool(_external_locations(model))
    if external:
        _check_external_data(model, p.parent, p)
        # checked before its data is read in: a model with gigabytes of external data
        # (llama_1b) is over protobuf's 2 GB once loaded and cannot be serialized for the
        # checker; its path form reads only the graph and checks the data files beside it
        check_model(model, str(p), path=p)
        try:
            for _, tensor in _external_locations(model):
                if load_external or _elements(tensor) <= _LIGHT_INIT_ELEMENTS:
                    _read_external(tensor, p.parent)
        except Exception as exc:
            raise OnnxImportError(
                f"external data of `{p}` cannot be read ({_first_line(exc)})"
            ) from None
    else:
        # a file that is the whole model is checked on the bytes read above: the checker
        # parses them in C++ instead of having the loaded proto serialized again for it, or
        # reading the file again (its path form reads through a stream: 2-3x slower on
        # ResNet-50's 100 MB)
        check_model(model, str(p), data=data)
        if identity is not None and identity == file_identity(p):  # (not rewritten meanwhile)
            _last_read = (identity, data)
    return model, external


def _elements(tensor: onnx.TensorProto) -> int:
    return int(np.prod(tensor.dims, dtype=np.int64))


def _read_external(tensor: onnx.TensorProto, base: Path) -> None:
    """Move ``tensor``'s external data into the proto."""
    from onnx.external_data_helper import load_external_data_for_tensor

    load_external_data_for_tensor(tensor, str(base))
    tensor.data_location = TensorProto.DEFAULT
    del tensor.external_data[:]


#: ONNX element types whose raw little-endian bytes are the numpy array's bytes (a tensor
#: of another type is read through ``numpy_helper`` instead of mapped).
_MAPPABLE_TYPES = frozenset(
    {
        TensorProto.FLOAT,
        TensorProto.DOUBLE,
        TensorProto.FLOAT16,
        TensorProto.INT8,
        TensorProto.UINT8,
        TensorProto.INT16,
        TensorProto.UINT16,
        TensorProto.INT32,
        TensorProto.UINT32,
        TensorProto.INT64,
        TensorProto.UINT64,
        TensorProto.BOOL,
    }
)


def tensor_array(tensor: onnx.TensorProto, external_dir: Path | None = None) -> np.ndarray:
    """The value of an initializer. Data still in an external file (a model read with
    ``load_external=False``) is mapped from the file in ``external_dir`` (read-only, see
    `aipusim.base.mapped`), not read."""
    if tensor.data_location != TensorProto.EXTERNAL:
        return numpy_helper.to_array(tensor)
    assert external_dir is not None, f"tensor {tensor.name} is external: its folder is needed"
    if tensor.data_type not in _MAPPABLE_TYPES:
        return numpy_helper.to_array(tensor, base_dir=str(external_dir))
    info = {e.key: e.value for e in tensor.external_data}
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type))
    try:
        return mapped_array(
            external_dir / info["location"], int(info.get("offset") or 0), dtype, tensor.dims
        )
    except (OSError, ValueError) as exc:
        raise OnnxImportError(
            f"external data of tensor `{tensor.name}` in `{external_dir}` cannot be read "
            f"({_first_line(exc)})"
        ) from None


def check_model(
    model: onnx.ModelProto, what: str, data: bytes | None = None, path: Path | None = None
) -> None:
    """Run ``onnx.checker`` (on ``data``, the serialized ``model``, or on the file
    ``path``, when given); a failure becomes one `OnnxImportError` line."""
    try:
        onnx.checker.check_model(str(path) if path is not None else model if data is None else data)
    except (onnx.checker.ValidationError, ValueError) as exc:
        raise OnnxImportError(
            f"model `{what}` fails the ONNX checker: {_first_line(exc)}"
        ) from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0] if lines else text


def model_opset(model: onnx.ModelProto) -> int:
    """The opset version of the default ONNX domain."""
    for op in model.opset_import:
        if op.domain in ("", "ai.onnx"):
            return int(op.version)
    return 1


def convert_opset(model: onnx.ModelProto, target: int, what: str) -> onnx.ModelProto:
    """Bring ``model`` to opset >= ``target`` (never down) with ``onnx.version_converter``.

    The compile log says which opset a model came from. A conversion that fails names, in
    one line, the first node whose op the converter cannot upgrade (`_blocking_node`).
    Resize nodes made from opset < 11 Upsample/Resize keep their asymmetric coordinates.
    """
    version = model_opset(model)
    if version < MIN_SOURCE_OPSET:
        raise OnnxImportError(
            f"opset of model `{what}` must be >= {MIN_SOURCE_OPSET}, not {version}"
        )
    if version >= target:
        return model
    resizes = [n.op_type for n in model.graph.node if n.op_type in ("Upsample", "Resize")]
    try:
        converted = version_converter.convert_version(model, target)
    except Exception as exc:
        blocker = _blocking_node(model, target)
        where = f": node {blocker} cannot be upgraded" if blocker else ""
        raise OnnxImportError(
            f"model `{what}` cannot be converted from opset {version} to {target}{where} "
            f"({_converter_reason(exc)})"
        ) from None
    if version < _ASYMMETRIC_RESIZE_BEFORE and resizes:
        _keep_old_resize_semantics(converted, len(resizes))
    log.info(
        "model `%s` has opset %d: upgraded to opset %d with onnx.version_converter",
        what,
        version,
        target,
    )
    return converted


def _converter_reason(exc: BaseException) -> str:
    """The converter's message without its C++ source location and assertion text:
    ``/x/transformers.h:35: operator(): Assertion `...` failed: Attribute spatial must have
    value 1`` -> ``Attribute spatial must have value 1``."""
    line = _first_line(exc)
    _, sep, reason = line.rpartition("failed: ")
    return reason.strip() if sep and reason.strip() else line


def _keep_old_resize_semantics(model: onnx.ModelProto, count: int) -> None:
    """Upsample (opset 7/9) and Resize-10 map output pixel i to input i / scale (asymmetric,
    nearest rounds down). The converter's Resize adapter leaves the opset-11 defaults
    (half_pixel, round_prefer_floor), which silently changes linear resizing: set the old
    semantics explicitly on the Resize nodes that came from them (the converter keeps node
    order, and no other op becomes a Resize)."""
    nodes = [n for n in model.graph.node if n.op_type == "Resize"]
    assert len(nodes) == count, "the converter changed the number of Resize nodes"
    for node in nodes:
        for attr in list(node.attribute):
            if attr.name in ("coordinate_transformation_mode", "nearest_mode"):
                node.attribute.remove(attr)
        node.attribute.extend(
            [
                helper.make_attribute("coordinate_transformation_mode", "asymmetric"),
                helper.make_attribute("nearest_mode", "floor"),
            ]
        )
    log.info("kept the asymmetric coordinates of %d opset < 11 Upsample/Resize node(s)", count)


def _blocking_node(model: onnx.ModelProto, target: int) -> str | None:
    """```name` (OpType)`` of the first node that onnx.version_converter cannot upgrade on
    its own (converted as a one-node model), or None if each one alone converts."""
    shapes = _value_infos(model)
    opsets = list(model.opset_import)
    tried: set[tuple[str, str]] = set()
    for i, node in enumerate(model.graph.node):
        key = (node.domain, node.op_type)
        if key in tried:
            continue
        tried.add(key)
        ins = [shapes.get(x) or helper.make_tensor_value_info(x, TensorProto.FLOAT, None)
               for x in node.input if x]  # fmt: skip
        outs = [helper.make_tensor_value_info(x, TensorProto.FLOAT, None) for x in node.output if x]
        single = helper.make_model(
            helper.make_graph([node], "probe", ins, outs), opset_imports=opsets
        )
        single.ir_version = model.ir_version
        try:
            version_converter.convert_version(single, target)
        except Exception:
            return f"`{node.name or f'{node.op_type}_{i}'}` ({node.op_type})"
    return None


def _value_infos(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    """Typed value infos of every graph tensor (inferred where possible; never fails)."""
    g = model.graph
    try:
        g = shape_inference.infer_shapes(model).graph
    except Exception:  # the probe works without shapes too
        log.debug("no shape inference for the conversion probe")
    out = {vi.name: vi for vi in [*g.input, *g.value_info, *g.output]}
    for t in model.graph.initializer:
        out[t.name] = helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
    return out


# ----------------------------------------------------------------------------- shapes

_DIM_LETTERS = {Layout.NCHW: "NCHW", Layout.NHWC: "NHWC"}


def _dims(vi: onnx.ValueInfoProto) -> list[int | str | None] | None:
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return None
    out: list[int | str | None] = []
    for d in tt.shape.dim:
        if d.HasField("dim_value") and d.dim_value >= 0:
            out.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            out.append(d.dim_param)
        else:
            out.append(None)
    return out


def _dim_label(index: int, rank: int, layout: Layout, dim: int | str | None) -> str:
    letter = f" ({_DIM_LETTERS[layout][index]})" if rank == 4 else ""
    param = f" `{dim}`" if isinstance(dim, str) else ""
    return f"dim {index}{letter}{param}"


def _fit_input_shape(
    name: str, dims: list[int | str | None], given: tuple[int, ...], layout: Layout
) -> tuple[int, ...]:
    """Merge the model's dims with the user's shape; the user's shape is in ``layout``, and
    if the model's static dims only agree with it transposed NHWC<->NCHW, it is transposed."""
    if any(int(d) <= 0 for d in given):
        bad = next(i for i, d in enumerate(given) if int(d) <= 0)
        model_dim = dims[bad] if bad < len(dims) else None
        label = _dim_label(bad, len(given), layout, model_dim)
        raise OnnxImportError(
            f"--input-shape dims must be positive integers, not {given[bad]} "
            f"(input `{name}` {label})"
        )
    if len(given) != len(dims):
        raise OnnxImportError(
            f"--input-shape {','.join(map(str, given))} must have {len(dims)} dims for input "
            f"`{name}` (model shape {_show(dims)}), not {len(given)}"
        )
    candidates = [given]
    if len(given) == 4:
        perm = (0, 2, 3, 1) if layout is Layout.NCHW else (0, 3, 1, 2)
        candidates.append(tuple(given[p] for p in perm))
    for cand in candidates:
        if all(not isinstance(d, int) or d == c for d, c in zip(dims, cand, strict=True)):
            if cand is not given:
                log.info("input %s: --input-shape applied in the model's layout %s", name, cand)
            return cand
    bad = next(
        i for i, (d, c) in enumerate(zip(dims, given, strict=True)) if isinstance(d, int) and d != c
    )
    raise OnnxImportError(
        f"--input-shape {','.join(map(str, given))} does not fit input `{name}` of shape "
        f"{_show(dims)}: {_dim_label(bad, len(dims), layout, dims[bad])} is {dims[bad]} "
        f"in the model, not {given[bad]}"
    )


def _show(dims: Sequence[int | str | None]) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def _set_input_shapes(
    model: onnx.ModelProto,
    input_shape: tuple[int, ...] | Mapping[str, tuple[int, ...]] | None,
    layout: Layout,
    what: str,
) -> None:
    """Write static shapes into the graph inputs; the first input takes a plain shape."""
    inits = {t.name for t in model.graph.initializer}
    real_inputs = [vi for vi in model.graph.input if vi.name not in inits]
    if isinstance(input_shape, Mapping):
        unknown = sorted(set(input_shape) - {vi.name for vi in real_inputs})
        if unknown:
            raise OnnxImportError(
                f"input shape given for `{unknown[0]}`, which is not an input of `{what}`; "
                f"inputs are {', '.join(vi.name for vi in real_inputs)}"
            )
        shapes = dict(input_shape)
    elif input_shape is not None and real_inputs:
        shapes = {real_inputs[0].name: tuple(input_shape)}
    else:
        shapes = {}
    for vi in real_inputs:
        dims = _dims(vi)
        if dims is None:
            if vi.name not in shapes:
                raise OnnxImportError(
                    f"input `{vi.name}` of `{what}` has no shape; give one with --input-shape"
                )
            final = shapes[vi.name]
        else:
            final = (
                _fit_input_shape(vi.name, dims, shapes[vi.name], layout)
                if vi.name in shapes
                else dims
            )
        for i, d in enumerate(final):
            if not isinstance(d, int) or d <= 0:
                static = ",".join(str(x) if isinstance(x, int) else "?" for x in final)
                raise OnnxImportError(
                    f"input `{vi.name}` {_dim_label(i, len(final), layout, d)} is dynamic "
                    f"(shape [{static}]); fix it with --input-shape"
                )
        tt = vi.type.tensor_type
        tt.ClearField("shape")
        for d in final:
            tt.shape.dim.add().dim_value = int(d)


def _constants_to_initializers(model: onnx.ModelProto) -> None:
    """Replace Constant nodes by initializers (value, value_float(s), value_int(s) ...)."""
    g = model.graph
    keep = []
    for node in g.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.output) == 1:
            ev = _evaluate(node, {}, model_opset(model))
            g.initializer.append(numpy_helper.from_array(np.asarray(ev[0]), node.output[0]))
        else:
            keep.append(node)
    del g.node[:]
    g.node.extend(keep)


def _evaluate(node: onnx.NodeProto, feeds: Mapping[str, np.ndarray], opset: int) -> list:
    from onnx.reference import ReferenceEvaluator

    ev = ReferenceEvaluator(node, opsets={"": opset})
    return ev.run(None, {k: v for k, v in feeds.items() if k})


def _static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...] | None]:
    """Tensor name -> static shape (None where inference left it unknown or symbolic)."""
    out: dict[str, tuple[int, ...] | None] = {}
    for vi in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        dims = _dims(vi)
        out[vi.name] = (
            tuple(dims)  # type: ignore[arg-type]
            if dims is not None and all(isinstance(d, int) for d in dims)
            else None
        )
    return out


#: Initializers with more elements than this are hidden from shape inference (only their
#: shape matters there), so inference never serializes the weights.
_LIGHT_INIT_ELEMENTS = 4096


def _infer(model: onnx.ModelProto, what: str) -> onnx.ModelProto:
    """Shape inference (with data propagation) on a weight-free copy; results copied back."""
    g = model.graph
    declared = {vi.name for vi in g.input}
    small: list[onnx.TensorProto] = []
    hidden: list[onnx.ValueInfoProto] = []
    for t in g.initializer:
        if int(np.prod(t.dims, dtype=np.int64)) > _LIGHT_INIT_ELEMENTS:
            if t.name not in declared:
                hidden.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        else:
            small.append(t)
    light_graph = helper.make_graph(
        list(g.node),
        g.name,
        [*g.input, *hidden],
        list(g.output),
        initializer=small,
        value_info=list(g.value_info),
    )
    light = helper.make_model(light_graph, opset_imports=list(model.opset_import))
    light.ir_version = model.ir_version
    light.functions.extend(model.functions)
    try:
        inferred = shape_inference.infer_shapes(
            light, check_type=False, strict_mode=True, data_prop=True
        )
    except Exception as exc:
        raise OnnxImportError(f"shape inference failed on `{what}`: {_first_line(exc)}") from None
    del g.value_info[:]
    g.value_info.extend(inferred.graph.value_info)
    del g.output[:]
    g.output.extend(inferred.graph.output)
    return model


def _fold_once(model: onnx.ModelProto, external_dir: Path | None = None) -> int:
    """Fold nodes whose inputs are all constant, and Shape/Size of static tensors."""
    g = model.graph
    opset = model_opset(model)
    consts = _Initializers(g, external_dir)
    shapes = _static_shapes(model)
    keep: list[onnx.NodeProto] = []
    folded = 0
    new_inits: list[onnx.TensorProto] = []
    for node in g.node:
        if node.domain not in ("", "ai.onnx") or node.op_type in _NO_FOLD:
            keep.append(node)
            continue
        values: list[np.ndarray] | None = None
        if node.op_type in ("Shape", "Size") and shapes.get(node.input[0]) is not None:
            shape = shapes[node.input[0]]
            assert shape is not None
            values = _evaluate(node, {node.input[0]: np.empty(shape, np.uint8)}, opset)
        elif all(i in consts for i in node.input if i) and node.input:
            size = _folded_elements(node, consts, shapes.get(node.output[0]))
            if size is None or size > MAX_FOLD_ELEMENTS:
                keep.append(node)
                continue
            try:
                values = _evaluate(node, {i: consts[i] for i in node.input if i}, opset)
            except Exception as exc:  # an op the reference cannot run stays in the graph
                log.debug("cannot fold %s (%s): %s", node.name, node.op_type, exc)
                values = None
        if values is None:
            keep.append(node)
            continue
        for name, value in zip(node.output, values, strict=False):
            if name:
                arr = np.asarray(value)
                consts[name] = arr
                new_inits.append(numpy_helper.from_array(arr, name))
        folded += 1
    if folded:
        del g.node[:]
        g.node.extend(keep)
        g.initializer.extend(new_inits)
        folded_names = {t.name for t in new_inits}
        # drop stale inferred shapes of folded tensors (the initializer is the truth now)
        vis = [vi for vi in g.value_info if vi.name not in folded_names]
        del g.value_info[:]
        g.value_info.extend(vis)
    return folded


class _Initializers(dict):
    """Initializer name -> numpy value, converted on first read (folding reads only the
    small ones: converting every weight each round would copy the whole model)."""

    def __init__(self, graph: onnx.GraphProto, external_dir: Path | None) -> None:
        super().__init__()
        self._protos = {t.name: t for t in graph.initializer}
        self._dir = external_dir

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or name in self._protos

    def __missing__(self, name: str) -> np.ndarray:
        value = tensor_array(self._protos[name], self._dir)
        self[name] = value
        return value


def _folded_elements(
    node: onnx.NodeProto, consts: Mapping[str, np.ndarray], inferred: tuple[int, ...] | None
) -> int | None:
    """Elements a fold of ``node`` would create, computed before anything is allocated
    (None if it cannot be told: the node is then left alone)."""
    if inferred is not None:
        return int(np.prod(inferred, dtype=np.int64))
    ins = [consts[i] for i in node.input if i]
    try:
        if node.op_type == "ConstantOfShape":
            dims = ins[0].astype(np.int64).reshape(-1)
            return int(np.prod(dims, dtype=np.int64)) if np.all(dims >= 0) else None
        if node.op_type == "Expand":
            target = tuple(int(d) for d in ins[1].reshape(-1))
            return int(np.prod(np.broadcast_shapes(ins[0].shape, target), dtype=np.int64))
        if node.op_type == "Tile":
            return int(ins[0].size * np.prod(ins[1].astype(np.int64), dtype=np.int64))
        if node.op_type == "Range":
            start, limit, delta = (float(a.reshape(-1)[0]) for a in ins)
            return max(int(np.ceil((limit - start) / delta)), 0) if delta else None
    except (ValueError, IndexError, OverflowError):
        return None
    # other ops produce at most what they read, times a small factor
    return int(sum(a.size for a in ins))


def _drop_unused_initializers(model: onnx.ModelProto) -> None:
    g = model.graph
    used = {i for n in g.node for i in n.input} | {o.name for o in g.output}
    for n in g.node:  # sub-graphs may read outer-scope initializers
        for a in n.attribute:
            if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                used.update(_subgraph_inputs(a))
    # delete in place: rebuilding the list would copy every weight
    for i in reversed([i for i, t in enumerate(g.initializer) if t.name not in used]):
        del g.initializer[i]


def _subgraph_inputs(attr: onnx.AttributeProto) -> set[str]:
    graphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
    names: set[str] = set()
    for sub in graphs:
        for n in sub.node:
            names.update(n.input)
            for a in n.attribute:
                if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                    names |= _subgraph_inputs(a)
    return names


# ----------------------------------------------------------------------------- to IR


def _attr_value(attr: onnx.AttributeProto) -> object:
    kind = attr.type
    A = onnx.AttributeProto
    if kind in (A.INTS, A.FLOATS, A.STRINGS) and not helper.get_attribute_value(attr):
        return attr  # an empty list has no element type: keep the proto
    if kind == A.TENSOR:
        return numpy_helper.to_array(attr.t)
    if kind in (A.GRAPH, A.GRAPHS, A.SPARSE_TENSOR, A.TENSORS, A.TYPE_PROTO, A.TYPE_PROTOS):
        return attr
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, list):
        return tuple(v.decode("utf-8") if isinstance(v, bytes) else v for v in value)
    return value


def _dtype_of(elem_type: int, what: str) -> DType:
    try:
        return DType.of(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError, TypeError):
        raise OnnxImportError(
            f"tensor `{what}` has element type {TensorProto.DataType.Name(elem_type)}, "
            "which the compiler does not support"
        ) from None


def _input_grids(model: onnx.ModelProto, what: str) -> dict[str, QuantParams]:
    """Graph inputs with a quantization annotation (``graph.quantization_annotation``:
    ``SCALE_TENSOR`` and ``ZERO_POINT_TENSOR`` naming scalar initializers): their fixed int8
    grid. A decoder's next step reads the KV cache an earlier compile wrote on its grid."""
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    inputs = {vi.name for vi in g.input} - set(inits)
    grids: dict[str, QuantParams] = {}
    for note in g.quantization_annotation:
        keys = {p.key: p.value for p in note.quant_parameter_tensor_names}
        if note.tensor_name not in inputs:
            raise OnnxImportError(
                f"model `{what}`: a quantization annotation must name a graph input, not "
                f"`{note.tensor_name}`"
            )
        try:
            scale = numpy_helper.to_array(inits[keys["SCALE_TENSOR"]]).reshape(())
            zero = numpy_helper.to_array(inits[keys["ZERO_POINT_TENSOR"]]).reshape(())
        except (KeyError, ValueError):
            raise OnnxImportError(
                f"model `{what}`: the quantization annotation of `{note.tensor_name}` must "
                "name scalar SCALE_TENSOR and ZERO_POINT_TENSOR initializers, not "
                f"{sorted(keys.items())}"
            ) from None
        if zero.dtype != np.int8 or not float(scale) > 0:
            raise OnnxImportError(
                f"model `{what}`: the grid of `{note.tensor_name}` must be a positive scale "
                f"and an int8 zero point, not {float(scale)} and {zero.dtype}"
            )
        grids[note.tensor_name] = QuantParams(
            np.asarray(scale, np.float32), np.asarray(zero, np.int64)
        )
    return grids


def _to_graph(
    model: onnx.ModelProto,
    what: str,
    grids: Mapping[str, QuantParams],
    external_dir: Path | None = None,
) -> Graph:
    g = model.graph
    consts = {t.name: tensor_array(t, external_dir) for t in g.initializer}
    tensors: dict[str, Tensor] = {}
    for name, arr in consts.items():
        tensors[name] = Tensor(name, arr.shape, DType.of(arr))
    inferred: dict[str, onnx.ValueInfoProto] = {}
    for vi in [*g.input, *g.value_info, *g.output]:
        if vi.name not in consts:
            inferred[vi.name] = vi
    nodes: list[Node] = []
    used_names: set[str] = set()
    dynamic: set[str] = set()
    for i, pn in enumerate(g.node):
        known = pn.domain in ("", "ai.onnx") and pn.op_type in Op._value2member_map_
        op = Op(pn.op_type) if known and pn.op_type != Op.OTHER.value else Op.OTHER
        name = pn.name or f"{pn.op_type}_{i}"
        while name in used_names:
            name = f"{name}_{i}"
        used_names.add(name)
        if op in DATA_DEPENDENT_OPS or any(x in dynamic for x in pn.input if x):
            dynamic.update(o for o in pn.output if o)
        nodes.append(
            Node(
                name=name,
                op=op,
                inputs=tuple(pn.input),
                outputs=tuple(pn.output),
                attrs={a.name: _attr_value(a) for a in pn.attribute},
                onnx_type=pn.op_type if op is Op.OTHER else "",
                domain=pn.domain if pn.domain != "ai.onnx" else "",
            )
        )
    inputs = tuple(vi.name for vi in g.input if vi.name not in consts)
    needed = set(inputs) | {o for n in nodes for o in n.outputs if o}
    for tname in sorted(needed - set(tensors)):
        vi = inferred.get(tname)
        dims = _dims(vi) if vi is not None else None
        producer = next((n for n in nodes if tname in n.outputs), None)
        origin = f" (output of node `{producer.name}` {producer.op_type})" if producer else ""
        if dims is None:
            if tname in dynamic:
                raise OnnxImportError(
                    f"tensor `{tname}`{origin} has an unknown rank; only the host can run it "
                    "and the compiler cannot represent it"
                )
            if producer is not None and producer.domain not in ("", "ai.onnx"):
                raise UnsupportedOperatorError(
                    f"node `{producer.name}` is operator `{producer.op_type}` of the unknown "
                    f"domain `{producer.domain}`; aipusim knows the standard ONNX domain "
                    f"(ai.onnx) only, so the shape of its output `{tname}` cannot be inferred"
                )
            raise OnnxImportError(f"the shape of tensor `{tname}`{origin} cannot be inferred")
        static = [d if isinstance(d, int) else -1 for d in dims]
        if any(d < 0 for d in static) and tname not in dynamic:
            raise OnnxImportError(
                f"tensor `{tname}`{origin} still has a dynamic shape {_show(dims)} after "
                "fixing the input shapes; give --input-shape or simplify the model"
            )
        elem = vi.type.tensor_type.elem_type if vi is not None else 0
        tensors[tname] = Tensor(tname, tuple(static), _dtype_of(elem, tname), grids.get(tname))
    graph = Graph(
        name=g.name or Path(what).stem or "model",
        nodes=tuple(nodes),
        tensors=tensors,
        constants=consts,
        inputs=inputs,
        outputs=tuple(o.name for o in g.output),
        opset=model_opset(model),
    )
    return prune_graph(graph)


def import_model(
    model: str | os.PathLike[str] | onnx.ModelProto,
    *,
    input_shape: tuple[int, ...] | Mapping[str, tuple[int, ...]] | None = None,
    layout: Layout | str = Layout.NCHW,
    target_opset: int = 17,
    max_fold_rounds: int = 8,
    source_name: str | None = None,
    checked: bool = False,
    external_dir: str | os.PathLike[str] | None = None,
) -> Graph:
    """Import an ONNX model (file or proto) as a statically shaped `Graph`.

    ``input_shape`` fixes dynamic dims of the first input (a mapping name -> shape for
    several inputs), written in ``layout``. ``source_name`` names a proto in messages (its
    file, say). ``checked``: the proto comes from `load_model` and is handed over, so it
    is neither copied nor checked again. ``external_dir``: the folder of a proto read with
    ``read_model(load_external=False)``, whose large external tensors are mapped from
    their files (a model file given by path is read that way). Raises `OnnxImportError`
    for anything the compiler cannot take, naming the file, tensor, input or dim.

    >>> from onnx import helper, TensorProto
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4, 4])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 4, 4])
    >>> m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])],
    ...     "g", [x], [y]), opset_imports=[helper.make_opsetid("", 13)])
    >>> import_model(m, input_shape=(2, 3, 4, 4)).shape("y")
    (2, 3, 4, 4)
    """
    try:
        layout = Layout(str(layout).upper())
    except ValueError:
        raise OnnxImportError(
            f"input data layout must be one of NCHW, NHWC, not {layout!r}"
        ) from None
    if isinstance(model, onnx.ModelProto):
        what = source_name or model.graph.name or "<model>"
        if checked:
            proto = model
        else:
            proto = onnx.ModelProto()
            proto.CopyFrom(model)
            check_model(proto, what)
    else:
        what = str(model)
        proto = read_model(model, load_external=False)[0]
        external_dir = Path(model).parent
    folder = Path(external_dir) if external_dir is not None else None
    proto = convert_opset(proto, target_opset, what)
    _constants_to_initializers(proto)
    _set_input_shapes(proto, input_shape, layout, what)
    # value_info written by the exporter may carry stale symbolic dims: infer afresh
    del proto.graph.value_info[:]
    for out in proto.graph.output:
        out.type.tensor_type.ClearField("shape")
    for _ in range(max_fold_rounds):
        proto = _infer(proto, what)
        if not _fold_once(proto, folder):
            break
    proto = _infer(proto, what)
    grids = _input_grids(proto, what)
    _drop_unused_initializers(proto)
    return _to_graph(proto, what, grids, folder)


__all__ = [
    "MIN_SOURCE_OPSET",
    "Layout",
    "check_model",
    "convert_opset",
    "external_files",
    "file_identity",
    "import_model",
    "load_model",
    "model_opset",
    "read_model",
    "tensor_array",
]
