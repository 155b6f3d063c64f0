"""``aipusim sweep`` and ``aipusim sweep-report`` through `aipusim.cli.main.main`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import sweep_evaluators as ev

from aipusim import config_for
from aipusim.cli.main import main
from aipusim.sweep import ResultStore, build_space, parse_backend, run_sweep


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["lenet"], "MODEL must be a zoo model"),
        (
            ["tiny_cnn", "--param", "mvm_utilization_limit=0.5,7"],
            "--param mvm_utilization_limit=7: mvm_utilization_limit must be",
        ),
        (
            ["tiny_cnn", "--arch-param", "ddr.latency_ns=x"],
            "--arch-param ddr.latency_ns=x",
        ),
        (["tiny_cnn", "--frames", "0"], "--frames must be a positive integer, not 0"),
        (["tiny_cnn", "--workers", "2", "--cluster", "local:2"], "only one of --workers"),
        (["tiny_cnn", "--set", "aipu_cores_used=9"], "--set: aipu_cores_used must be"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep", *args, "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_cluster_without_dask_names_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)
    args = ["sweep", "tiny_cnn", "--cluster", "local:2", "-o", str(tmp_path)]
    assert main(args) == 2
    assert "--cluster requires the optional extra aipusim[distributed]" in capsys.readouterr().err


def test_failing_points_are_rows_and_the_command_succeeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # aipu_cores_used=4 needs resources_used >= 1.0: both points fail before compiling.
    args = ["sweep", "tiny_cnn", "--set", "resources_used=0.25",
            "--param", "aipu_cores_used=2,4", "--workers", "2", "--no-progress",
            "-o", str(tmp_path), "--json"]  # fmt: skip
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    config = summary.pop("config")["tiny_cnn"]
    assert summary == {"points": 2, "skipped": 0, "ran": 2, "failed": 2, "dir": str(tmp_path)}
    assert config["base"] == "the built-in config of tiny_cnn"
    assert config["changes"]["resources_used"] == "0.25"
    table = ResultStore(tmp_path).read()
    assert table["error"].str.startswith("ConfigError: resources_used must be at least").all()
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == 2


def test_sweep_report_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    space = build_space(["tiny_cnn"], ["mvm_utilization_limit=0.5,1"], frames=2)
    run_sweep(
        space, tmp_path, evaluator=ev.arch_figures, backend=parse_backend(workers=1), progress=False
    )
    assert main(["sweep-report", str(tmp_path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["points"], summary["ok"], summary["failed"]) == (2, 2, 0)
    assert Path(summary["report"]) == tmp_path.with_name(f"{tmp_path.name}_report") / "report.md"
    assert Path(summary["report"]).is_file()
    assert main(["sweep-report", str(tmp_path)]) == 0
    assert "sweep-report: 2 points (2 ok, 0 failed)" in capsys.readouterr().out


def test_sweep_report_needs_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep-report", str(tmp_path / "nowhere")]) == 2
    assert "DIR must be an existing folder" in capsys.readouterr().err
    assert main(["sweep-report", str(tmp_path)]) == 2
    assert "must hold part-*.parquet results" in capsys.readouterr().err


def test_help_lists_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("--param", "--arch-param", "--frames", "--workers", "--cluster", "--scheduler"):
        assert flag in out


def test_a_damaged_sweep_folder_is_one_line_with_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["tiny_cnn", "--param", "mvm_utilization_limit=0.5,1", "--frames", "2"]
    # the sweep command starts tiny_cnn from its built-in config
    space = build_space(
        ["tiny_cnn"], ["mvm_utilization_limit=0.5,1"], frames=2, base=config_for("tiny_cnn")
    )
    run_sweep(
        space, tmp_path, evaluator=ev.arch_figures, backend=parse_backend(workers=1),
        flush_every=1, progress=False,
    )  # fmt: skip
    part = tmp_path / "part-0001.parquet"
    part.write_bytes(part.read_bytes()[:100])
    for command in (["sweep", *args, "-o", str(tmp_path)], ["sweep-report", str(tmp_path)]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "part-0001.parquet cannot be read" in err
        assert "--resume" in err


def test_check_stores_the_verdict_of_every_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    args = ["sweep", "tiny_cnn", "--input-size", "16", "--frames", "1", "--workers", "1"]
    assert main([*args, "--check", "--no-progress", "-o", str(out)]) == 0, capsys.readouterr()
    table = ResultStore(out).read()
    assert table["bit_exact"].tolist() == [True]
    assert table["mismatches"].tolist() == [0]


def test_sweep_report_writes_beside_the_dataset_never_into_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pandas as pd

    data = tmp_path / "sw"
    space = build_space(["tiny_cnn"], ["mvm_utilization_limit=0.5,1"], frames=2)
    run_sweep(
        space, data, evaluator=ev.arch_figures, backend=parse_backend(workers=1), progress=False
    )
    assert main(["sweep-report", str(data)]) == 0
    assert f"-> {tmp_path / 'sw_report' / 'report.md'}" in capsys.readouterr().out
    assert {p.name for p in (tmp_path / "sw_report").iterdir()} == {
        "report.md",
        "pareto_fps.png",
        "pareto_latency.png",
    }
    # (names starting with "." or "_" are skipped by Parquet readers)
    others = {p.name for p in data.iterdir() if p.suffix != ".parquet"}
    assert {n for n in others if n[0] not in "._"} == set()
    assert len(pd.read_parquet(data)) == 2
    assert main(["sweep-report", str(data), "-o", str(data / "plots")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "must lie outside the sweep's dataset folder" in err


def test_sweep_prints_the_result_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["sweep", "tiny_cnn", "--input-size", "16", "--frames", "2", "--workers", "1",
            "--param", "mvm_utilization_limit=0.5,1", "--no-progress",
            "-o", str(tmp_path)]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("| model"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert columns == [
        "model",
        "mvm_utilization_limit",
        "status",
        "fps",
        "latency_us_p50",
        "energy_mj_per_frame",
        "avg_power_w",
    ]
    rows = [line for line in lines if line.startswith("| tiny_cnn")]
    assert len(rows) == 2 and "e+" not in out
    assert lines[-1].startswith("sweep: 2 points")
