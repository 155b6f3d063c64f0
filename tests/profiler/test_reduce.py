from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aipusim.base.errors import TraceFormatError
from aipusim.profiler import (
    bandwidth_table,
    core_table,
    frame_summary,
    frame_table,
    layer_breakdown,
    layer_table,
    load_trace,
    power_table,
    unit_table,
    utilisation,
)
from aipusim.profiler.intervals import binned_overlap, covered


def test_layer_table_exact_figures(tiny):
    # conv, frame 0: dma [0, 4) and mvm [2, 8); frames 1 and 2: mvm [15, 35) and [40, 100).
    t = layer_table(load_trace(tiny)).set_index("layer")
    assert list(t.index) == ["conv", "add"]
    conv = t.loc["conv"]
    assert conv["samples"] == 3 and conv["op"] == "Conv"
    assert conv["span_us"] == pytest.approx((8 + 20 + 60) / 3)  # first start to last end
    assert conv["span_us_p50"] == pytest.approx(20.0)
    assert conv["span_us_p99"] == pytest.approx(20 + 0.98 * 40)  # linear interpolation
    # [2, 4): both run; the instant goes to the earlier-issued dma (task 1 before task 2)
    assert conv["busy_us"] == pytest.approx((8 + 20 + 60) / 3)
    assert (conv["dma_us"], conv["mvm_us"]) == (pytest.approx(4 / 3), pytest.approx(84 / 3))
    assert conv["wait_us"] == pytest.approx(0.0)
    # frame 0: nothing released the mvm (dispatch, 2 µs) ; frame 1's mvm was released by
    # frame 0's add ending at 15 (a token): the chains hold mvm 6 + 20 + 60, dispatch 2.
    assert conv["critical_unit"] == "mvm"
    assert conv["critical_pct"] == pytest.approx(100 * 86 / 88)
    assert pd.isna(conv["macs"]) and conv["array_macs"] == 1000 and conv["bytes"] == 133
    add = t.loc["add"]
    assert (add["busy_us"], add["span_us"], add["dpu_us"]) == (5.0, 5.0, 5.0)
    assert (add["critical_unit"], add["critical_pct"]) == ("dpu", 100.0)


def test_layer_breakdown_parts_add_up_to_the_span(tiny):
    b = layer_breakdown(load_trace(tiny)).set_index("layer")
    conv = b.loc["conv"]
    assert conv["mvm"] == pytest.approx(84 / 3)
    assert conv["dma"] == pytest.approx(4 / 3)
    assert conv["wait"] == pytest.approx(0.0)
    assert b.sum(axis=1).loc["conv"] == pytest.approx(88 / 3)


def test_drop_by_value_and_by_time(tiny):
    tr = load_trace(tiny)
    v = layer_table(tr, drop_percentile=34).set_index("layer")
    assert v.loc["conv", "samples"] == 1 and v.loc["conv", "busy_us"] == 20.0
    t = layer_table(tr, drop_percentile=34, drop_by="time").set_index("layer")
    assert t.loc["conv", "samples"] == 1 and t.loc["conv", "busy_us"] == 20.0
    assert frame_table(tr, 34, "time")["frame"].tolist() == [1]
    # 33 % of 3 samples is 0.99: nothing dropped.
    assert layer_table(tr, drop_percentile=33).set_index("layer").loc["conv", "samples"] == 3


def test_layer_spans_from_tasks_when_no_layer_events(write_trace, header):
    text = (
        f"{header}\n"
        "[M]  core=1 unit=dma0 frame=0 layer=c task=1 src=ddr dst=l1 bytes=8 start=0 end=4\n"
        "[K]  core=1 unit=mvm frame=0 layer=c task=2 tile=0 start=2 end=8 macs=5\n"
    )
    t = layer_table(load_trace(write_trace(text)))
    assert t["samples"].tolist() == [1] and t["span_us"].tolist() == [8.0]
    assert t["wait_us"].tolist() == [0.0] and t["op"].tolist() == [""]


def test_unit_table_busy_and_stalls(write_trace, header):
    text = (
        f"{header}\n"
        "[K]  core=0 unit=mvm frame=0 layer=c task=1 tile=0 start=0 end=10 macs=5\n"
        "[K]  core=0 unit=mvm frame=0 layer=c task=2 tile=1 start=15 end=20 macs=5\n"
        "[K]  core=0 unit=mvm frame=0 layer=d task=3 tile=0 start=30 end=40 macs=5\n"
    )
    u = unit_table(load_trace(write_trace(text)))
    row = u.iloc[0]
    assert (row["core"], row["unit"], row["tasks"]) == (0, "mvm", 3)
    assert row["busy_us"] == 25.0 and row["busy_pct"] == pytest.approx(62.5)
    # Only the gap inside layer c is a stall; the one between layers is not.
    assert (row["stalls"], row["stall_us"]) == (1, 5.0)
    assert (row["mean_task_us"], row["p50_task_us"], row["array_macs"]) == (
        pytest.approx(25 / 3),
        10.0,
        15,
    )


def test_frame_table_and_summary(tiny):
    tr = load_trace(tiny)
    f = frame_table(tr)
    assert f["latency_us"].tolist() == [15.0, 25.0, 65.0]
    assert np.isnan(f["interval_us"].iloc[0]) and f["interval_us"].tolist()[1:] == [25.0, 65.0]
    assert f["steady"].tolist() == [False, True, True]  # the first start is warm-up
    s = frame_summary(tr)
    # two frames after the warm-up one, from its end (15) to the last (105)
    assert (s["frames"], s["warmup_frames"]) == (3, 1)
    assert s["fps"] == pytest.approx(2 / 90e-6)
    assert s["p50_us"] == pytest.approx(45.0) and s["mean_us"] == pytest.approx(45.0)


def test_core_table(tiny):
    c = core_table(load_trace(tiny)).set_index("core")
    assert c.index.tolist() == [0]  # the cores that ran, not the header's count
    assert c.loc[0, "tasks"] == 7
    assert c.loc[0, "busy_pct"] == pytest.approx(100 * 103 / 105)
    assert c.loc[0, "mvm_pct"] == pytest.approx(100 * 86 / 105)
    assert c.loc[0, "array_macs"] == 3000 and c.loc[0, "bytes"] == 400
    assert c.loc[0, "frames"] == 3 and c.loc[0, "layer_samples"] == 6


def test_bandwidth_spreads_bytes_over_the_transfer(tiny):
    bw = bandwidth_table(load_trace(tiny), bins=21)  # 5 µs bins over [0, 105)
    assert bw["t_end_us"].iloc[0] == pytest.approx(5.0)
    # 400 bytes in [0, 4) -> all in the first bin: 400 B / 5 µs = 0.08 GB/s.
    assert bw["ddr_gb_s"].iloc[0] == pytest.approx(0.08)
    assert bw["l1_gb_s"].iloc[0] == pytest.approx(0.08)
    assert bw["ddr_gb_s"].iloc[1:].sum() == 0.0


def test_utilisation_fractions(tiny):
    util, edges = utilisation(load_trace(tiny), bins=21)
    assert edges[1] == pytest.approx(5.0)
    mvm = util.loc[(0, "mvm")].to_numpy()
    assert mvm[0] == pytest.approx(3 / 5)  # mvm busy [2, 5) of [0, 5)
    assert util.to_numpy().max() <= 1.0


def test_power_table_needs_a_timeline(tiny):
    with pytest.raises(TraceFormatError, match="no power timeline"):
        power_table(load_trace(tiny))


def test_covered_counts_overlaps_once_and_clips():
    got = covered(
        np.array([0, 5, 20, 1]),
        np.array([10, 15, 30, 3]),
        np.array([0, 0, 0, 1]),
        2,
        np.array([0, 0]),
        np.array([25, 2]),
    )
    assert got.tolist() == [20.0, 1.0]


def test_binned_overlap_is_exact():
    got = binned_overlap(
        np.array([1, 4]), np.array([3, 9]), np.array([1.0, 2.0]), np.array([0, 2, 5, 10])
    )
    assert got.tolist() == [1.0, 1.0 + 2.0, 8.0]


def test_events_without_layer_are_in_no_layer(write_trace, header):
    text = (
        f"{header}\n"
        "[M]  core=0 unit=pcie_h2d frame=0 layer= task=-1 src=host dst=ddr bytes=8 start=0 end=4\n"
        "[K]  core=0 unit=mvm frame=0 layer=c task=2 tile=0 start=4 end=8 macs=5\n"
    )
    tr = load_trace(write_trace(text))
    assert layer_table(tr)["layer"].tolist() == ["c"]
    u = unit_table(tr).set_index("unit")
    assert u.loc["pcie_h2d", "bytes"] == 8
    c = core_table(tr).set_index("core")
    assert c.loc[0, "dma_pct"] == 0.0 and c.loc[0, "other_pct"] == 50.0


def test_init_phase_is_not_a_layer_sample(write_trace, header):
    text = (
        f"{header}\n"
        "[PB] t=0 core=0 frame=-1 layer=c op=Conv\n"
        "[PE] t=50 core=0 frame=-1 layer=c\n"
        "[PB] t=60 core=0 frame=0 layer=c op=Conv\n"
        "[PE] t=70 core=0 frame=0 layer=c\n"
    )
    t = layer_table(load_trace(write_trace(text)))
    assert t["samples"].tolist() == [1] and t["span_us"].tolist() == [10.0]
    # no task in the trace: busy is not known
    assert t["busy_us"].isna().all()


def test_frame_drop_by_value_over_all_frames(tiny):
    # Latencies 15, 25, 65: 34 % of 3 drops the shortest and the longest.
    assert frame_table(load_trace(tiny), 34)["latency_us"].tolist() == [25.0]


def test_header_only_trace_reduces_to_empty_tables(write_trace):
    tr = load_trace(write_trace("# aipusim-trace 1 freq_hz=1000000 cores=1 model=e levels=\n"))
    assert layer_table(tr).empty and unit_table(tr).empty and frame_table(tr).empty
    assert core_table(tr).empty
    assert frame_summary(tr)["frames"] == 0 and layer_breakdown(tr).empty


def test_core_table_counts_the_frames_that_ran_not_the_init_phase(write_trace, header):
    text = (
        f"{header}\n"
        "[B]  frame=0 inst=0 start=0 end=30\n"
        "[B]  frame=1 inst=0 start=10 end=40\n"
        "[K]  core=0 unit=wload frame=-1 layer=c task=0 tile=0 start=0 end=5 macs=0\n"
        "[K]  core=0 unit=mvm frame=0 layer=c task=1 tile=0 start=5 end=20 macs=8\n"
        "[K]  core=0 unit=mvm frame=1 layer=c task=1 tile=0 start=20 end=35 macs=8\n"
    )
    c = core_table(load_trace(write_trace(text)))
    assert c["core"].tolist() == [0] and c["frames"].tolist() == [2]
