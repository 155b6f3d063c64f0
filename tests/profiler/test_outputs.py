from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from aipusim.base.errors import ConfigError
from aipusim.profiler import (
    compare_layers,
    layer_table,
    load_trace,
    plot_all,
    plot_gantt,
    plot_layer_bars,
    plot_power,
    plot_roofline,
    plot_utilisation,
    to_records,
    write_chrome_trace,
    write_synthetic_power,
    write_synthetic_trace,
    write_table,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_chrome_trace_has_events_with_microsecond_times(tiny, tmp_path):
    out = tmp_path / "t.json"
    n = write_chrome_trace(load_trace(tiny), out)
    doc = json.loads(out.read_text())
    events = doc["traceEvents"]
    assert len(events) == n
    mvm = [e for e in events if e.get("cat") == "K" and e["args"]["task"] == 2]
    assert sorted((e["ts"], e["dur"]) for e in mvm) == [(2.0, 6.0), (15.0, 20.0), (40.0, 60.0)]
    assert all(e["ph"] == "X" and e["pid"] == 0 for e in mvm)
    dma = next(e for e in events if e.get("cat") == "M")
    assert dma["args"] == {"frame": 0, "task": 1, "src": "ddr", "dst": "l1", "bytes": 400}
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert {"core 0", "mvm", "dma0", "layers", "frames"} <= names
    layers = [e for e in events if e.get("cat") == "layer"]
    assert len(layers) == 6 and {"conv", "add"} == {e["name"] for e in layers}
    assert any(e["ph"] == "C" for e in events)  # bandwidth counters


def test_chrome_escapes_odd_layer_names(write_trace, header, tmp_path):
    text = (
        f'{header}\n[K]  core=0 unit=mvm frame=0 layer=a"b\\c task=1 tile=0 start=0 end=1 macs=1\n'
    )
    out = tmp_path / "t.json"
    write_chrome_trace(load_trace(write_trace(text)), out)
    assert 'a"b\\c' in {e.get("name") for e in json.loads(out.read_text())["traceEvents"]}


@pytest.fixture(scope="module")
def synthetic_plots(tmp_path_factory):
    """`plot_all` of a synthetic 4-core trace with power, drawn once for the tests that read
    its files and its legends: the paths it returns, and the legend texts of every figure
    it saved (recorded before the figure is closed)."""
    from aipusim.profiler import plots

    folder = tmp_path_factory.mktemp("synthetic")
    p = folder / "run.trace"
    write_synthetic_trace(
        p, frames=8, cores=4, extra={"peak_macs_per_cycle": "65536", "ddr_bytes_per_cycle": "64"}
    )
    write_synthetic_power(p, bins=50)
    legends: dict[str, list[str]] = {}
    save = plots._save

    def recording(fig, path):
        legend = fig.axes[0].get_legend()
        legends[Path(path).name] = [t.get_text() for t in legend.get_texts()] if legend else []
        return save(fig, path)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plots, "_save", recording)
        paths = plot_all(load_trace(p), folder / "plots")
    return paths, legends


def test_plots_are_written_as_png(synthetic_plots):
    paths, _ = synthetic_plots
    assert sorted(p.name for p in paths) == [
        "bandwidth.png",
        "gantt.png",
        "layers.png",
        "power.png",
        "roofline.png",
        "utilisation.png",
    ]
    for p in paths:
        data = p.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000, p


def test_plots_of_a_tiny_trace_without_roofs(tiny, tmp_path):
    tr = load_trace(tiny)
    for fn in (plot_layer_bars, plot_gantt, plot_roofline, plot_utilisation):
        out = fn(tr, tmp_path / f"{fn.__name__}.png")
        assert out.read_bytes().startswith(PNG_MAGIC)
    with pytest.raises(Exception, match="no power timeline"):
        plot_power(tr, tmp_path / "power.png")


def test_tables_written_by_suffix(tiny, tmp_path):
    t = layer_table(load_trace(tiny))
    md = write_table(t, tmp_path / "t.md").read_text()
    assert md.startswith("| layer") and "| conv" in md
    csv = pd.read_csv(write_table(t, tmp_path / "t.csv"))
    assert csv["samples"].tolist() == [3, 3]
    pq = pd.read_parquet(write_table(t, tmp_path / "t.parquet"))
    assert pq["layer"].tolist() == ["conv", "add"]
    with pytest.raises(ConfigError, match=r"must end in one of \.md, \.csv, \.parquet"):
        write_table(t, tmp_path / "t.xlsx")


def test_records_are_plain_json(tiny):
    recs = to_records(layer_table(load_trace(tiny)))
    text = json.dumps(recs)
    assert json.loads(text)[0]["layer"] == "conv"


def test_compare_gives_per_layer_deltas(tiny, write_trace, tiny_text):
    slower = tiny_text.replace("end=100 macs", "end=130 macs")
    slower = slower.replace("t=100 core=0 frame=2 layer=conv", "t=130 core=0 frame=2 layer=conv")
    c = compare_layers(load_trace(tiny), load_trace(write_trace(slower, "b.trace")))
    conv = c.set_index("layer").loc["conv"]
    # busy of conv: (8 + 20 + 60) / 3 against (8 + 20 + 90) / 3
    assert conv["busy_us_a"] == pytest.approx(88 / 3) and conv["busy_us_b"] == pytest.approx(
        118 / 3
    )
    assert conv["delta_busy_us"] == pytest.approx(10.0)
    assert conv["delta_busy_pct"] == pytest.approx(100 * 30 / 88)
    assert conv["delta_wait_us"] == pytest.approx(0.0)
    # b's frame-2 add [100, 105) now runs under the earlier-issued conv: it holds no instant
    assert c.set_index("layer").loc["add", "delta_busy_us"] == pytest.approx(-5 / 3)


def test_header_only_trace_still_plots_and_exports(write_trace, tmp_path):
    tr = load_trace(write_trace("# aipusim-trace 1 freq_hz=1000000 cores=1 model=e levels=\n"))
    for p in plot_all(tr, tmp_path / "plots"):
        assert p.read_bytes().startswith(PNG_MAGIC)
    write_chrome_trace(tr, tmp_path / "e.json")
    assert json.loads((tmp_path / "e.json").read_text())["traceEvents"]  # metadata only


def test_plot_legends_name_every_colour(synthetic_plots):
    _, legends = synthetic_plots
    gantt = legends["gantt.png"]
    assert 1 <= len(gantt) <= 11 and "first 20" not in " ".join(gantt)
    roofline = legends["roofline.png"]
    assert any(text.startswith("Conv (") for text in roofline)
    power = legends["power.png"]
    assert power[0] == "static" and "total" in power


def test_power_bins_are_merged_keeping_the_energy():
    import numpy as np
    import pandas as pd

    from aipusim.profiler.plots import _coarser

    n = 1000
    t = pd.DataFrame(
        {
            "t_start_us": np.arange(n, dtype=float),
            "t_end_us": np.arange(1, n + 1, dtype=float),
            "mvm_w": np.random.default_rng(0).random(n),
        }
    )
    t.attrs["bin_us"] = 1.0
    c = _coarser(t, 400)
    assert len(c) <= 400 and c.attrs["bin_us"] == 3.0
    width = c["t_end_us"] - c["t_start_us"]
    assert (c["mvm_w"] * width).sum() == pytest.approx(t["mvm_w"].sum())
