"""Scheduling knobs: DMA channels, fences between operators, prologue/epilogue, list
scheduling, host double buffering, hardware tokens."""

from __future__ import annotations

from backend_helpers import check_ok, compile_backend

from aipusim.compiler.backend.emit.files import build_program
from aipusim.compiler.backend.memplan.buffers import BufKind
from aipusim.isa.tasks import DmaCopy, Unit


def _waits(r) -> int:
    return sum(len(t.waits) for ts in r.tasks.values() for t in ts)


def test_dma_dual_channel_false_uses_one_channel() -> None:
    dual = compile_backend("resnet18", 224)
    single = compile_backend("resnet18", 224, dma_dual_channel=False)
    check_ok(single)
    units = lambda r: {t.unit for t in r.tasks[0] if isinstance(t, DmaCopy)}  # noqa: E731
    assert Unit.DMA1 in units(dual)
    assert Unit.DMA1 not in units(single)


def test_inter_operator_async_false_fences_every_operator() -> None:
    on = compile_backend("resnet18", 224)
    off = compile_backend("resnet18", 224, inter_operator_async=False)
    check_ok(off)
    deps = lambda r: sum(len(s.deps) for s in r.schedule.steps)  # noqa: E731
    assert deps(off) > deps(on)


def test_unroll_prologue_epilogue_drops_layer_boundary_waits() -> None:
    off = compile_backend("resnet18", 224)
    on = compile_backend("resnet18", 224, unroll_prologue_epilogue=True)
    check_ok(on)
    deps = lambda r: sum(len(s.deps) for s in r.schedule.steps)  # noqa: E731
    assert deps(on) < deps(off)


def test_list_scheduler_reorders_by_critical_path() -> None:
    plain = compile_backend("resnet18", 224)
    listed = compile_backend("resnet18", 224, use_list_scheduler=True)
    check_ok(listed)
    order = lambda r: [(t.unit, t.layer, t.tile) for t in r.tasks[0]]  # noqa: E731
    assert sorted(order(plain)) == sorted(order(listed))
    assert order(plain) != order(listed)


def test_double_buffer_gives_two_io_slots() -> None:
    on = compile_backend("tiny_cnn")
    off = compile_backend("tiny_cnn", double_buffer=False)

    def size(r) -> int:
        return next(b.size_bytes for b in r.memory.buffers.values() if b.kind is BufKind.INPUT)

    assert size(on) == 2 * size(off)
    assert build_program(on, "m", "id", {}).double_buffer
    assert not build_program(off, "m", "id", {}).double_buffer


def test_use_hw_tokens_false_is_told_to_the_runtime() -> None:
    r = compile_backend("tiny_cnn", use_hw_tokens=False)
    assert not build_program(r, "m", "id", {}).use_hw_tokens
