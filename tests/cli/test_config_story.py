"""One config story: a zoo model starts from its built-in config in compile, sweep and run
(``--defaults``: from the defaults), and every output names the base and the effective
config's changes from the defaults."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest

import aipusim
from aipusim import zoo
from aipusim.cli.main import main


class _Captured(Exception):
    """Raised by the stand-ins below once they have what the test checks."""


@pytest.fixture
def tiny_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """Zoo models built as tiny_cnn: the config, not the network, is under test."""
    real = zoo.build
    monkeypatch.setattr(zoo, "build", lambda name, **kw: real("tiny_cnn", **kw))


@pytest.mark.parametrize(
    ("flags", "cores", "base"),
    [([], 4, "the built-in config of resnet50"), (["--defaults"], 1, "the defaults (--defaults)")],
)
def test_compile_of_a_zoo_name_starts_from_its_builtin_config(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    tiny_build: None,
    flags: list[str],
    cores: int,
    base: str,
) -> None:
    seen: dict[str, Any] = {}

    def fake_compile(request: Any, after_pass: Any = None) -> Any:
        seen["config"] = request.config
        return types.SimpleNamespace(status="OK")

    monkeypatch.setattr("aipusim.compiler.driver.compile_model", fake_compile)
    assert main(["compile", "-i", "resnet50", "-o", str(tmp_path / "c"), *flags, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert seen["config"].aipu_cores_used == cores
    assert summary["config"]["base"] == base
    assert summary["config"]["changes"].get("aipu_cores_used", "1") == str(cores)
    assert main(["compile", "-i", "resnet50", "-o", str(tmp_path / "d"), *flags]) == 0
    assert f"config: starts from {base}; changes from the defaults: " in capsys.readouterr().out


def test_sweep_points_start_from_the_builtin_config_like_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spaces: list[Any] = []

    def fake_run_sweep(space: Any, *args: Any, **kwargs: Any) -> Any:
        spaces.append(space)
        raise _Captured

    monkeypatch.setattr("aipusim.sweep.runner.run_sweep", fake_run_sweep)
    args = ["sweep", "resnet50", "--param", "multicore_mode=batch", "--set", "aipu_cores_used=4"]
    with pytest.raises(_Captured):
        main([*args, "-o", str(tmp_path / "sw")])
    config = spaces[0].points[0].config()
    # what `aipusim run resnet50` compiles: the built-in config
    assert config.to_dict() == aipusim.config_for("resnet50").to_dict()
    with pytest.raises(_Captured):
        main([*args, "-o", str(tmp_path / "sw2"), "--defaults"])
    assert spaces[1].points[0].config().resources_used == aipusim.CompilerConfig().resources_used
    assert spaces[1].points[0].config().imc_double_buffer_pipeline is False


def test_sweep_report_names_each_models_base_config(tmp_path: Path) -> None:
    from aipusim.sweep.report import base_config_lines
    from aipusim.sweep.space import build_space
    from aipusim.sweep.store import ResultStore

    bases = {"tiny_cnn": aipusim.config_for("resnet50"), "resnet18": aipusim.CompilerConfig()}
    space = build_space(["tiny_cnn", "resnet18"], base=bases, frames=1)
    store = ResultStore(tmp_path / "sw")
    store.open(space.context)
    lines = base_config_lines(store.context(), ["tiny_cnn", "resnet18"])
    assert lines[0].startswith("- `tiny_cnn`: ")
    assert "aipu_cores_used=4" in lines[0] and "multicore_mode=batch" in lines[0]
    assert lines[1] == "- `resnet18`: none (the defaults)"


@pytest.mark.slow
def test_sweep_and_run_of_resnet50_report_the_same_batch_fps(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The issue's case at 32 px: with the run's trace levels the sweep's point is the
    run's simulation; untraced, both printouts say which levels they record."""
    small = ["--input-size", "32", "--frames", "4"]
    assert main(["run", "resnet50", *small, "-o", str(tmp_path / "r"), "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    sweep = ["sweep", "resnet50", "--param", "multicore_mode=batch", "--set", "aipu_cores_used=4"]
    levels = ["--set", "profiling_levels=" + ",".join(run["config"]["trace_levels"])]
    out = tmp_path / "sw"
    assert main([*sweep, *levels, *small, "-o", str(out), "--workers", "1", "--json"]) == 0
    capsys.readouterr()
    import pandas as pd

    assert pd.read_parquet(out)["fps"].iloc[0] == pytest.approx(run["fps"], rel=1e-12)
    assert main([*sweep, *small, "-o", str(tmp_path / "sw2"), "--workers", "1"]) == 0
    assert "trace levels none (trace lines cost control-core cycles)" in capsys.readouterr().out


def test_report_and_compare_take_defaults_and_set(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "p"
    args = ["report", "power", "--models", "tiny_cnn", "--limits", "1", "--input-size", "16"]
    flags = ["--defaults", "--set", "frequency=400000000"]
    assert main([*args, "--frames", "1", "--workers", "1", "-o", str(out), *flags]) == 0
    readme = (out / "README.md").read_text()
    assert (
        "- base config of each model (the defaults (--defaults), `--set frequency=400000000`; "
        in (readme)
    )
    assert "  - `tiny_cnn`: `frequency=400000000`" in readme  # not the built-in 4 x Batch-1
    assert "--defaults --set frequency=400000000`" in readme  # the reproducing command
    capsys.readouterr()
    out = tmp_path / "c"
    args = ["compare", "tiny_cnn", "--modes", "batch", "--input-size", "16", "--frames", "1"]
    assert main([*args, "--workers", "1", "-o", str(out), "--set", "frequency=400000000"]) == 0
    readme = (out / "README.md").read_text()
    assert "(built-in zoo config, `--set frequency=400000000`; changes from the defaults)" in readme


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["compare", "tiny_cnn", "--set", "multicore_mode=batch"],
            "--set must not name multicore_mode: the multicore study sets it itself (choose "
            "modes with --modes)",
        ),
        (
            ["compare", "tiny_cnn", "--limits", "1", "--set", "mvm_utilization_limit=0.5"],
            "--set must not name mvm_utilization_limit: the power study sets it itself",
        ),
        (
            ["report", "validation", "--defaults"],
            "--defaults applies to the multicore, power, layers, llm studies only, not validation",
        ),
        (
            ["report", "corpus", "--set", "frequency=400000000"],
            "--set applies to the multicore, power, layers, llm studies only, not corpus",
        ),
        (["report", "power", "--set", "frequency=7"], "--set: frequency must be an integer"),
        (
            ["report", "power", "--set", "resources_used=0.25"],  # (its default: resnet50)
            "resources_used must be at least 0.25 per core (aipu_cores_used = 4 needs >= 1.0)",
        ),
    ],
)
def test_report_and_compare_refuse_a_base_they_cannot_use(
    tmp_path: Path, capsys: pytest.CaptureFixture, args: list[str], message: str
) -> None:
    assert main([*args, "-o", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()
