from __future__ import annotations

import json
from pathlib import Path

import pytest

import aipusim
from aipusim.base.errors import ConfigError


def test_one_result_type(tiny_sim: aipusim.SimResult) -> None:
    # The exported SimResult is the class users get, with its documented trace views; it
    # is the simulator's SimResult with them added, not a wrapper.
    from aipusim.simulator import SimResult

    assert type(tiny_sim) is aipusim.SimResult and issubclass(aipusim.SimResult, SimResult)
    for view in ("profile", "plot_layers", "plot_timeline", "to_chrome_trace"):
        assert callable(getattr(aipusim.SimResult, view)), view
    assert aipusim.SimResult.__name__ == "SimResult"
    assert tiny_sim.fps > 0
    assert tiny_sim.latency_us_p99 >= tiny_sim.latency_us_p50 > 0
    assert json.loads(tiny_sim.to_json())["fps"] == pytest.approx(tiny_sim.fps)
    assert "avg_power_w" in dir(tiny_sim) and "profile" in dir(tiny_sim)
    assert repr(tiny_sim).startswith(f"SimResult(frames={tiny_sim.frames}, fps=")
    with pytest.raises(AttributeError):
        _ = tiny_sim.no_such_figure


def test_profile_tables(tiny_sim: aipusim.SimResult, tiny: aipusim.CompiledModel) -> None:
    layers = tiny_sim.profile()
    assert {"layer", "op", "samples", "busy_us", "span_us", "wait_us", "critical_unit"} <= set(
        layers
    )
    # every MVM layer of the compiler's report shows up in the trace
    mvm = set(tiny.report.query("unit == 'mvm'")["layer"])
    assert mvm and mvm <= set(layers["layer"])
    frames = tiny_sim.profile(table="frames")
    assert len(frames) == tiny_sim.frames
    assert len(tiny_sim.profile(table="units")) > 0
    assert len(tiny_sim.profile(table="cores")) == tiny_sim.active_cores


def test_dropping_outliers(tiny_sim: aipusim.SimResult) -> None:
    full = tiny_sim.profile(table="frames")
    # by time: the first and last frame ids go (3 frame ids, 40 % -> one at each end)
    kept = tiny_sim.profile(drop_percentile=40, by="time", table="frames")
    assert set(kept["frame"]) == {1} and set(full["frame"]) == {0, 1, 2}
    # by value: each layer keeps its middle samples
    samples = tiny_sim.profile()["samples"]
    trimmed = tiny_sim.profile(drop_percentile=20)["samples"]
    assert (trimmed < samples).all()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"table": "layer"}, r"table must be one of layers, units, frames, cores, not 'layer'"),
        ({"by": "frame"}, r"by must be one of value, time, not 'frame'"),
        ({"drop_percentile": 60}, r"drop percentile must be a number in \[0, 50\)"),
    ],
)
def test_bad_profile_arguments(tiny_sim: aipusim.SimResult, kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        tiny_sim.profile(**kwargs)


def test_plots_and_chrome_trace(tiny_sim: aipusim.SimResult, tmp_path: Path) -> None:
    from matplotlib.figure import Figure

    bars = tiny_sim.plot_layers(tmp_path / "bars.png")
    gantt = tiny_sim.plot_timeline(tmp_path / "gantt.png")
    for fig, png in ((bars, "bars.png"), (gantt, "gantt.png")):
        assert isinstance(fig, Figure) and fig.axes
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    chrome = tiny_sim.to_chrome_trace(tmp_path / "run.json")
    events = json.loads(chrome.read_text())["traceEvents"]
    assert any(e.get("ph") == "X" for e in events)


def test_a_plot_without_a_path_writes_nothing(tiny_sim: aipusim.SimResult) -> None:
    """The figure is the result; a file appears only where the caller asks (never in the
    result's temporary trace folder, which goes away with it)."""
    before = sorted(tiny_sim.trace_path.parent.iterdir())
    fig = tiny_sim.plot_layers()
    assert fig.axes[0].get_title().endswith("per-layer busy and wait time")
    assert sorted(tiny_sim.trace_path.parent.iterdir()) == before


def test_overrides_reach_the_simulator(tiny: aipusim.CompiledModel) -> None:
    slow = tiny.simulate(frames=2, frequency=400_000_000)
    assert slow.frequency_hz == 400_000_000
    with pytest.raises(ConfigError, match=r"simulate override must be one of .*, not 'warp'"):
        tiny.simulate(frames=2, warp=9)
    with pytest.raises(ConfigError, match=r"frames must be an integer >= 1, not 0"):
        aipusim.simulate(tiny.compiled_dir(), frames=0)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            {"multicore_mode": "batch"},
            "multicore_mode is fixed at compile time (multiprocess); recompile with "
            "--set multicore_mode=batch",
        ),
        (
            {"tiling_depth": 3},
            "tiling_depth is fixed at compile time (1); recompile with --set tiling_depth=3",
        ),
        (
            {"aipu_cores": 4},
            "aipu_cores_used is fixed at compile time (1); recompile with --set aipu_cores_used=4",
        ),
    ],
)
def test_compile_time_decisions_need_a_recompile(
    tiny: aipusim.CompiledModel, override: dict, message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        tiny.simulate(frames=1, **override)
    assert str(err.value) == message


def test_simulate_another_shape(tiny: aipusim.CompiledModel) -> None:
    big = tiny.simulate(frames=2, input_shapes={"input": (2, 3, 64, 64)})
    small = tiny.simulate(frames=2)
    assert big.latency_us_p50 > small.latency_us_p50


def test_the_trace_folder_goes_with_the_result(tiny: aipusim.CompiledModel) -> None:
    import gc

    r = tiny.simulate(frames=1)
    folder = r.trace_path.parent
    assert folder.is_dir()
    del r
    gc.collect()
    assert not folder.exists()


def test_simulate_a_folder(tiny: aipusim.CompiledModel) -> None:
    by_root = aipusim.simulate(tiny.output_dir, frames=2)
    by_compiled = aipusim.simulate(tiny.compiled_dir(), frames=2)
    assert by_root.total_cycles == by_compiled.total_cycles == tiny.simulate(2).total_cycles
