"""What a run's outputs state. The plots: the roofline's weight-load and L1 roofs with
labels that do not overlap, the window of power.png's averages, pcie (not host) in
bandwidth.png, INIT marked on every timeline. report.md: a one-line verdict first, every
unit name defined once, shares rounded to what they mean, an all-layers table of
informative columns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aipusim.cli.main import main
from aipusim.profiler import load_trace
from aipusim.profiler import plots as plots_module


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run's folder (its trace and report.md); the tests draw each plot again from its
    trace, so the run itself draws none (they are most of its time)."""
    import aipusim.profiler

    out = tmp_path_factory.mktemp("plots") / "r"
    args = ["run", "tiny_cnn", "--input-size", "16", "--frames", "2", "-o", str(out), "--json"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(aipusim.profiler, "plot_all", lambda *_args, **_kwargs: [])
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


def test_report_opens_with_a_verdict_and_defines_every_unit_name(run_dir: Path) -> None:
    import json
    import re

    text = (run_dir / "report.md").read_text()
    summary = json.loads((run_dir / "run.json").read_text())
    first = text.split("\n")[2]
    assert first.startswith(f"**Verdict**: {summary['fps']:.1f} FPS")
    assert "limited by" in first and "% of the" in first and "TOPS peak" in first
    glossary = text.split("## Names of units and links")[1].split("\n## ")[0]
    units = text.split("## Unit utilisation")[1].split("\n## ")[0]
    for unit in re.findall(r"^\| (\w+) +\|", units, re.M)[1:]:
        assert glossary.count(f"`{unit}`") + glossary.count(f" {unit}`") >= 1, unit
    assert glossary.count("- `ctrl`") == 1 and glossary.count("- `control`") == 1
    # power per unit: every part of each unit, and the whole of the run's power
    by_unit = text.split("## Power by unit")[1].split("\n## ")[0]
    header = (
        "| unit | dynamic (W) | clocked busy (W) | clocked idle (W) | gated idle (W) "
        "| leakage (W) |"
    )
    assert header in re.sub(" +", " ", by_unit)
    assert re.search(r"^\| mvm +\|", by_unit, re.M)


def test_report_rounds_shares_and_trims_the_all_layers_table(run_dir: Path) -> None:
    text = (run_dir / "report.md").read_text()
    energy = text.split("## Energy per frame by component")[1].split("\n## ")[0]
    shares = [row.rsplit("|", 2)[1].strip() for row in energy.strip().splitlines()[2:]]
    assert shares and all(s in ("0", "<0.1") or len(s.split(".")[1]) == 1 for s in shares)
    table = text.split("## All layers")[1]
    header = table.split("\n| layer")[1].split("\n")[0]
    assert "<NA>" not in table and "nan" not in table
    assert "samples" not in header  # the same in every row
