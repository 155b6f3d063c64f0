"""The example of the issue (and of README's Python API section), end to end."""

from __future__ import annotations

import numpy as np

import aipusim


def test_resnet18_batch_range_call_simulate_profile() -> None:
    m = aipusim.compile("resnet18", inputs={"input": aipusim.InputInfo(((1, 1, 4), 3, 224, 224))})
    y = m(np.zeros((2, 3, 224, 224), np.float32))
    r = m.simulate(frames=4)
    layers = r.profile()
    assert y.shape == (2, 1000)
    # two identical images give identical logits
    assert np.array_equal(y[0], y[1])
    assert r.fps > 0 and r.latency_us_p50 > 0
    assert {"/conv1/Conv", "/fc/Gemm"} <= set(layers["layer"])
    assert (layers.loc[layers["layer"] == "/conv1/Conv", "samples"] > 0).all()
