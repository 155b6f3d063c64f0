"""The Parquet result folder: atomic parts, ids of done points, one row per id, context."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from aipusim.base.errors import ConfigError
from aipusim.sweep.store import ResultStore, result_schema, swept_columns

SCHEMA = result_schema(
    ["mvm_utilization_limit", "arch.ddr.latency_ns"], {"mvm_utilization_limit": "float"}
)


def _row(point_id: str, fps: float | None = 1.0, status: str = "ok") -> dict:
    return {
        "point_id": point_id,
        "model": "tiny_cnn",
        "frames": 2,
        "mvm_utilization_limit": "0.5",
        "mvm_utilization_limit__value": 0.5,
        "arch.ddr.latency_ns": "12",
        "status": status,
        "fps": fps,
    }


def test_parts_are_numbered_and_leave_no_temporary_files(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.open({"base_config": {}})
    assert store.write_part([_row("a"), _row("b")], SCHEMA).name == "part-0000.parquet"
    assert store.write_part([_row("c", None, "failed")], SCHEMA).name == "part-0001.parquet"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "_sweep.json",
        "part-0000.parquet",
        "part-0001.parquet",
    ]
    assert store.done_ids() == {"a", "b", "c"}
    schema = pq.read_schema(tmp_path / "part-0001.parquet")
    assert str(schema.field("fps").type) == "double"
    assert str(schema.field("mvm_utilization_limit__value").type) == "double"
    assert str(schema.field("arch.ddr.latency_ns").type) == "string"


def test_read_keeps_one_row_per_point(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.open({})
    store.write_part([_row("a", 1.0), _row("b", 2.0)], SCHEMA)
    store.write_part([_row("a", 9.0)], SCHEMA)  # e.g. two sweeps racing into one folder
    table = store.read()
    assert table["point_id"].tolist() == ["a", "b"]
    assert table["fps"].tolist() == [1.0, 2.0]
    assert swept_columns(table.columns) == ["mvm_utilization_limit", "arch.ddr.latency_ns"]


def test_a_folder_keeps_one_context(tmp_path: Path) -> None:
    ResultStore(tmp_path).open({"base_config": {"double_buffer": False}, "arch_sha256": "x"})
    ResultStore(tmp_path).open({"arch_sha256": "x", "base_config": {"double_buffer": False}})
    with pytest.raises(ConfigError, match=r"same --conf/--set/--arch.*differs in base_config"):
        ResultStore(tmp_path).open({"base_config": {}, "arch_sha256": "x"})


@pytest.mark.parametrize("old", [1, 2])
def test_a_folder_of_an_old_result_format_is_not_resumed(tmp_path: Path, old: int) -> None:
    # Format 1 held fps and energy with the warm-up in them, format 2 had no check columns:
    # mixing rows would mislead.
    (tmp_path / "_sweep.json").write_text(f'{{"format": {old}, "context": {{}}}}')
    with pytest.raises(ConfigError) as err:
        ResultStore(tmp_path).open({})
    assert str(err.value) == (
        f"-o {str(tmp_path)!r} must hold a sweep of result format 3 (steady-state metrics, "
        f"check columns), not {old}; use another folder"
    )


def test_reading_an_empty_folder_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"must hold part-\*\.parquet results, not none"):
        ResultStore(tmp_path).read()


def test_output_must_not_be_a_file(tmp_path: Path) -> None:
    file = tmp_path / "results"
    file.write_text("")
    with pytest.raises(ConfigError, match=r"-o must be a folder"):
        ResultStore(file).open({})


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_an_unreadable_part_is_named_with_the_way_out(tmp_path: Path) -> None:
    from aipusim.sweep.store import SweepStoreError

    store = ResultStore(tmp_path)
    store.open({})
    store.write_part([_row("a")], SCHEMA)
    store.write_part([_row("b")], SCHEMA)
    _truncate(tmp_path / "part-0001.parquet")
    for call in (store.done_ids, store.read):
        with pytest.raises(SweepStoreError, match=r"part-0001\.parquet cannot be read") as err:
            call()
        assert "--resume" in str(err.value) and "another -o folder" in str(err.value)
    # --resume: the bad part is set aside, its points are not done
    assert store.done_ids(resume=True) == {"a"}
    assert [p.name for p in store.set_aside] == ["part-0001.parquet.bad"]
    assert store.read()["point_id"].tolist() == ["a"]


def test_a_broken_sweep_json_is_named_and_rewritten_with_resume(tmp_path: Path) -> None:
    from aipusim.sweep.store import SweepStoreError

    (tmp_path / "_sweep.json").write_text('{"format": 2, "cont')
    with pytest.raises(SweepStoreError, match=r"_sweep\.json cannot be read.*--resume"):
        ResultStore(tmp_path).open({"x": 1})
    ResultStore(tmp_path).open({"x": 1}, resume=True)
    ResultStore(tmp_path).open({"x": 1})  # intact again


def test_a_folder_of_the_old_layout_keeps_its_context_under_the_new_name(tmp_path: Path) -> None:
    ResultStore(tmp_path).open({"x": 1})
    (tmp_path / "_sweep.json").rename(tmp_path / "sweep.json")
    with pytest.raises(ConfigError, match="same --conf"):
        ResultStore(tmp_path).open({"x": 2})
    assert [p.name for p in tmp_path.iterdir() if "sweep" in p.name] == ["_sweep.json"]


def test_temporary_files_of_dead_writers_are_removed(tmp_path: Path) -> None:
    dead = 2**22 + 1  # above the kernel's pid_max: no such process
    (tmp_path / f".part-{dead}-00ff.parquet.tmp").write_bytes(b"half")
    (tmp_path / ".scratch" / f"worker-{dead}-abc").mkdir(parents=True)
    (tmp_path / ".scratch" / f"worker-{dead}-abc" / "model.onnx").write_bytes(b"x")
    ResultStore(tmp_path).open({})
    assert sorted(p.name for p in tmp_path.iterdir()) == [".scratch", "_sweep.json"]
    assert list((tmp_path / ".scratch").iterdir()) == []
