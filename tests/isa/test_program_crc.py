"""A compiled folder whose files changed after compilation is refused on load, file named."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

from aipusim import zoo
from aipusim.base.errors import TasklistError
from aipusim.cli.main import main
from aipusim.isa.program import load_program, load_program_tables
from aipusim.isa.table import TaskTable


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("crc")
    onnx.save(zoo.build("tiny_cnn", input_size=16), root / "m.onnx")
    assert main(["compile", "-i", str(root / "m.onnx"), "-o", str(root / "out")]) == 0
    return root / "out" / "compiled_model"


def _copy(compiled: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "compiled_model"
    shutil.copytree(compiled, folder)
    return folder


def test_intact_folder_loads(compiled: Path) -> None:
    program, tasklists = load_program(compiled)
    assert program.extra["crc_check"] is True
    assert sum(len(t) for t in tasklists.values()) > 0


def test_tables_load_the_same_tasks_as_objects(compiled: Path) -> None:
    program, tasklists = load_program(compiled)
    program2, tables = load_program_tables(compiled)
    assert program2 == program and set(tables) == set(tasklists)
    for core, tasks in tasklists.items():
        assert tables[core] == TaskTable.from_tasks(tasks)


@pytest.mark.parametrize("load", [load_program, load_program_tables])
@pytest.mark.parametrize("name", ["core0.tasklist", "report.json", "manifest.json"])
def test_a_flipped_byte_names_the_file(
    compiled: Path, tmp_path: Path, name: str, load: Callable[[Path], object]
) -> None:
    folder = _copy(compiled, tmp_path)
    data = bytearray((folder / name).read_bytes())
    data[len(data) // 2] ^= 0x01
    (folder / name).write_bytes(bytes(data))
    with pytest.raises(
        TasklistError, match=rf"^{name} must have CRC32 0x[0-9a-f]{{8}} as recorded"
    ):
        load(folder)


def test_simulate_refuses_a_corrupted_folder_in_one_line(
    compiled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _copy(compiled, tmp_path)
    (folder / "report.json").unlink()
    assert main(["simulate", str(folder), "--frames", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "report.json must exist in" in err


@pytest.mark.parametrize(
    ("position", "mask"), [(40, 0xFF), (0, 0x01)], ids=["not-utf8", "not-json"]
)
def test_a_flipped_byte_in_model_json_is_named_corrupt(
    compiled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], position: int, mask: int
) -> None:
    """model.json holds the CRCs of the others: a flip in it is named, not a traceback."""
    folder = _copy(compiled, tmp_path)
    data = bytearray((folder / "model.json").read_bytes())
    data[position] ^= mask
    (folder / "model.json").write_bytes(bytes(data))
    assert main(["simulate", str(folder.parent / "compiled_model"), "--frames", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "model.json" in err and "corrupt" in err
