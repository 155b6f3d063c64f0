"""``profile --compare``: per-frame figures, so runs that sample layers differently compare."""

from __future__ import annotations

import json

import pytest

from aipusim.cli.main import main
from aipusim.profiler import compare_layers, load_trace

# one sample of `conv` per frame, 10 µs of MVM each
PER_FRAME = """[B]  frame=0 inst=0 start=0 end=10
[PB] t=0 core=0 frame=0 layer=conv op=Conv
[K]  core=0 unit=mvm frame=0 layer=conv task=1 tile=0 start=0 end=10 macs=100
[PE] t=10 core=0 frame=0 layer=conv
[B]  frame=1 inst=0 start=10 end=20
[PB] t=10 core=0 frame=1 layer=conv op=Conv
[K]  core=0 unit=mvm frame=1 layer=conv task=1 tile=0 start=10 end=20 macs=100
[PE] t=20 core=0 frame=1 layer=conv
"""
# the same work batched: one sample of `conv` for two frames, 20 µs
BATCHED = """[B]  frame=0 inst=0 start=0 end=20
[B]  frame=1 inst=0 start=0 end=20
[PB] t=0 core=0 frame=0 layer=conv op=Conv
[K]  core=0 unit=mvm frame=0 layer=conv task=1 tile=0 start=0 end=20 macs=200
[PE] t=20 core=0 frame=0 layer=conv
"""


@pytest.fixture
def pair(write_trace, header):
    a = write_trace(f"{header}\n{PER_FRAME}", "a.trace")
    b = write_trace(f"{header}\n{BATCHED}", "b.trace")
    return a, b


def test_deltas_are_per_frame(pair) -> None:
    a, b = pair
    row = compare_layers(load_trace(a), load_trace(b)).set_index("layer").loc["conv"]
    assert (row["busy_us_a"], row["busy_us_b"]) == (10.0, 10.0)
    assert row["delta_busy_us"] == 0.0
    assert (row["samples_per_frame_a"], row["samples_per_frame_b"]) == (1.0, 0.5)


def test_the_header_names_both_runs(pair, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = pair
    assert main(["profile", str(a), "--compare", str(b)]) == 0
    out = capsys.readouterr().out
    head = out.split("\n\n")[0].splitlines()
    assert head[0].startswith(f"a: {a}: 2 frames, ") and "fps" in head[0]
    assert "latency p50" in head[0] and "power: no timeline" in head[0]
    assert head[1].startswith(f"b: {b}: 2 frames, ")
    assert "per frame" in out
    assert main(["profile", str(a), "--compare", str(b), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["delta_busy_us"] == 0.0
