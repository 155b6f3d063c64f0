"""Static checker: token ranges and balance, barriers, deadlocks by abstract execution."""

from __future__ import annotations

from pathlib import Path

import pytest

from aipusim.arch import load_arch
from aipusim.base.errors import TasklistError
from aipusim.isa.check import (
    ProblemKind,
    Severity,
    check_paths,
    check_tasklists,
    load_tasklists,
)
from aipusim.isa.tasklist import Tasklist, tasklist_path, write_tasklist
from aipusim.isa.tasks import (
    Barrier,
    Phase,
    TokenRef,
    TokenScope,
    TokenSignal,
    TokenWait,
    Unit,
)

ARCH = load_arch()


def L(index: int, count: int = 1) -> TokenRef:
    return TokenRef(TokenScope.LOCAL, index, count)


def G(index: int, count: int = 1) -> TokenRef:
    return TokenRef(TokenScope.GLOBAL, index, count)


def sig(unit: Unit, *refs: TokenRef, layer: str = "x", phase: Phase = Phase.FRAME) -> TokenSignal:
    return TokenSignal(unit=unit, signals=refs, layer=layer, phase=phase)


def wait(unit: Unit, *refs: TokenRef, layer: str = "x", phase: Phase = Phase.FRAME) -> TokenWait:
    return TokenWait(unit=unit, waits=refs, layer=layer, phase=phase)


def barrier(bid: int, mask: int, **kw: object) -> Barrier:
    return Barrier(unit=Unit.CTRL, barrier_id=bid, core_mask=mask, **kw)  # type: ignore[arg-type]


def kinds(report: object) -> list[str]:
    return [p.kind.value for p in report.problems]  # type: ignore[attr-defined]


def test_double_buffered_pipeline_is_clean() -> None:
    # Init gives the producer two buffer credits (L1x2); per frame the producer takes a
    # credit and fills a buffer (L0), the consumer empties it and returns the credit.
    tl = Tasklist(
        0,
        [
            sig(Unit.CTRL, L(1, 2), phase=Phase.INIT, layer="setup"),
            TokenSignal(unit=Unit.DMA0, waits=(L(1),), signals=(L(0),), layer="load"),
            TokenSignal(unit=Unit.MVM, waits=(L(0),), signals=(L(1),), layer="conv"),
        ],
    )
    report = check_tasklists([tl], ARCH)
    assert report.ok and report.problems == []
    assert report.task_count == 3 and report.frames == 2 and report.cores == (0,)


def test_waited_but_never_signalled() -> None:
    tl = Tasklist(0, [wait(Unit.DPU, L(4), layer="add")])
    report = check_tasklists([tl], ARCH)
    assert kinds(report) == ["never_signalled", "deadlock"]
    never = report.problems[0]
    assert never.tokens == ("core0:L4",)
    assert never.tasks[0].index == 0 and never.tasks[0].layer == "add"
    assert "core0:L4 (has 0, needs 1; no task left signals it)" in report.problems[1].message


def test_signalled_but_never_waited_is_a_warning() -> None:
    report = check_tasklists([Tasklist(0, [sig(Unit.DMA1, G(2), phase=Phase.INIT)])], ARCH)
    assert report.ok
    [p] = report.problems
    assert p.kind is ProblemKind.NEVER_WAITED and p.severity is Severity.WARNING


def test_per_frame_imbalance_leaks_counts() -> None:
    tl = Tasklist(0, [sig(Unit.DMA0, L(0, 2)), wait(Unit.MVM, L(0))])
    report = check_tasklists([tl], ARCH)
    assert kinds(report) == ["unbalanced"]
    assert "frame tasks signal it 2 and wait for 1" in report.problems[0].message


def test_init_credit_consumed_every_frame_deadlocks_in_frame_1() -> None:
    tl = Tasklist(0, [sig(Unit.DMA0, L(0), phase=Phase.INIT), wait(Unit.MVM, L(0), layer="conv")])
    report = check_tasklists([tl], ARCH)
    assert kinds(report) == ["unbalanced", "deadlock"]
    dead = report.problems[1]
    assert dead.tasks[0].frame == 1 and dead.tasks[0].layer == "conv"
    assert "core 0 task 1 (mvm TokenWait, layer conv, frame 1)" in dead.message


def test_cycle_of_waits_names_tasks_and_layers() -> None:
    tl = Tasklist(
        0,
        [
            TokenSignal(unit=Unit.DMA0, waits=(L(0),), signals=(L(1),), layer="load"),
            TokenSignal(unit=Unit.MVM, waits=(L(1),), signals=(L(0),), layer="conv"),
        ],
    )
    report = check_tasklists([tl], ARCH)
    assert kinds(report) == ["deadlock"]
    dead = report.problems[0]
    assert "deadlock after 0 of 4 task runs" in dead.message
    assert "cycle of waits: core 0 mvm task 1 -> core 0 dma0 task 0" in dead.message
    assert {(t.index, t.layer, t.unit) for t in dead.tasks} == {
        (0, "load", Unit.DMA0),
        (1, "conv", Unit.MVM),
    }
    assert dead.tokens == ("core0:L0", "core0:L1")


def test_queue_order_deadlock_within_one_unit() -> None:
    # The signal sits behind the wait on the same in-order queue.
    tl = Tasklist(0, [wait(Unit.DPU, L(0)), sig(Unit.DPU, L(0))])
    report = check_tasklists([tl], ARCH)
    assert kinds(report) == ["deadlock"]
    assert "signalled later by core 0 dpu" in report.problems[0].message
    assert "cycle of waits: core 0 dpu task 0 -> (back" in report.problems[0].message
    # The same tasks on two units run fine.
    ok = Tasklist(0, [wait(Unit.DPU, L(0)), sig(Unit.DMA0, L(0))])
    assert check_tasklists([ok], ARCH).ok


def test_token_range_and_zero_count() -> None:
    local_top = ARCH.tokens.local_per_core
    tl = Tasklist(
        0,
        [sig(Unit.DMA0, L(local_top), G(0, 0)), wait(Unit.MVM, L(local_top))],
    )
    report = check_tasklists([tl], ARCH)
    messages = [p.message for p in report.errors if p.kind is ProblemKind.TOKEN_RANGE]
    assert messages == [
        f"local token index must be 0-{local_top - 1} (arch.tokens.local_per_core), "
        f"not {local_top}",
        "token count in signals must be at least 1, not 0",
        f"local token index must be 0-{local_top - 1} (arch.tokens.local_per_core), "
        f"not {local_top}",
    ]


def test_global_tokens_match_across_cores() -> None:
    producer = Tasklist(0, [sig(Unit.DMA0, G(3), layer="send")])
    consumer = Tasklist(1, [wait(Unit.DMA0, G(3), layer="recv")])
    assert check_tasklists([producer, consumer], ARCH).problems == []
    alone = check_tasklists([consumer], ARCH)
    assert kinds(alone) == ["never_signalled", "deadlock"]
    assert alone.problems[0].tokens == ("G3",)
    # Local tokens of different cores are different tokens.
    local = check_tasklists(
        [Tasklist(0, [sig(Unit.DMA0, L(3))]), Tasklist(1, [wait(Unit.DMA0, L(3))])], ARCH
    )
    assert "never_signalled" in kinds(local) and "never_waited" in kinds(local)


def test_shared_waiters_warning() -> None:
    tl = Tasklist(0, [sig(Unit.DMA0, L(0, 2)), wait(Unit.MVM, L(0)), wait(Unit.DPU, L(0))])
    report = check_tasklists([tl], ARCH)
    assert report.ok and kinds(report) == ["shared_waiters"]
    assert "core 0 dpu, core 0 mvm" in report.problems[0].message


def test_barrier_across_cores_completes_and_signals() -> None:
    # Each core signals after the barrier; the other side waits on it.
    c0 = Tasklist(0, [barrier(1, 0b11, signals=(L(0),)), wait(Unit.DMA0, L(0))])
    c1 = Tasklist(1, [barrier(1, 0b11, signals=(L(0),)), wait(Unit.DMA0, L(0))])
    assert check_tasklists([c0, c1], ARCH).problems == []


def test_barrier_waits_for_a_core_that_never_arrives() -> None:
    c0 = Tasklist(0, [barrier(1, 0b11)])
    c1 = Tasklist(1, [barrier(2, 0b11)])
    report = check_tasklists([c0, c1], ARCH)
    assert kinds(report) == ["barrier", "barrier", "deadlock"]
    assert "barrier 1 waits for core 1, which never reaches barrier 1" in report.problems[0].message
    assert "barrier 1 waits for cores 1" in report.problems[2].message


def test_barrier_mask_problems() -> None:
    report = check_tasklists([Tasklist(0, [barrier(1, 0b10)])], ARCH)
    assert "barrier 1 core_mask must include the core that runs it (core 0), not 0b10" in [
        p.message for p in report.problems
    ]
    assert "barrier 1 waits for core 1, which has no tasklist" in [
        p.message for p in report.problems
    ]
    c0 = Tasklist(0, [barrier(1, 0b11)])
    c1 = Tasklist(1, [barrier(1, 0b11, phase=Phase.INIT)])
    mismatch = check_tasklists([c0, c1], ARCH)
    assert any("same phases and core masks on cores 0 and 1" in p.message for p in mismatch.errors)


def test_barrier_cross_dependency_deadlock() -> None:
    # Core 0 waits for core 1's token before its barrier; core 1 signals only after it.
    c0 = Tasklist(0, [TokenWait(unit=Unit.CTRL, waits=(G(0),)), barrier(1, 0b11)])
    c1 = Tasklist(1, [barrier(1, 0b11), sig(Unit.CTRL, G(0))])
    report = check_tasklists([c0, c1], ARCH)
    assert kinds(report) == ["deadlock"]
    assert "cycle of waits" in report.problems[0].message


def test_core_ids() -> None:
    report = check_tasklists([Tasklist(0, []), Tasklist(0, []), Tasklist(9, [])], ARCH)
    assert [p.message for p in report.errors] == [
        "core id 0 must be unique, not repeated",
        f"core id must be 0-{ARCH.chip.cores - 1} (arch.chip.cores), not 9",
    ]


def test_frames_argument() -> None:
    tl = Tasklist(0, [sig(Unit.DMA0, L(0), phase=Phase.INIT), wait(Unit.MVM, L(0))])
    assert kinds(check_tasklists([tl], ARCH, frames=1)) == ["unbalanced"]
    with pytest.raises(TasklistError, match=r"frames must be at least 1, not 0"):
        check_tasklists([tl], ARCH, frames=0)


def test_report_formats() -> None:
    tl = Tasklist(0, [wait(Unit.DPU, L(4), layer="add")])
    report = check_tasklists([tl], ARCH)
    text = report.format()
    assert text.splitlines()[0] == (
        "checked 1 tasks on cores 0 (init + 2 frames): 2 errors, 0 warnings"
    )
    assert "error: [never_signalled] token core0:L4 is waited on" in text
    data = report.to_dict()
    assert data["ok"] is False and data["errors"] == 2
    assert data["problems"][0]["tasks"][0] == {
        "core": 0,
        "index": 0,
        "unit": "dpu",
        "kind": "TokenWait",
        "layer": "add",
        "phase": "frame",
        "frame": None,
    }


def test_check_paths_reads_folders_and_files(tmp_path: Path) -> None:
    write_tasklist(tasklist_path(tmp_path, 0), Tasklist(0, [sig(Unit.DMA0, G(1))]))
    write_tasklist(tasklist_path(tmp_path, 1), Tasklist(1, [wait(Unit.DMA0, G(1))]))
    assert check_paths([tmp_path], ARCH).ok
    assert not check_paths([tasklist_path(tmp_path, 1)], ARCH).ok
    assert [t.core_id for t in load_tasklists([tmp_path])] == [0, 1]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TasklistError, match=r"must hold core<N>.tasklist files"):
        load_tasklists([empty])


def test_large_pipeline_runs_quickly() -> None:
    # 20k tasks per core over 4 cores: the worklist execution is linear in the tasks.
    tasks = []
    for _ in range(10_000):
        tasks.append(TokenSignal(unit=Unit.DMA0, waits=(L(1),), signals=(L(0),)))
        tasks.append(TokenSignal(unit=Unit.MVM, waits=(L(0),), signals=(L(1),)))
    tls = [Tasklist(core, [sig(Unit.CTRL, L(1), phase=Phase.INIT), *tasks]) for core in range(4)]
    report = check_tasklists(tls, ARCH)
    assert report.ok, report.format()
