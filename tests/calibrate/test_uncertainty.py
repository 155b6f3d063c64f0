"""Bands over the inferred hardware numbers: the joint sample design, the recompiles, the
failures kept as findings, and the API and CLI that give them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aipusim
from aipusim.api.retarget import Retargeter
from aipusim.arch import load_arch
from aipusim.base.errors import ConfigError, MemoryPlanError
from aipusim.calibrate.uncertainty import bands, sample_overrides
from aipusim.cli.main import main


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("unc") / "tiny"
    aipusim.compile("tiny_cnn", output_dir=out)
    return out


def test_samples_cover_every_range_once_per_stratum_and_load() -> None:
    arch = load_arch()
    n = 8
    samples = sample_overrides(arch, n, seed=3)
    moved = [r for r in arch.ranges if r.low < r.high]
    assert len(samples) == n
    for r in moved:
        values = [s[r.key] for s in samples]
        assert all(r.low <= v <= r.high for v in values), r.key
        if r.key.startswith("energy."):
            # Latin hypercube: each of the n strata of a (continuous) range is used once
            strata = sorted(int((v - r.low) / (r.high - r.low) * n) for v in values)
            assert strata == list(range(n)), r.key
    assert all(isinstance(s["dpu.lanes"], int) for s in samples)
    for s in samples:
        load_arch(overrides=s)  # V-f supplies kept in order: every sample is a valid arch
    assert sample_overrides(arch, n, seed=3) == samples
    assert sample_overrides(arch, n, seed=4) != samples


def test_bands_recompile_each_sample_and_spread(compiled: Path) -> None:
    b = bands(compiled, 4, frames=2, progress=False)
    assert b.samples == 4 and b.failed == []
    for band in (b.fps, b.energy_mj_per_frame, b.avg_power_w):
        assert 0 < band.p5 <= band.p50 <= band.p95
    assert b.fps.p5 < b.fps.p95  # the (I) numbers move the figures


def test_a_sample_that_fails_is_kept_as_a_finding(
    compiled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Retargeter.compile
    calls = []

    def second_fails(self: Retargeter, arch: object, out: Path, config: object = None) -> dict:
        calls.append(out)
        if len(calls) == 2:
            raise MemoryPlanError("must use at most 32 global tokens")
        return real(self, arch, out, config)

    monkeypatch.setattr(Retargeter, "compile", second_fails)
    b = bands(compiled, 3, frames=2, progress=False)
    assert b.samples == 2
    assert [f["error"] for f in b.failed] == ["MemoryPlanError: must use at most 32 global tokens"]
    assert "dpu.lanes" in b.failed[0]["overrides"]


def test_too_few_samples_compile(compiled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fails(*_: object, **__: object) -> dict:
        raise MemoryPlanError("no fit")

    monkeypatch.setattr(Retargeter, "compile", fails)
    with pytest.raises(ConfigError, match="at least 2 samples that compile, not 0 of 2"):
        bands(compiled, 2, frames=2, progress=False)


def test_the_api_adds_bands_to_the_result(compiled: Path) -> None:
    r = aipusim.simulate(compiled, 2, uncertainty=2)
    d = r.to_dict()
    assert d["fps_band"] == [r.bands.fps.p5, r.bands.fps.p95]
    assert set(d) >= {"energy_mj_per_frame_band", "avg_power_w_band", "uncertainty"}
    with pytest.raises(ConfigError, match="arch must be the file's path"):
        aipusim.simulate(compiled, 2, arch=load_arch(), uncertainty=2)
    with pytest.raises(ConfigError, match="uncertainty must be an integer 2-4096"):
        aipusim.simulate(compiled, 2, uncertainty=1)


def test_the_cli_prints_and_writes_the_bands(compiled: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["simulate", str(compiled), "--frames", "2", "--uncertainty", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fps_band"][0] <= out["fps_band"][1] and out["uncertainty"]["samples"] == 2
    assert main(["simulate", str(compiled), "--frames", "2", "--uncertainty", "2"]) == 0
    text = capsys.readouterr().out
    assert "p5-p95" in text and "over 2 samples of the (I) numbers" in text
    assert main(["simulate", str(compiled), "--uncertainty", "0"]) == 2
    assert "--uncertainty must be an integer 2-4096 (samples), not 0" in capsys.readouterr().err


def test_a_folder_without_its_compile_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="must be the output folder of a compile"):
        Retargeter.from_compiled(tmp_path)


@pytest.mark.usefixtures("no_run_plots")
def test_run_gives_the_bands_in_report_and_run_json(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "r"
    args = ["run", "tiny_cnn", "-o", str(out), "--frames", "2", "--uncertainty", "2"]
    assert main(args) == 0
    assert "over 2 samples of the (I) numbers" in capsys.readouterr().out
    assert "p5-p95" in (out / "report.md").read_text()
    summary = json.loads((out / "run.json").read_text())
    assert summary["fps_band"][0] <= summary["fps_band"][1]
