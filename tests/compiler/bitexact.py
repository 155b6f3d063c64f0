"""Compile a small ONNX model and check its functional run against the int8 reference.

Shared by the quantization pathology tests and the random-CNN property test.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import onnx

import aipusim
from aipusim.api.functional_check import chip_inputs, compare, load_reference
from aipusim.simulator import simulate


def compile_bit_exact(
    model: onnx.ModelProto,
    out: Path,
    config: Mapping[str, Any] | None = None,
    known_gaps: Collection[str] = (),
) -> Any:
    """Compile ``model`` into ``out``, run one frame on data and assert it is bit-exact and
    complete (no functional gaps); returns the int8 reference (a `QuantizedGraph`).

    ``known_gaps``: reasons of functional gaps (layers the compiler declares timed only)
    to accept; a model with only such gaps is not run on data and None is returned."""
    folder = aipusim.compile(model, dict(config or {}), output_dir=out).compiled_dir()
    gaps = json.loads((folder / "model.json").read_text())["extra"]["functional_gaps"]
    if gaps and set(gaps.values()) <= set(known_gaps):
        return None
    assert gaps == {}, gaps
    chip, how = chip_inputs(folder)
    check = compare(simulate(folder, frames=1, functional=True, inputs=chip), folder, chip, how)
    assert check.bit_exact, check.text()
    return load_reference(folder)
