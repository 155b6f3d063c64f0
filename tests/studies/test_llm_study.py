"""``aipusim report llm``: a decoder's prefill and decode over the context, the batch, the
modes and the utilization limit, with conclusions computed from its tables."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from aipusim.base.errors import ConfigError
from aipusim.cli.main import main
from aipusim.studies import STUDIES
from aipusim.studies.llm import MEMORY_BOUND_SHARE, conclusions, run_llm_study


def test_small_study_on_tiny_decoder(tmp_path: Path) -> None:
    # one mode, no extra context, batch 1 and u = 1 only: the base run's two compiles
    result = run_llm_study(
        tmp_path / "llm", models=["tiny_decoder"], prompt=4, contexts=(), batches=(1,),
        limits=(1.0,), modes=("single",), progress=False,
    )  # fmt: skip
    readme = (tmp_path / "llm" / "README.md").read_text()
    assert "## Conclusions (computed from the tables below)" in readme
    assert (tmp_path / "llm" / "llm.png").stat().st_size > 0
    decode = result.table[result.table["phase"] == "decode"].iloc[0]
    # the conclusion quotes the table's own figure
    assert any(f"({decode['tokens/s']:.1f})" in c for c in result.conclusions)
    assert any("the prefill processes" in c for c in result.conclusions)
    assert "llm" in STUDIES


def test_memory_bound_context_is_read_from_the_table() -> None:
    rows = [
        {"mode": "1 core", "phase": "decode", "context": c, "tokens/s": t,
         "tokens/s per sequence": t, "energy/token (mJ)": 1.0, "share of DDR roofline": s}
        for c, t, s in ((64, 100.0, 0.2), (512, 90.0, MEMORY_BOUND_SHARE), (2048, 60.0, 0.9))
    ]  # fmt: skip
    empty = pd.DataFrame(columns=["mode", "batch", "u", "phase", "tokens/s"])
    found = conclusions({"context": pd.DataFrame(rows), "batch": empty, "limit": empty}, 64)
    assert any("DDR-bound (at least 0.50 of the DDR roofline) from context 512" in c for c in found)
    assert any("100.0 -> 60.0 from context 64 to 2048" in c for c in found)


def test_bad_study_input_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="--models must name one decoder, not 2"):
        run_llm_study(tmp_path / "a", models=["tiny_decoder", "llama_1b"], progress=False)
    argv = ["report", "llm", "-o", str(tmp_path / "b"), "--set", "multicore_mode=batch"]
    assert main(argv) != 0
    assert "--set must not name multicore_mode" in capsys.readouterr().err
