"""Zoo models compiled end to end, then simulated: the mode comparisons of the issue.

Slow (each ResNet-50 compile takes tens of seconds): ``pytest -m slow tests/simulator``.
Which mode wins is what the model says; the checks below are the properties the hardware
model must show, not tuned figures.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from zoo_compiles import ZooCompiles, once, quantization_cache

from aipusim.cli.main import main
from aipusim.simulator import simulate

pytestmark = pytest.mark.slow

VARIANTS = {
    "c1": ["--set", "multicore_mode=cooperative"],
    "c4": ["--aipu-cores", "4", "--set", "multicore_mode=cooperative"],
    "b4": ["--aipu-cores", "4", "--set", "multicore_mode=batch"],
    "u05": ["--set", "multicore_mode=cooperative", "--set", "mvm_utilization_limit=0.5"],
}


class _Variants:
    """ResNet-50 compiled in a `VARIANTS` setup on first request, each once per session: in
    the folder the xdist workers share, so that the tests of this file may run on both
    workers (``--dist load``) and compile their variants side by side."""

    def __init__(self, zoo_compiles: ZooCompiles) -> None:
        self.onnx_path = zoo_compiles.model("resnet50", 224)
        self.root = zoo_compiles.compiles
        self.quant_cache = zoo_compiles.quant_cache

    def __getitem__(self, name: str) -> Path:
        def compile_into(out: Path) -> None:
            args = ["compile", "-i", str(self.onnx_path), "-o", str(out), *VARIANTS[name]]
            with quantization_cache(self.quant_cache):  # calibrated once for the four
                assert main(args) == 0

        return once(self.root / f"resnet50-cli-{name}", compile_into) / "compiled_model"


@pytest.fixture(scope="module")
def resnet50(zoo_compiles: ZooCompiles) -> _Variants:
    return _Variants(zoo_compiles)


def test_cooperative_on_four_cores_has_lower_latency(resnet50) -> None:
    one = simulate(resnet50["c1"], frames=4)
    four = simulate(resnet50["c4"], frames=4)
    assert four.latency_us_p50 < one.latency_us_p50
    for res in (one, four):
        assert np.all(res.device_latency_cycles >= res.lower_bound_cycles)
        assert all(b <= res.total_cycles for b in res.busy_cycles.values())


def test_batch_on_four_cores_clearly_out_throughputs_one_core(resnet50) -> None:
    one = simulate(resnet50["c1"], frames=8)
    batch = simulate(resnet50["b4"], frames=8)
    assert batch.device_fps > 1.5 * one.device_fps


def test_half_mvm_utilization_lowers_peak_power_not_raising_fps(resnet50) -> None:
    full = simulate(resnet50["c1"], frames=4)
    half = simulate(resnet50["u05"], frames=4)
    assert half.peak_power_w["10us"] < full.peak_power_w["10us"]
    assert half.fps <= full.fps


def test_400_mhz_doubles_the_time_of_compute_bound_layers(resnet50) -> None:
    fast = simulate(resnet50["c1"], frames=2)
    slow = simulate(resnet50["c1"], frames=2, overrides={"frequency": 400_000_000})

    def layer_spans(res) -> tuple[dict[str, int], dict[str, float]]:
        log = res.task_log
        log = log[(log["frame"] == 1) & (log["layer"] != "")]
        spans = log.groupby("layer").agg(start=("start", "min"), end=("end", "max"))
        mvm = log[log["unit"] == "mvm"].assign(d=lambda f: f["end"] - f["start"])
        busy = mvm.groupby("layer")["d"].sum()
        span = (spans["end"] - spans["start"]).to_dict()
        share = {k: busy.get(k, 0) / v for k, v in span.items() if v > 0}
        return span, share

    span_fast, share = layer_spans(fast)
    span_slow, _ = layer_spans(slow)
    compute_bound = [k for k, s in share.items() if s > 0.8 and span_fast[k] > 2000]
    assert compute_bound, "ResNet-50 must have MVM-bound layers"
    for layer in compute_bound:
        t_fast = span_fast[layer] / 800e6
        t_slow = span_slow[layer] / 400e6
        assert t_slow == pytest.approx(2 * t_fast, rel=0.1), layer
