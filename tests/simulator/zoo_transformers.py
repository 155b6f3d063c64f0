"""Full-size checks shared by the zoo transformers' slow tests (`test_deit_tiny.py`
and `test_vit_b16.py`, both in ``make test-slow``): every multicore mode, and the
``--quantize-only`` accuracy against fp32."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx

import aipusim
import aipusim.zoo as zoo
from aipusim.api.functional_check import attach_check, chip_inputs
from aipusim.cli.main import main
from aipusim.compiler.modelcard import builtin_config_path
from aipusim.simulator import simulate

#: (multicore_mode, aipu_cores_used, resources_used) of every multicore mode: 4 x Batch-1
#: as processes or threads of the host, and the three 4-core modes.
MODES = {
    "multiprocess": ("multiprocess", 1, 0.25),
    "multithread": ("multithread", 1, 0.25),
    "batch": ("batch", 4, 1.0),
    "cooperative": ("cooperative", 4, 1.0),
    "pipeline": ("pipeline", 4, 1.0),
}


def simulate_in_mode(
    name: str, mode_key: str, out: Path, *, check: bool = False
) -> tuple[aipusim.SimResult, dict]:
    """Compile zoo model ``name`` (its built-in config, the mode changed) and
    simulate 2 frames per replica; the simulation result and report.json. ``check``: run
    on data too and require the outputs bit-exact against the int8 reference."""
    mode, cores, resources = MODES[mode_key]
    config = {"multicore_mode": mode, "aipu_cores_used": cores, "resources_used": resources}
    m = aipusim.compile(name, config, output_dir=out)
    if check:
        folder = out / "compiled_model"
        inputs, how = chip_inputs(folder)
        result = simulate(folder, frames=2, functional=True, inputs=inputs)
        verdict = attach_check(result, folder, inputs, how)
        assert verdict.bit_exact, verdict.text()
    else:
        result = m.simulate(frames=2)
    assert result.active_cores == 4 and result.fps > 0
    assert np.all(result.device_latency_cycles >= result.lower_bound_cycles)
    assert all(b <= result.total_cycles for b in result.busy_cycles.values())
    return result, json.loads((out / "compiled_model" / "report.json").read_text())


def quantize_only_accuracy(name: str, tmp_path: Path) -> tuple[dict, str]:
    """``aipusim compile --quantize-only`` of zoo model ``name`` with its built-in config:
    compilation_report.json's ``accuracy`` and the compile log."""
    path = tmp_path / f"{name}.onnx"
    onnx.save(zoo.build(name), path)
    out = tmp_path / "q"
    args = ["compile", "-i", str(path), "--quantize-only", "-o", str(out)]
    assert main([*args, "--conf", str(builtin_config_path(name))]) == 0
    report = json.loads((out / "compilation_report.json").read_text())
    return report["accuracy"], (out / "compilation_log.txt").read_text()
