"""``aipusim llm`` and `aipusim.run_llm`: the per-token figures of a decoder and the
refusals of what does not fit or is not a decoder."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from aipusim.api.sources import resolve_config, with_sets
from aipusim.base.errors import ConfigError, MemoryPlanError
from aipusim.cli.main import main
from aipusim.llm import job
from aipusim.llm.job import MODES, Step, decode_us, kv_capacity_tokens, run_llm, zoo_pair


def test_tiny_decoder_never_exceeds_the_ddr_roofline() -> None:
    # weights kept in DDR (no promotion to L2), so every token reads them from DDR
    r = run_llm(
        "tiny_decoder", prompt=4, generate=1, modes=["single"], contexts=(),
        sets=["enable_buffer_promotion=false"], progress=False,
    )  # fmt: skip
    assert [(s.phase, s.context) for s in r.steps] == [("prefill", 0), ("decode", 4)]
    for step in r.steps:
        # a token reads at least the weights of its layers' MatMuls (the embedding is a
        # Gather of one row)
        assert step.ddr_bytes_per_token > 0.5 * r.weight_bytes / step.tokens
        assert step.roofline_tokens_per_s == pytest.approx(
            r.ddr_bytes_per_s / step.ddr_bytes_per_token
        )
        assert 0 < step.roofline_share <= 1
    # the decode step grows the KV cache in place: it writes the new token's rows only
    decode = r.steps[1].compile_bytes_per_step
    assert decode is not None and decode["kv_write"] == r.kv_bytes_per_token
    assert decode["kv_written"] == decode["kv_write"]
    summary = r.summary[0]
    assert summary["roofline_share_max"] <= 1
    assert summary["decode_tokens_per_s_start"] == r.steps[1].tokens_per_s
    assert summary["ttft_ms"] == pytest.approx(r.steps[0].latency_us / 1e3)


def test_llama_weights_are_refused_at_the_default_ddr_size_and_fit_when_raised() -> None:
    # llama_1b's geometry, without building its 1.2 B weights
    pair = zoo_pair("llama_1b", 128, 1)
    with pytest.raises(MemoryPlanError, match=r"ddr_size_used must hold llama_1b's int8 "
                       r"weights, 1,235,814,400 bytes .*not 1,073,741,824 "
                       r"\(1,040,187,392 usable\).*card's 4,294,967,296 bytes"):  # fmt: skip
        kv_capacity_tokens(pair, resolve_config(None, None), MODES["single"], "llama_1b")
    raised = with_sets(
        resolve_config(None, None), ["ddr_size_max=2147483648", "ddr_size_used=2147483648"]
    )
    # 16 layers x 8 KV heads x 64 dims x (key, value) = 16 KiB per token
    free = 2147483648 - 33554432 - pair.weight_params
    assert kv_capacity_tokens(pair, raised, MODES["single"], "llama_1b") == free // 16384
    # batch mode holds one KV cache per core
    assert kv_capacity_tokens(pair, raised, MODES["batch"], "llama_1b") == free // (4 * 16384)


def test_a_context_beyond_the_kv_capacity_is_refused_with_the_capacity() -> None:
    # 5 MiB of DDR: tiny_decoder's 4.6 MB of weights leave room for about 1000 tokens
    with pytest.raises(MemoryPlanError, match=r"at most the KV cache capacity [\d,]+ tokens"):
        run_llm(
            "tiny_decoder", prompt=8, generate=5000, modes=["single"], contexts=(),
            sets=["ddr_constraint=5242880"], progress=False,
        )  # fmt: skip


def test_decode_time_is_linear_between_measured_contexts() -> None:
    steps = [
        Step("m", "decode", c, 1, 1, t, 0, 0, 0, 0, None, None)
        for c, t in ((10, 100.0), (20, 200.0), (40, 300.0))
    ]
    assert decode_us(steps, 15) == 150.0
    assert decode_us(steps, 30) == 250.0
    assert decode_us(steps, 50) == 350.0  # beyond: the last two


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["nosuch", "--prompt", "4", "--generate", "1"],
         "MODEL must be a zoo decoder (llama_1b, tiny_decoder) or a folder"),
        (["tiny_decoder", "--prompt", "0", "--generate", "1"],
         "prompt must be an integer >= 1, not 0"),
        (["tiny_decoder", "--prompt", "4", "--generate", "-2"],
         "generate must be an integer >= 1, not -2"),
        (["tiny_decoder", "--prompt", "4", "--generate", "1", "--modes", "warp"],
         "modes must be some of single, batch, cooperative, pipeline, not warp"),
        (["tiny_decoder", "--prompt", "4", "--generate", "1", "--set", "multicore_mode=batch"],
         "--set must not name multicore_mode"),
        (["tiny_decoder", "--prompt", "4", "--generate", "1", "--contexts", "12,x"],
         "--contexts must be positive integers"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["llm", *argv, "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()  # nothing half written


def test_a_folder_without_the_graphs_leaves_no_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "mine").mkdir()
    argv = [str(tmp_path / "mine"), "--prompt", "4", "--generate", "1", "-o", str(tmp_path / "o")]
    assert main(["llm", *argv]) == 2
    assert "must hold prefill.onnx" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_folder_must_match_its_graphs(tmp_path: Path) -> None:
    assert main(["zoo", "decoder", "tiny_decoder", "--prompt", "6", "--past", "6",
                 "-o", str(tmp_path / "d")]) == 0  # fmt: skip
    with pytest.raises(ConfigError, match="--prompt must be 6 for"):
        run_llm(tmp_path / "d", prompt=5, generate=1, progress=False)
    with pytest.raises(ConfigError, match=r"--prompt \+ --generate - 1 must be 6"):
        run_llm(tmp_path / "d", prompt=6, generate=3, modes=["single"], progress=False)


@pytest.mark.slow
def test_cli_writes_report_json_and_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "llm"
    argv = ["llm", "tiny_decoder", "--prompt", "8", "--generate", "3", "--contexts", "32",
            "--modes", "single,cooperative", "-o", str(out)]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "1 core" in text and "cooperative" in text
    data = json.loads((out / "llm.json").read_text())
    assert [s["mode"] for s in data["summary"]] == ["1 core", "cooperative"]
    contexts = sorted({s["context"] for s in data["steps"] if s["phase"] == "decode"})
    assert contexts == [8, 10, 32]
    assert (out / "tokens_per_s.png").stat().st_size > 0
    assert "## Per mode" in (out / "report.md").read_text()


def test_llama_1b_is_refused_at_the_default_ddr_size_before_it_is_built(tmp_path: Path) -> None:
    # the zoo decoder's sizes are checked before its graphs (minutes, gigabytes) are built
    with pytest.raises(MemoryPlanError, match="int8 weights, 1,235,814,400 bytes"):
        run_llm("llama_1b", prompt=16, generate=1, modes=["single"], contexts=(),
                output_dir=tmp_path / "out", progress=False)  # fmt: skip
    assert not (tmp_path / "out").exists()


def _files(folder: Path) -> dict[str, str]:
    """Every file below ``folder`` by relative path: its SHA-256."""
    return {
        str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(folder.rglob("*"))
        if f.is_file()
    }


def _earlier(folder: Path) -> dict[str, str]:
    """An earlier `aipusim llm` folder (its llm.json marks it), with a compiled step."""
    (folder / "single" / "decode_4").mkdir(parents=True)
    (folder / "single" / "decode_4" / "model.json").write_text('{"old": true}\n')
    (folder / "llm.json").write_text('{"model": "tiny_decoder"}\n')
    (folder / "report.md").write_text("# the earlier run\n")
    return _files(folder)


def _fake_step(
    graph: Path,
    out: Path,
    config: Any,
    mode: Any,
    phase: str,
    context: int,
    tokens: int,
    batch: int,
    ddr_bytes_per_s: float,
    shown: Any,
) -> Step:
    """A measured step without compiling (the folder mechanics only): one file written."""
    out.mkdir(parents=True)
    (out / "model.json").write_text(json.dumps({"graph": str(shown(graph))}))
    return Step(mode.label, phase, context, tokens, batch, 10.0, 1e5, 1e5 * tokens * batch,
                0.1, 1000.0, 1e6, 0.1)  # fmt: skip


def _no_temporaries(parent: Path) -> list[str]:
    return [p.name for p in parent.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


def test_a_failed_run_leaves_the_earlier_folder_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "llm"
    before = _earlier(out)

    def fail(*_args: Any, **_kwargs: Any) -> Step:
        raise RuntimeError("the simulator stopped")

    # fails after the graphs were built into the folder being written
    monkeypatch.setattr(job, "measure_step", fail)
    with pytest.raises(RuntimeError, match="the simulator stopped"):
        run_llm("tiny_decoder", prompt=4, generate=1, modes=["single"], contexts=(),
                output_dir=out, progress=False)  # fmt: skip
    assert _files(out) == before
    assert _no_temporaries(tmp_path) == []


def test_a_successful_run_replaces_the_earlier_folder_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "llm"
    _earlier(out)
    monkeypatch.setattr(job, "measure_step", _fake_step)
    r = run_llm("tiny_decoder", prompt=4, generate=1, modes=["single"], contexts=(),
                output_dir=out, progress=False, command="aipusim llm tiny_decoder")  # fmt: skip
    after = _files(out)
    # nothing of the earlier run is left; the report was written in the folder swapped in
    assert "single/decode_4/model.json" in after and "single/prefill/model.json" in after
    assert json.loads((out / "single" / "decode_4" / "model.json").read_text()) == {
        "graph": str(out / "graphs" / "decode_4.onnx")
    }  # the compile records the folder's final place, not the temporary one
    assert {"report.md", "llm.json", "tokens_per_s.png"} <= set(after)
    assert "aipusim llm tiny_decoder" in (out / "report.md").read_text()
    assert json.loads((out / "llm.json").read_text())["model"] == "tiny_decoder"
    assert r.files == [out / "report.md", out / "llm.json", out / "tokens_per_s.png"]
    assert _no_temporaries(tmp_path) == []


def test_a_folder_with_other_files_is_refused_and_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    argv = ["llm", "tiny_decoder", "--prompt", "4", "--generate", "1", "-o", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "must be empty or an earlier `aipusim llm` folder; it holds other files" in err
    assert len(err.strip().splitlines()) == 1
    assert _files(out) == {"notes.txt": hashlib.sha256(b"mine\n").hexdigest()}
    assert _no_temporaries(tmp_path) == []
