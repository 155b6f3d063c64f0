"""Functional simulation speed: a synthetic ResNet-50-sized MVM workload (4.2 GMAC a frame).

One core runs 1x1 convs on 56 x 56 x 256 and 28 x 28 x 512 tiles and 3x3 convs on
56 x 56 x 64 tiles (two row blocks, partial sums), the shapes that carry most of
ResNet-50's MACs, 8 of each per frame. The benchmark times one functional frame from
`simulate` (timing run, schedule, hazard sweeps, kernels) and prints its GMAC/s beside the
timing-only run. Nothing here asserts on time.

Run with ``pytest tests/benchmarks/test_functional_bench.py --benchmark-only -s``.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "simulator" / "functional"))

from functional_helpers import Image, channel_params, dma, program, tok

from aipusim.isa.tasks import Mvm, Phase, Pool, PostOp, Task, Unit, WeightLoad
from aipusim.simulator import simulate

#: (name, tile h, w, cin, cout, k): the layer shapes of the workload.
LAYERS = (("a", 56, 56, 256, 256, 1), ("b", 56, 56, 64, 64, 3), ("c", 28, 28, 512, 512, 1))
PSUM, OUT, STAGE, PARAMS = 0x1A0000, 0xD0000, 0x280000, 0x300000


def workload(repeats: int = 8) -> tuple[object, dict[int, list[Task]], Image, int]:
    rng = np.random.default_rng(1)
    img = Image()
    x = rng.integers(-128, 128, 56 * 56 * 256).astype(np.int8)
    init: list[Task] = [dma(Pool.DDR, img.put(x), Pool.L1, 0, x.size, phase=Phase.INIT)]
    rec = channel_params(512)
    init.append(dma(Pool.DDR, img.put(rec), Pool.L1, PARAMS, rec.nbytes, phase=Phase.INIT))
    blocks: list[tuple[int, int, int]] = []  # (set, rows, cols)
    for _, _, _, cin, cout, k in LAYERS:
        rows = k * k * cin
        for r0 in range(0, rows, 512):
            blocks.append((len(blocks), min(512, rows - r0), cout))
    stage = STAGE
    for ws, rows, cols in blocks:
        w = rng.integers(-128, 128, rows * cols).astype(np.int8)
        init.append(dma(Pool.DDR, img.put(w), Pool.L1, stage, w.size, phase=Phase.INIT))
        init.append(
            WeightLoad(
                unit=Unit.WLOAD,
                phase=Phase.INIT,
                weight_set=ws,
                src_addr=stage,
                bytes=w.size,
                rows_used=rows,
                cols_used=cols,
            )
        )
        stage += w.size
    frame: list[Task] = []
    macs = 0
    for _ in range(repeats):
        ws = 0
        for name, h, w_, cin, cout, k in LAYERS:
            rows = k * k * cin
            for r0 in range(0, rows, 512):
                n = min(512, rows - r0)
                last = r0 + n >= rows
                frame.append(
                    Mvm(
                        unit=Unit.MVM,
                        layer=name,
                        weight_set=ws,
                        in_addr=0,
                        out_addr=OUT,
                        vectors=h * w_,
                        rows_used=n,
                        cols_used=cout,
                        accumulate=int(r0 > 0),
                        post=PostOp.REQUANT if last else PostOp.NONE,
                        psum_addr=PSUM,
                        param_addr=PARAMS,
                        in_w=w_,
                        in_rows=h,
                        in_pitch=cin,
                        in_row_pitch=w_ * cin,
                        cin=cin,
                        cpad=cin,
                        kh=k,
                        kw=k,
                        pad_top=k // 2,
                        pad_left=k // 2,
                        row0=r0,
                        out_w=w_,
                        out_pitch=cout,
                        out_row_pitch=w_ * cout,
                    )
                )
                macs += h * w_ * n * cout
                ws += 1
    tasks = {0: _ordered(init) + frame}
    return program(tasks, img), tasks, img, macs


def _ordered(init: list[Task]) -> list[Task]:
    """INIT: every copy first (one DMA queue), then the loads after a token from the last."""
    copies = [t for t in init if t.unit is not Unit.WLOAD]
    loads = [t for t in init if t.unit is Unit.WLOAD]
    copies[-1] = replace(copies[-1], signals=(tok(0),))
    loads[0] = replace(loads[0], waits=(tok(0),))
    return copies + loads


@pytest.mark.benchmark(group="functional")
def test_functional_resnet50_sized_frame(benchmark) -> None:
    prog, tasks, img, macs = workload()
    simulate(prog, tasks, frames=1, functional=True, constants=bytes(img))  # compile kernels
    t0 = time.perf_counter()
    simulate(prog, tasks, frames=1)
    timing_s = time.perf_counter() - t0
    res = benchmark.pedantic(
        lambda: simulate(prog, tasks, frames=1, functional=True, constants=bytes(img)),
        rounds=3,
        iterations=1,
    )
    best = benchmark.stats.stats.min
    print(
        f"\nfunctional frame: {macs / 1e9:.2f} GMAC in {best:.2f} s ({macs / best / 1e9:.1f} "
        f"GMAC/s; timing-only run {timing_s:.2f} s; saturations "
        f"{res.functional['saturations']})"
    )


@pytest.mark.benchmark(group="functional")
@pytest.mark.slow
def test_functional_resnet50_coop_frame_against_onnxruntime(benchmark) -> None:
    """Issue 15's figure: one functional ResNet-50 frame (224 px, cooperative on 4 cores)
    against onnxruntime fp32 and the int8 reference, in one run; prints both ratios."""
    from aipusim.bench.functional import functional_bench

    row = benchmark.pedantic(functional_bench, rounds=1, iterations=1)
    assert row["bit_exact"]
    print(
        f"\nResNet-50 coop x4: functional {row['functional_s']} s, onnxruntime fp32 "
        f"{row['onnxruntime_fp32_s']} s, int8 reference {row['int8_reference_s']} s; "
        f"functional/onnxruntime {row['functional_vs_onnxruntime']}x, functional/int8 "
        f"{row['functional_vs_int8_reference']}x"
    )
