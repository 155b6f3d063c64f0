"""DmaCopy on data: rows, planes, strides, transposes, broadcasts and multicast."""

from __future__ import annotations

import numpy as np
import pytest
from functional_helpers import Image, chain, dma, gtok, int8, io, program, run

from aipusim.base.errors import SimulationError
from aipusim.isa.program import MulticoreMode
from aipusim.isa.tasks import Pool, Unit

X, Y = 0x100000, 0x200000


def copy_through_l1(x: np.ndarray, first: dict, second: dict, out_bytes: int) -> np.ndarray:
    """Input -> (DMA ``first`` into L1 at 0) -> (DMA ``second`` out to the output buffer)."""
    img = Image()
    tasks = {
        0: chain(
            [
                dma(Pool.DDR, X, Pool.L1, 0, layer="in", **first),
                dma(Pool.L1, 0, Pool.DDR, Y, unit=Unit.DMA1, layer="out", **second),
            ]
        )
    }
    bufs = [
        io("x", "h2d", X, x.shape, layout="row_major"),
        io("y", "d2h", Y, (out_bytes,), layout="row_major"),
    ]
    res = run(program(tasks, img, io_bufs=bufs), tasks, img, inputs={"x": x})
    return res.outputs["y"]


def runs_ref(
    src: np.ndarray,
    dst: np.ndarray,
    planes: int,
    rows: int,
    run_len: int,
    s: tuple[int, int, int],
    d: tuple[int, int, int],
) -> None:
    """What a DmaCopy does, run by run: (addr, plane stride, row stride) per side."""
    for p in range(planes):
        for r in range(rows):
            a = s[0] + p * s[1] + r * s[2]
            b = d[0] + p * d[1] + r * d[2]
            dst[b : b + run_len] = src[a : a + run_len]


def test_rows_and_planes_gather_a_strided_slice() -> None:
    x = int8(240)
    # 3 planes 80 apart, 4 rows 16 apart, runs of 5 bytes from offset 3; packed on the way in
    first = dict(
        bytes=60,
        planes=3,
        rows=4,
        src_plane_stride=80,
        src_stride=16,
        dst_plane_stride=20,
        dst_stride=5,
    )
    second = dict(bytes=60)
    got = copy_through_l1(x, {**first, "src_addr": X + 3}, second, 60)
    want = np.zeros(60, np.int8)
    runs_ref(x, want, 3, 4, 5, (3, 80, 16), (0, 20, 5))
    assert np.array_equal(got, want)


def test_planes_transpose_channels_last_to_first() -> None:
    h, w, c = 3, 5, 4
    x = int8(h, w, c)
    first = dict(bytes=h * w * c)
    # one byte per run: plane = channel (source step 1, destination step h*w)
    second = dict(
        bytes=h * w * c,
        planes=c,
        rows=h * w,
        src_plane_stride=1,
        src_stride=c,
        dst_plane_stride=h * w,
        dst_stride=1,
    )
    got = copy_through_l1(x, first, second, h * w * c)
    assert np.array_equal(got, x.transpose(2, 0, 1).reshape(-1))


def test_zero_stride_repeats_the_source() -> None:
    x = int8(8)
    first = dict(bytes=32, rows=4, src_stride=0, dst_stride=8)  # four copies of 8 bytes
    got = copy_through_l1(x, first, dict(bytes=32), 32)
    assert np.array_equal(got, np.tile(x, 4))


def test_multicast_writes_every_masked_core() -> None:
    x = int8(64)
    img = Image()
    # core 0 fetches once into the L1 of cores 0 and 1; each core sends its copy back
    core0 = chain(
        [
            dma(Pool.DDR, X, Pool.L1, 0x400, bytes=64, dst_core_mask=0b11, signals=(gtok(0),)),
            dma(Pool.L1, 0x400, Pool.DDR, Y, bytes=64, unit=Unit.DMA1),
        ]
    )
    core1 = [dma(Pool.L1, 0x400, Pool.DDR, Y + 64, bytes=64, waits=(gtok(0),))]
    tasks = {0: core0, 1: core1}
    bufs = [
        io("x", "h2d", X, (64,), layout="row_major"),
        io("y0", "d2h", Y, (64,), layout="row_major"),
        io("y1", "d2h", Y + 64, (64,), layout="row_major", core=1),
    ]
    res = run(program(tasks, img, io_bufs=bufs), tasks, img, inputs={"x": x})
    assert np.array_equal(res.outputs["y0"], x) and np.array_equal(res.outputs["y1"], x)


@pytest.mark.parametrize(
    ("task", "message"),
    [
        (dict(bytes=10, rows=3), r"bytes must be a positive multiple of planes x rows \(1 x 3\)"),
        (
            dict(bytes=8, dst_core_mask=0b10, dst_pool=Pool.L2),
            "dst_core_mask needs an l1 destination, not l2",
        ),
        (
            dict(bytes=8, dst_core_mask=0b100),
            r"dst_core_mask must name cores of the instance "
            r"0-0, not 0b100",
        ),
    ],
    ids=["rows", "mask-pool", "mask-core"],
)
def test_bad_copies_are_named(task: dict, message: str) -> None:
    img = Image()
    kw = {"dst_pool": Pool.L1, **task}
    pool = kw.pop("dst_pool")
    tasks = {0: [dma(Pool.DDR, X, pool, 0, layer="bad", **kw)]}
    bufs = [io("x", "h2d", X, (16,), layout="row_major")]
    with pytest.raises(
        SimulationError,
        match=r"core 0 dma0 task 0 \(DmaCopy, layer 'bad', "
        r"frame 0\): " + message,
    ):
        run(program(tasks, img, io_bufs=bufs), tasks, img, inputs={"x": int8(16)})


def test_batch_mode_cores_run_their_own_frames() -> None:
    img = Image()
    # each core copies its own input buffer to its own output buffer
    tasks = {
        c: chain(
            [
                dma(Pool.DDR, X + 64 * c, Pool.L1, 0, bytes=64),
                dma(Pool.L1, 0, Pool.DDR, Y + 64 * c, bytes=64, unit=Unit.DMA1),
            ]
        )
        for c in range(2)
    }
    bufs = [io("x", "h2d", X + 64 * c, (64,), layout="row_major", core=c) for c in range(2)]
    bufs += [io("y", "d2h", Y + 64 * c, (64,), layout="row_major", core=c) for c in range(2)]
    x = int8(64)
    prog = program(tasks, img, io_bufs=bufs, mode=MulticoreMode.BATCH)
    res = run(prog, tasks, img, inputs={"x": x}, frames=4)
    assert np.array_equal(res.outputs["y"], x)
    assert res.functional["outputs_agree_across_frames"]
    assert res.functional["frames"] == 4
