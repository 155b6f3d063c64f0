"""How much memory a run will take, checked before it starts.

A run keeps the start and end cycle of every executed task (and, with a trace, one record
per event) until the result is built, so its memory grows with frames x tasks per frame.
The per-task figures below were measured (peak RSS of ``aipusim simulate`` at 100 and 8000
frames of tiny_cnn, 20 and 400 frames of mobilenetv2: 0.53-0.65 kB per executed task
untraced, 1.1-1.7 kB with a B,PB,PE,K,M trace) and rounded up.

>>> run_memory_bytes(executed_tasks=1_000_000, traced=False)
900000000
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aipusim.base.errors import ResourceLimitError
from aipusim.base.resources import available_memory_bytes, format_bytes
from aipusim.isa.table import TaskTable
from aipusim.isa.tasks import Phase, Task

#: Bytes per executed task (its timing arrays, events and result rows), untraced.
BYTES_PER_TASK = 800
#: More bytes per executed task when its events are traced.
BYTES_PER_TRACED_TASK = 1200
#: What a run needs whatever its length (interpreter, libraries, tables of the program).
BASE_BYTES = 100_000_000
_FRAME = list(Phase).index(Phase.FRAME)


def run_memory_bytes(executed_tasks: int, traced: bool) -> int:
    """Estimated peak memory of a run that executes ``executed_tasks`` tasks."""
    per_task = BYTES_PER_TASK + (BYTES_PER_TRACED_TASK if traced else 0)
    return BASE_BYTES + executed_tasks * per_task


def phase_counts(tasklist: Sequence[Task] | TaskTable) -> tuple[int, int]:
    """(init tasks, frame tasks) of one core's tasklist."""
    if isinstance(tasklist, TaskTable):
        frame = int((tasklist["phase"] == _FRAME).sum())
    else:
        frame = sum(1 for t in tasklist if t.phase == Phase.FRAME)
    return len(tasklist) - frame, frame


def check_run_memory(
    tasklists: Mapping[int, Sequence[Task] | TaskTable],
    *,
    frames: int,
    frames_per_start: int,
    replicas: int,
    traced: bool,
    available: int | None = None,
) -> None:
    """Refuse (`ResourceLimitError`) a run of ``frames`` frames per replica whose estimated
    memory exceeds ``available`` (default: what the machine has), saying how many frames
    would fit."""
    init = frame = 0
    for tasks in tasklists.values():
        i, f = phase_counts(tasks)
        init, frame = init + i, frame + f
    starts = -(-frames // frames_per_start)
    need = run_memory_bytes(replicas * (init + starts * frame), traced)
    room = available_memory_bytes() if available is None else available
    if need <= room:
        return
    per_start = replicas * max(1, frame) * (run_memory_bytes(1, traced) - BASE_BYTES)
    fit_starts = max(0, (room - run_memory_bytes(replicas * init, traced)) // per_start)
    most = fit_starts * frames_per_start
    per_task = format_bytes(run_memory_bytes(1, traced) - BASE_BYTES)
    raise ResourceLimitError(
        f"frames={frames} would need about {format_bytes(need)} of memory ({replicas} "
        f"replica(s) x {starts} start(s) x {frame} task(s) per start, ~{per_task} per task"
        f"{' with the trace' if traced else ''}); {format_bytes(room)} is available, "
        f"enough for at most {most} frames"
    )


def check_frames_bound(frames: int, available: int | None = None, flag: str = "frames") -> None:
    """Refuse, before a compile, a frame count that could not fit even at one task per
    frame (the exact check, `check_run_memory`, needs the compiled tasklists)."""
    need = run_memory_bytes(frames, traced=False)
    room = available_memory_bytes() if available is None else available
    if need > room:
        most = max(0, (room - BASE_BYTES) // BYTES_PER_TASK)
        raise ResourceLimitError(
            f"{flag}={frames} would need more than {format_bytes(need)} of memory (at least "
            f"one task per frame, ~{format_bytes(BYTES_PER_TASK)} each); "
            f"{format_bytes(room)} is available, enough for fewer than {most} frames"
        )


__all__ = [
    "BASE_BYTES",
    "BYTES_PER_TASK",
    "BYTES_PER_TRACED_TASK",
    "check_frames_bound",
    "check_run_memory",
    "phase_counts",
    "run_memory_bytes",
]
