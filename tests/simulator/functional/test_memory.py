"""Where accesses land: I/O slots per frame, replica partitions, pool bounds."""

from __future__ import annotations

import numpy as np
import pytest
from functional_helpers import Image, chain, dma, int8, io, program, run

from aipusim.base.errors import HazardError, SimulationError
from aipusim.isa.image import BufferPlace
from aipusim.isa.program import MulticoreMode
from aipusim.isa.tasks import DwpuKind, DwpuOp, Phase, Pool, Unit

X, Y = 0x100000, 0x200000


def copy_program(*, slots: int, double_buffer: bool, mode=MulticoreMode.COOPERATIVE, **kw):
    """Every frame: input buffer -> L1 -> + a constant from the image -> output buffer."""
    img = Image()
    at = img.put(np.arange(64, dtype=np.int8))
    tasks = {
        0: chain([dma(Pool.DDR, at, Pool.L1, 0x1000, 64, phase=Phase.INIT)])
        + chain(
            [
                dma(Pool.DDR, X, Pool.L1, 0, 64, layer="in"),
                dma(Pool.L1, 0, Pool.DDR, Y, 64, unit=Unit.DMA1, layer="out"),
                dma(Pool.L1, 0x1000, Pool.DDR, Y + 64, 64, unit=Unit.DMA1, layer="const"),
            ]
        )
    }
    bufs = [
        io("x", "h2d", X, (64,), layout="row_major", slots=slots),
        io("y", "d2h", Y, (128,), layout="row_major", slots=slots),
    ]
    prog = program(tasks, img, io_bufs=bufs, double_buffer=double_buffer, mode=mode, **kw)
    return prog, tasks, img


def test_double_buffered_frames_use_their_own_slots() -> None:
    prog, tasks, img = copy_program(slots=2, double_buffer=True)
    x = int8(64)
    res = run(prog, tasks, img, inputs={"x": x}, frames=5)
    assert np.array_equal(res.outputs["y"], np.concatenate([x, np.arange(64, dtype=np.int8)]))
    assert res.functional["outputs_agree_across_frames"]


def test_one_slot_under_double_buffering_is_a_hazard() -> None:
    # the runtime overlaps the next input with this frame: with one slot they collide
    prog, tasks, img = copy_program(slots=1, double_buffer=True)
    message = (
        r"the host's input \(h2d\) of start 1 \(replica 0\) overwrites what core 0 dma0 "
        r"task 0 \(DmaCopy, layer 'in', frame 0\) still reads at ddr 0x100000..0x100040 "
        r"\(I/O buffer x, slot 0\), and nothing orders the two"
    )
    with pytest.raises(HazardError, match=message):
        run(prog, tasks, img, frames=3)


def test_replicas_see_their_own_partition() -> None:
    part = {"ddr": 0x400000, "l2": 0}
    prog, tasks, img = copy_program(
        slots=1, double_buffer=False, mode=MulticoreMode.MULTIPROCESS, resources=0.5, partition=part
    )
    assert prog.replicas == 2
    x = int8(64)
    res = run(prog, tasks, img, inputs={"x": x}, frames=2)
    assert np.array_equal(res.outputs["y"][:64], x)
    assert res.functional["frames"] == 4


def test_replicas_without_a_partition_collide() -> None:
    prog, tasks, img = copy_program(
        slots=1, double_buffer=False, mode=MulticoreMode.MULTIPROCESS, resources=0.5
    )
    message = (
        r"the host's input \(h2d\) of start 0 \(replica 1\) writes what the host's input "
        r"\(h2d\) of start 0 \(replica 0\) wrote at ddr 0x100000..0x100040 \(I/O buffer x"
    )
    with pytest.raises(HazardError, match=message):
        run(prog, tasks, img, frames=1)


def test_a_partition_beyond_the_pool_is_named() -> None:
    part = {"ddr": 4_261_412_830}  # replica 1's constants would end past the chip's DDR
    prog, tasks, img = copy_program(
        slots=1, double_buffer=False, mode=MulticoreMode.MULTIPROCESS, resources=0.5, partition=part
    )
    lo = part["ddr"]
    message = (
        rf"constants image constants.bin: ddr access {lo:#x}..{lo + 64:#x} lies outside "
        r"the 4261412864 usable bytes of ddr"
    )
    with pytest.raises(SimulationError, match=message):
        run(prog, tasks, img)


def test_an_access_beyond_the_replicas_partition_is_named() -> None:
    prog, tasks, img = copy_program(
        slots=1,
        double_buffer=False,
        mode=MulticoreMode.MULTIPROCESS,
        resources=0.5,
        partition={"ddr": 0x1000},
    )
    message = (
        r"I/O x: ddr access 0x100000..0x100040 lies outside the 4096 bytes of ddr one replica "
        r"owns \(model.json partition\)"
    )
    with pytest.raises(SimulationError, match=message):
        run(prog, tasks, img)


def test_an_extent_past_l1_names_the_task() -> None:
    img = Image()
    # the first byte lies inside L1 (isa check passes it), the output rows do not
    pool = DwpuOp(
        unit=Unit.DWPU,
        layer="pool",
        kind=DwpuKind.MAXPOOL,
        in_addr=0,
        out_addr=3_670_000,
        channels=8,
        h=4,
        w=4,
        out_h=4,
        out_w=4,
        kh=1,
        kw=1,
        stride=1,
        in_pitch=8,
        in_row_pitch=32,
        out_pitch=8,
        out_row_pitch=32,
    )
    tasks = {0: [pool]}
    with pytest.raises(
        SimulationError,
        match=r"core 0 dwpu task 0 \(DwpuOp, layer 'pool', "
        r"frame 0\): l1 access 0x37fff0..0x380070 lies outside the 3670016 "
        r"usable bytes of l1",
    ):
        run(program(tasks, img), tasks, img)


def test_only_accesses_inside_an_io_slot_are_relocated() -> None:
    # frame 1 uses slot 1 of the input: a copy of slot 0's bytes moves with it; a copy
    # across the buffer's edge belongs to another buffer and stays where it is
    img = Image()
    x = int8(64)
    tasks = {
        0: chain(
            [
                dma(Pool.DDR, X, Pool.L1, 0, 64, layer="in"),
                dma(Pool.DDR, X - 32, Pool.L1, 0x100, 64, layer="edge"),
                dma(Pool.L1, 0, Pool.DDR, Y, 64, unit=Unit.DMA1),
                dma(Pool.L1, 0x100, Pool.DDR, Y + 64, 64, unit=Unit.DMA1),
            ]
        )
    }
    bufs = [
        io("x", "h2d", X, (64,), layout="row_major", slots=2),
        io("y", "d2h", Y, (128,), layout="row_major", slots=2),
    ]
    prog = program(tasks, img, io_bufs=bufs, double_buffer=True)
    res = run(prog, tasks, img, inputs={"x": x}, frames=2)
    y = res.outputs["y"]
    assert np.array_equal(y[:64], x)  # frame 1 read its own slot
    assert np.array_equal(y[96:], x[:32])  # the edge copy saw slot 0 (frame 0's input)


def test_slots_must_be_the_buffers_alone() -> None:
    img = Image()
    tasks = {0: [dma(Pool.DDR, X, Pool.L1, 0, 64)]}
    bufs = [io("x", "h2d", X, (64,), layout="row_major", slots=2)]
    others = [BufferPlace("tile_out:conv", "ddr", -1, X + 96, 16)]
    prog = program(tasks, img, io_bufs=bufs, buffers=others, double_buffer=True)
    message = (
        r"I/O buffer x uses 2 slots \(ddr 0x100000..0x100080\), but the memory plan also "
        r"places tile_out:conv at 0x100060..0x100070"
    )
    with pytest.raises(SimulationError, match=message):
        run(prog, tasks, img)
    # without double buffering every frame uses slot 0: the plan may reuse slot 1
    run(program(tasks, img, io_bufs=bufs, buffers=others), tasks, img, frames=2)
