"""What the run's plots state: the roofline's weight-load and L1 roofs with labels that do
not overlap, the window of power.png's averages, pcie (not host) in bandwidth.png, and INIT
marked on every timeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aipusim.cli.main import main
from aipusim.profiler import load_trace
from aipusim.profiler import plots as plots_module


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plots") / "r"
    args = ["run", "tiny_cnn", "--input-size", "16", "--frames", "2", "-o", str(out), "--json"]
    assert main(args) == 0
    return out


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The figures the plot functions draw, kept open instead of saved."""
    drawn: list[Any] = []
    monkeypatch.setattr(plots_module, "_save", lambda fig, path: drawn.append(fig) or Path(path))
    return drawn


def _legend_texts(ax: Any) -> list[str]:
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend is not None else []


def test_roofline_draws_the_weight_load_and_l1_roofs_with_separate_labels(
    run_dir: Path, figures: list[Any]
) -> None:
    from aipusim.arch import load_arch

    arch = load_arch()
    plots_module.plot_roofline(
        load_trace(run_dir / "trace.txt"),
        run_dir / "x.png",
        arch.mvm.macs_per_cycle,
        arch.ddr_bw_bytes_per_cycle(800_000_000),
        weight_load_bytes_per_cycle=arch.mvm.weight_load_bw_bytes_per_cycle,
        l1_fill_bytes_per_cycle=arch.dma.channel_bw_bytes_per_cycle,
    )
    (fig,) = figures
    legends = " | ".join(t for ax in fig.axes for t in _legend_texts(ax))
    assert "DDR roof" in legends and "weight-load roof" in legends and "L1 fill roof" in legends
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        boxes = [a.get_window_extent(renderer) for a in ax.texts if a.get_text()]
        for i, a in enumerate(boxes):
            assert not any(a.overlaps(b) for b in boxes[i + 1 :])


def test_power_states_the_window_of_each_average(run_dir: Path, figures: list[Any]) -> None:
    import json

    plots_module.plot_power(load_trace(run_dir / "trace.txt"), run_dir / "x.png")
    texts = _legend_texts(figures[0].axes[0])
    steady = json.loads((run_dir / "run.json").read_text())["avg_power_w"]
    assert any(t.startswith("whole-run average") and "(INIT included)" in t for t in texts)
    assert any(t.startswith(f"steady-state average {steady:.2f} W (report.md") for t in texts)
    assert f"{steady:.3f}" in (run_dir / "report.md").read_text()


def test_bandwidth_names_the_host_link_pcie(run_dir: Path, figures: list[Any]) -> None:
    plots_module.plot_bandwidth(load_trace(run_dir / "trace.txt"), run_dir / "x.png")
    texts = _legend_texts(figures[0].axes[0])
    assert "pcie" in texts and "host" not in texts and "l1" in texts and "l2" in texts
    styles = {line.get_label(): line.get_linestyle() for line in figures[0].axes[0].lines}
    assert styles["l1"] != styles["l2"]  # L1 stays visible where L2 lies over it


def test_gantt_utilisation_and_power_mark_init(run_dir: Path, figures: list[Any]) -> None:
    trace = load_trace(run_dir / "trace.txt")
    assert plots_module.init_window_us(trace) is not None
    plots_module.plot_utilisation(trace, run_dir / "x.png")
    plots_module.plot_power(trace, run_dir / "x.png")
    fig = plots_module.gantt_figure(trace)
    for figure in (*figures, fig):
        texts = [t.get_text() for t in figure.axes[0].texts]
        assert any(t.startswith("INIT") for t in texts), texts
