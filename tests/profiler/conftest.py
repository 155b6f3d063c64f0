"""Hand-written traces for the profiler tests (1 MHz clock: one cycle is one µs)."""

from __future__ import annotations

from pathlib import Path

import pytest

HEADER = "# aipusim-trace 1 freq_hz=1000000 cores=2 model=tiny levels=B,PB,PE,K,M,T"

# Layer "conv" runs three times on core 0 (frames 0, 1, 2) with latencies 10, 20, 60;
# layer "add" once per frame. Frame 0's conv has an MVM task [2, 8) and a DMA [0, 4),
# so its span [0, 10) is covered by mvm 6, dma 4, union 8 -> waiting 2.
TINY = f"""{HEADER}
[B]  frame=0 inst=0 start=0 end=15
[PB] t=0 core=0 frame=0 layer=conv op=Conv
[M]  core=0 unit=dma0 frame=0 layer=conv task=1 src=ddr dst=l1 bytes=400 start=0 end=4
[K]  core=0 unit=mvm frame=0 layer=conv task=2 tile=0 start=2 end=8 macs=1000
[T]  t=8 core=0 token=3 scope=local op=signal task=2
[PE] t=10 core=0 frame=0 layer=conv
[PB] t=10 core=0 frame=0 layer=add op=Add
[K]  core=0 unit=dpu frame=0 layer=add task=3 tile=0 start=10 end=15 macs=0
[PE] t=15 core=0 frame=0 layer=add
[B]  frame=1 inst=0 start=15 end=40
[PB] t=15 core=0 frame=1 layer=conv op=Conv
[K]  core=0 unit=mvm frame=1 layer=conv task=2 tile=0 start=15 end=35 macs=1000
[PE] t=35 core=0 frame=1 layer=conv
[PB] t=35 core=0 frame=1 layer=add op=Add
[K]  core=0 unit=dpu frame=1 layer=add task=3 tile=0 start=35 end=40 macs=0
[PE] t=40 core=0 frame=1 layer=add
[B]  frame=2 inst=0 start=40 end=105
[PB] t=40 core=0 frame=2 layer=conv op=Conv
[K]  core=0 unit=mvm frame=2 layer=conv task=2 tile=0 start=40 end=100 macs=1000
[PE] t=100 core=0 frame=2 layer=conv
[PB] t=100 core=0 frame=2 layer=add op=Add
[K]  core=0 unit=dpu frame=2 layer=add task=3 tile=0 start=100 end=105 macs=0
[PE] t=105 core=0 frame=2 layer=add
"""


@pytest.fixture
def write_trace(tmp_path: Path):
    """Write text to ``tmp_path/<name>`` and return the path."""

    def write(text: str, name: str = "run.trace") -> Path:
        p = tmp_path / name
        p.write_text(text)
        return p

    return write


@pytest.fixture
def tiny(write_trace) -> Path:
    return write_trace(TINY)


@pytest.fixture
def header() -> str:
    return HEADER


@pytest.fixture
def tiny_text() -> str:
    return TINY
