"""The model.json contract, loading a compiled directory, traces on disk and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from helpers import dma, mvm, program, tok

from aipusim.base.errors import ConfigError
from aipusim.cli.main import main
from aipusim.isa.program import (
    PROGRAM_FORMAT_VERSION,
    Instance,
    MulticoreMode,
    Program,
    load_program,
    save_program,
)
from aipusim.isa.tasklist import Tasklist, write_tasklist
from aipusim.isa.tasks import Phase, Pool, Unit
from aipusim.isa.trace_schema import COLUMNS, POWER_TOTAL_COLUMN, Tag, TraceHeader
from aipusim.simulator import simulate


def test_program_json_round_trips_and_is_versioned() -> None:
    prog = program(2, MulticoreMode.PIPELINE, input_bytes=100, output_bytes=10)
    text = prog.to_json()
    data = json.loads(text)
    assert data["format"] == "aipusim-program" and data["version"] == PROGRAM_FORMAT_VERSION
    assert data["instance"]["tasklists"] == ["core0.tasklist", "core1.tasklist"]
    assert Program.from_json(text) == prog
    data["version"] = 99
    with pytest.raises(ConfigError, match=f"version must be {PROGRAM_FORMAT_VERSION}, not 99"):
        Program.from_json(json.dumps(data))


@pytest.mark.parametrize(
    ("mode", "cores", "resources", "replicas"),
    [
        (MulticoreMode.MULTIPROCESS, 1, 0.25, 4),
        (MulticoreMode.MULTITHREAD, 1, 0.5, 2),
        (MulticoreMode.MULTIPROCESS, 2, 0.5, 2),
        (MulticoreMode.MULTIPROCESS, 1, 1.0, 1),
        (MulticoreMode.BATCH, 4, 1.0, 1),
        (MulticoreMode.COOPERATIVE, 2, 0.5, 1),
    ],
)
def test_replicas_follow_the_runtime_rule(mode, cores, resources, replicas) -> None:
    assert program(cores, mode, resources=resources).replicas == replicas


def test_bad_programs_are_config_errors() -> None:
    inst = Instance((0,), ("core0.tasklist",), 0, 0)
    with pytest.raises(ConfigError, match="aipu_cores_used must be an integer 1-4, not 5"):
        Program("m", MulticoreMode.BATCH, 5, 1.0, inst)
    with pytest.raises(ConfigError, match=r"resources_used must be a multiple of 0\.25"):
        Program("m", MulticoreMode.BATCH, 1, 0.3, inst)
    with pytest.raises(ConfigError, match="one file per core"):
        Instance((0, 1), ("core0.tasklist",), 0, 0)


def write_compiled(folder: Path) -> Path:
    folder.mkdir()
    prog = program(1, input_bytes=4096, output_bytes=256, profiling_levels=("K",))
    tasks = [
        dma(Unit.DMA0, 65536, dst=Pool.L2, phase=Phase.INIT, layer="consts"),
        dma(Unit.DMA0, 8192, signals=(tok(0),), layer="conv1"),
        mvm(500, waits=(tok(0),), layer="conv1"),
    ]
    write_tasklist(folder / "core0.tasklist", Tasklist(0, tasks))
    save_program(prog, folder)
    return folder


def test_load_program_and_simulate_a_directory(tmp_path: Path) -> None:
    folder = write_compiled(tmp_path / "compiled_model")
    prog, lists = load_program(folder)
    assert prog.model == "hand" and len(lists[0]) == 3
    res = simulate(folder, frames=3)
    assert res.frames == 3
    assert res.energy_mj_init > 0  # the INIT copy ran once
    log = res.task_log
    assert (log["frame"] == -1).sum() == 1 and (log["layer"] == "conv1").sum() == 6


def test_missing_model_json_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"must contain model\.json"):
        load_program(tmp_path)


def test_text_and_parquet_traces_share_columns(tmp_path: Path) -> None:
    folder = write_compiled(tmp_path / "c")
    text = tmp_path / "run.trace"
    res = simulate(folder, frames=2, levels="B,PB,PE,K,M,T", trace_path=text)
    lines = text.read_text().splitlines()
    header = TraceHeader.parse(lines[0])
    assert header.levels == ("B", "PB", "PE", "K", "M", "T") and header.model == "hand"
    tags = {line.split()[0] for line in lines[1:]}
    assert tags == {"[B]", "[PB]", "[PE]", "[K]", "[M]", "[T]"}
    assert len(lines) - 1 == res.event_counts["trace_lines"]
    timeline = pd.read_parquet(tmp_path / "run.power.parquet")
    assert POWER_TOTAL_COLUMN in timeline and (timeline[POWER_TOTAL_COLUMN] > 0).all()

    pq = tmp_path / "run.parquet"
    simulate(folder, frames=2, levels="B,PB,PE,K,M,T", trace_path=pq)
    table = pd.read_parquet(pq)
    for tag in (Tag.K, Tag.M):
        cols = [name for name, _ in COLUMNS[tag]]
        assert set(cols) <= set(table.columns)
    assert sorted(table["tag"].unique()) == ["B", "K", "M", "PB", "PE", "T"]


def test_cli_simulate_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_compiled(tmp_path / "c")
    code = main(["simulate", str(folder), "--frames", "4", "--json", "--set", "frequency=400e6"])
    out = capsys.readouterr().out
    assert code == 0
    data = json.loads(out)
    for key in ("fps", "latency_us_p50", "latency_us_p99", "energy_mj_per_frame", "avg_power_w",
                "peak_power_w", "total_cycles", "utilization"):  # fmt: skip
        assert key in data
    assert data["frequency_hz"] == 400_000_000 and 0 < data["utilization"]["mvm"] <= 1


def test_cli_simulate_table_and_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_compiled(tmp_path / "c")
    trace = tmp_path / "t.trace"
    code = main(["simulate", str(folder), "--trace", str(trace), "--levels", "K,M"])
    out = capsys.readouterr().out
    assert code == 0 and "system FPS" in out and "energy per frame by component" in out
    assert trace.read_text().startswith("# aipusim-trace 1")


def test_cli_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(tmp_path / "nope")]) == 2
    assert "COMPILED_DIR must be an existing folder" in capsys.readouterr().err
    folder = write_compiled(tmp_path / "c")
    assert main(["simulate", str(folder), "--set", "colour=blue"]) == 2
    assert "simulate override must be one of" in capsys.readouterr().err
    assert main(["simulate", str(folder), "--set", "multicore_mode=batch"]) == 2
    assert capsys.readouterr().err == (
        "aipusim: error: multicore_mode is fixed at compile time (cooperative); recompile with "
        "--set multicore_mode=batch\n"
    )
    assert main(["simulate", str(folder), "--levels", "K,X"]) == 2
    assert "profiling level must be one of" in capsys.readouterr().err


def test_the_trace_tells_the_profiler_what_its_metrics_need(tmp_path: Path) -> None:
    from aipusim.profiler import load_trace, plot_power

    folder = write_compiled(tmp_path / "c")
    res = simulate(folder, frames=3, levels="B,PB,PE,K,M", trace_path=tmp_path / "run.trace")
    trace = load_trace(tmp_path / "run.trace")
    # the cores of an instance and the token latency, for the critical path
    assert trace.header.extra["instance_cores"] == "1"
    assert trace.header.extra["token_latency_cycles"] == "2"
    # the power timeline states its bin and the run's peaks by window
    assert trace.power.attrs["bin_us"] == res.power_bin_us == 1.0
    assert trace.power.attrs["peak_power_w"] == res.peak_power_w
    # the same steady-state definitions on both sides
    from aipusim.profiler import frame_summary

    summary = frame_summary(trace)
    assert summary["fps"] == pytest.approx(res.fps)
    assert summary["p50_us"] == pytest.approx(res.latency_us_p50)
    assert summary["warmup_frames"] == res.warmup_frames == 1
    assert plot_power(trace, tmp_path / "power.png").stat().st_size > 0
