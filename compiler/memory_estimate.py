"""How much memory a compile will take, checked right after the import (before the slow
passes), so that a model too big for the machine is refused with the estimate instead of
being killed in calibration.

Calibration runs the float model once per sample and keeps every activation it observes,
so the peak grows with the sum of the activations of one sample; the constants are held
by the graph, the executor and the quantized copy. The factors were measured (peak RSS of
``aipusim compile``: tiny_cnn at 4096x4096, 9.7 GB of activations, 16.9 GB; at 1024x1024,
608 MB, 1.05 GB; resnet18 at 448x448, 134 MB of activations and 47 MB of weights, 0.51 GB)
and rounded up.

Constants kept in an external-data file are mapped from it, not read
(`aipusim.compiler.importer.read_model`), and cost less: the float executor reads them
where they are (one resident copy while it runs), each weight's pages are given back once
it is quantized, and what stays is the int8 copy. A Transpose of a constant folds into a
view of it (`aipusim.compiler.passes.simplify.folds_to_view`): it counts as a constant of
its source's kind, not as an activation (the executor still takes a contiguous copy).
`PER_MAPPED_BYTE` was measured on llama_1b's decode graph (see its comment).

>>> compile_memory_bytes(activation_bytes=10**9, constant_bytes=0)
2100000000
"""

from __future__ import annotations

from aipusim.base.errors import ResourceLimitError
from aipusim.base.mapped import is_mapped
from aipusim.base.resources import available_memory_bytes, format_bytes
from aipusim.compiler.ir import Graph
from aipusim.compiler.passes.simplify import folds_to_view

#: What any compile needs (interpreter, onnx, numpy, onnxruntime, the IR).
BASE_BYTES = 300_000_000
#: Bytes of memory per byte of float32 activations of one sample (the executor's buffers,
#: the values it returns, the observers' copies).
PER_ACTIVATION_BYTE = 1.8
#: Bytes of memory per byte of constants held in memory (the graph's, the executor's, the
#: int8 copy).
PER_CONSTANT_BYTE = 3.0
#: Bytes of memory per byte of constants mapped from their file. Measured on llama_1b's
#: decode graph (past 128; 4.95 GB of mapped weights and the 1.05 GB transposed view of its
#: embedding, 126 MB of other activations): a peak RSS of 7.18 GB, calibration 6.3 GB
#: (the weights resident while onnxruntime runs, and a contiguous copy of the view), the
#: peak in ``emit`` while it fills the constants image beside the int8 copies the back end
#: holds (the graph's, the packed blobs, the reference program; emit writes each file as
#: it is made, so the image and the reference arrays are never held together):
#: (7.18 - 0.3 - 1.8 * 0.126) / 6.0 = 1.11, rounded up.
PER_MAPPED_BYTE = 1.2
#: What a refusal tells the user to change, by default (`check_compile_memory`).
DEFAULT_REMEDY = "compile a smaller input (--input-shape) or on a bigger machine"


def compile_memory_bytes(activation_bytes: int, constant_bytes: int, mapped_bytes: int = 0) -> int:
    """Estimated peak memory of a compile with these float32 activations of one sample,
    constants in memory and constants mapped from their file."""
    return int(
        BASE_BYTES
        + PER_ACTIVATION_BYTE * activation_bytes
        + PER_CONSTANT_BYTE * constant_bytes
        + PER_MAPPED_BYTE * mapped_bytes
    )


def graph_bytes(graph: Graph) -> tuple[int, int, int, str]:
    """(activation bytes as float32, bytes of constants in memory, bytes of constants mapped
    from their file, the largest activation) of ``graph``. The output of a Transpose of a
    constant counts as a constant of its source's kind (it folds into a view)."""
    views = {node.outputs[0]: node.inputs[0] for node in graph.nodes if folds_to_view(graph, node)}
    acts = consts = mapped = 0
    largest, largest_bytes = "", -1
    for name, tensor in graph.tensors.items():
        if name in graph.constants or not tensor.is_static:
            continue
        size = tensor.size * 4  # calibration runs in float32 whatever the stored type
        if name in views:
            if is_mapped(graph.constants[views[name]]):
                mapped += size
            else:
                consts += size
            continue
        acts += size
        if size > largest_bytes:
            largest, largest_bytes = name, size
    for a in graph.constants.values():
        if is_mapped(a):
            mapped += int(a.nbytes)
        else:
            consts += int(a.nbytes)
    shape = "x".join(map(str, graph.shape(largest))) if largest else "-"
    return acts, consts, mapped, f"`{largest}` {shape} = {format_bytes(largest_bytes)}"


def check_compile_memory(
    graph: Graph, available: int | None = None, remedy: str = DEFAULT_REMEDY
) -> None:
    """Refuse (`ResourceLimitError`) a compile of ``graph`` whose estimated memory exceeds
    ``available`` (default: what the machine has); the message ends with ``remedy``, what
    the caller can change (`DEFAULT_REMEDY`: the flags of ``aipusim compile``)."""
    acts, consts, mapped, largest = graph_bytes(graph)
    need = compile_memory_bytes(acts, consts, mapped)
    room = available_memory_bytes() if available is None else available
    if need <= room:
        return
    held = f"{format_bytes(consts + mapped)} of constants"
    if mapped:
        held += f" ({format_bytes(mapped)} of them mapped from their file)"
    raise ResourceLimitError(
        f"compiling {graph.name} would need about {format_bytes(need)} of memory "
        f"(calibration keeps the {format_bytes(acts)} of float activations of a sample, the "
        f"largest {largest}, and {held}); {format_bytes(room)} is available: {remedy}"
    )


__all__ = [
    "DEFAULT_REMEDY",
    "check_compile_memory",
    "compile_memory_bytes",
    "graph_bytes",
]
