"""The sweep engine: local pool and Dask, failure isolation, resume, interruption.

The evaluators are the deterministic test doubles of `sweep_evaluators` (figures computed
from the arch and config of each point), so these tests check the engine, not the pipeline.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import sweep_evaluators as ev

from aipusim.base.errors import ConfigError, SimulationError
from aipusim.sweep import ResultStore, build_space, parse_backend, run_sweep
from aipusim.sweep.runner import require_dask
from aipusim.sweep.store import WALL_TIME_COLUMNS

LOCAL2 = parse_backend(workers=2)
HERE = Path(__file__).resolve().parent


def _space(utilization: str = "0.5,1", models: tuple[str, ...] = ("tiny_cnn", "resnet18")):
    return build_space(
        list(models),
        [f"mvm_utilization_limit={utilization}", "multicore_mode=batch,cooperative"],
        frames=2,
    )


def _comparable(table: pd.DataFrame) -> pd.DataFrame:
    """Rows in point order without the wall-time columns (they differ run to run)."""
    return (
        table.drop(columns=list(WALL_TIME_COLUMNS)).sort_values("point_id").reset_index(drop=True)
    )


def test_every_point_gets_one_row_with_its_figures(tmp_path: Path) -> None:
    space = _space()
    summary = run_sweep(space, tmp_path, evaluator=ev.arch_figures, backend=LOCAL2, progress=False)
    assert (summary.total, summary.skipped, summary.ran, summary.failed) == (8, 0, 8, 0)
    table = ResultStore(tmp_path).read()
    assert sorted(table["point_id"]) == sorted(p.point_id for p in space.points)
    point = space.points[0]
    row = table.set_index("point_id").loc[point.point_id]
    assert row["fps"] == pytest.approx(ev.arch_figures(point)["fps"])
    assert row["mvm_utilization_limit"] == "0.5"
    assert row["mvm_utilization_limit__value"] == 0.5
    assert row["multicore_mode"] == "batch"
    assert (table["status"] == "ok").all()
    assert table["error"].isna().all()


def test_a_failing_point_is_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    summary = run_sweep(
        _space(), tmp_path, evaluator=ev.fails_for_resnet, backend=LOCAL2, progress=False
    )
    assert (summary.ran, summary.failed) == (8, 4)
    table = ResultStore(tmp_path).read()
    failed = table[table["status"] == "failed"]
    assert set(failed["model"]) == {"resnet18"}
    assert failed["fps"].isna().all()
    assert failed["error"].str.fullmatch(r"RuntimeError: boom on resnet18 .*").all()
    assert (table.loc[table["model"] == "tiny_cnn", "status"] == "ok").all()


def test_an_invalid_combination_is_a_failed_point(tmp_path: Path) -> None:
    space = build_space(["tiny_cnn"], ["aipu_cores_used=1,4", "resources_used=0.25,1"])
    summary = run_sweep(space, tmp_path, evaluator=ev.arch_figures, backend=LOCAL2, progress=False)
    assert (summary.ran, summary.failed) == (4, 1)
    table = ResultStore(tmp_path).read()
    bad = table[table["status"] == "failed"].iloc[0]
    assert (bad["aipu_cores_used"], bad["resources_used"]) == ("4", "0.25")
    assert bad["error"].startswith("ConfigError: resources_used must be at least")


def test_a_dying_worker_stops_the_sweep_keeping_finished_points(tmp_path: Path) -> None:
    space = _space()
    with pytest.raises(SimulationError, match=r"a sweep worker process died .* re-run"):
        run_sweep(space, tmp_path, evaluator=ev.dies_for_resnet, backend=LOCAL2, progress=False)
    table = ResultStore(tmp_path).read()
    # The pool breaks as a whole, so only points finished before the death are kept.
    assert set(table["model"]) <= {"tiny_cnn"}
    assert (table["status"] == "ok").all()
    assert len(table) >= 1


def test_a_rerun_skips_done_points_and_adds_new_ones(tmp_path: Path) -> None:
    first = run_sweep(
        _space("0.5"), tmp_path, evaluator=ev.arch_figures, backend=LOCAL2, progress=False
    )
    assert (first.total, first.ran) == (4, 4)
    second = run_sweep(
        _space("0.5,1"), tmp_path, evaluator=ev.arch_figures, backend=LOCAL2, progress=False
    )
    assert (second.total, second.skipped, second.ran) == (8, 4, 4)
    third = run_sweep(
        _space("0.5,1"), tmp_path, evaluator=ev.arch_figures, backend=LOCAL2, progress=False
    )
    assert (third.skipped, third.ran) == (8, 0)
    rows = pd.concat([pd.read_parquet(p) for p in ResultStore(tmp_path).parts()])
    assert len(rows) == 8
    assert rows["point_id"].is_unique


def test_local_pool_and_dask_local_cluster_give_identical_rows(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    run_sweep(
        _space(), tmp_path / "local", evaluator=ev.arch_figures, backend=LOCAL2, progress=False
    )
    run_sweep(
        _space(),
        tmp_path / "dask",
        evaluator=ev.arch_figures,
        backend=parse_backend(cluster="local:2"),
        progress=False,
    )
    local = _comparable(ResultStore(tmp_path / "local").read())
    dask = _comparable(ResultStore(tmp_path / "dask").read())
    assert len(local) == 8
    pd.testing.assert_frame_equal(local, dask)


def _start_slow_sweep(directory: Path, marks: Path, flush_every: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "SWEEP_MARKS": str(marks),
        "SWEEP_SLEEP_S": "0.4",
    }
    script = HERE / "sweep_evaluators.py"
    return subprocess.Popen(
        [sys.executable, str(script), str(directory), str(flush_every)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux /proc)."""
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(c) for c in text.split()]


def _running(pid: int) -> bool:
    """``pid`` exists and is not a zombie (an exited child not yet reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_for(condition, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "the sweep made no progress"
        time.sleep(0.05)


def test_a_killed_sweep_resumes_without_loss_or_duplicates(tmp_path: Path) -> None:
    directory, marks = tmp_path / "out", tmp_path / "marks"
    marks.mkdir()
    proc = _start_slow_sweep(directory, marks, flush_every=1)
    _wait_for(lambda: (directory / "part-0000.parquet").exists(), proc)
    workers = _children(proc.pid)
    assert workers, "the sweep's pool has worker processes"
    proc.kill()  # SIGKILL: no chance to clean up
    proc.wait()
    # the workers notice that their parent is gone and exit instead of living on
    deadline = time.monotonic() + 10.0
    while any(_running(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_running(w) for w in workers), workers
    assert list((directory / ".scratch").iterdir()), "the killed workers left their scratch"
    stored = ResultStore(directory).done_ids()
    space = build_space(*ev.SPACE_ARGS, frames=2)
    assert 1 <= len(stored) < len(space.points)
    summary = run_sweep(space, directory, evaluator=ev.arch_figures, backend=LOCAL2, progress=False)
    assert summary.skipped == len(stored)
    # the next run removed the scratch folders of the killed workers (and its own)
    assert list((directory / ".scratch").iterdir()) == []
    rows = pd.concat([pd.read_parquet(p) for p in ResultStore(directory).parts()])
    assert rows["point_id"].is_unique
    assert set(rows["point_id"]) == {p.point_id for p in space.points}
    clean = tmp_path / "clean"
    run_sweep(space, clean, evaluator=ev.arch_figures, backend=LOCAL2, progress=False)
    pd.testing.assert_frame_equal(
        _comparable(ResultStore(directory).read()), _comparable(ResultStore(clean).read())
    )


def test_sigterm_flushes_the_finished_points(tmp_path: Path) -> None:
    directory, marks = tmp_path / "out", tmp_path / "marks"
    marks.mkdir()
    # flush_every larger than the sweep: only the interruption handler writes rows.
    proc = _start_slow_sweep(directory, marks, flush_every=1000)
    _wait_for(lambda: len(list(marks.iterdir())) >= 4, proc)
    time.sleep(0.2)  # let the main process collect the finished outcomes
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert proc.returncode != 0
    assert len(ResultStore(directory).done_ids()) >= 2


def test_backend_flags_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"only one of --workers, --cluster, --scheduler"):
        parse_backend(workers=2, cluster="local:2")
    for cluster in ("local:0", "local:99999"):
        with pytest.raises(
            ConfigError, match=rf"--cluster must be local:N with N 1-\d+ .*{cluster}"
        ):
            parse_backend(cluster=cluster)
    with pytest.raises(ConfigError, match=r"--scheduler must be .*tcp://HOST:PORT, not 'host'"):
        parse_backend(scheduler="host")
    for workers in (0, 99999):  # not a pool of 99999 processes
        with pytest.raises(
            ConfigError, match=rf"--workers must be an integer 1-\d+ .*not {workers}"
        ):
            parse_backend(workers=workers)
    assert parse_backend(scheduler="tcp://10.0.0.1:8786").address == "tcp://10.0.0.1:8786"


def test_missing_dask_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(
        ConfigError,
        match=r"--cluster requires the optional extra "
        r"aipusim\[distributed\] \(pip install 'aipusim\[distributed\]'\)",
    ):
        require_dask("--cluster")


def test_a_running_scheduler_is_joined_by_address(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    # Workers as threads of this process: a real scheduler, without spawning processes.
    with distributed.LocalCluster(
        n_workers=1, processes=False, protocol="tcp://", dashboard_address=None
    ) as cluster:
        backend = parse_backend(scheduler=cluster.scheduler_address)
        summary = run_sweep(
            _space("0.5"), tmp_path, evaluator=ev.arch_figures, backend=backend, progress=False
        )
        assert cluster.scheduler_address.startswith("tcp://")
    assert (summary.ran, summary.failed) == (4, 0)
    assert len(ResultStore(tmp_path).read()) == 4


def test_an_unreachable_scheduler_is_a_config_error(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    backend = dataclasses.replace(
        parse_backend(scheduler="tcp://127.0.0.1:9"), connect_timeout_s=0.5
    )
    with pytest.raises(ConfigError, match=r"--scheduler must be a reachable Dask scheduler"):
        run_sweep(
            _space("0.5"), tmp_path, evaluator=ev.arch_figures, backend=backend, progress=False
        )
