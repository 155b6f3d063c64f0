"""Run the points of a sweep on a local process pool or a Dask cluster; store the rows.

The backend is an existing engine, never a scheduler of ours: `concurrent.futures`
(``ProcessPoolExecutor``) by default, or ``dask.distributed`` (``--cluster local:N`` starts a
``LocalCluster``; ``--scheduler tcp://HOST:PORT`` joins a running one). Dask is an optional
extra, imported only when asked for.

Each point runs in a worker through `run_point`, which turns any exception into a failed
outcome carrying the error message, so one bad point never stops the sweep. The points that
share a compiled program (`program_groups`) travel to one worker as one task
(`run_points`), which compiles their program once. The main process
collects outcomes as they complete, shows a progress bar, and flushes rows to the
`ResultStore` every ``flush_every`` points or ``flush_seconds`` seconds, and once more when
the sweep ends or is interrupted (Ctrl-C, SIGTERM): only the points in flight are lost, and
the next run with the same arguments picks up the rest.

Local pool workers watch the process that started them: when it is gone (``kill -9`` of
the sweep), they exit within a second or two instead of living on as orphans. Each works
in its own scratch folder ``DIR/.scratch/worker-<pid>-<hex>`` (its temporary files and
compile outputs), which the next run into DIR removes if the worker died with it.

>>> backend = parse_backend(workers=None, cluster="local:2", scheduler=None)
>>> backend.kind, backend.workers
('dask-local', 2)
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from aipusim.base.errors import ConfigError, SimulationError
from aipusim.run.progress import Progress
from aipusim.sweep.evaluate import evaluate_point, program_key
from aipusim.sweep.space import SweepPoint, SweepSpace
from aipusim.sweep.store import (
    METRIC_COLUMNS,
    SCRATCH_DIR,
    STATUS_FAILED,
    STATUS_OK,
    TYPED_SUFFIX,
    ResultStore,
    result_schema,
)

#: What evaluates one point: returns the measurements (keys of `METRIC_COLUMNS`).
Evaluator = Callable[[SweepPoint], Mapping[str, Any]]

_DASK_MISSING = (
    "{flag} requires the optional extra aipusim[distributed] (pip install 'aipusim[distributed]')"
)
_CLUSTER_RE = re.compile(r"local:(\d+)")
_ADDRESS_RE = re.compile(r"[a-z][a-z0-9+.-]*://[^\s/:]+:\d+")
#: Longest error message kept in a row (a traceback-sized message is noise in a table).
_MAX_ERROR_CHARS = 2000


@dataclass(frozen=True)
class Backend:
    """Where the points run: ``local`` (process pool), ``dask-local`` or ``dask``."""

    kind: str
    workers: int | None = None
    address: str | None = None
    #: How long to try reaching a ``--scheduler`` before giving up.
    connect_timeout_s: float = 30.0


#: Most local worker processes per CPU: the points are CPU-bound, more only take memory
#: (each worker imports numpy, onnx and the compiler) and time to start.
WORKERS_PER_CPU = 4


def max_local_workers() -> int:
    """The most local worker processes a sweep or a study may start on this machine."""
    return WORKERS_PER_CPU * (os.cpu_count() or 1)


def check_workers(workers: int | None, flag: str = "--workers") -> None:
    """`ConfigError` unless ``workers`` is None or 1-`max_local_workers`."""
    if workers is None:
        return
    most = max_local_workers()
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= most:
        raise ConfigError(
            f"{flag} must be an integer 1-{most} ({WORKERS_PER_CPU} per CPU of this "
            f"machine), not {workers!r}"
        )


def parse_backend(
    workers: int | None = None, cluster: str | None = None, scheduler: str | None = None
) -> Backend:
    """The backend of ``--workers N``, ``--cluster local:N`` or ``--scheduler URL`` (one)."""
    given = [
        f
        for f, v in (("--workers", workers), ("--cluster", cluster), ("--scheduler", scheduler))
        if v is not None
    ]
    if len(given) > 1:
        raise ConfigError(f"give only one of --workers, --cluster, --scheduler, not {given}")
    if cluster is not None:
        match = _CLUSTER_RE.fullmatch(cluster.strip())
        most = max_local_workers()
        if match is None or not 1 <= int(match.group(1)) <= most:
            raise ConfigError(
                f"--cluster must be local:N with N 1-{most} ({WORKERS_PER_CPU} per CPU of "
                f"this machine), not {cluster!r}"
            )
        return Backend("dask-local", workers=int(match.group(1)))
    if scheduler is not None:
        if _ADDRESS_RE.fullmatch(scheduler.strip()) is None:
            raise ConfigError(
                f"--scheduler must be a scheduler address like tcp://HOST:PORT, not {scheduler!r}"
            )
        return Backend("dask", address=scheduler.strip())
    check_workers(workers)
    return Backend("local", workers=workers or os.cpu_count() or 1)


def require_dask(flag: str) -> None:
    """`ConfigError` naming the extra to install when ``dask.distributed`` is missing."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise ConfigError(_DASK_MISSING.format(flag=flag)) from None


def run_point(evaluator: Evaluator, point: SweepPoint) -> dict[str, Any]:
    """Evaluate one point in a worker: its measurements, or a failed outcome with the error."""
    try:
        measured = dict(evaluator(point))
    except Exception as exc:  # a failing point is data, whatever the cause
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        return {"status": STATUS_FAILED, "error": message[:_MAX_ERROR_CHARS]}
    unknown = set(measured) - set(METRIC_COLUMNS)
    assert not unknown, f"evaluator returned columns outside the schema: {sorted(unknown)}"
    return {**measured, "status": STATUS_OK, "error": None}


def run_points(evaluator: Evaluator, points: Sequence[SweepPoint]) -> list[dict[str, Any]]:
    """Evaluate ``points`` one after the other in one worker (`run_point` each): the
    points of one `program_groups` group, so the worker compiles their program once."""
    return [run_point(evaluator, p) for p in points]


def program_groups(points: Sequence[SweepPoint]) -> list[list[SweepPoint]]:
    """``points`` grouped by `aipusim.sweep.evaluate.program_key` (the points that share a
    compiled program), in the order of their first point.

    >>> from aipusim.sweep.space import build_space
    >>> space = build_space(["tiny_cnn"], ["multicore_mode=batch,cooperative"],
    ...                     ["energy.control_task_pj=1,2"])
    >>> [len(g) for g in program_groups(space.points)]
    [2, 2]
    """
    groups: dict[str, list[SweepPoint]] = {}
    for point in points:
        groups.setdefault(program_key(point), []).append(point)
    return list(groups.values())


def _typed(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if isinstance(value, StrEnum):
        return value.value
    return float(value) if kind == "float" else value


def make_row(
    point: SweepPoint, outcome: Mapping[str, Any], typed: Mapping[str, str]
) -> dict[str, Any]:
    """The full result row of a point: identity, swept values, then the outcome."""
    row: dict[str, Any] = {
        "point_id": point.point_id,
        "model": point.model,
        "input_size": point.input_size,
        "frames": point.frames,
    }
    values = {k: v for k, v in point.params}
    values.update({"arch." + k: v for k, v in point.arch_params})
    for column, text in point.columns().items():
        row[column] = text
        if column in typed:
            row[column + TYPED_SUFFIX] = _typed(values[column], typed[column])
    for column in METRIC_COLUMNS:
        row[column] = outcome.get(column)
    return row


@dataclass(frozen=True)
class SweepSummary:
    """What one `run_sweep` call did."""

    total: int
    skipped: int
    ran: int
    failed: int
    directory: Path

    def to_dict(self) -> dict[str, Any]:
        return {
            "points": self.total,
            "skipped": self.skipped,
            "ran": self.ran,
            "failed": self.failed,
            "dir": str(self.directory),
        }


class _Interrupted(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so finished rows are flushed on the way out."""


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise _Interrupted()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


#: Seconds between a worker's checks that the sweep that started it still runs.
PARENT_CHECK_S = 1.0


def _watch_parent(parent: int, interval_s: float) -> None:
    while True:
        time.sleep(interval_s)
        if os.getppid() != parent:
            # the sweep is gone (killed): nothing will read our results
            os._exit(1)


def worker_setup(
    parent: int, scratch_root: str | None = None, interval_s: float = PARENT_CHECK_S
) -> None:
    """Initializer of a local pool worker: a daemon thread that ends the worker when its
    parent ``parent`` is gone, and (given ``scratch_root``) a private scratch folder there
    for every temporary file the worker makes (``TMPDIR``)."""
    threading.Thread(
        target=_watch_parent, args=(parent, interval_s), name="watch-parent", daemon=True
    ).start()
    if scratch_root is None:
        return
    root = Path(scratch_root)
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"worker-{os.getpid()}-", dir=root))
    os.environ["TMPDIR"] = str(scratch)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again


@contextlib.contextmanager
def _executor(
    backend: Backend, scratch: Path | None = None
) -> Iterator[tuple[Callable[..., Any], Callable[..., Any]]]:
    """``(submit, as_completed)`` of the backend; shuts it down on the way out."""
    if backend.kind == "local":
        setup: dict[str, Any] = {}
        if scratch is not None:
            setup = {"initializer": worker_setup, "initargs": (os.getpid(), str(scratch))}
        pool = ProcessPoolExecutor(max_workers=backend.workers, **setup)
        try:
            yield pool.submit, as_completed
        except BaseException:
            # Interrupted: drop the queue and do not wait for the points in flight.
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return
    require_dask("--cluster" if backend.kind == "dask-local" else "--scheduler")

    # lazy: loads distributed, not otherwise loaded here
    from distributed import Client, LocalCluster
    from distributed import as_completed as dask_as_completed

    cluster = None
    if backend.kind == "dask-local":
        # One thread per worker: the points are CPU-bound Python, threads would only contend.
        cluster = LocalCluster(
            n_workers=backend.workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        client = Client(cluster)
    else:
        try:
            client = Client(backend.address, timeout=backend.connect_timeout_s)
        except OSError as exc:
            raise ConfigError(
                f"--scheduler must be a reachable Dask scheduler, not {backend.address!r} "
                f"({' '.join(str(exc).split())})"
            ) from None

    def submit(fn: Callable[..., Any], *args: Any) -> Any:
        return client.submit(fn, *args, pure=False)

    try:
        yield submit, dask_as_completed
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def run_sweep(
    space: SweepSpace,
    directory: str | Path,
    *,
    evaluator: Evaluator | None = None,
    backend: Backend | None = None,
    flush_every: int = 8,
    flush_seconds: float = 10.0,
    progress: bool = True,
    resume: bool = False,
) -> SweepSummary:
    """Evaluate every point of ``space`` not yet stored in ``directory``; store the rows.

    ``evaluator`` defaults to `aipusim.sweep.evaluate.evaluate_point` (compile + simulate).
    It must be picklable by reference (a module-level function) for the local pool.
    ``resume`` goes on from a damaged folder: unreadable parts are set aside (``*.bad``)
    and their points run again; a broken ``_sweep.json`` is rewritten.
    """
    if evaluator is None:
        evaluator = evaluate_point
    backend = backend or parse_backend()
    store = ResultStore(directory)
    store.open(space.context, resume=resume)
    typed = space.typed_columns()
    key_columns = list(space.points[0].columns()) if space.points else []
    schema = result_schema(key_columns, typed)
    done = store.done_ids(resume)
    for bad in store.set_aside:
        print(f"sweep: set aside unreadable {bad.name}; its points run again", file=sys.stderr)
    todo = [p for p in space.points if p.point_id not in done]
    skipped = len(space.points) - len(todo)
    if backend.kind == "local" and todo:
        # no more processes than points: each worker costs memory and start-up time
        backend = replace(backend, workers=min(backend.workers or 1, len(todo)))
    ran = failed = 0
    if not todo:
        return SweepSummary(len(space.points), skipped, 0, 0, store.directory)

    buffer: list[dict[str, Any]] = []
    last_flush = time.monotonic()

    def flush() -> None:
        nonlocal last_flush
        if buffer:
            store.write_part(buffer, schema)
            buffer.clear()
        last_flush = time.monotonic()

    progress = Progress() if progress else None
    step = progress.stage("sweep", len(todo)) if progress is not None else None
    try:
        scratch = store.directory / SCRATCH_DIR
        with _sigterm_as_interrupt(), _executor(backend, scratch) as (submit, as_completed):
            # a group's points run in one task: their shared program is compiled once
            futures = {submit(run_points, evaluator, g): g for g in program_groups(todo)}
            for future in as_completed(list(futures)):
                group = futures[future]
                try:
                    outcomes = future.result()
                except BrokenProcessPool:
                    raise SimulationError(
                        "a sweep worker process died (out of memory or killed); the finished "
                        "points are stored, re-run the same command to resume"
                    ) from None
                except Exception as exc:  # the engine lost the task (e.g. a Dask worker died)
                    message = " ".join(f"{type(exc).__name__}: {exc}".split())
                    lost = {"status": STATUS_FAILED, "error": message[:_MAX_ERROR_CHARS]}
                    outcomes = [lost] * len(group)
                for point, outcome in zip(group, outcomes, strict=True):
                    buffer.append(make_row(point, outcome, typed))
                    ran += 1
                    failed += outcome["status"] == STATUS_FAILED
                if progress is not None and step is not None:
                    progress.note(f"{failed} failed")
                    step(len(group))
                if len(buffer) >= flush_every or time.monotonic() - last_flush >= flush_seconds:
                    flush()
    finally:
        flush()
        if progress is not None:
            progress.close()
        store.clean_stale()  # the scratch folders of the workers that ended
    return SweepSummary(len(space.points), skipped, ran, failed, store.directory)


__all__ = [
    "WORKERS_PER_CPU",
    "Backend",
    "Evaluator",
    "SweepSummary",
    "check_workers",
    "make_row",
    "max_local_workers",
    "parse_backend",
    "program_groups",
    "require_dask",
    "run_point",
    "run_points",
    "run_sweep",
    "worker_setup",
]
