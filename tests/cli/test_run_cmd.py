"""``aipusim run``: the main job end to end on the tiny zoo model, and its bad inputs."""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from aipusim.cli.main import main


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("run") / "tiny"
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(["run", "tiny_cnn", "--frames", "3", "-o", str(out), "--json"])
    assert code == 0
    return out, json.loads(buf.getvalue())


def test_run_writes_the_whole_folder(tiny_run: tuple[Path, dict]) -> None:
    out, _ = tiny_run
    for name in (
        "report.md",
        "trace.txt",
        "trace.power.parquet",
        "layers.csv",
        "units.csv",
        "run.json",
        "compile/compiled_model/model.json",
    ):
        assert (out / name).is_file(), name
    pngs = sorted(p.name for p in (out / "plots").glob("*.png"))
    assert {"layers.png", "gantt.png", "power.png"} <= set(pngs)
    assert all((out / "plots" / p).stat().st_size > 1000 for p in pngs)
    report = (out / "report.md").read_text()
    assert "## The 10 slowest layers by busy time" in report
    assert "![layers](plots/layers.png)" in report
    # a Gemm lowered to a 1x1 conv is still labelled Gemm; macs are the network's MACs
    # per layer, array_macs what the arrays ran (padded)
    import pandas as pd

    layers = pd.read_csv(out / "layers.csv").set_index("layer")
    assert layers.loc["/fc/Gemm", "op"] == "Gemm"
    assert layers.loc["/fc/Gemm", "macs"] == 64 * 10  # 64 features -> 10 classes
    assert layers.loc["/fc/Gemm", "array_macs"] >= 3 * 64 * 10  # 3 frames, padded
    units = pd.read_csv(out / "units.csv")
    assert "array_macs" in units.columns and "macs" not in units.columns
    # no copy of the ONNX model: run.json says which it was
    assert list(out.rglob("*.onnx")) == []
    run_json = json.loads((out / "run.json").read_text())
    assert run_json["input_model"] == {"zoo": "tiny_cnn", "input_size": None}
    # No temporary folder is left beside the output.
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".tiny.")]


def test_run_json_has_the_headline_figures(tiny_run: tuple[Path, dict]) -> None:
    _, data = tiny_run
    for key in (
        "fps",
        "latency_us_p50",
        "latency_us_p99",
        "energy_mj_per_frame",
        "avg_power_w",
        "peak_power_w",
        "total_cycles",
        "slowest_layers",
    ):
        assert key in data, key
    assert data["model"] == "tiny_cnn"
    assert data["fps"] > 0 and data["peak_power_w"]["100ns"] >= data["avg_power_w"] > 0
    assert 0 < len(data["slowest_layers"]) <= 10
    assert {"layer", "unit", "busy_us", "span_us", "critical_unit"} <= set(
        data["slowest_layers"][0]
    )
    busy = [row["busy_us"] for row in data["slowest_layers"]]
    assert busy == sorted(busy, reverse=True)


@pytest.mark.usefixtures("no_run_plots")
def test_rerun_replaces_an_earlier_run_folder(
    tiny_run: tuple[Path, dict], capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = tiny_run
    assert main(["run", "tiny_cnn", "--frames", "1", "-o", str(out), "--json"]) == 0
    assert (
        json.loads(capsys.readouterr().out)["frames"]
        == json.loads((out / "run.json").read_text())["frames"]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["run", "vgg99"],
            r"MODEL must be an ONNX file or a zoo model \(.*resnet50.*\), not 'vgg99'",
        ),
        (["run", "missing/model.onnx"], r"model file must exist, not 'missing/model.onnx'"),
        (["run", "tiny_cnn", "--frames", "0"], r"--frames must be an integer >= 1, not 0"),
        (["run", "tiny_cnn", "--levels", "K,X"], r"profiling level must be one of .*, not 'X'"),
        (
            ["run", "tiny_cnn", "--set", "aipu_cores_used=5"],
            r"aipu_cores_used must be an integer 1-4, not 5",
        ),
        (
            ["run", "tiny_cnn", "--input-shape", "1,3,32,32"],
            r"--input-shape applies to ONNX files; a zoo model takes --input-size",
        ),
        (["run", "tiny_cnn", "--frames", "x"], r"run: Invalid value for '--frames'"),
    ],
)
def test_bad_input_is_one_line(
    args: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("aipusim: error: ")
    assert re.search(message, err), err
    assert list(tmp_path.iterdir()) == []


def test_refuses_a_folder_with_other_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    assert main(["run", "tiny_cnn", "-o", str(tmp_path)]) == 2
    assert "must be empty or an earlier `aipusim run` folder" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_refuses_an_output_below_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "afile").write_text("x")
    assert main(["run", "tiny_cnn", "-o", str(tmp_path / "afile" / "out")]) == 2
    assert "is a file" in capsys.readouterr().err


@pytest.mark.usefixtures("no_run_plots")
def test_input_shape_fixes_a_dynamic_onnx_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import onnx

    from aipusim import zoo

    model = zoo.build("tiny_cnn")
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[0].dim_param, dims[2].dim_param, dims[3].dim_param = "batch", "h", "w"
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    path = tmp_path / "dynamic.onnx"
    onnx.save(model, path)
    assert main(["run", str(path), "-o", str(tmp_path / "a"), "--frames", "1"]) == 2
    assert "fix it with --input-shape" in capsys.readouterr().err
    args = [
        "run",
        str(path),
        "-o",
        str(tmp_path / "b"),
        "--frames",
        "1",
        "--input-shape",
        "1,3,32,32",
    ]
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["frames"] == 1


def test_a_model_is_named_by_its_graph_or_else_its_file(tmp_path: Path) -> None:
    import onnx

    from aipusim import zoo
    from aipusim.run.job import model_name, resolve_model

    model = zoo.build("tiny_cnn")
    onnx.save(model, tmp_path / "renamed.onnx")
    model.graph.name = ""
    onnx.save(model, tmp_path / "nameless.onnx")
    assert model_name(tmp_path / "renamed.onnx") == "tiny_cnn"
    assert model_name(tmp_path / "nameless.onnx") == "nameless"
    assert model_name("resnet50") == "resnet50"
    assert resolve_model(tmp_path / "renamed.onnx").name == "tiny_cnn"
