"""Golden simulated results of the zoo models (small inputs), shared by the golden test and
its regeneration script. Update the JSON on purpose only, with the reason in the commit."""

from __future__ import annotations

import json
from pathlib import Path

import onnx

from aipusim import zoo
from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.driver import compile_model
from aipusim.compiler.request import CompileRequest
from aipusim.simulator import simulate

GOLDEN_FILE = Path(__file__).with_name("golden_cycles.json")
SIDE = {"yolov5s": 64, "yolov8n": 64}
#: (multicore_mode, aipu_cores_used, resources_used) per case name.
CASES = {"1core": ("multiprocess", 1, 1.0), "coop4": ("cooperative", 4, 1.0)}
FRAMES = 3


def measure(name: str, case: str, workdir: Path) -> dict[str, object]:
    """Compile and simulate one zoo model in one case; the figures the goldens pin."""
    mode, cores, resources = CASES[case]
    model = workdir / f"{name}.onnx"
    onnx.save(zoo.build(name, input_size=SIDE.get(name, 32)), model)
    config = CompilerConfig(aipu_cores_used=cores, resources_used=resources, multicore_mode=mode)
    out = workdir / f"{name}-{case}"
    compile_model(CompileRequest(model_path=model, output_dir=out, config=config))
    return figures(out / "compiled_model")


def figures(compiled: Path) -> dict[str, object]:
    """The figures the goldens pin, from simulating a compiled folder."""
    result = simulate(compiled, frames=FRAMES)
    return {
        "total_cycles": int(result.total_cycles),
        "device_latency_cycles": [int(c) for c in result.device_latency_cycles],
        "energy_pj": round(result.energy_mj_run * 1e9),
    }


def regenerate() -> None:
    """Rewrite the golden file from the current code (run: python tests/golden.py)."""
    import tempfile

    data = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in zoo.names():
            for case in CASES:
                data[f"{name}/{case}"] = measure(name, case, Path(tmp))
    GOLDEN_FILE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    regenerate()
