"""``aipusim bench --functional``: how long one functional frame takes, next to the same
model's fp32 inference in onnxruntime and the int8 reference executor.

The model is compiled once (not timed). Each figure is the median of ``rounds`` runs after
one warm-up run (numba compiles the kernels, onnxruntime builds its session). The
functional frame is what `simulate(..., functional=True, frames=1)` costs end to end: the
timing run, the run-order schedule, every task's data, the hazard sweeps.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from aipusim import zoo
from aipusim.api.functional_check import attach_check, chip_inputs, load_reference
from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.driver import compile_model
from aipusim.compiler.request import CompileRequest


def _median_s(fn: Callable[[], object], rounds: int) -> float:
    fn()  # warm-up: kernels compiled, sessions built
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def compile_zoo(
    name: str,
    tmp: Path,
    config: CompilerConfig,
    input_size: int | None,
    quantization_cache: bool,
) -> tuple[Path, Path]:
    """Compile zoo model ``name`` with ``config`` in folder ``tmp``: the ONNX file and the
    compiled folder."""
    model_path = tmp / f"{name}.onnx"
    onnx.save(zoo.build(name, input_size=input_size), model_path)
    out = tmp / "out"
    compile_model(
        CompileRequest(
            model_path=model_path,
            output_dir=out,
            config=config,
            quantization_cache=quantization_cache,
        )
    )
    return model_path, out / "compiled_model"


def functional_bench(
    name: str = "resnet50",
    *,
    mode: str = "cooperative",
    cores: int = 4,
    input_size: int | None = None,
    rounds: int = 3,
    quantization_cache: bool = True,
) -> dict[str, Any]:
    """Time one functional frame of zoo model ``name`` (compiled for ``mode`` on ``cores``
    cores) against onnxruntime fp32 and the int8 reference; the seconds, the two ratios and
    whether the frame was bit-exact."""
    # lazy: loads numba, onnxruntime, simpy, not otherwise loaded here
    import onnxruntime as ort

    from aipusim.compiler.quant.reference import run_int8
    from aipusim.simulator import simulate

    with tempfile.TemporaryDirectory(prefix="aipusim-fbench-") as tmp:
        resources = 1.0 if cores > 1 else 0.25
        config = CompilerConfig(
            aipu_cores_used=cores, multicore_mode=mode, resources_used=resources
        )
        model_path, folder = compile_zoo(name, Path(tmp), config, input_size, quantization_cache)
        inputs, how = chip_inputs(folder)
        reference = load_reference(folder)

        session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
        feed = {
            i.name: np.random.default_rng(0)
            .standard_normal([d if isinstance(d, int) else 1 for d in i.shape])
            .astype(np.float32)
            for i in session.get_inputs()
        }
        ort_s = _median_s(lambda: session.run(None, feed), rounds)
        int8_s = _median_s(lambda: run_int8(reference, inputs, raw=True), rounds)
        timing_s = _median_s(lambda: simulate(folder, frames=1), rounds)
        last: dict[str, Any] = {}

        def functional() -> None:
            last["result"] = simulate(folder, frames=1, functional=True, inputs=inputs)

        functional_s = _median_s(functional, rounds)
        check = attach_check(last["result"], folder, inputs, how)
        shape = "x".join(str(d) for d in zoo.info(name).input_shape)
        return {
            "model": name,
            "input": shape if input_size is None else f"{input_size}px",
            "mode": f"{mode} x{cores}",
            "functional_s": round(functional_s, 3),
            "timing_only_s": round(timing_s, 2),
            "onnxruntime_fp32_s": round(ort_s, 6),
            "int8_reference_s": round(int8_s, 4),
            "functional_vs_onnxruntime": round(functional_s / ort_s, 1),
            "functional_vs_int8_reference": round(functional_s / int8_s, 2),
            "gmac": round(last["result"].functional["mvm_macs"] / 1e9, 2),
            "bit_exact": check.bit_exact,
        }


__all__ = ["compile_zoo", "functional_bench"]
