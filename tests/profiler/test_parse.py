from __future__ import annotations

import gzip

import pandas as pd
import pytest

from aipusim.base.errors import TraceFormatError
from aipusim.isa.trace_schema import COLUMNS, LEVELS, Tag, TraceHeader, format_line
from aipusim.profiler import load_trace, write_synthetic_power, write_synthetic_trace
from aipusim.profiler import parse as parse_mod


def test_tables_have_schema_columns_types_and_microseconds(tiny):
    tr = load_trace(tiny)
    assert tr.header.freq_hz == 1_000_000 and tr.header.model == "tiny"
    assert {t: len(tr[t]) for t in LEVELS} == {
        Tag.B: 3,
        Tag.PB: 6,
        Tag.PE: 6,
        Tag.K: 6,
        Tag.M: 1,
        Tag.T: 1,
    }
    k = tr[Tag.K]
    assert list(k.columns[: len(COLUMNS[Tag.K])]) == [n for n, _ in COLUMNS[Tag.K]]
    assert str(k["start"].dtype) == "int64[pyarrow]"
    assert isinstance(k["unit"].dtype, pd.CategoricalDtype)
    assert k["start_us"].tolist() == [2.0, 15.0, 10.0, 35.0, 40.0, 100.0] or sorted(
        k["start_us"].tolist()
    ) == [2.0, 10.0, 15.0, 35.0, 40.0, 100.0]
    m = tr[Tag.M].iloc[0]
    assert (m["src"], m["dst"], m["bytes"], m["end_us"]) == ("ddr", "l1", 400, 4.0)
    assert tr[Tag.T]["t_us"].tolist() == [8.0]
    assert tr.unknown_count == 0 and tr.malformed_count == 0 and tr.events == 23


def test_unknown_and_malformed_lines_are_counted_with_line_numbers(write_trace, header):
    text = (
        f"{header}\n"
        "[B]  frame=0 inst=0 start=0 end=10\n"  # line 2
        "[X]  something new=1\n"  # line 3: unknown tag, kept
        "\n"  # line 4: blank, skipped
        "# a comment\n"  # line 5: skipped
        "[K]  core=0 unit=mvm frame=0 layer=c task=1 tile=0 start=oops end=5 macs=1\n"  # 6
        "garbage without tag\n"  # line 7
        "[PE] t=3 core=0 frame=0\n"  # line 8: missing layer
        "[?]  kept=too\n"  # line 9: unknown
    )
    tr = load_trace(write_trace(text))
    assert tr.unknown["line"].tolist() == [3, 9]
    assert tr.unknown["text"].tolist() == ["[X]  something new=1", "[?]  kept=too"]
    assert tr.malformed["line"].tolist() == [6, 7, 8]
    assert "start must be an integer" in tr.malformed["reason"].iloc[0]
    assert "layer" in tr.malformed["reason"].iloc[2]
    assert len(tr[Tag.B]) == 1 and len(tr[Tag.K]) == 0


def test_strict_raises_on_first_malformed_line_with_number(write_trace, header):
    text = f"{header}\n[B]  frame=0 inst=0 start=0 end=10\n[X] fine\n[B]  frame=x\n[B] bad\n"
    with pytest.raises(TraceFormatError, match=r"line 4: .*frame must be an integer"):
        load_trace(write_trace(text), strict=True)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "trace is empty"),
        ("[B]  frame=0 inst=0 start=0 end=1\n", "line 1 must start with '# aipusim-trace'"),
        ("# aipusim-trace 2 freq_hz=1 cores=1\n", "trace version must be 1, not '2'"),
        ("# aipusim-trace 1 cores=1\n", "header must have freq_hz"),
        ("# aipusim-trace 1 freq_hz=fast cores=1\n", "must be integers"),
    ],
)
def test_missing_or_bad_header_is_a_clear_error(write_trace, text, match):
    with pytest.raises(TraceFormatError, match=match):
        load_trace(write_trace(text))


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(TraceFormatError, match="must be an existing file"):
        load_trace(tmp_path / "nope.trace")


def test_noncanonical_layouts_are_still_read(write_trace, header):
    text = (
        f"{header}\r\n"
        "[B]  frame=0 inst=0 start=0 end=10\r\n"  # CRLF
        "[K] end=5 start=1 core=1 unit=dpu frame=0 layer=c task=1 tile=0 macs=7 extra=1\n"
        "[PB]\tt=1\tcore=1\tframe=0\tlayer=c\top=Conv\n"  # tabs
    )
    tr = load_trace(write_trace(text))
    assert tr.malformed_count == 0
    k = tr[Tag.K].iloc[0]
    assert (k["core"], k["unit"], k["start"], k["end"], k["macs"]) == (1, "dpu", 1, 5, 7)
    assert tr[Tag.B]["end"].tolist() == [10]
    assert tr[Tag.PB]["op"].tolist() == ["Conv"]


def test_a_last_line_without_newline_is_left_out_as_cut(write_trace, header):
    """The writer ends every line; one without its newline may hold a cut number."""
    tr = load_trace(write_trace(f"{header}\n[B]  frame=0 inst=0 start=0 end=10\n[B]  frame=1"))
    assert tr.cut_line == 3 and tr.malformed_count == 1
    assert tr[Tag.B]["end"].tolist() == [10]
    assert (
        load_trace(write_trace(f"{header}\n[B]  frame=0 inst=0 start=0 end=1\n")).cut_line is None
    )


def test_key_mismatch_in_canonical_layout_is_malformed(write_trace, header):
    text = f"{header}\n[B]  frame=0 inst=0 begin=0 end=10\n"
    tr = load_trace(write_trace(text))
    assert tr.malformed["line"].tolist() == [2]
    assert "start=" in tr.malformed["reason"].iloc[0]


def test_small_chunks_give_the_same_tables(tiny, monkeypatch):
    whole = load_trace(tiny)
    monkeypatch.setattr(parse_mod, "CHUNK_BYTES", 37)  # splits lines across chunks
    chunked = load_trace(tiny)
    for tag in LEVELS:
        pd.testing.assert_frame_equal(
            whole[tag].reset_index(drop=True), chunked[tag].reset_index(drop=True)
        )


def test_many_chunks_report_bad_lines_in_file_order(tmp_path, monkeypatch):
    """A trace read in many chunks gives the tables, the malformed lines and strict
    mode's first error of a one-chunk read."""
    path = tmp_path / "synth.trace"
    write_synthetic_trace(path, frames=2, cores=2)
    lines = path.read_text().splitlines(keepends=True)
    bad = [len(lines) // 3, 2 * len(lines) // 3]
    for i in bad:
        lines[i] = "[K]  core=zero\n"
    path.write_text("".join(lines))
    whole = load_trace(path)
    monkeypatch.setattr(parse_mod, "CHUNK_BYTES", 1000)
    chunked = load_trace(path)
    assert chunked.malformed["line"].tolist() == [i + 1 for i in bad]
    pd.testing.assert_frame_equal(whole.malformed, chunked.malformed)
    for tag in LEVELS:
        pd.testing.assert_frame_equal(whole[tag], chunked[tag])
    with pytest.raises(TraceFormatError, match=f"line {bad[0] + 1}: "):
        load_trace(path, strict=True)


def test_bad_utf8_marks_only_that_line(write_trace, tmp_path, header):
    p = tmp_path / "bin.trace"
    p.write_bytes(
        (header + "\n").encode()
        + b"[PE] t=1 core=0 frame=0 layer=\xff\xfe\n"
        + b"[B]  frame=0 inst=0 start=0 end=10\n"
    )
    tr = load_trace(p)
    assert len(tr[Tag.B]) == 1
    assert len(tr[Tag.PE]) + tr.malformed_count == 1


def test_gzip_trace_is_read(tmp_path, tiny_text):
    p = tmp_path / "run.trace.gz"
    with gzip.open(p, "wt") as fh:
        fh.write(tiny_text)
    assert len(load_trace(p)[Tag.K]) == 6


def test_format_line_output_round_trips_every_tag(write_trace, header):
    values = {
        "frame": 3,
        "inst": 1,
        "start": 5,
        "end": 9,
        "t": 7,
        "core": 1,  # the header says cores=2
        "layer": "l/1",
        "op": "Conv",
        "unit": "mvm",
        "task": 11,
        "tile": 4,
        "macs": 99,
        "src": "ddr",
        "dst": "l2",
        "bytes": 64,
        "token": 5,
        "scope": "global",
    }
    text = header + "\n" + "\n".join(format_line(t, values) for t in LEVELS) + "\n"
    tr = load_trace(write_trace(text))
    assert tr.malformed_count == 0
    for tag in LEVELS:
        row = tr[tag].iloc[0]
        assert {n: row[n] for n, _ in COLUMNS[tag]} == {n: values[n] for n, _ in COLUMNS[tag]}


def test_parquet_round_trip_equals_text_parse(tiny, tmp_path):
    text = load_trace(tiny)
    out = tmp_path / "run.parquet"
    text.to_parquet(out)
    back = load_trace(out)
    assert back.header == text.header
    for tag in LEVELS:
        a = text[tag].reset_index(drop=True)
        b = back[tag].reset_index(drop=True)
        for col in a.columns:
            assert a[col].astype(str).tolist() == b[col].astype(str).tolist(), (tag, col)


def test_parquet_null_required_column_is_malformed(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    header = TraceHeader(1_000_000, 1, "m", ("B",))
    table = pa.table(
        {
            "tag": ["B", "B", "Z"],
            "frame": [0, None, 1],
            "inst": [0, 0, 0],
            "start": [0, 1, 2],
            "end": [5, 6, 7],
        }
    )
    p = tmp_path / "t.parquet"
    pq.write_table(table.replace_schema_metadata(header.metadata()), p)
    tr = load_trace(p)
    assert len(tr[Tag.B]) == 1
    assert tr.malformed["line"].tolist() == [2] and "frame is null" in tr.malformed["reason"][0]
    assert tr.unknown["line"].tolist() == [3]


def test_power_timeline_beside_trace_is_loaded(tmp_path):
    p = tmp_path / "run.trace"
    write_synthetic_trace(p, frames=2, cores=1)
    write_synthetic_power(p, bins=10)
    tr = load_trace(p)
    assert tr.power is not None and len(tr.power) == 10
    assert {"t_start_us", "t_end_us", "total_w", "mvm_w"} <= set(tr.power.columns)


def test_empty_string_values_and_negative_numbers(write_trace, header):
    # The simulator writes host-link transfers with no layer and task -1.
    line = (
        "[M]  core=0 unit=pcie_h2d frame=-1 layer= task=-1 src=host dst=ddr bytes=64 start=0 end=9"
    )
    tr = load_trace(write_trace(f"{header}\n{line}\n"))
    assert tr.malformed_count == 0
    m = tr[Tag.M].iloc[0]
    assert (m["layer"], m["task"], m["frame"], m["unit"]) == ("", -1, -1, "pcie_h2d")


def test_power_timeline_name_follows_the_simulator(tmp_path):
    from aipusim.profiler.trace import power_timeline_path

    assert power_timeline_path(tmp_path / "a.b.trace").name == "a.b.power.parquet"
    assert power_timeline_path(tmp_path / "run.parquet").name == "run.power.parquet"


def test_events_that_contradict_the_trace_are_counted_or_refused(write_trace, tiny_text):
    bad = (
        tiny_text
        + "[PB] t=-5 core=0 frame=1 layer=conv op=Conv macs=1\n"
        + "[K]  core=7 unit=mvm frame=1 layer=conv task=9 tile=0 start=50 end=60 macs=1\n"
        + "[K]  core=0 unit=mvm frame=99 layer=conv task=9 tile=0 start=50 end=60 macs=1\n"
        + "[K]  core=0 unit=mvm frame=1 layer=conv task=9 tile=0 start=60 end=50 macs=1\n"
    )
    path = write_trace(bad, "bad.trace")
    clean = load_trace(write_trace(tiny_text, "clean.trace"))
    tr = load_trace(path)
    assert tr.inconsistent == {
        "a core beyond the header (cores=2)": 1,
        "a negative time": 1,
        "an end before its start": 1,
        "a frame that no [B] event has": 1,
    }
    assert len(tr[Tag.K]) == len(clean[Tag.K]) and tr.events == clean.events
    with pytest.raises(TraceFormatError, match=r"bad\.trace: \[PB\] t=-5 .* has a negative time"):
        load_trace(path, strict=True)


def test_profile_counts_them_in_one_line_or_fails_with_strict(
    write_trace, tiny_text, capsys
) -> None:
    from aipusim.cli.main import main

    path = write_trace(tiny_text + "[PB] t=-5 core=0 frame=1 layer=conv op=Conv macs=1\n")
    assert main(["profile", str(path)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"{path}: 1 event(s) left out that contradict the trace: 1 with a negative time"]
    assert main(["profile", str(path), "--strict"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has a negative time" in err[0]


@pytest.mark.parametrize("chunk", [1 << 21, 61])
def test_canonical_scan_edges_match_the_per_line_reader(write_trace, header, monkeypatch, chunk):
    """Lines at the edges of the canonical layout (18 and 19 digits, tokens shorter than
    their key, doubled or trailing spaces, '=' or non-ASCII in a string) read as the
    per-line reader reads them, whichever path takes them."""
    monkeypatch.setattr(parse_mod, "CHUNK_BYTES", chunk)
    k = "[K]  core=1 unit=mvm frame=1 layer=c task=2 tile=0 start=2 end=9 macs="
    text = (
        f"{header}\n"
        f"{k}123456789012345678\n"  # 2: 18 digits, canonical
        f"{k}1234567890123456789\n"  # 3: 19 digits: malformed
        f"{k}-00000000000000007\n"  # 4: negative, leading zeros
        "[B]  f=0 i=0 s=0 e=1\n"  # 5: tokens shorter than their keys: malformed
        "[B]  frame=1 inst=0 start=0 end=3 \n"  # 6: trailing space, read
        "[B]  frame=2  inst=0 start=0 end=4\n"  # 7: doubled space, read
        "[PE] t=1 core=0 frame=1 layer=a=b\n"  # 8: '=' in a value: read per line
        "[PE] t=2 core=0 frame=1 layer=caf\u00e9\n"  # 9: non-ASCII, read
        "[PE] t=3 core=0 frame=1 layer=\n"  # 10: empty string, canonical
        "[B]  frame=3 inst=0 start=0 end=99999999999\n"  # 11: canonical
    )
    tr = load_trace(write_trace(text))
    assert tr.malformed["line"].tolist() == [3, 5]
    assert "macs must be an integer" in tr.malformed["reason"].iloc[0]
    assert tr[Tag.K]["macs"].tolist() == [123456789012345678, -7]
    pe = sorted(zip(tr[Tag.PE]["t"].tolist(), tr[Tag.PE]["layer"].astype(str), strict=True))
    assert pe == [(1, "a=b"), (2, "caf\u00e9"), (3, "")]
    b = sorted(zip(tr[Tag.B]["frame"].tolist(), tr[Tag.B]["start"], tr[Tag.B]["end"], strict=True))
    assert b == [(1, 0, 3), (2, 0, 4), (3, 0, 99999999999)]
