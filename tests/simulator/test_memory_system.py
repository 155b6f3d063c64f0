"""The memory system limits throughput: a copy of the arch file with L1 ports half as wide
makes every multicore mode slower (issue 16), from the ONNX model to the simulated FPS."""

from __future__ import annotations

import re
from pathlib import Path

import onnx
import pytest

import aipusim
from aipusim import zoo
from aipusim.api.retarget import Retargeter
from aipusim.arch import DEFAULT_ARCH_PATH, load_arch
from aipusim.compiler.driver import compile_model
from aipusim.compiler.request import CompileRequest

#: The four ways of using the chip of the multicore study.
MODES = {
    "4 x Batch-1": dict(aipu_cores_used=1, resources_used=0.25, multicore_mode="multiprocess"),
    "batch": dict(aipu_cores_used=4, resources_used=1.0, multicore_mode="batch"),
    "cooperative": dict(aipu_cores_used=4, resources_used=1.0, multicore_mode="cooperative"),
    "pipeline": dict(aipu_cores_used=4, resources_used=1.0, multicore_mode="pipeline"),
}


def half_ports(tmp_path: Path) -> Path:
    """A copy of the default arch file with `l1.port_bytes_per_cycle` halved (the line in
    the ``[l1]`` table; the other numbers and comments as they are)."""
    text = DEFAULT_ARCH_PATH.read_text()
    l1 = re.search(r"^\[l1\]\n(.*?)(?=^\[)", text, re.S | re.M)
    assert l1 is not None
    width = load_arch().l1.port_bytes_per_cycle
    old = re.search(rf"^port_bytes_per_cycle = {width}\b", l1.group(1), re.M)
    assert old is not None
    start = l1.start(1) + old.start()
    new = f"port_bytes_per_cycle = {width // 2}"
    path = tmp_path / "half_l1_ports.toml"
    path.write_text(text[:start] + new + text[start + len(old.group(0)) :])
    assert load_arch(path).l1.port_bytes_per_cycle == width // 2
    assert load_arch(path).l2 == load_arch().l2
    return path


def config(model: str, mode: str) -> object:
    """The model's built-in config in ``mode`` (one core first: every step stays valid)."""
    cfg = aipusim.config_for(model)
    cfg.aipu_cores_used = 1
    for key in ("resources_used", "aipu_cores_used", "multicore_mode"):
        setattr(cfg, key, MODES[mode][key])
    return cfg


def test_half_width_l1_ports_slow_every_mode_small(tmp_path: Path) -> None:
    """ResNet-18 (its deep layers accumulate partial sums through L1): one front end, the
    back end and a simulation per mode and arch."""
    half = load_arch(half_ports(tmp_path))
    front = Retargeter("resnet18")
    for mode in MODES:
        fps = {}
        for name, arch in (("file", load_arch()), ("half", half)):
            out = tmp_path / f"{mode}-{name}"
            front.compile(arch, out, config(front.model, mode))
            fps[name] = aipusim.simulate(out, 8, levels=[], arch=arch).fps
        assert fps["half"] < fps["file"], f"{mode}: {fps}"


@pytest.mark.slow
def test_half_width_l1_ports_slow_every_mode_of_resnet50(tmp_path: Path) -> None:
    """ResNet-50, each mode compiled from the ONNX file for each arch file."""
    path = half_ports(tmp_path)
    onnx_path = tmp_path / "resnet50.onnx"
    onnx.save(zoo.build("resnet50"), onnx_path)
    for mode in MODES:
        fps = {}
        for name, arch in (("file", None), ("half", path)):
            out = tmp_path / f"{mode}-{name}"
            compile_model(
                CompileRequest(
                    model_path=onnx_path,
                    output_dir=out,
                    config=config("resnet50", mode),
                    arch_path=arch,
                )
            )
            fps[name] = aipusim.simulate(out, 8, levels=[], arch=load_arch(arch)).fps
        assert fps["half"] < fps["file"], f"{mode}: {fps}"
