"""`aipusim run --top N --sort busy|span`: the slowest-layers table and the layer plot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import aipusim.profiler
from aipusim.cli.main import main
from aipusim.profiler import plots


def _layer_plot_only(trace: Any, folder: Path, percent: float, **options: Any) -> list[Path]:
    """`plot_all` cut to the plot this file checks: layers.png, with the run's --top and
    --sort (the other five plots are most of a small run's time; tests/cli/test_run_cmd.py
    checks them)."""
    return [
        plots.plot_layer_bars(
            trace,
            folder / "layers.png",
            percent,
            table=options["table"],
            top=options["layer_top"],
            sort=options["layer_sort"],
        )
    ]


def test_top_and_sort_pick_the_table_and_the_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(aipusim.profiler, "plot_all", _layer_plot_only)
    out = tmp_path / "r"
    args = ["run", "tiny_cnn", "-o", str(out), "--frames", "2", "--top", "3", "--sort", "span"]
    assert main([*args, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["slowest_layers"]
    spans = [r["span_us"] for r in rows]
    assert len(rows) == 3 and spans == sorted(spans, reverse=True)
    report = (out / "report.md").read_text()
    assert "## The 3 slowest layers by span" in report
    assert (out / "plots" / "layers.png").is_file()
    assert main(args) == 0
    assert "the 3 slowest layers by span" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--top", "0", "Invalid value for '--top': 0 is not in the range x>=1"),
        ("--sort", "fast", "Invalid value for '--sort': 'fast' is not one of 'busy', 'span'"),
    ],
)
def test_bad_top_and_sort_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture, flag: str, value: str, message: str
) -> None:
    assert main(["run", "tiny_cnn", "-o", str(tmp_path / "r"), flag, value]) == 2
    assert message in capsys.readouterr().err
