from __future__ import annotations

import json
import tarfile
from pathlib import Path

import numpy as np
import onnx
import pytest

import aipusim
from aipusim.api.leip import (
    CompileOptimizations,
    CompileOptions,
    GraphOptimization,
    KernelOptimization,
    Layout,
    compile_,
)
from aipusim.base.errors import ConfigError


def test_defaults_follow_leip_with_the_aipu_as_target() -> None:
    opts = CompileOptions()
    assert opts.layout is Layout.NCHW
    assert opts.target == "aipu"
    assert opts.optimization.kernel.level == 3
    assert opts.optimization.graph is None
    assert CompileOptions(layout="nhwc", target="AIPU").layout is Layout.NHWC


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target": "llvm -keys=cpu"}, r"target must be one of aipu, not 'llvm -keys=cpu'"),
        ({"target": "cuda"}, r"target must be one of aipu, not 'cuda'"),
        ({"target": ""}, r"target must be one of aipu, not ''"),
        ({"layout": "NCWH"}, r"layout must be one of NCHW, NHWC, not 'NCWH'"),
        ({"target_host": "cuda"}, r"target_host must be None or one of cpu, llvm"),
        ({"model_id": ""}, r"model_id must be a non-empty string or None"),
        ({"crc_check": 1}, r"crc_check must be True or False, not 1"),
        ({"optimization": 3}, r"optimization must be a CompileOptimizations, not int"),
    ],
)
def test_bad_options_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        CompileOptions(**kwargs)


def test_bad_optimizations_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"KernelOptimization level must be an integer 1-4"):
        KernelOptimization(level=5)
    with pytest.raises(ConfigError, match=r"GraphOptimization iterations must be an integer"):
        GraphOptimization(iterations=-1)
    with pytest.raises(ConfigError, match=r"kernel must be a KernelOptimization, not int"):
        CompileOptimizations(kernel=2)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"options must be a CompileOptions, not dict"):
        compile_("tiny_cnn", "out", {"crc_check": True})  # type: ignore[arg-type]


def test_compile_with_options(tmp_path: Path) -> None:
    out = tmp_path / "tiny"
    options = CompileOptions(
        model_id="tiny-7",
        crc_check=True,
        legacy_artifacts=True,
        target_host="llvm",
        optimization=CompileOptimizations(
            kernel=KernelOptimization(level=4), graph=GraphOptimization(iterations=2)
        ),
    )
    m = compile_("tiny_cnn", out, options)
    program = json.loads((out / "compiled_model" / "model.json").read_text())
    assert program["extra"]["model_id"] == "tiny-7"
    assert m.optimization_level == 4
    cfg = m.config
    assert cfg.use_list_scheduler and cfg.dfs_search_constraint == 2
    with tarfile.open(out / "legacy" / "deploy_lib.tar") as tar:
        assert tar.getnames() == ["core0.tasklist"]
    graph = json.loads((out / "legacy" / "deploy_graph.json").read_text())
    assert graph["program"]["model"] == program["model"]
    assert np.load(out / "legacy" / "deploy_param.npz").files
    # crc_check: the folder is verified on load, and a changed file is named
    loaded = aipusim.load(out)
    assert loaded.name == "tiny_cnn"
    (out / "legacy" / "deploy_graph.json").write_text("{}\n")
    with pytest.raises(aipusim.AipuSimError, match=r"legacy/deploy_graph.json must have CRC32"):
        aipusim.load(out)


def test_a_shape_compiled_after_saving_joins_the_crc_list(tmp_path: Path) -> None:
    out = tmp_path / "tiny"
    info = aipusim.InputInfo((1, 3, (32, 32, 64), (32, 32, 64)))
    m = compile_("tiny_cnn", out, CompileOptions(crc_check=True), inputs={"input": info})
    m(np.zeros((1, 3, 64, 64), np.float32))
    reloaded = aipusim.load(out)
    assert reloaded(np.zeros((1, 3, 64, 64), np.float32)).shape == (1, 10)


def test_nhwc_layout_takes_channels_last_inputs(tmp_path: Path) -> None:
    nchw = aipusim.compile("tiny_cnn")
    nhwc = compile_("tiny_cnn", tmp_path / "nhwc", CompileOptions(layout="NHWC"))
    assert nhwc.inputs["input"].shape == (1, 32, 32, 3)
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    y = nhwc(x.transpose(0, 2, 3, 1))
    assert y.shape == (1, 10)
    # same network, same calibration: the transposed input gives the same logits
    assert np.array_equal(y, nchw(x))
    pre = onnx.load(tmp_path / "nhwc" / "preprocess.onnx")
    assert [n.op_type for n in pre.graph.node] == ["Transpose"]
