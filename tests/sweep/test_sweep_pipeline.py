"""Sweeps through the real pipeline (`evaluate_point`: compile + simulate), via the CLI.

Small inputs (tiny_cnn at 16 px, and the same network exported at 24 px as a second model
file) keep each point well under a second once a worker has warmed up.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pandas as pd
import pytest

from aipusim import zoo
from aipusim.cli.main import main
from aipusim.sweep import ResultStore
from aipusim.sweep.store import WALL_TIME_COLUMNS

SWEPT = [
    # both models from the plain defaults (tiny_cnn's built-in config is 4 x Batch-1 at
    # resources_used=0.25, which 4 cores per instance refuse)
    "--defaults",
    "--set", "aipu_cores_used=4",
    "--param", "multicore_mode=batch,cooperative",
    "--param", "mvm_utilization_limit=0.5,1",
    "--frames", "2",
    "--no-progress",
]  # fmt: skip


@pytest.fixture(scope="module")
def second_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "tiny24.onnx"
    onnx.save(zoo.build("tiny_cnn", input_size=24), path)
    return path


def _comparable(directory: Path) -> pd.DataFrame:
    table = ResultStore(directory).read().drop(columns=list(WALL_TIME_COLUMNS))
    return table.sort_values("point_id").reset_index(drop=True)


def _sweep(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["sweep", *args, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_2x2x2_runs_locally_through_the_real_pipeline(
    tmp_path: Path, second_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = ["tiny_cnn", str(second_model), "--input-size", "16"]
    local = _sweep([*models, *SWEPT, "--workers", "2", "-o", str(tmp_path / "local")], capsys)
    assert (local["points"], local["ran"], local["failed"]) == (8, 8, 0)
    table = _comparable(tmp_path / "local")
    assert (table["fps"] > 0).all() and (table["avg_power_w"] > 0).all()
    # Each swept key reaches the compiler: the multicore mode changes the figures.
    by_mode = table.groupby(["model", "mvm_utilization_limit"])["fps"].nunique()
    assert (by_mode == 2).all()
    raw = ResultStore(tmp_path / "local").read()
    assert (raw["compile_s"] > 0).all() and (raw["simulate_s"] > 0).all()


SHARED = [
    "tiny_cnn", "--input-size", "16", "--defaults",
    "--set", "aipu_cores_used=4",
    "--param", "multicore_mode=batch,cooperative",
    # simulator-only numbers: the two points of a mode share one compiled program
    "--arch-param", "energy.mvm_mac_pj=0.185,0.3",
    "--frames", "2", "--no-progress",
]  # fmt: skip


def test_rows_are_the_same_with_or_without_cache_on_one_or_two_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aipusim.compiler.config import CompilerConfig
    from aipusim.sweep import build_space
    from aipusim.sweep.evaluate import _Worker, program_key

    warm = _sweep([*SHARED, "--workers", "2", "-o", str(tmp_path / "warm")], capsys)
    cold = _sweep([*SHARED, "--workers", "1", "--no-cache", "-o", str(tmp_path / "cold")], capsys)
    assert (warm["ran"], warm["failed"], cold["ran"], cold["failed"]) == (4, 0, 4, 0)
    table = _comparable(tmp_path / "warm")
    pd.testing.assert_frame_equal(table, _comparable(tmp_path / "cold"))
    # compiled once, simulated twice per mode; the energy number still reaches the result
    raw = ResultStore(tmp_path / "warm").read()
    reused = raw.groupby("multicore_mode")["compile_s"].apply(lambda s: int((s == 0).sum()))
    assert reused.tolist() == [1, 1]
    assert (table.groupby("multicore_mode")["energy_mj_per_frame"].nunique() == 2).all()
    # a shared program gives each point what compiling it on its own gives
    space = build_space(
        ["tiny_cnn"], ["multicore_mode=batch,cooperative"], ["energy.mvm_mac_pj=0.185,0.3"],
        frames=2, input_size=16, base=CompilerConfig(aipu_cores_used=4),
    )  # fmt: skip
    assert len({program_key(p) for p in space.points}) == 2
    by_id = raw.set_index("point_id")
    for point in space.points:
        alone = _Worker()  # a worker of its own: the point compiles its program itself
        row = alone.evaluate(point)
        alone.drop_program()
        assert row["compile_s"] > 0
        for column in ("fps", "energy_mj_per_frame", "total_cycles", "avg_power_w"):
            assert row[column] == by_id.loc[point.point_id, column], column


# The fast engine test of the same (test_sweep_runner: a local pool and a dask cluster give
# identical rows) uses a test double; this one sends real compiles to a dask cluster.
@pytest.mark.slow
def test_2x2x2_on_a_dask_cluster_matches_the_local_run(
    tmp_path: Path, second_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("distributed")
    models = ["tiny_cnn", str(second_model), "--input-size", "16"]
    local = _sweep([*models, *SWEPT, "--workers", "2", "-o", str(tmp_path / "local")], capsys)
    dask = _sweep([*models, *SWEPT, "--cluster", "local:2", "-o", str(tmp_path / "dask")], capsys)
    assert (local["points"], local["ran"], local["failed"]) == (8, 8, 0)
    assert (dask["points"], dask["ran"], dask["failed"]) == (8, 8, 0)
    pd.testing.assert_frame_equal(_comparable(tmp_path / "local"), _comparable(tmp_path / "dask"))


@pytest.mark.slow  # the fast engine test of the same (test_sweep_runner) uses a test double
def test_an_interrupted_sweep_resumes(
    tmp_path: Path, second_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    args = [
        "tiny_cnn", str(second_model), "--input-size", "16",
        "--set", "aipu_cores_used=4",
        "--param", "multicore_mode=batch,cooperative",
        "--param", "mvm_utilization_limit=0.25,0.5,1",
        "--frames", "2", "--no-progress", "-o", str(out),
    ]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "aipusim.cli.main", "sweep", *args,
         "--workers", "2", "--flush-every", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (out / "part-0000.parquet").exists():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "no point finished in time"
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    stored = ResultStore(out).done_ids()
    assert 1 <= len(stored) < 12
    summary = _sweep([*args, "--workers", "2"], capsys)
    assert (summary["points"], summary["skipped"]) == (12, len(stored))
    assert summary["ran"] == 12 - len(stored)
    rows = pd.concat([pd.read_parquet(p) for p in ResultStore(out).parts()])
    assert len(rows) == 12 and rows["point_id"].is_unique
    assert (rows["status"] == "ok").all()


@pytest.mark.slow
def test_two_zoo_models_locally_and_on_a_dask_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("distributed")
    models = ["tiny_cnn", "mobilenetv2", "--input-size", "32"]
    _sweep([*models, *SWEPT, "--workers", "2", "-o", str(tmp_path / "local")], capsys)
    _sweep([*models, *SWEPT, "--cluster", "local:2", "-o", str(tmp_path / "dask")], capsys)
    local = _comparable(tmp_path / "local")
    assert len(local) == 8 and (local["status"] == "ok").all()
    pd.testing.assert_frame_equal(local, _comparable(tmp_path / "dask"))
