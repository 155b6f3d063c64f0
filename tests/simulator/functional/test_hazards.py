"""Hazards: unordered tasks on the same bytes raise HazardError naming both, the range and
the buffer; so do token units the frames leave unconsumed; orderings through tokens,
barriers and phases are accepted."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from functional_helpers import Image, chain, dma, gtok, int8, io, program, run, tok

from aipusim.base.errors import HazardError
from aipusim.isa.image import BufferPlace
from aipusim.isa.tasks import (
    Barrier,
    DpuKind,
    DpuOp,
    Mvm,
    Phase,
    Pool,
    PostOp,
    Task,
    TokenSignal,
    Unit,
    WeightLoad,
)

X, Y, L2 = 0x100000, 0x200000, 0x10000


def copy(src: int, dst: int, n: int = 256, **kw) -> DpuOp:
    return DpuOp(unit=Unit.DPU, kind=DpuKind.COPY, in_addr0=src, out_addr=dst, elements=n, **kw)


def two_core_program() -> tuple[dict[int, list[Task]], Image, list]:
    """Core 0: input -> L1 -> copy -> L2 (global token 0); core 1: L2 -> L1 -> copy ->
    output, then frees the L2 buffer (global token 1) for core 0's next frame, which INIT
    credits once."""
    img = Image()
    core0 = [
        TokenSignal(unit=Unit.DMA1, phase=Phase.INIT, signals=(gtok(1),)),  # L2 free credit
        dma(Pool.DDR, X, Pool.L1, 0, 256, layer="in", signals=(tok(0),)),
        copy(0, 0x1000, layer="stage0", waits=(tok(0),), signals=(tok(1),)),
        dma(
            Pool.L1,
            0x1000,
            Pool.L2,
            L2,
            256,
            unit=Unit.DMA1,
            layer="to_l2",
            waits=(tok(1), gtok(1)),
            signals=(gtok(0),),
        ),
    ]
    core1 = [
        dma(Pool.L2, L2, Pool.L1, 0, 256, layer="from_l2", waits=(gtok(0),), signals=(tok(0),)),
        TokenSignal(unit=Unit.DMA0, layer="free", signals=(gtok(1),)),
        copy(0, 0x1000, layer="stage1", waits=(tok(0),), signals=(tok(1),)),
        dma(Pool.L1, 0x1000, Pool.DDR, Y, 256, unit=Unit.DMA1, layer="out", waits=(tok(1),)),
    ]
    bufs = [
        io("x", "h2d", X, (256,), layout="row_major"),
        io("y", "d2h", Y, (256,), layout="row_major", core=1),
    ]
    return {0: core0, 1: core1}, img, bufs


def run_two(tasks, img, bufs, frames=3, double_buffer=False):
    if double_buffer:
        bufs = [replace(b, slots=2) for b in bufs]
    buffers = [BufferPlace("act_l2", "l2", -1, L2, 256), BufferPlace("in_l1", "l1", 0, 0, 256)]
    prog = program(tasks, img, io_bufs=bufs, buffers=buffers, double_buffer=double_buffer)
    return run(prog, tasks, img, inputs={"x": int8(256)}, frames=frames)


def test_the_two_core_pipeline_is_ordered() -> None:
    tasks, img, bufs = two_core_program()
    res = run_two(tasks, img, bufs, frames=4)
    assert res.functional["hazard_checked_tasks"] > 0


def test_a_removed_wait_names_both_tasks_the_range_and_the_buffer() -> None:
    tasks, img, bufs = two_core_program()
    tasks[1][0] = replace(tasks[1][0], waits=())  # core 1 reads L2 without waiting for it
    # core 1 now reads first; core 0's write lands on what it read
    message = (
        r"core 0 dma1 task 2 \(DmaCopy, layer 'to_l2', frame 0\) overwrites what core 1 dma0 "
        r"task 0 \(DmaCopy, layer 'from_l2', frame 0\) still reads at l2 0x10000..0x10100 "
        r"\(buffer act_l2\), and nothing orders the two"
    )
    with pytest.raises(HazardError, match=message):
        run_two(tasks, img, bufs)


def test_an_overwrite_of_unfinished_reads_is_found() -> None:
    tasks, img, bufs = two_core_program()
    tasks[0][3] = replace(tasks[0][3], waits=(tok(1),))  # no longer waits for the free buffer
    # (double buffering lets core 0 start frame 1 before core 1 finished frame 0)
    message = (
        r"core 0 dma1 task 2 \(DmaCopy, layer 'to_l2', frame 1\) overwrites what core 1 dma0 "
        r"task 0 \(DmaCopy, layer 'from_l2', frame 0\) still reads at l2 0x10000..0x10100"
    )
    with pytest.raises(HazardError, match=message):
        run_two(tasks, img, bufs, double_buffer=True)


def test_frames_that_signal_more_than_they_take_are_found() -> None:
    tasks, img, bufs = two_core_program()
    tasks[1].append(TokenSignal(unit=Unit.DPU, layer="stray", signals=(tok(5),)))
    message = (
        r"token core1.local5 still holds 3 unit\(s\) the frames signalled at the end of the "
        r"run, the last by core 1 dpu task 4 \(TokenSignal, layer 'stray', frame 2\): a wait "
        r"on it is missing"
    )
    with pytest.raises(HazardError, match=message):
        run_two(tasks, img, bufs)


def test_two_unordered_writers_are_found() -> None:
    img = Image()
    tasks = {0: [copy(0x100, 0, 64, layer="a"), dma(Pool.L2, 0, Pool.L1, 32, 64, layer="b")]}
    with pytest.raises(
        HazardError,
        match=r"core 0 dma0 task 1 \(DmaCopy, layer 'b', frame 0\) "
        r"writes what core 0 dpu task 0 \(DpuOp, layer 'a', frame 0\) wrote at l1 of core 0 "
        r"0x20..0x40",
    ):
        run(program(tasks, img), tasks, img)


def test_a_weight_set_loaded_under_a_running_mvm_is_found() -> None:
    img = Image()
    load = WeightLoad(
        unit=Unit.WLOAD,
        layer="w",
        weight_set=2,
        src_addr=0x1000,
        bytes=64,
        rows_used=8,
        cols_used=8,
    )
    mvm = Mvm(
        unit=Unit.MVM,
        layer="m",
        weight_set=2,
        in_addr=0,
        out_addr=0x2000,
        vectors=4,
        rows_used=8,
        cols_used=8,
        post=PostOp.NONE,
        psum_addr=0x3000,
        in_w=4,
        in_rows=1,
        in_pitch=8,
        in_row_pitch=32,
        cin=8,
        cpad=64,
        out_w=4,
    )
    tasks = {0: [replace(load, signals=(tok(0),)), replace(mvm, waits=(tok(0),)), load]}
    with pytest.raises(
        HazardError,
        match=r"core 0 wload task 2 \(WeightLoad, layer 'w', frame 0\) "
        r"overwrites what core 0 mvm task 1 .* still reads at imc of core 0 "
        r"0x2..0x3 \(IMC weight set\)",
    ):
        run(program(tasks, img), tasks, img)


def test_a_barrier_orders_the_cores() -> None:
    img = Image()
    # core 0 writes L2, its control core waits for that before the barrier; core 1 reads L2
    # after the barrier (its later tasks are dispatched only once the barrier is done)
    core0 = [
        dma(Pool.L1, 0, Pool.L2, L2, 64, layer="w", signals=(tok(0),)),
        Barrier(unit=Unit.CTRL, layer="sync", barrier_id=1, core_mask=0b11, waits=(tok(0),)),
    ]
    core1 = [
        Barrier(unit=Unit.CTRL, layer="sync", barrier_id=1, core_mask=0b11),
        dma(Pool.L2, L2, Pool.L1, 0, 64, layer="r"),
    ]
    tasks = {0: core0, 1: core1}
    run(program(tasks, img), tasks, img, frames=2)
    unsynced = {0: [replace(core0[0], signals=())], 1: [core1[1]]}
    with pytest.raises(HazardError, match=r"core 1 dma0 task 0 \(DmaCopy, layer 'r', frame 0\)"):
        run(program(unsynced, img), unsynced, img, frames=2)


def every_wait(tasks: dict[int, list[Task]]) -> list[tuple[int, int, int]]:
    return [
        (c, i, k)
        for c, lst in tasks.items()
        for i, t in enumerate(lst)
        for k in range(len(t.waits))
    ]


@pytest.mark.parametrize("removed", every_wait(two_core_program()[0]))
def test_every_removed_wait_is_found(removed: tuple[int, int, int]) -> None:
    tasks, img, bufs = two_core_program()
    c, i, k = removed
    t = tasks[c][i]
    tasks[c][i] = replace(t, waits=t.waits[:k] + t.waits[k + 1 :])
    with pytest.raises(HazardError):
        run_two(tasks, img, bufs)


def test_chained_programs_are_clean() -> None:
    img = Image()
    steps = [dma(Pool.DDR, X, Pool.L1, 0, 64)] + [
        copy(0x1000 * (i % 2), 0x1000 * ((i + 1) % 2), 64) for i in range(6)
    ]
    steps.append(dma(Pool.L1, 0, Pool.DDR, Y, 64, unit=Unit.DMA1))
    tasks = {0: chain(steps)}
    bufs = [
        io("x", "h2d", X, (64,), layout="row_major"),
        io("y", "d2h", Y, (64,), layout="row_major"),
    ]
    x = int8(64)
    res = run(program(tasks, img, io_bufs=bufs), tasks, img, inputs={"x": x}, frames=2)
    assert np.array_equal(res.outputs["y"], x)
