"""The back end as a typed pass list: each pass takes one IR stage and gives the next, every
pass dumps and verifies, stops where asked, and a pass that breaks fails the compile."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from zoo_compiles import zoo_model

import aipusim.zoo as zoo
from aipusim.base.errors import CompilerInternalError, TasklistError
from aipusim.compiler import CompilerConfig
from aipusim.compiler.backend.common import ir
from aipusim.compiler.driver import LOG_NAME, REPORT_NAME, compile_model
from aipusim.compiler.ir import Graph
from aipusim.compiler.passes.context import PassContext
from aipusim.compiler.pipeline import (
    BACK,
    FRONT,
    PIPELINE,
    Pass,
    pass_names,
    run_pipeline,
    verify_ir,
)
from aipusim.compiler.request import CompileRequest

NO_QUANT = tuple(p for p in PIPELINE if p.name != "quantize")
#: What each back-end pass gives.
STAGE_OF = dict(zip([p.name for p in BACK], ir.STAGES, strict=True))


def _request(tmp_path: Path, **kw) -> CompileRequest:
    model = tmp_path / "m.onnx"
    onnx.save(zoo.build("tiny_cnn"), model)
    return CompileRequest(
        model_path=model, output_dir=tmp_path / "out", config=CompilerConfig(), **kw
    )


@pytest.mark.parametrize(
    ("name", "cores", "mode"),
    [("tiny_cnn", 1, "multiprocess"), ("resnet18", 4, "cooperative"), ("yolov8n", 4, "pipeline")],
)
def test_every_back_pass_gives_its_stage_and_verifies(name: str, cores: int, mode: str) -> None:
    ctx = PassContext(CompilerConfig(aipu_cores_used=cores, multicore_mode=mode))
    seen: dict[str, object] = {}

    def after(pass_name: str, out: object) -> None:
        verify_ir(out)
        seen[pass_name] = out

    model = zoo_model(name, 64 if name == "yolov8n" else 32)
    run_pipeline(model, ctx, passes=NO_QUANT, after_pass=after)
    for p in BACK:
        assert type(seen[p.name]) is STAGE_OF[p.name], p.name
    assert isinstance(seen[FRONT[-1].name], Graph)
    emitted = seen["emit"]
    assert isinstance(emitted, ir.Emitted) and emitted.files == {
        k: v for k, v in ctx.files.items() if k.startswith("compiled_model/")
    }


def test_a_stage_keeps_what_earlier_passes_decided() -> None:
    ctx = PassContext(CompilerConfig())
    seen: dict[str, object] = {}
    run_pipeline(zoo.build("tiny_cnn"), ctx, passes=NO_QUANT, after_pass=seen.__setitem__)
    tiled, emitted = seen["tile"], seen["emit"]
    assert emitted.layers == tiled.layers and emitted.tilings == tiled.tilings
    assert emitted.mappings == seen["imc"].mappings
    with pytest.raises(AttributeError):
        emitted.layers[0].name = "renamed"  # frozen: no pass writes into a layer


@pytest.mark.parametrize("stop", [p.name for p in BACK[:-1]])
def test_stop_after_any_back_pass_dumps_it_and_writes_no_program(tmp_path: Path, stop: str) -> None:
    result = compile_model(_request(tmp_path, stop_after=stop, dump_after=(stop,)), passes=NO_QUANT)
    out = tmp_path / "out"
    assert result.status == "STOPPED"
    report = json.loads((out / REPORT_NAME).read_text())
    assert report["status"] == "STOPPED" and report["stage"] == stop
    assert [r["name"] for r in report["passes"]][-1] == stop
    assert not (out / "compiled_model").exists()
    (dump,) = (out / "ir").iterdir()
    assert dump.name.endswith(f"_{stop}.txt")
    assert "# back end: " in dump.read_text()


def test_dump_after_all_writes_every_pass_and_the_report_lists_the_same_names(
    tmp_path: Path,
) -> None:
    compile_model(_request(tmp_path, dump_after=("all",)), passes=NO_QUANT)
    out = tmp_path / "out"
    dumps = sorted(p.name for p in (out / "ir").iterdir())
    names = pass_names(NO_QUANT)
    assert dumps == [f"{i:02d}_{n}.txt" for i, n in enumerate(names)]
    report = json.loads((out / REPORT_NAME).read_text())
    assert report["status"] == "SUCCEEDED"
    assert [r["name"] for r in report["passes"]] == names
    text = (out / "ir" / f"{names.index('schedule'):02d}_schedule.txt").read_text()
    assert "# schedule" in text and "Mvm" in text


def _breaking(pass_name: str, exc: Exception) -> tuple[Pass, ...]:
    def broken(_ir: object, _ctx: object) -> object:
        raise exc

    return tuple(Pass(p.name, broken, p.stage) if p.name == pass_name else p for p in NO_QUANT)


@pytest.mark.parametrize("pass_name", ["lower", "memplan", "emit"])
def test_a_pass_that_cannot_run_fails_the_compile_naming_it(tmp_path: Path, pass_name: str) -> None:
    passes = _breaking(pass_name, ImportError("No module named 'aipusim.broken'"))
    with pytest.raises(CompilerInternalError, match=f"internal error in pass `{pass_name}`"):
        compile_model(_request(tmp_path), passes=passes)
    out = tmp_path / "out"
    report = json.loads((out / REPORT_NAME).read_text())
    assert report["status"] == "INTERNAL_ERROR" and report["stage"] == pass_name
    assert "ImportError: No module named 'aipusim.broken'" in report["message"]
    assert sorted(p.name for p in out.iterdir()) == [LOG_NAME, REPORT_NAME]


def test_the_cli_reports_an_internal_error_in_one_line_with_status_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from aipusim.cli.main import main

    monkeypatch.setattr(
        "aipusim.compiler.driver.PIPELINE", _breaking("tile", ImportError("no tiler"))
    )
    model = tmp_path / "m.onnx"
    onnx.save(zoo.build("tiny_cnn"), model)
    code = main(["compile", "-i", str(model), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and "internal error in pass `tile`" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out" / "compiled_model").exists()


def test_success_needs_the_written_program_to_pass_its_crc_check(tmp_path: Path) -> None:
    def emit_then_corrupt(stage: ir.Estimated, ctx: PassContext) -> ir.Emitted:
        emitted = next(p for p in BACK if p.name == "emit").run(stage, ctx)
        # the driver has emit write each file into its aside folder as it is made
        written = ctx.write_dir / "compiled_model" / "core0.tasklist"
        data = bytearray(written.read_bytes())
        data[-1] ^= 0xFF
        written.write_bytes(bytes(data))
        return emitted

    passes = tuple(
        Pass("emit", emit_then_corrupt, p.stage) if p.name == "emit" else p for p in NO_QUANT
    )
    with pytest.raises(TasklistError, match=r"core0\.tasklist must have CRC32"):
        compile_model(_request(tmp_path), passes=passes)
    report = json.loads((tmp_path / "out" / REPORT_NAME).read_text())
    assert report["status"] != "SUCCEEDED" and report["stage"] == "write_artifacts"


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--stop-after", "tiles", "--stop-after must be one pass of import, rewrite_einsum"),
        ("--stop-after", "tile,imc", "--stop-after must be one pass of"),
        ("--dump-after", "tile,nope", "--dump-after must be passes separated by commas"),
    ],
)
def test_bad_pass_names_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, message: str
) -> None:
    from aipusim.cli.main import main

    model = tmp_path / "m.onnx"
    onnx.save(zoo.build("tiny_cnn"), model)
    code = main(["compile", "-i", str(model), "-o", str(tmp_path / "o"), flag, value])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_cli_stop_after_prints_what_it_did(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aipusim.cli.main import main

    model = tmp_path / "m.onnx"
    onnx.save(zoo.build("tiny_cnn"), model)
    out = tmp_path / "o"
    code = main(["compile", "-i", str(model), "-o", str(out), "--stop-after", "imc",
                 "--dump-after", "imc"])  # fmt: skip
    assert code == 0
    config, stopped = capsys.readouterr().out.splitlines()[:2]
    assert config.startswith("config: starts from the defaults")  # the config story's line
    assert stopped.startswith("stopped after imc as asked")
    (dump,) = (out / "ir").iterdir()
    assert "# imc" in dump.read_text()
