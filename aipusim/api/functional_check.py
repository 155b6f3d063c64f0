"""Is a functional simulation bit-exact? Its outputs against the int8 reference's.

The compiled folder carries the integer program it was built from
(``compiled_model/reference/``): `run_int8` of that program on the same int8 input is what
the chip must produce, byte for byte. Where an output differs, the first differing tensor
in graph order (the layers' results as the functional run left them, `SimResult.tensors`)
names the layer, the element and the tasks that last wrote it.

>>> import aipusim, tempfile
>>> from aipusim.simulator import simulate
>>> m = aipusim.compile("tiny_cnn")
>>> folder = m.compiled_dir()
>>> inputs, how = chip_inputs(folder)
>>> how
'seeded random int8 (numpy default_rng(0))'
>>> r = simulate(folder, frames=1, functional=True, inputs=inputs)
>>> check = compare(r, folder, inputs, how)
>>> check.bit_exact, check.outputs
(True, {'logits': {'shape': [1, 10], 'mismatches': 0}})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aipusim.api.inputs import check_finite
from aipusim.base.errors import ConfigError, FunctionalMismatch, SimulationError
from aipusim.compiler.quant.artifacts import MANIFEST, read_quantized_model
from aipusim.compiler.quant.scheme import dequantize_values, quantize_values
from aipusim.isa.program import load_program_tables

#: The integer program a compiled folder was built from (its reference), in that folder.
REFERENCE_DIR = "reference"


@dataclass(frozen=True)
class FirstMismatch:
    """The first element (in graph order, then C order) where the chip and the reference
    differ, and the tasks that last wrote it."""

    tensor: str
    layer: str
    index: tuple[int, ...]
    got: int
    want: int
    #: ``"core 0 mvm task 12 (Mvm, layer conv1, frame 0)"`` per writer; empty when no task
    #: wrote the element (it kept what was there before).
    writers: tuple[str, ...]

    def text(self) -> str:
        by = "; ".join(self.writers) if self.writers else "no task wrote it"
        return (
            f"first differing layer {self.layer} (tensor {self.tensor}) at element "
            f"{list(self.index)}: {self.got} instead of {self.want}; written by {by}"
        )


@dataclass(frozen=True)
class FunctionalCheck:
    """A functional run's outputs against the int8 reference (`compare`)."""

    bit_exact: bool
    #: How the input was chosen ("given", or the seed).
    input: str
    #: Output name -> ``{"shape": [...], "mismatches": int}``.
    outputs: dict[str, dict[str, Any]]
    #: Layers the compiler could not express on data (``model.json``): timed, not executed.
    gaps: dict[str, str]
    first: FirstMismatch | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``"functional"`` block of ``simulate --json`` and ``run.json``."""
        out: dict[str, Any] = {
            "bit_exact": self.bit_exact,
            "input": self.input,
            "outputs": self.outputs,
        }
        if self.gaps:
            out["functional_gaps"] = self.gaps
        if self.first is not None:
            first = self.first
            out["first_mismatch"] = {
                "layer": first.layer,
                "tensor": first.tensor,
                "index": list(first.index),
                "got": first.got,
                "want": first.want,
                "writers": list(first.writers),
            }
        return out

    def text(self) -> str:
        """One line: bit-exact, or how many elements differ and where first."""
        if self.bit_exact:
            return f"bit-exact vs int8 reference ({self.input} input)"
        bad = ", ".join(
            f"{n} {v['mismatches']} of {int(np.prod(v['shape']))}"
            for n, v in self.outputs.items()
            if v["mismatches"]
        )
        parts = [f"differs from the int8 reference ({self.input} input): {bad or 'no output'}"]
        if self.gaps:
            parts.append(f"layers not executable on data: {', '.join(self.gaps)}")
        if self.first is not None:
            parts.append(self.first.text())
        return "; ".join(parts)

    def error(self) -> FunctionalMismatch:
        return FunctionalMismatch(f"FUNCTIONAL_MISMATCH: {self.text()}")


def load_reference(compiled_dir: str | Path) -> Any:
    """The int8 program ``compiled_dir`` was compiled from (a `QuantizedGraph`)."""
    manifest = Path(compiled_dir) / REFERENCE_DIR / MANIFEST
    if not manifest.is_file():
        raise SimulationError(
            f"the compiled folder must hold its int8 reference ({REFERENCE_DIR}/{MANIFEST}), "
            f"not lack it: {compiled_dir} (recompile)"
        )
    return read_quantized_model(manifest)


def chip_inputs(
    compiled_dir: str | Path,
    given: Mapping[str, Any] | None = None,
    *,
    program: Any = None,
) -> tuple[dict[str, np.ndarray], str]:
    """The int8 input of every graph input, and how it was chosen: ``given`` arrays (int8
    as they are; float ones quantized with the input's scale and zero point), else the
    simulator's seeded random input. ``program``: the folder's `Program` when the caller
    has loaded it already (else it is read)."""
    # lazy: loads simpy, not otherwise loaded here
    from aipusim.simulator.functional.io import NOT_COMPLETE, check_inputs

    if program is None:
        program, _ = load_program_tables(compiled_dir)
    if program.memory is None:
        raise SimulationError(NOT_COMPLETE)
    if given is None:
        return check_inputs(program.memory, None)
    graph = load_reference(compiled_dir).graph
    chip = {}
    for name, value in given.items():
        arr = np.asarray(value)
        quant = graph.tensor(name).quant if name in graph.inputs else None
        if arr.dtype.kind == "f" and quant is not None:
            check_finite(name, arr)
            if tuple(arr.shape) != tuple(graph.shape(name)):
                raise ConfigError(
                    f"input {name} must have shape {list(graph.shape(name))}, not {list(arr.shape)}"
                )
            arr = quantize_values(arr.astype(np.float64), quant.scale, quant.zero_point, quant.axis)
        chip[name] = arr
    # the simulator's own check names a missing, unknown, mis-typed or mis-shaped input
    return check_inputs(program.memory, chip)[0], "given"


def compare(
    result: Any, compiled_dir: str | Path, inputs: Mapping[str, np.ndarray], how: str
) -> FunctionalCheck:
    """Check the functional `SimResult` ``result`` of ``compiled_dir`` run on ``inputs``
    against `run_int8` of the folder's reference on the same input."""
    # lazy: aipusim.compiler.quant.reference loads numba, not otherwise loaded here
    from aipusim.compiler.quant.reference import run_int8

    if result.outputs is None:
        raise ConfigError("the result must come from simulate(..., functional=True), not timing")
    reference = load_reference(compiled_dir)
    want = run_int8(reference, dict(inputs), raw=True, keep_all=True)
    outputs, exact = {}, True
    for name, got in result.outputs.items():
        ref = np.asarray(want[name])
        got = np.asarray(got).reshape(ref.shape)
        bad = int(np.count_nonzero(got != ref))
        outputs[name] = {"shape": list(ref.shape), "mismatches": bad}
        exact &= bad == 0
    gaps = dict(result.functional.get("functional_gaps") or {})
    first = None if exact else _first_mismatch(result, reference.graph, want)
    return FunctionalCheck(exact and not gaps, how, outputs, gaps, first)


def attach_check(
    result: Any, compiled_dir: str | Path, inputs: Mapping[str, np.ndarray], how: str
) -> FunctionalCheck:
    """`compare`, with the verdict's fields put on top of ``result.functional`` (so that
    ``--json`` and ``run.json`` carry ``bit_exact`` and the per-output mismatches)."""
    verdict = compare(result, compiled_dir, inputs, how)
    result.functional = {**(result.functional or {}), **verdict.to_dict()}
    return verdict


def run_on_chip(compiled_dir: str | Path, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The outputs of one frame executed by the functional simulator on ``feeds`` (int8, or
    float quantized with each input's scale), dequantized like the reference's."""
    # lazy: aipusim.simulator loads simpy, not otherwise loaded here
    from aipusim.simulator import simulate

    program, tasklists = load_program_tables(compiled_dir)
    inputs, _ = chip_inputs(compiled_dir, feeds, program=program)
    result = simulate(
        program, tasklists, frames=1, functional=True, inputs=inputs, constants=compiled_dir
    )
    graph = load_reference(compiled_dir).graph
    out = {}
    for name, arr in result.outputs.items():
        quant = graph.tensor(name).quant
        arr = np.asarray(arr).reshape(graph.shape(name))
        out[name] = (
            arr
            if quant is None
            else dequantize_values(arr, quant.scale, quant.zero_point, quant.axis)
        )
    return out


def _first_mismatch(result: Any, graph: Any, want: Mapping[str, np.ndarray]) -> FirstMismatch:
    """The first differing element of the layers' results in graph order (an output's own
    buffer when no placed tensor differs)."""
    placed = result.tensors or {}
    for node in graph.nodes:
        for name in (o for o in node.outputs if o):
            got = placed.get(name, result.outputs.get(name))
            if got is None or name not in want:
                continue
            ref = np.asarray(want[name])
            got = np.asarray(got).reshape(ref.shape)
            diff = np.argwhere(got != ref)
            if len(diff):
                index = tuple(int(i) for i in diff[0])
                return FirstMismatch(
                    name,
                    node.name,
                    index,
                    int(got[index]),
                    int(ref[index]),
                    _writers(result, name, index),
                )
    raise SimulationError("outputs differ but no tensor of the reference graph does")


def _writers(result: Any, tensor: str, index: tuple[int, ...]) -> tuple[str, ...]:
    writers = (result.tensor_writers or {}).get(tensor)
    if writers is None:
        return ()
    node = int(np.asarray(writers).reshape(np.asarray(result.tensors[tensor]).shape)[index])
    if node < 0:
        return ()
    row = result.functional_tasks.loc[node]
    return (
        f"core {row['core']} {row['unit']} task {row['task']} ({row['kind']}, layer "
        f"{row['layer']}, frame {row['frame']})",
    )


__all__ = [
    "FirstMismatch",
    "FunctionalCheck",
    "attach_check",
    "chip_inputs",
    "compare",
    "load_reference",
    "run_on_chip",
]
