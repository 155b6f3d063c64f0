"""The bit-exact check: a functional run against the int8 reference, the first differing
layer and its writer, the inputs it is given, and `CompiledModel` through the simulator."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import aipusim
from aipusim.api.functional_check import attach_check, chip_inputs, compare, load_reference
from aipusim.base.errors import ConfigError, FunctionalMismatch
from aipusim.isa.program import record_crc
from aipusim.simulator import simulate


@pytest.fixture(scope="module")
def model() -> aipusim.CompiledModel:
    return aipusim.compile(
        "tiny_cnn",
        config={"aipu_cores_used": 4, "multicore_mode": "cooperative", "resources_used": 1.0},
    )


@pytest.fixture(scope="module")
def folder(model: aipusim.CompiledModel) -> Path:
    return model.compiled_dir()


def run(folder: Path, inputs=None):
    chip, how = chip_inputs(folder, inputs)
    return simulate(folder, frames=1, functional=True, inputs=chip), chip, how


def test_a_compiled_model_is_bit_exact(folder: Path) -> None:
    result, chip, how = run(folder)
    check = compare(result, folder, chip, how)
    assert check.bit_exact and check.first is None
    assert check.outputs == {"logits": {"shape": [1, 10], "mismatches": 0}}
    assert (
        check.text()
        == "bit-exact vs int8 reference (seeded random int8 (numpy default_rng(0)) input)"
    )
    assert check.to_dict()["bit_exact"] is True


def test_the_first_differing_layer_element_and_writer_are_named(folder: Path) -> None:
    result, chip, how = run(folder)
    graph = load_reference(folder).graph
    # the second layer's result as if the chip had computed one element differently
    second = next(o for node in graph.nodes[1:] for o in node.outputs if o in result.tensors)
    wrong = result.tensors[second].copy()
    wrong.flat[5] = np.int8(int(wrong.flat[5]) ^ 1)
    result.tensors[second] = wrong
    logits = result.outputs["logits"].copy()
    logits.flat[0] = np.int8(int(logits.flat[0]) ^ 1)
    result.outputs["logits"] = logits
    check = compare(result, folder, chip, how)
    assert not check.bit_exact
    assert check.outputs["logits"]["mismatches"] == 1
    first = check.first
    assert first is not None and first.tensor == second
    assert np.ravel_multi_index(first.index, wrong.shape) == 5
    assert first.got == int(wrong.flat[5]) and first.want == int(wrong.flat[5]) ^ 1
    assert first.writers and first.writers[0].startswith("core ")
    assert "first differing layer" in check.text() and "logits 1 of 10" in check.text()
    assert isinstance(check.error(), FunctionalMismatch)
    assert str(check.error()).startswith("FUNCTIONAL_MISMATCH: differs from the int8 reference")


def test_layers_that_do_not_run_on_data_are_no_bit_exact_run(folder: Path) -> None:
    result, chip, how = run(folder)
    result.functional["functional_gaps"] = {"/attn/MatMul": "run-time weights"}
    check = compare(result, folder, chip, how)
    assert not check.bit_exact
    assert "layers not executable on data: /attn/MatMul" in check.text()


def test_float_inputs_are_quantized_like_the_reference(folder: Path) -> None:
    x = np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)
    chip, how = chip_inputs(folder, {"input": x})
    quant = load_reference(folder).graph.tensor("input").quant
    assert how == "given" and chip["input"].dtype == np.int8
    want = np.clip(np.rint(x / quant.scale) + quant.zero_point, -128, 127)
    assert np.array_equal(chip["input"], want.astype(np.int8))


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({}, "inputs must give input"),
        (
            {"input": np.zeros((1, 3, 31, 32), np.float32)},
            r"input input must have shape \[1, 3, 32, 32\], not \[1, 3, 31, 32\]",
        ),
        ({"input": np.zeros((1, 3, 32, 32), np.int16)}, "input input must be an int8 array"),
        ({"nope": np.zeros(3, np.int8)}, "inputs must be among the program's inputs"),
    ],
)
def test_bad_inputs_are_refused(folder: Path, inputs, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        chip_inputs(folder, inputs)


def test_a_timing_result_cannot_be_checked(folder: Path) -> None:
    chip, how = chip_inputs(folder)
    with pytest.raises(ConfigError, match="must come from simulate"):
        compare(simulate(folder, frames=1), folder, chip, how)


def test_a_changed_weight_is_a_mismatch_end_to_end(folder: Path, tmp_path: Path) -> None:
    copy = tmp_path / "compiled_model"
    shutil.copytree(folder, copy)
    image = copy / "constants.bin"
    data = bytearray(image.read_bytes())
    for i in range(1000, 1064):  # inside conv1's weights
        data[i] ^= 1
    image.write_bytes(bytes(data))
    record_crc(image)
    result, chip, how = run(copy)
    check = attach_check(result, copy, chip, how)
    assert not check.bit_exact and check.first is not None
    assert result.functional["bit_exact"] is False
    assert result.functional["first_mismatch"]["layer"] == check.first.layer


def test_compiled_model_runs_through_the_simulator(model: aipusim.CompiledModel) -> None:
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)
    assert np.array_equal(model(x), model(x, executor="simulator"))
    with pytest.raises(
        ConfigError, match="executor must be one of reference, simulator, not 'chip'"
    ):
        model(x, executor="chip")


def test_compiled_model_simulate_returns_the_outputs(model: aipusim.CompiledModel) -> None:
    x = np.random.default_rng(2).standard_normal((1, 3, 32, 32)).astype(np.float32)
    timed = model.simulate(frames=2)
    r = model.simulate(frames=2, functional=True, inputs={"input": x})
    assert r.functional["bit_exact"] is True and r.functional["input"] == "given"
    assert r.outputs["logits"].shape == (1, 10) and r.outputs["logits"].dtype == np.int8
    # executing the data changes no cycle and no energy
    assert r.total_cycles == timed.total_cycles and r.energy_mj_run == timed.energy_mj_run
