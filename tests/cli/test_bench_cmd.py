"""``aipusim bench``: one real (tiny) row, and its bad inputs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from aipusim.cli.main import main


def test_bench_prints_one_row_per_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "tiny_cnn", "--frames", "2", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["model"] == "tiny_cnn" and row["frames"] == 2
    assert row["tasks"] > 0 and row["tasks_per_s"] > 0
    assert row["compile_s"] > 0 and row["simulate_s"] > 0
    # A fresh process holding numpy, numba and onnx is tens of MiB at least.
    assert row["peak_rss_mib"] > 50
    assert row["passes"]["quantize"] > 0 and row["slowest_pass"] in row["passes"]
    assert row["passes"][row["slowest_pass"]] == max(row["passes"].values())
    # reading, checking and writing take time too, outside every pass
    assert 0 < row["outside_passes_s"] < row["compile_s"]


def test_bench_functional_times_the_frame_beside_onnxruntime(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "tiny_cnn", "--functional", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["model"] == "tiny_cnn" and row["mode"] == "cooperative x4"
    assert row["bit_exact"] is True and row["gmac"] > 0
    assert row["functional_s"] > 0 and row["onnxruntime_fp32_s"] > 0
    ratio = row["functional_s"] / row["onnxruntime_fp32_s"]
    assert row["functional_vs_onnxruntime"] == pytest.approx(ratio, rel=0.05)


def test_bench_detailed_reports_simulated_cycles_per_second(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    page = tmp_path / "benchmarks.md"
    args = ["bench", "tiny_cnn", "--detailed", "--input-size", "32", "--json"]
    assert main([*args, "--markdown", str(page)]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["mode"] == "batch x4" and row["frames"] == 1
    assert row["cycles_detailed"] > 0 and row["detailed_cpu_s"] > 0
    assert row["simulated_cycles_per_s"] > 0 and row["detailed_wall_s"] > 0
    # the banked L1 timed the run's L1 accesses
    assert row["l1_accesses"] > 0
    text = page.read_text()
    assert "## Detailed mode speed" in text and "--detailed --frames 1" in text


def test_bench_compile_only_prints_the_pass_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "tiny_cnn", "--frames", "0"]) == 0
    out = capsys.readouterr().out
    assert "simulate_s" not in out
    assert re.search(r"^\| quantize +\| +[0-9.]+ +\|$", out, re.M), out
    assert re.search(r"^\| \(read, check, write\) +\| +[0-9.]+ +\|$", out, re.M), out
    assert re.search(r"^slowest pass: tiny_cnn: \w+$", out, re.M), out
    assert re.search(r"^slowest pass over all: \w+, [0-9.]+ s \([0-9]+% of all", out, re.M), out


def test_bench_sweep_times_a_small_space_into_a_page(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import aipusim.bench.speed
    from aipusim.bench.speed import BLOCK_BEGIN, BLOCK_END

    # two points of the benchmark's space (the whole 200 is a benchmark, not a test)
    monkeypatch.setattr(aipusim.bench.speed, "SWEEP_PARAMS", ("multicore_mode=batch,cooperative",))
    monkeypatch.setattr(aipusim.bench.speed, "SWEEP_ARCH_PARAMS", ())
    page = tmp_path / "benchmarks.md"
    prose = "# Measured figures\n\nHand-written prose.\n\n## Sweep speed\n\n"
    after = "\n\n## Later section\n\nMore prose.\n"
    old = f"{BLOCK_BEGIN.format('sweep')}\n\n| old |\n\n{BLOCK_END.format('sweep')}"
    page.write_text(prose + old + after)
    args = ["bench", "--sweep", "--workers", "1", "--frames", "2", "--json"]
    assert main([*args, "--markdown", str(page)]) == 0
    text = page.read_text()
    assert text.startswith(prose) and text.endswith(after) and "| old |" not in text
    assert "Measured by `aipusim bench --sweep --workers 1 --frames 2` on " in text
    assert re.search(r"^\| tiny_cnn +\| 32px +\| +2 \|", text, re.M), text
    row = json.loads(capsys.readouterr().out)
    assert row["points"] == 2 and row["failed"] == 0 and row["workers"] == 1
    assert row["points_per_s"] == pytest.approx(2 / row["wall_s"], rel=0.05)
    assert row["compile_s_mean"] > 0 and row["simulate_s_mean"] > 0
    assert row["cpu_s"] > 0
    assert row["cpu_s_per_point"] == pytest.approx(row["cpu_s"] / 2, abs=0.01)
    assert row["compile_front_s"] > 0 and row["compile_back_s"] > 0
    # the sweep's points filled the quantization cache; the split's compiles hit it
    assert row["quantization"] == "cached"
    assert row["compiles"] == 2


def test_bench_sweep_of_a_named_model_shares_programs_over_simulator_only_numbers(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import aipusim.bench.speed

    monkeypatch.setattr(aipusim.bench.speed, "SWEEP_PARAMS", ("multicore_mode=batch",))
    args = ["bench", "tiny_cnn", "--input-size", "16", "--sweep", "--workers", "1"]
    args += ["--frames", "2", "--arch-param", "energy.mvm_mac_pj=0.185,0.3", "--json"]
    assert main(args) == 0
    row = json.loads(capsys.readouterr().out)
    assert (row["input"], row["points"], row["failed"], row["compiles"]) == ("16px", 2, 0, 1)


def test_bench_warm_cold_compiles_cold_then_from_the_cache(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import aipusim.bench.speed

    monkeypatch.setattr(aipusim.bench.speed, "WARM_COLD_MODES", ("cooperative",))
    assert main(["bench", "tiny_cnn", "--warm-cold", "--input-size", "16", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["model"], row["mode"]) == ("tiny_cnn", "cooperative")
    # an empty cache calibrates; the compiles after it, and a fresh process, read it
    assert row["cold_quantization"] == "computed"
    assert row["warm_quantization"] == row["first_warm_quantization"] == "cached"
    assert row["warm_cpu_s"] > 0 and row["first_warm_cpu_s"] > 0
    # a warm compile with one simulated frame after it, the figure against the peers
    assert row["warm_frame_s"] > 0 and row["warm_frame_cpu_s"] > 0
    assert row["speedup"] == pytest.approx(row["cold_cpu_s"] / row["warm_cpu_s"], rel=0.2)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bench", "vgg"], "model must be one of .*, not 'vgg'"),
        (["bench", "tiny_cnn", "--frames", "-1"], "--frames must be an integer >= 0, not -1"),
        (["bench", "--sweep", "--frames", "0"], "--frames must be an integer >= 1 with --sweep"),
        (["bench", "--sweep", "--workers", "0"], "--workers must be an integer 1-[0-9]+ "),
        (["bench", "tiny_cnn", "resnet50", "--sweep"], "MODELS must be one zoo model with --sweep"),
        (
            ["bench", "tiny_cnn", "resnet50", "--warm-cold"],
            "MODELS must be one zoo model with --warm-cold, not 2",
        ),
        (
            ["bench", "--detailed", "--sweep"],
            "bench must take at most one of .*, not --detailed and --sweep",
        ),
    ],
)
def test_bad_input(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert re.search(message, err), err


def test_a_page_with_a_broken_block_is_refused() -> None:
    from aipusim.base.errors import ConfigError
    from aipusim.bench.speed import BLOCK_BEGIN, replace_block

    page = f"{BLOCK_BEGIN.format('sweep')}\n| a |\n"  # no end marker
    with pytest.raises(ConfigError, match=r"must hold the block 'sweep' once.* not 1 begin and 0"):
        replace_block(page, "sweep", "| b |", "## Sweep")
