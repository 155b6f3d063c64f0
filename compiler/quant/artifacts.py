"""The ``quantized_model/`` folder: write a `QuantizedGraph` and read it back exactly.

Files (as in the compiler CLI reference):

- ``quantized_model_manifest.json``: format version, scheme, I/O quantization, calibration
  source, every activation tensor's scale(s) and zero point(s), and the name and SHA-256
  of the array sidecar. This is the file a later ``aipusim compile -i`` starts from.
- ``quantized_model.npz``: every constant (int8 weights, int32 biases, ...) and every
  integer parameter of the steps (multipliers, shifts, LUTs), by key.
- ``quantized_model.json``: the graph structure (tensors, nodes with attributes and
  their integer step); arrays are referenced by npz key.
- ``quantized_model.txt``: a human-readable dump with the quantization of each tensor.
- ``report.json``: the accuracy report (`accuracy.accuracy_report`) and timings.

The folder is written beside the target and renamed into place, so a failure never leaves
a half-written folder. Reading checks the format version and the sidecar checksum.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from aipusim.base.atomic import swap_into_place
from aipusim.base.errors import QuantizationError
from aipusim.compiler.ir import DType, Graph, Node, Op, QuantParams, Tensor, dump
from aipusim.compiler.quant.quantize import QStep, QuantizedGraph

FORMAT = "aipusim-quantized-model"
FORMAT_VERSION = 1
MANIFEST = "quantized_model_manifest.json"
ARRAYS = "quantized_model.npz"
GRAPH_JSON = "quantized_model.json"
DUMP_TXT = "quantized_model.txt"
REPORT = "report.json"


class _Arrays:
    def __init__(self) -> None:
        self.data: dict[str, np.ndarray] = {}

    def put(self, key: str, arr: np.ndarray) -> dict[str, str]:
        k = f"a{len(self.data)}"
        self.data[k] = np.asarray(arr)
        return {"__array__": k, "name": key}


def _enc(value: Any, arrays: _Arrays, where: str) -> Any:
    if isinstance(value, np.ndarray):
        return arrays.put(where, value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple | list):
        return [_enc(v, arrays, where) for v in value]
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    raise QuantizationError(f"{where}: a {type(value).__name__} value cannot be saved")


def _dec(value: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    if isinstance(value, dict) and "__array__" in value:
        return np.array(arrays[value["__array__"]])
    if isinstance(value, list):
        return tuple(_dec(v, arrays) for v in value)
    return value


def _quant_json(q: QuantParams | None) -> dict | None:
    if q is None:
        return None
    return {
        "scale": q.scale.reshape(-1).astype(float).tolist(),
        "zero_point": q.zero_point.reshape(-1).astype(int).tolist(),
        "dtype": q.dtype.value,
        "axis": q.axis,
    }


def _quant_from(d: dict | None) -> QuantParams | None:
    if d is None:
        return None
    scale = np.asarray(d["scale"], np.float32)
    zp = np.asarray(d["zero_point"], np.int32)
    if d["axis"] is None:
        scale, zp = scale.reshape(()), zp.reshape(())
    return QuantParams(scale, zp, DType(d["dtype"]), d["axis"])


def _structure(qg: QuantizedGraph, arrays: _Arrays) -> dict:
    g = qg.graph
    return {
        "name": g.name,
        "opset": g.opset,
        "inputs": list(g.inputs),
        "outputs": list(g.outputs),
        "tensors": {
            n: {"shape": list(t.shape), "dtype": t.dtype.value, "quant": _quant_json(t.quant)}
            for n, t in g.tensors.items()
        },
        "constants": {n: arrays.put(n, a) for n, a in g.constants.items()},
        "nodes": [
            {
                "name": n.name,
                "op": n.op.value,
                "onnx_type": n.onnx_type,
                "domain": n.domain,
                "inputs": list(n.inputs),
                "outputs": list(n.outputs),
                "attrs": {k: _enc(v, arrays, f"{n.name}.{k}") for k, v in n.attrs.items()},
                "step": {
                    "kind": qg.steps[n.name].kind,
                    "params": {
                        k: _enc(v, arrays, f"{n.name}/{k}")
                        for k, v in qg.steps[n.name].params.items()
                    },
                },
            }
            for n in g.nodes
        ],
    }


#: The files `quantized_graph_from_files` rebuilds a `QuantizedGraph` from (the others of
#: the folder, the text dump and the accuracy report, are for people).
CORE_FILES = (ARRAYS, GRAPH_JSON, MANIFEST)


#: The `CORE_FILES` of quantized graphs still alive, by graph object: a `QuantizedGraph`
#: never changes, so neither do its files. The quantization cache enters the files it
#: rebuilt a graph from (a graph and its files go both ways byte for byte), so a compile
#: whose back end keeps that graph as its integer program (no rewrite changed it) writes
#: ``reference/`` without serializing 26 MB (ResNet-50) again.
_files_of: weakref.WeakKeyDictionary[QuantizedGraph, Mapping[str, bytes]] = (
    weakref.WeakKeyDictionary()
)


def remember_files(qgraph: QuantizedGraph, files: Mapping[str, bytes]) -> None:
    """Record that ``files`` are the `quantized_graph_files` of ``qgraph``."""
    _files_of[qgraph] = files


def quantized_graph_files(qgraph: QuantizedGraph) -> dict[str, bytes]:
    """The `CORE_FILES` of ``qgraph`` (arrays, graph structure, manifest), by name."""
    known = _files_of.get(qgraph)
    if known is not None:
        return dict(known)
    arrays = _Arrays()
    structure = _structure(qgraph, arrays)
    buf = io.BytesIO()
    np.savez(buf, **arrays.data)
    blob = buf.getvalue()
    g = qgraph.graph
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model": g.name,
        "quantization_scheme": qgraph.scheme,
        "quantize_dw_channel_wise": qgraph.quantize_dw_channel_wise,
        "io_quantization": qgraph.io_quantized,
        "calibration": {
            "source": qgraph.calibration_source,
            "samples": qgraph.calibration_samples,
        },
        "inputs": {n: _quant_json(g.tensor(n).quant) for n in g.inputs},
        "outputs": {n: _quant_json(g.tensor(n).quant) for n in g.outputs},
        "tensors": {
            n: _quant_json(t.quant)
            for n, t in g.tensors.items()
            if t.quant is not None and n not in g.constants
        },
        "graph": GRAPH_JSON,
        "arrays": {"file": ARRAYS, "sha256": hashlib.sha256(blob).hexdigest()},
    }
    files = {
        ARRAYS: blob,
        # compact: with an indent, json falls back to its pure-Python encoder (MBs here)
        GRAPH_JSON: json.dumps(structure, separators=(",", ":")).encode(),
        MANIFEST: json.dumps(manifest, indent=2).encode(),
    }
    remember_files(qgraph, files)
    return dict(files)


def quantized_model_files(
    qgraph: QuantizedGraph,
    report: Mapping[str, Any],
    core: Mapping[str, bytes] | None = None,
) -> dict[str, bytes]:
    """The files of a ``quantized_model/`` folder, by name, as bytes; ``core`` gives its
    `CORE_FILES` when they are already serialized (the quantization cache holds them)."""
    files = dict(quantized_graph_files(qgraph) if core is None else core)
    dumped = _dumps_of.get(qgraph)
    if dumped is None:
        # (every warm compile writes the same graphs again: quantized_model/, reference/)
        dumped = _dumps_of[qgraph] = text_dump(qgraph).encode()
    return {
        **files,
        DUMP_TXT: dumped,
        REPORT: json.dumps(report, indent=2).encode(),
    }


#: The `text_dump` of quantized graphs still alive, by graph object (as `_files_of`).
_dumps_of: weakref.WeakKeyDictionary[QuantizedGraph, bytes] = weakref.WeakKeyDictionary()


def write_quantized_model(
    directory: str | os.PathLike[str],
    qgraph: QuantizedGraph,
    report: Mapping[str, Any],
    *,
    core: Mapping[str, bytes] | None = None,
) -> Path:
    """Write the ``quantized_model/`` folder (atomically: aside, then renamed into place);
    ``core`` as in `quantized_model_files`.

    Returns the manifest path.
    """
    target = Path(directory)
    target.parent.mkdir(parents=True, exist_ok=True)
    files = quantized_model_files(qgraph, report, core)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        swap_into_place(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target / MANIFEST


def text_dump(qgraph: QuantizedGraph) -> str:
    """The IR dump followed by one line of quantization parameters per tensor."""
    g = qgraph.graph
    lines = [
        f"# scheme={qgraph.scheme} io_quantization={qgraph.io_quantized} "
        f"dw_channel_wise={qgraph.quantize_dw_channel_wise}",
        dump(g),
        "",
        "quantization (real = scale * (q - zero_point)):",
    ]
    # Graph order: inputs, node outputs as computed, then the constants.
    order = [*g.inputs, *(o for n in g.nodes for o in n.outputs if o), *g.constants]
    for name in dict.fromkeys(order):
        t = g.tensors.get(name)
        q = t.quant if t is not None else None
        if q is None:
            continue
        s = q.scale.reshape(-1)
        z = q.zero_point.reshape(-1)
        if q.axis is None:
            desc = f"scale={float(s[0]):.6g} zp={int(z[0])}"
        else:
            desc = (
                f"per-channel axis={q.axis} n={s.size} "
                f"scale=[{float(s.min()):.4g}..{float(s.max()):.4g}]"
            )
        kind = "const" if name in g.constants else "act"
        lines.append(f"  {name} ({kind} {t.dtype.value}): {desc}")
    lines.append("")
    lines.append("steps:")
    for n in g.nodes:
        lines.append(f"  {n.name}: {qgraph.steps[n.name].kind}")
    return "\n".join(lines) + "\n"


def _json_object(text: bytes | str, what: str) -> dict:
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise QuantizationError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise QuantizationError(f"{what} must hold a JSON object")
    return data


def _load_json(path: Path, what: str) -> dict:
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        raise QuantizationError(f"{what} {path} does not exist") from None
    return _json_object(text, f"{what} {path}")


def _check_format(manifest: dict, where: object) -> None:
    if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
        raise QuantizationError(
            f"quantized model manifest {where} must have format {FORMAT} version "
            f"{FORMAT_VERSION}, not {manifest.get('format')} {manifest.get('format_version')}"
        )


def read_quantized_model(manifest_path: str | os.PathLike[str]) -> QuantizedGraph:
    """Load a quantized model written by `write_quantized_model` (checksum verified)."""
    mpath = Path(manifest_path)
    manifest = _load_json(mpath, "quantized model manifest")
    _check_format(manifest, mpath)
    folder = mpath.parent
    try:
        blob = (folder / manifest["arrays"]["file"]).read_bytes()
    except (OSError, KeyError, TypeError) as exc:
        raise QuantizationError(
            f"quantized model arrays next to {mpath} unreadable: {exc}"
        ) from None
    if hashlib.sha256(blob).hexdigest() != manifest["arrays"].get("sha256"):
        raise QuantizationError(
            f"quantized model arrays {folder / manifest['arrays']['file']} do not match the "
            "checksum in the manifest (file changed or corrupted)"
        )
    structure = _load_json(folder / manifest["graph"], "quantized graph")
    return _from_parts(manifest, blob, structure, mpath)


def quantized_graph_from_files(
    files: Mapping[str, bytes], where: str, *, checked: bool = False
) -> QuantizedGraph:
    """The `QuantizedGraph` whose `quantized_graph_files` are ``files`` (``where`` names
    their place in error messages); `QuantizationError` if they are not such files.
    ``checked``: the caller verified the bytes with a checksum of its own, so the arrays'
    checksum in the manifest is not computed again."""
    missing = [name for name in CORE_FILES if name not in files]
    if missing:
        raise QuantizationError(f"quantized model {where} lacks {', '.join(missing)}")
    manifest = _json_object(files[MANIFEST], f"quantized model manifest in {where}")
    _check_format(manifest, f"in {where}")
    blob = files[ARRAYS]
    if not checked and hashlib.sha256(blob).hexdigest() != manifest.get("arrays", {}).get("sha256"):
        raise QuantizationError(
            f"quantized model arrays in {where} do not match the checksum in the manifest"
        )
    structure = _json_object(files[GRAPH_JSON], f"quantized graph in {where}")
    return _from_parts(manifest, blob, structure, where)


def _from_parts(manifest: dict, blob: bytes, structure: dict, where: object) -> QuantizedGraph:
    with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    try:
        return _rebuild(structure, arrays, manifest)
    except (KeyError, TypeError, ValueError) as exc:
        raise QuantizationError(f"quantized graph of {where} is malformed: {exc}") from None


def _rebuild(s: dict, arrays: Mapping[str, np.ndarray], manifest: dict) -> QuantizedGraph:
    tensors = {
        n: Tensor(n, tuple(d["shape"]), DType(d["dtype"]), _quant_from(d["quant"]))
        for n, d in s["tensors"].items()
    }
    constants = {n: arrays[ref["__array__"]] for n, ref in s["constants"].items()}
    nodes = []
    steps = {}
    for d in s["nodes"]:
        attrs = {k: _dec(v, arrays) for k, v in d["attrs"].items()}
        nodes.append(
            Node(
                d["name"],
                Op(d["op"]),
                tuple(d["inputs"]),
                tuple(d["outputs"]),
                attrs,
                onnx_type=d["onnx_type"],
                domain=d["domain"],
            )
        )
        params = {k: _dec_param(v, arrays) for k, v in d["step"]["params"].items()}
        steps[d["name"]] = QStep(d["step"]["kind"], params)
    graph = Graph(
        name=s["name"],
        nodes=tuple(nodes),
        tensors=tensors,
        constants=constants,
        inputs=tuple(s["inputs"]),
        outputs=tuple(s["outputs"]),
        opset=int(s["opset"]),
    )
    return QuantizedGraph(
        graph=graph,
        steps=steps,
        scheme=manifest["quantization_scheme"],
        io_quantized=bool(manifest["io_quantization"]),
        quantize_dw_channel_wise=bool(manifest["quantize_dw_channel_wise"]),
        calibration_source=manifest["calibration"]["source"],
        calibration_samples=int(manifest["calibration"]["samples"]),
    )


def _dec_param(value: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    if isinstance(value, dict) and "__array__" in value:
        return np.array(arrays[value["__array__"]])
    if isinstance(value, int) and not isinstance(value, bool):
        return np.int64(value)
    return value


__all__ = [
    "CORE_FILES",
    "MANIFEST",
    "quantized_graph_files",
    "quantized_graph_from_files",
    "quantized_model_files",
    "read_quantized_model",
    "remember_files",
    "text_dump",
    "write_quantized_model",
]
