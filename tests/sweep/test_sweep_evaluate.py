"""The parts of `evaluate_point` that prepare a point's inputs in its private folder."""

from __future__ import annotations

from pathlib import Path

import onnx

from aipusim.arch import load_arch
from aipusim.sweep.evaluate import write_arch, write_model
from aipusim.sweep.space import build_space


def test_the_arch_file_of_a_point_carries_its_overrides(tmp_path: Path) -> None:
    space = build_space(["tiny_cnn"], arch_params=["ddr.latency_ns=12", "l1.size_bytes=2097152"])
    path = write_arch(space.points[0], tmp_path)
    assert path is not None
    wanted = load_arch(overrides={"ddr.latency_ns": 12, "l1.size_bytes": 2097152})
    assert load_arch(path) == wanted
    assert load_arch(path) != load_arch()


def test_without_arch_values_the_sweep_arch_is_used(tmp_path: Path) -> None:
    assert write_arch(build_space(["tiny_cnn"]).points[0], tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_a_zoo_model_is_built_at_the_point_input_size(tmp_path: Path) -> None:
    point = build_space(["tiny_cnn"], input_size=16).points[0]
    model = onnx.load(write_model(point, tmp_path))
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims[-2:] == [16, 16]


def test_a_checked_point_runs_on_data_against_the_reference() -> None:
    from aipusim.sweep.evaluate import evaluate_point

    point = build_space(["tiny_cnn"], input_size=16, frames=1, check=True).points[0]
    row = evaluate_point(point)
    assert (row["bit_exact"], row["mismatches"]) == (True, 0)
    assert row["check"].startswith("bit-exact vs int8 reference (seeded random int8")


def test_a_checked_point_has_its_own_id_and_an_unchecked_one_has_no_check_columns() -> None:
    checked = build_space(["tiny_cnn"], input_size=16, frames=1, check=True).points[0]
    plain = build_space(["tiny_cnn"], input_size=16, frames=1).points[0]
    assert checked.point_id != plain.point_id
    from aipusim.sweep.evaluate import evaluate_point

    assert "bit_exact" not in evaluate_point(plain)


def test_check_columns_sum_the_mismatches_of_every_output() -> None:
    from aipusim.api.functional_check import FunctionalCheck
    from aipusim.sweep.evaluate import check_columns

    verdict = FunctionalCheck(
        False,
        "given",
        {"a": {"shape": [4], "mismatches": 3}, "b": {"shape": [2], "mismatches": 1}},
        {},
    )
    assert check_columns(verdict) == {
        "bit_exact": False,
        "mismatches": 4,
        "check": "differs from the int8 reference (given input): a 3 of 4, b 1 of 2",
    }


def test_a_zoo_model_is_built_once_and_kept_in_the_cache_folder(monkeypatch) -> None:
    import aipusim.zoo
    from aipusim.sweep.evaluate import zoo_model_file

    first = zoo_model_file("tiny_cnn", 20)
    assert first.parent.name == "zoo"
    built = onnx.load(first)
    monkeypatch.setattr(aipusim.zoo, "build", lambda *a, **k: 1 / 0)  # not built again
    assert zoo_model_file("tiny_cnn", 20) == first
    assert (
        built.SerializeToString()
        == aipusim.zoo.registry.build("tiny_cnn", input_size=20).SerializeToString()
    )
