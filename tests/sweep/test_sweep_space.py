"""Parsing and checking the swept keys; the Cartesian product and the point ids."""

from __future__ import annotations

import pytest

from aipusim.base.errors import ArchError, ConfigError
from aipusim.compiler.config import CompilerConfig, MulticoreMode, ProfilingLevel
from aipusim.sweep.space import build_space, parse_arch_param, parse_param, value_text


def test_param_values_are_typed_by_the_property() -> None:
    assert parse_param("multicore-mode=batch,cooperative") == (
        "multicore_mode",
        (MulticoreMode.BATCH, MulticoreMode.COOPERATIVE),
    )
    assert parse_param("aipu_cores=1,4") == ("aipu_cores_used", (1, 4))
    assert parse_param("double_buffer=true,false") == ("double_buffer", (True, False))


def test_a_list_property_joins_members_with_plus() -> None:
    name, values = parse_param("profiling_levels=B+PB,B")
    assert name == "profiling_levels"
    assert values == (
        (ProfilingLevel.FRAME, ProfilingLevel.LAYER_BEGIN),
        (ProfilingLevel.FRAME,),
    )
    assert [value_text(v) for v in values] == ["B+PB", "B"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mvm_utilization_limit=0.5,1.5", r"--param mvm_utilization_limit=1\.5: .*0\.125-1"),
        ("multicore_mode=batch,turbo", r"--param multicore_mode=turbo: .*batch"),
        ("aipu_core_used=1,2", r"--param aipu_core_used: .*did you mean `aipu_cores_used`"),
        ("mvm_utilization_limit", r"--param must be given as KEY=V1,V2"),
        ("mvm_utilization_limit=0.5,,1", r"must list non-empty values"),
        ("mvm_utilization_limit=0.5,0.50", r"must list each value once, not '0\.5' twice"),
    ],
)
def test_every_value_is_checked_with_the_key_named(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_param(text)


def test_arch_values_are_checked_against_the_arch() -> None:
    assert parse_arch_param("ddr.latency_ns=12,24.5") == (
        "ddr.latency_ns",
        (12, 24.5),
    )
    with pytest.raises(ArchError, match=r"--arch-param ddr\.latency_ns=fast: .*number"):
        parse_arch_param("ddr.latency_ns=12,fast")
    with pytest.raises(ArchError, match=r"--arch-param ddr\.latency=12: .*did you mean"):
        parse_arch_param("ddr.latency=12")


def test_the_product_is_in_a_stable_order() -> None:
    space = build_space(
        ["tiny_cnn", "resnet18"],
        ["mvm_utilization_limit=0.5,1", "multicore_mode=batch,cooperative"],
        ["ddr.latency_ns=12,24"],
        frames=2,
    )
    assert len(space.points) == 16
    first = space.points[0]
    assert first.model == "tiny_cnn"
    assert first.columns() == {
        "mvm_utilization_limit": "0.5",
        "multicore_mode": "batch",
        "arch.ddr.latency_ns": "12",
    }
    assert space.points[1].columns()["arch.ddr.latency_ns"] == "24"
    assert space.points[8].model == "resnet18"
    assert len({p.point_id for p in space.points}) == 16
    assert space.typed_columns() == {
        "mvm_utilization_limit": "float",
        "multicore_mode": "string",
        "arch.ddr.latency_ns": "int",
    }


def test_ids_depend_on_everything_that_changes_a_result() -> None:
    def one(**kw: object) -> str:
        args = {"frames": 2, **kw}
        return build_space(["tiny_cnn"], ["mvm_utilization_limit=0.5"], **args).points[0].point_id

    same = one()
    assert same == one()
    assert one(frames=3) != same
    assert one(input_size=32) != same
    assert one(base=CompilerConfig(double_buffer=False)) != same
    # The whole base config is part of the id, even a property a swept key overrides.
    assert one(base=CompilerConfig(mvm_utilization_limit=0.25)) != same


def test_models_frames_and_repeated_keys_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"MODEL must be a zoo model .*not 'lenet'"):
        build_space(["lenet"])
    with pytest.raises(ConfigError, match=r"existing \.onnx file"):
        build_space(["/nonexistent/model.onnx"])
    with pytest.raises(ConfigError, match=r"at least one"):
        build_space([])
    with pytest.raises(ConfigError, match=r"--frames must be a positive integer, not 0"):
        build_space(["tiny_cnn"], frames=0)
    with pytest.raises(ConfigError, match=r"name each key once, not 'double_buffer' twice"):
        build_space(["tiny_cnn"], ["double_buffer=true", "double-buffer=false"])


def test_a_point_config_is_the_base_with_the_swept_values() -> None:
    base = CompilerConfig(aipu_cores_used=4, resources_used=1.0)
    space = build_space(["tiny_cnn"], ["multicore_mode=batch"], base=base)
    config = space.points[0].config()
    assert (config.aipu_cores_used, config.multicore_mode) == (4, MulticoreMode.BATCH)
    clash = build_space(["tiny_cnn"], ["resources_used=0.25"], base=base).points[0]
    with pytest.raises(ConfigError, match="resources_used must be at least"):
        clash.config()
