from __future__ import annotations

import json

import pytest

from aipusim.cli.main import main


def test_json_layer_records_have_the_keys(tiny, capsys):
    assert main(["profile", str(tiny), "--json"]) == 0
    recs = json.loads(capsys.readouterr().out)
    assert [r["layer"] for r in recs] == ["conv", "add"]
    assert {
        "layer",
        "op",
        "samples",
        "busy_us",
        "span_us",
        "wait_us",
        "critical_unit",
        "mvm_us",
        "dma_us",
        "macs",
        "array_macs",
    } <= set(recs[0])
    assert recs[0]["samples"] == 3 and recs[0]["busy_us"] == pytest.approx(88 / 3)
    assert recs[0]["critical_unit"] == "mvm"
    # the trace does not say the network's MACs: null, not a made-up number
    assert recs[0]["macs"] is None and recs[0]["array_macs"] == 1000


def test_by_unit_frame_core_bandwidth(tiny, capsys):
    for by, key in (
        ("unit", "busy_pct"),
        ("frame", "latency_us"),
        ("core", "busy_pct"),
        ("bandwidth", "t_start_us"),
    ):
        assert main(["profile", str(tiny), "--by", by, "--json"]) == 0
        assert key in json.loads(capsys.readouterr().out)[0]


def test_markdown_default_with_drop_and_outputs(tiny, tmp_path, capsys):
    args = [
        "profile",
        str(tiny),
        "--drop-percentile",
        "34",
        "--drop-by",
        "time",
        "--plot",
        str(tmp_path / "plots"),
        "--chrome",
        str(tmp_path / "c.json"),
        "--parquet",
        str(tmp_path / "t.parquet"),
        "--csv",
        str(tmp_path / "t.csv"),
    ]
    assert main(args) == 0
    out = capsys.readouterr()
    assert "| conv" in out.out and "1 frames" in out.out
    assert "traceEvents" in json.loads((tmp_path / "c.json").read_text())
    assert (tmp_path / "plots" / "gantt.png").stat().st_size > 0
    assert (tmp_path / "t.parquet").stat().st_size > 0 and (tmp_path / "t.csv").exists()


def test_compare(tiny, write_trace, tiny_text, capsys):
    other = write_trace(tiny_text, "other.trace")
    assert main(["profile", str(tiny), "--compare", str(other), "--json"]) == 0
    recs = json.loads(capsys.readouterr().out)
    assert recs[0]["delta_busy_us"] == 0.0
    assert main(["profile", str(tiny), "--compare", str(other), "--by", "unit"]) == 2
    assert "--by must be layer" in capsys.readouterr().err


def test_bad_input_exits_2_with_one_line(write_trace, capsys, header):
    bad = write_trace("not a trace\n", "bad.trace")
    assert main(["profile", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "line 1 must start with" in err and len(err.strip().splitlines()) == 1
    broken = write_trace(f"{header}\n[B]  frame=x inst=0 start=0 end=1\n", "broken.trace")
    assert main(["profile", str(broken), "--strict"]) == 2
    assert "line 2" in capsys.readouterr().err
    assert main(["profile", str(broken)]) == 0
    assert "1 malformed line(s) skipped (lines 2" in capsys.readouterr().err
    assert main(["profile", str(broken), "--drop-percentile", "60"]) == 2


def test_bins_are_checked_before_reading(tmp_path, capsys) -> None:
    from aipusim.cli.main import main

    for bins in ("0", "999999999999"):
        assert main(["profile", str(tmp_path / "none.trace"), "--bins", bins]) == 2
        assert "--bins must be an integer 1-100000" in capsys.readouterr().err


def test_a_trace_cut_mid_line_says_so_and_reduces_the_rest(write_trace, tiny_text, capsys):
    """A trace whose writer stopped mid-line: the cut line is named and left out (``end=10``
    of ``end=105`` would read as a valid, wrong event), the lines before it are reduced."""
    whole = tiny_text.rstrip("\n").splitlines()[:-1]  # up to the last [K] line
    cut_text = "\n".join(whole[:-1]) + "\n" + whole[-1][: whole[-1].index("end=") + 6]
    assert cut_text.endswith("start=100 end=10")
    cut = write_trace(cut_text, "cut.trace")
    line = len(whole)
    assert main(["profile", str(cut), "--json"]) == 0
    captured = capsys.readouterr()
    assert f"{cut}: line {line} (the last) was cut short" in captured.err
    assert "malformed" not in captured.err
    recs = json.loads(captured.out)
    assert [r["layer"] for r in recs] == ["conv", "add"]
    assert main(["profile", str(cut), "--strict"]) == 2
    assert f"line {line}" in capsys.readouterr().err
