"""The parts of `evaluate_point` that prepare a point's inputs in its private folder."""

from __future__ import annotations

from pathlib import Path

import onnx

from aipusim.arch import load_arch
from aipusim.sweep.evaluate import _write_arch, _write_model
from aipusim.sweep.space import build_space


def test_the_arch_file_of_a_point_carries_its_overrides(tmp_path: Path) -> None:
    space = build_space(["tiny_cnn"], arch_params=["ddr.latency_ns=12", "l1.size_bytes=2097152"])
    path = _write_arch(space.points[0], tmp_path)
    assert path is not None
    wanted = load_arch(overrides={"ddr.latency_ns": 12, "l1.size_bytes": 2097152})
    assert load_arch(path) == wanted
    assert load_arch(path) != load_arch()


def test_without_arch_values_the_sweep_arch_is_used(tmp_path: Path) -> None:
    assert _write_arch(build_space(["tiny_cnn"]).points[0], tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_a_zoo_model_is_built_at_the_point_input_size(tmp_path: Path) -> None:
    point = build_space(["tiny_cnn"], input_size=16).points[0]
    model = onnx.load(_write_model(point, tmp_path))
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims[-2:] == [16, 16]
