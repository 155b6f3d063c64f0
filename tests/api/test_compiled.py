from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from api_models import two_input_model

import aipusim
from aipusim.api.compiled import SHAPES_DIR
from aipusim.api.modelfiles import API_FILE
from aipusim.base.errors import ConfigError, InvalidArgument, TasklistError, ZooError
from aipusim.compiler.export import run_onnx
from aipusim.compiler.quant import sqnr_db


def _batch(n: int, side: int = 32, seed: int = 0) -> np.ndarray:
    """Image-like inputs: pixels in [0, 1], the range the default calibration photographs
    give an image input (N(0, 1) data would be clipped at 0 by the int8 input grid)."""
    return np.random.default_rng(seed).uniform(0.0, 1.0, (n, 3, side, side)).astype(np.float32)


def test_signature_and_folder(tiny: aipusim.CompiledModel) -> None:
    assert tiny.name == "tiny_cnn"
    assert tiny.input_names == ("input",)
    assert tiny.output_names == ("logits",)
    assert tiny.inputs["input"].shape_bounds.opt == (2, 3, 32, 32)
    assert (tiny.output_dir / "compiled_model" / "model.json").is_file()
    meta = json.loads((tiny.output_dir / API_FILE).read_text())
    assert meta["inputs"]["input"]["max"] == [4, 3, 64, 64]


def test_the_opt_shape_runs_the_int8_reference(tiny: aipusim.CompiledModel) -> None:
    x = _batch(2)
    y = tiny(x)
    ref = run_onnx(onnx.load(tiny.output_dir / "input_model" / "fp32_model.onnx"), {"input": x})
    assert y.shape == (2, 10)
    # int8 against float: close (quantization noise 0.3 % of the power), not bit-equal
    assert 25 < sqnr_db(ref["logits"], y) < np.inf


def test_a_larger_batch_runs_as_compiled_size_slices(tiny: aipusim.CompiledModel) -> None:
    x = _batch(4)
    y = tiny(x)
    assert np.array_equal(y[:2], tiny(x[:2]))
    assert np.array_equal(y[2:], tiny(x[2:]))
    assert not (tiny.output_dir / SHAPES_DIR / "input-4x3x32x32").exists()


def test_another_shape_in_bounds_compiles_once(tiny: aipusim.CompiledModel) -> None:
    x = _batch(2, side=64)
    y = tiny(x)
    assert y.shape == (2, 10)
    folder = tiny.output_dir / SHAPES_DIR / "input-2x3x64x64"
    stamp = (folder / "compiled_model" / "model.json").stat().st_mtime_ns
    assert np.array_equal(tiny(x), y)
    assert (folder / "compiled_model" / "model.json").stat().st_mtime_ns == stamp
    assert tiny.compiled_dir({"input": (2, 3, 64, 64)}) == folder / "compiled_model"


def test_a_batch_that_does_not_divide_compiles_its_own_shape(tiny: aipusim.CompiledModel) -> None:
    assert tiny(_batch(3)).shape == (3, 10)
    assert (tiny.output_dir / SHAPES_DIR / "input-3x3x32x32" / "compiled_model").is_dir()


def test_shapes_outside_the_bounds_are_refused(tiny: aipusim.CompiledModel) -> None:
    with pytest.raises(ConfigError, match=r"input `input` dim 0 must be within 1..4, not 5"):
        tiny(_batch(5))
    with pytest.raises(ConfigError, match=r"input `input` dim 2 must be within 32..64, not 16"):
        tiny(np.zeros((1, 3, 16, 32), np.float32))
    with pytest.raises(ConfigError, match=r"dim 0 must be within 1..4, not 8"):
        tiny.simulate(frames=1, input_shapes={"input": (8, 3, 32, 32)})


def test_inputs_are_checked_by_count_and_name(tiny: aipusim.CompiledModel) -> None:
    x = _batch(2)
    assert np.array_equal(tiny(input=x), tiny(x))
    with pytest.raises(ConfigError, match=r"takes 1 input\(s\) \(input\), not 2"):
        tiny(x, x)
    with pytest.raises(ConfigError, match=r"`image` must be an input of the model \(input\)"):
        tiny(image=x)
    with pytest.raises(ConfigError, match=r"input `input` must be given"):
        tiny()
    with pytest.raises(ConfigError, match=r"input `input` is given twice"):
        tiny(x, input=x)


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        (np.nan, r"not NaN \(3 NaN values\)"),
        (np.inf, r"not inf \(3 inf values\)"),
    ],
)
def test_non_finite_inputs_are_refused_by_name(
    tiny: aipusim.CompiledModel, bad: float, words: str
) -> None:
    x = _batch(2)
    x.flat[[0, 7, 99]] = bad
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy RuntimeWarning before the refusal
        with pytest.raises(InvalidArgument, match=rf"^input `input` must be finite, {words}$"):
            tiny(x)


def test_report_is_the_compilers_per_layer_estimate(tiny: aipusim.CompiledModel) -> None:
    report = tiny.report
    assert {"layer", "op", "unit", "macs", "estimated_cycles", "estimated_us"} <= set(report)
    data = json.loads((tiny.output_dir / "compiled_model" / "report.json").read_text())
    assert list(report["layer"]) == [layer["name"] for layer in data["layers"]]
    assert report["estimated_cycles"].sum() == sum(
        layer["estimated_cycles"] for layer in data["layers"]
    )


def test_save_and_load_keep_the_model(tiny: aipusim.CompiledModel, tmp_path: Path) -> None:
    saved = tiny.save(tmp_path / "m")
    loaded = aipusim.load(saved)
    assert loaded.inputs == tiny.inputs
    x = _batch(2)
    assert np.array_equal(loaded(x), tiny(x))
    with pytest.raises(ConfigError, match=r"save path must be a new or empty folder"):
        tiny.save(saved)


def test_load_with_crc_check_refuses_a_changed_file(
    tiny: aipusim.CompiledModel, tmp_path: Path
) -> None:
    saved = tiny.save(tmp_path / "m", crc_check=True)
    aipusim.load(saved)
    npz = saved / "quantized_model" / "quantized_model.npz"
    data = bytearray(npz.read_bytes())
    data[len(data) // 2] ^= 0x10
    npz.write_bytes(bytes(data))
    with pytest.raises(TasklistError, match=r"quantized_model/quantized_model.npz must have CRC32"):
        aipusim.load(saved)


def test_load_with_crc_check_refuses_a_missing_file(
    tiny: aipusim.CompiledModel, tmp_path: Path
) -> None:
    saved = tiny.save(tmp_path / "m", crc_check=True)
    (saved / "compiled_model" / "core0.tasklist").unlink()
    with pytest.raises(TasklistError, match=r"compiled_model/core0.tasklist must exist"):
        aipusim.load(saved)


def test_load_without_crc_check_does_not_read_every_file(
    tiny: aipusim.CompiledModel, tmp_path: Path
) -> None:
    saved = tiny.save(tmp_path / "m", crc_check=False)
    (saved / "compilation_log.txt").write_text("edited\n")
    assert aipusim.load(saved).name == "tiny_cnn"


def test_load_opens_a_folder_the_cli_compiled(tmp_path: Path) -> None:
    from aipusim.cli.main import main

    onnx.save(aipusim.zoo.build("tiny_cnn", input_size=16), tmp_path / "t.onnx")
    out = tmp_path / "out"
    assert main(["compile", "-i", str(tmp_path / "t.onnx"), "-o", str(out)]) == 0
    m = aipusim.load(out)
    assert (m.input_names, m.output_names) == (("input",), ("logits",))
    assert m.inputs["input"].shape_bounds.opt == (1, 3, 16, 16)
    x = _batch(1, side=16)
    ref = run_onnx(onnx.load(tmp_path / "t.onnx"), {"input": x})  # (referenced, not copied)
    assert 20 < sqnr_db(ref["logits"], m(x)) < np.inf
    assert m.simulate(frames=1).fps > 0
    assert not (out / API_FILE).exists()  # loading leaves the CLI's folder as it was


def test_load_refuses_a_folder_that_is_no_model(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=rf"must hold {API_FILE}"):
        aipusim.load(tmp_path)


def test_a_numpy_input_is_baked_in_as_a_constant() -> None:
    proto = two_input_model()
    rng = np.random.default_rng(3)
    x, z = (rng.standard_normal((1, 8, 8, 8)).astype(np.float32) for _ in range(2))
    ref = run_onnx(proto, {"x": x, "z": z})["y"]
    both = aipusim.compile(proto)
    assert both.input_names == ("x", "z")
    baked = aipusim.compile(proto, inputs={"z": z})
    assert baked.input_names == ("x",)
    # int8 against float: quantization noise well below the signal (25 dB: 0.3 % power)
    assert sqnr_db(ref, both(x, z=z)) > 25
    assert sqnr_db(ref, baked(x)) > 25
    # the baked z is the one given, not some other value
    other = run_onnx(proto, {"x": x, "z": -z})["y"]
    assert sqnr_db(other, baked(x)) < 10
    with pytest.raises(ConfigError, match=r"takes 1 input\(s\) \(x\), not 2"):
        baked(x, z)


def test_bad_model_and_inputs_are_refused() -> None:
    with pytest.raises(ZooError, match=r"zoo model \(.*resnet18.*\), not 'resnet19'"):
        aipusim.compile("resnet19")
    with pytest.raises(ConfigError, match=r"model must be an ONNX path, an onnx.ModelProto"):
        aipusim.compile(42)
    with pytest.raises(ConfigError, match=r"inputs names `image`, which is not an input"):
        aipusim.compile("tiny_cnn", inputs={"image": aipusim.InputInfo((1, 3, 32, 32))})
    with pytest.raises(ConfigError, match=r"must have 4 dims like the model"):
        aipusim.compile("tiny_cnn", inputs={"input": aipusim.InputInfo((3, 32, 32))})
    with pytest.raises(ConfigError, match=r"dtype of `input` must be float32 .*, not int8"):
        aipusim.compile("tiny_cnn", inputs={"input": aipusim.InputInfo((1, 3, 32, 32), "int8")})
    with pytest.raises(ConfigError, match=r"must be an InputInfo .* or a numpy array"):
        aipusim.compile("tiny_cnn", inputs={"input": [1, 3, 32, 32]})
    with pytest.raises(ConfigError, match=r"compiler_mode must be quantize_and_lower"):
        aipusim.compile("tiny_cnn", {"compiler_mode": "quantize_only"})
    with pytest.raises(ConfigError, match=r"config must be a CompilerConfig"):
        aipusim.compile("tiny_cnn", config=3)


def test_a_model_file_and_an_output_dir(tmp_path: Path) -> None:
    path = tmp_path / "two.onnx"
    onnx.save(two_input_model(), path)
    m = aipusim.compile(path, {"aipu_cores_used": 1}, output_dir=tmp_path / "out")
    assert m.output_dir == tmp_path / "out"
    assert (tmp_path / "out" / API_FILE).is_file()
    assert m.name == "two_inputs"  # the graph's name, as run and the reports call it


def test_a_mapping_changes_the_zoo_models_built_in_config() -> None:
    m = aipusim.compile("tiny_cnn", {"frequency": 400_000_000})
    cfg = m.config
    # tiny_cnn.toml: quarter-chip instances with I/O in L2; the mapping changed the clock
    assert (cfg.resources_used, cfg.io_memory_pool) == (0.25, "global.l2")
    assert cfg.frequency == 400_000_000


def test_the_model_keeps_the_arch_it_was_compiled_for(tmp_path: Path) -> None:
    from aipusim.arch import DEFAULT_ARCH_PATH

    slow_dispatch = tmp_path / "slow.toml"
    text = DEFAULT_ARCH_PATH.read_text()
    assert "dispatch_cycles_per_task = 8 " in text
    slow_dispatch.write_text(
        text.replace("dispatch_cycles_per_task = 8 ", "dispatch_cycles_per_task = 80 ")
    )
    m = aipusim.compile("tiny_cnn", arch=slow_dispatch, output_dir=tmp_path / "m")
    assert (tmp_path / "m" / "arch.toml").read_text() == slow_dispatch.read_text()
    slow = m.simulate(frames=1)
    plain = aipusim.compile("tiny_cnn").simulate(frames=1)
    assert slow.total_cycles > plain.total_cycles
    # the saved copy travels with the model
    assert aipusim.load(m.save(tmp_path / "saved")).simulate(frames=1).total_cycles == (
        slow.total_cycles
    )


def test_config_for_is_where_compile_starts() -> None:
    from aipusim.compiler.modelcard import builtin_configs

    assert aipusim.config_for("resnet50") == aipusim.load_config(builtin_configs()["resnet50"])
    assert aipusim.config_for("tiny_cnn").resources_used == 0.25
