"""``aipusim isa``: disasm, asm, check, info through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aipusim.cli.main import main
from aipusim.isa.encoding import RECORD_BYTES
from aipusim.isa.tasklist import Tasklist, encode_tasklist, tasklist_path, write_tasklist
from aipusim.isa.tasks import (
    Barrier,
    Mvm,
    Phase,
    TokenRef,
    TokenScope,
    TokenSignal,
    TokenWait,
    Unit,
)

L0 = TokenRef(TokenScope.LOCAL, 0)


def _model_dir(tmp_path: Path) -> Path:
    """Two cores that exchange a global token and meet at a barrier."""
    out = tmp_path / "compiled_model"
    out.mkdir()
    g = TokenRef(TokenScope.GLOBAL, 1)
    core0 = Tasklist(
        0,
        [
            TokenSignal(unit=Unit.DMA0, layer="load", phase=Phase.INIT, signals=(L0,)),
            Mvm(
                unit=Unit.MVM,
                layer="conv1",
                waits=(L0,),
                signals=(g,),
                weight_set=0,
                in_addr=0,
                out_addr=4096,
                vectors=10,
                rows_used=27,
                cols_used=16,
            ),
            TokenSignal(unit=Unit.DMA0, layer="load", signals=(L0,)),
            Barrier(unit=Unit.CTRL, layer="sync", barrier_id=1, core_mask=0b11),
        ],
    )
    core1 = Tasklist(
        1,
        [
            TokenWait(unit=Unit.DMA1, layer="recv", waits=(g,)),
            Barrier(unit=Unit.CTRL, layer="sync", barrier_id=1, core_mask=0b11),
        ],
    )
    write_tasklist(tasklist_path(out, 0), core0)
    write_tasklist(tasklist_path(out, 1), core1)
    return out


def test_disasm_asm_roundtrip_is_byte_identical(tmp_path: Path, capsys) -> None:
    model = _model_dir(tmp_path)
    src = tasklist_path(model, 0)
    assert main(["isa", "disasm", str(src)]) == 0
    text = capsys.readouterr().out
    assert "tasklist core=0" in text and "Mvm" in text and "layer=conv1" in text
    txt = tmp_path / "core0.txt"
    assert main(["isa", "disasm", str(src), "-o", str(txt)]) == 0
    assert txt.read_text() == text
    rebuilt = tmp_path / "rebuilt" / "core0.tasklist"
    rebuilt.parent.mkdir()
    assert main(["isa", "asm", str(txt), "-o", str(rebuilt)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert rebuilt.read_bytes() == src.read_bytes()
    assert main(["isa", "asm", str(txt), "-o", str(rebuilt), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["tasks"] == 4 and record["size_bytes"] == rebuilt.stat().st_size


def test_check_clean_folder(tmp_path: Path, capsys) -> None:
    model = _model_dir(tmp_path)
    assert main(["isa", "check", str(model)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("checked 6 tasks on cores 0, 1 (init + 2 frames): 0 errors")
    assert main(["isa", "check", str(model), "--json", "--frames", "3"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["frames"] == 3 and report["cores"] == [0, 1]


def test_check_one_core_alone_fails(tmp_path: Path, capsys) -> None:
    model = _model_dir(tmp_path)
    code = main(["isa", "check", str(tasklist_path(model, 1))])
    captured = capsys.readouterr()
    assert code == 2
    assert "error: [never_signalled] token G1" in captured.out
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("aipusim: error: 3 error(s) in the tasklists of cores 1; first:")


def test_check_deadlock_json(tmp_path: Path, capsys) -> None:
    tl = Tasklist(
        0,
        [
            TokenSignal(unit=Unit.DMA0, waits=(L0,), signals=(TokenRef(TokenScope.LOCAL, 1),)),
            TokenSignal(unit=Unit.DPU, waits=(TokenRef(TokenScope.LOCAL, 1),), signals=(L0,)),
        ],
    )
    path = tmp_path / "core0.tasklist"
    write_tasklist(path, tl)
    assert main(["isa", "check", str(path), "--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    [dead] = report["problems"]
    assert dead["kind"] == "deadlock" and "cycle of waits" in dead["message"]
    assert sorted(t["index"] for t in dead["tasks"]) == [0, 1]


def test_info(tmp_path: Path, capsys) -> None:
    model = _model_dir(tmp_path)
    path = tasklist_path(model, 0)
    assert main(["isa", "info", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"core 0, 4 tasks of {RECORD_BYTES} bytes, 3 layers" in out
    assert "fits in the 1048576-byte L2 tasklist window" in out
    assert "by unit: ctrl 1, dma0 2, mvm 1" in out
    assert main(["isa", "info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["by_kind"] == {"Barrier": 1, "Mvm": 1, "TokenSignal": 2}
    assert info["by_phase"] == {"frame": 3, "init": 1}
    assert info["size_bytes"] == path.stat().st_size and info["fits_l2_window"] is True


@pytest.mark.parametrize("command", ["disasm", "info"])
def test_corrupt_file_one_line_error(tmp_path: Path, capsys, command: str) -> None:
    data = bytearray(encode_tasklist(Tasklist(0, [TokenSignal(unit=Unit.DMA0, signals=(L0,))])))
    data[40] ^= 0x04
    path = tmp_path / "core0.tasklist"
    path.write_bytes(bytes(data))
    assert main(["isa", command, str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("aipusim: error: byte 40: body CRC32 must be")
    assert err.count("\n") == 1


def test_bad_inputs_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["isa", "disasm", str(tmp_path / "missing.tasklist")]) == 2
    assert "cannot read tasklist" in capsys.readouterr().err
    bad_text = tmp_path / "bad.txt"
    bad_text.write_text("tasklist core=0\nmvm Mvm vectors=1\n")
    assert main(["isa", "asm", str(bad_text), "-o", str(tmp_path / "x.tasklist")]) == 2
    assert "line 2: Mvm needs fields" in capsys.readouterr().err
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"tasklist core=0\n\xff\xfe")
    assert main(["isa", "asm", str(binary), "-o", str(tmp_path / "x.tasklist")]) == 2
    assert "byte 16: " in capsys.readouterr().err
    not_tasklist = tmp_path / "core0.tasklist"
    not_tasklist.write_bytes(b"PK\x03\x04" + bytes(40))
    assert main(["isa", "check", str(not_tasklist)]) == 2
    assert "byte 0: magic must be" in capsys.readouterr().err


def test_help(capsys) -> None:
    for sub in ([], ["disasm"], ["asm"], ["check"], ["info"]):
        assert main(["isa", *sub, "--help"]) == 0
        assert "Usage: aipusim isa" in capsys.readouterr().out


def test_asm_into_a_compiled_folder_updates_its_crc(tmp_path: Path, capsys) -> None:
    import onnx

    from aipusim import zoo
    from aipusim.compiler.config import CompilerConfig
    from aipusim.compiler.driver import compile_model
    from aipusim.compiler.request import CompileRequest
    from aipusim.isa.program import load_program

    model = tmp_path / "tiny.onnx"
    onnx.save(zoo.build("tiny_cnn", input_size=32), model)
    request = CompileRequest(model_path=model, output_dir=tmp_path / "out", config=CompilerConfig())
    compile_model(request)
    folder = tmp_path / "out" / "compiled_model"
    text = tmp_path / "core0.txt"
    assert main(["isa", "disasm", str(folder / "core0.tasklist"), "-o", str(text)]) == 0
    # a hand edit: the last task's tile number changes, so its bytes (and CRC) change
    lines = text.read_text().splitlines()
    lines[-1] = lines[-1].replace(" tile=0 ", " tile=7 ", 1)
    text.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["isa", "asm", str(text), "-o", str(folder / "core0.tasklist"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model_json_updated"] == str(folder / "model.json")
    _, tasks = load_program(folder)  # the CRC check passes
    assert tasks[0][-1].tile == 7


def test_asm_outside_a_compiled_folder_touches_no_model_json(tmp_path: Path, capsys) -> None:
    text = tmp_path / "c.txt"
    out = tmp_path / "core0.tasklist"
    write_tasklist(out, Tasklist(0, [TokenSignal(unit=Unit.DMA0, signals=(L0,))]))
    assert main(["isa", "disasm", str(out), "-o", str(text)]) == 0
    capsys.readouterr()
    assert main(["isa", "asm", str(text), "-o", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model_json_updated"] is None
    assert not (tmp_path / "model.json").exists()
