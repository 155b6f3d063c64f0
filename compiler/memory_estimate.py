"""How much memory a compile will take, checked right after the import (before the slow
passes), so that a model too big for the machine is refused with the estimate instead of
being killed in calibration.

Calibration runs the float model once per sample and keeps every activation it observes,
so the peak grows with the sum of the activations of one sample; the constants are held
by the graph, the executor and the quantized copy. The factors were measured (peak RSS of
``aipusim compile``: tiny_cnn at 4096x4096, 9.7 GB of activations, 16.9 GB; at 1024x1024,
608 MB, 1.05 GB; resnet18 at 448x448, 134 MB of activations and 47 MB of weights, 0.51 GB)
and rounded up.

>>> compile_memory_bytes(activation_bytes=10**9, constant_bytes=0)
2100000000
"""

from __future__ import annotations

from aipusim.base.errors import ResourceLimitError
from aipusim.base.resources import available_memory_bytes, format_bytes
from aipusim.compiler.ir import Graph

#: What any compile needs (interpreter, onnx, numpy, onnxruntime, the IR).
BASE_BYTES = 300_000_000
#: Bytes of memory per byte of float32 activations of one sample (the executor's buffers,
#: the values it returns, the observers' copies).
PER_ACTIVATION_BYTE = 1.8
#: Bytes of memory per byte of constants (the graph's, the executor's, the int8 copy).
PER_CONSTANT_BYTE = 3.0


def compile_memory_bytes(activation_bytes: int, constant_bytes: int) -> int:
    """Estimated peak memory of a compile with these float32 activations of one sample."""
    return int(
        BASE_BYTES + PER_ACTIVATION_BYTE * activation_bytes + PER_CONSTANT_BYTE * constant_bytes
    )


def graph_bytes(graph: Graph) -> tuple[int, int, str]:
    """(activation bytes as float32, constant bytes, the largest activation) of ``graph``."""
    acts = 0
    largest, largest_bytes = "", -1
    for name, tensor in graph.tensors.items():
        if name in graph.constants or not tensor.is_static:
            continue
        size = tensor.size * 4  # calibration runs in float32 whatever the stored type
        acts += size
        if size > largest_bytes:
            largest, largest_bytes = name, size
    consts = sum(int(a.nbytes) for a in graph.constants.values())
    shape = "x".join(map(str, graph.shape(largest))) if largest else "-"
    return acts, consts, f"`{largest}` {shape} = {format_bytes(largest_bytes)}"


def check_compile_memory(graph: Graph, available: int | None = None) -> None:
    """Refuse (`ResourceLimitError`) a compile of ``graph`` whose estimated memory exceeds
    ``available`` (default: what the machine has)."""
    acts, consts, largest = graph_bytes(graph)
    need = compile_memory_bytes(acts, consts)
    room = available_memory_bytes() if available is None else available
    if need <= room:
        return
    raise ResourceLimitError(
        f"compiling {graph.name} would need about {format_bytes(need)} of memory "
        f"(calibration keeps the {format_bytes(acts)} of float activations of a sample, the "
        f"largest {largest}, and {format_bytes(consts)} of constants); "
        f"{format_bytes(room)} is available: compile a smaller input (--input-shape) or on "
        "a bigger machine"
    )


__all__ = ["check_compile_memory", "compile_memory_bytes", "graph_bytes"]
