"""simulate(..., functional=True): outputs, tensors and their writers, the summary; the
timing untouched; value-aware energy; clear errors for bad programs and inputs."""

from __future__ import annotations

import numpy as np
import pytest
from functional_helpers import (
    Image,
    chain,
    channel_params,
    dma,
    int8,
    io,
    program,
    requant_ref,
    run,
    tensor,
)
from pandas.testing import assert_frame_equal

from aipusim.arch import load_arch
from aipusim.base.errors import ConfigError, SimulationError
from aipusim.isa.cost import dynamic_scale, mvm_clock_pj_per_mac
from aipusim.isa.tasks import Mvm, Phase, Pool, PostOp, Unit, WeightLoad
from aipusim.simulator import simulate
from aipusim.simulator.functional.energy import mac_energy_pj

X, Y, OUT = 0x100000, 0x200000, 0x8000
H = W = 8


def conv1x1(w: np.ndarray, rec: np.ndarray):
    """A 1x1 conv over an 8 x 8 input: weights and records from the image in INIT; each frame
    the input in, the Mvm (its result a placed tensor), the output back."""
    k, n = w.shape
    img = Image()
    init = chain(
        [
            dma(Pool.DDR, img.put(w), Pool.L1, 0x10000, k * n, phase=Phase.INIT),
            dma(Pool.DDR, img.put(rec), Pool.L1, 0x20000, n * 24, phase=Phase.INIT),
            WeightLoad(
                unit=Unit.WLOAD,
                phase=Phase.INIT,
                weight_set=0,
                src_addr=0x10000,
                bytes=k * n,
                rows_used=k,
                cols_used=n,
            ),
        ]
    )
    mvm = Mvm(
        unit=Unit.MVM,
        layer="conv",
        weight_set=0,
        in_addr=0,
        out_addr=OUT,
        vectors=H * W,
        rows_used=k,
        cols_used=n,
        post=PostOp.REQUANT,
        param_addr=0x20000,
        in_w=W,
        in_rows=H,
        in_pitch=k,
        in_row_pitch=W * k,
        cin=k,
        cpad=64 * -(-k // 64),
        out_w=W,
        out_pitch=n,
        out_row_pitch=W * n,
    )
    frame = chain(
        [
            dma(Pool.DDR, X, Pool.L1, 0, H * W * k, layer="in"),
            mvm,
            dma(Pool.L1, OUT, Pool.DDR, Y, H * W * n, unit=Unit.DMA1, layer="out"),
        ],
        8,
    )
    tasks = {0: init + frame}
    bufs = [io("x", "h2d", X, (1, k, H, W)), io("y", "d2h", Y, (1, n, H, W))]
    places = [tensor("conv_out", "l1", OUT, (1, n, H, W), layer="conv")]
    return program(tasks, img, io_bufs=bufs, tensors=places), tasks, img


def reference(x: np.ndarray, w: np.ndarray, rec: np.ndarray) -> np.ndarray:
    acc = np.einsum("nchw,ck->nkhw", x.astype(np.int64), w.astype(np.int64))
    return requant_ref(acc, rec)


def test_outputs_tensors_and_their_writers() -> None:
    w, rec = int8(64, 32), channel_params(32)
    prog, tasks, img = conv1x1(w, rec)
    x = int8(1, 64, H, W)
    res = run(prog, tasks, img, inputs={"x": x}, frames=3)
    want = reference(x, w, rec)
    assert np.array_equal(res.outputs["y"], want)
    assert np.array_equal(res.tensors["conv_out"], want)
    writers = res.tensor_writers["conv_out"]
    assert writers.shape == want.shape and len(set(writers.reshape(-1).tolist())) == 1
    row = res.functional_tasks.loc[int(writers.reshape(-1)[0])]
    assert (row["kind"], row["layer"], row["frame"], row["unit"]) == ("Mvm", "conv", 2, "mvm")
    summary = res.functional
    assert summary["tasks_executed"] == 3 + 3 * 3 and summary["saturations"] == 0
    assert summary["outputs"] == {"y": {"shape": [1, 32, H, W], "dtype": "int8"}}
    assert summary["mvm_macs"] == 3 * H * W * 64 * 32 and summary["input"] == "given"
    assert res.to_dict()["functional"] == summary


def test_without_inputs_a_seeded_input_is_used_and_said() -> None:
    w, rec = int8(64, 32), channel_params(32)
    prog, tasks, img = conv1x1(w, rec)
    a = run(prog, tasks, img)
    b = run(prog, tasks, img)
    assert a.functional["input"] == "seeded random int8 (numpy default_rng(0))"
    assert np.array_equal(a.outputs["y"], b.outputs["y"])
    x = np.random.default_rng(0).integers(-128, 128, (1, 64, H, W)).astype(np.int8)
    assert np.array_equal(a.outputs["y"], reference(x, w, rec))


def test_functional_mode_changes_no_cycle_and_no_energy() -> None:
    w, rec = int8(64, 32), channel_params(32)
    prog, tasks, img = conv1x1(w, rec)
    timed = simulate(prog, tasks, frames=4)
    both = run(prog, tasks, img, frames=4, energy_model="value_aware")
    plain = {
        k: v for k, v in both.to_dict().items() if k not in ("functional", "energy_value_aware")
    }
    assert plain == timed.to_dict()
    assert_frame_equal(both.task_log, timed.task_log)
    assert_frame_equal(both.power_timeline, timed.power_timeline)
    assert both.peak_power_w == timed.peak_power_w


def mvm_mj_per_frame(res) -> tuple[float, float]:
    return (
        res.energy_mj_per_frame["mvm"],
        res.energy_value_aware["energy_mj_per_frame_by_component"]["mvm"],
    )


def test_value_aware_energy_follows_the_data() -> None:
    arch = load_arch()
    a, b = arch.energy.mvm_activity_fit
    rng = np.random.default_rng(3)
    results = {}
    for name, (p_in, p_w) in {"dense": (1.0, 1.0), "sparse": (0.5, 0.1)}.items():
        w = int8(64, 32, lo=1, hi=128) * (rng.random((64, 32)) < p_w)
        x = int8(1, 64, H, W, lo=1, hi=128) * (rng.random((1, 64, H, W)) < p_in)
        prog, tasks, img = conv1x1(w.astype(np.int8), channel_params(32))
        res = run(
            prog, tasks, img, inputs={"x": x.astype(np.int8)}, frames=3, energy_model="value_aware"
        )
        # the exact fraction of products with two nonzero operands
        nz_x = (x[0] != 0).reshape(64, -1).sum(axis=1)
        active = int(nz_x @ (w != 0).sum(axis=1))
        p = active / (H * W * 64 * 32)
        assert res.energy_value_aware["mvm_active_fraction"] == pytest.approx(p)
        cycles, aware = mvm_mj_per_frame(res)
        # both leave out the array's clock (charged per busy cycle); with it added back, the
        # value-aware energy is the cycle model's times a + b p
        scale = dynamic_scale(arch, res.voltage_v)[0]
        clock = mvm_clock_pj_per_mac(arch) * H * W * 64 * 32 * scale * 1e-9
        assert aware + clock == pytest.approx((cycles + clock) * (a + b * p), rel=1e-9)
        results[name] = (aware + clock) / (cycles + clock)
        frame_pj = mac_energy_pj(arch, H * W * 64 * 32, active) * scale
        assert aware == pytest.approx(frame_pj * 1e-9, rel=1e-9)
        total = res.energy_value_aware["energy_mj_per_frame"]
        assert total == pytest.approx(res.energy_mj_per_frame_total - cycles + aware)
    assert results["dense"] == pytest.approx(1.0, abs=1e-9)
    # 50 % input, 90 % weight sparsity: close to the published 82 TOPS/W (15/82 of the energy)
    assert results["sparse"] == pytest.approx(15 / 82, abs=0.03)


def test_padded_rows_are_not_full_macs() -> None:
    # three real channels padded to a 64-row block: the zero weights are not charged in full
    w = np.zeros((64, 32), np.int8)
    w[:3] = int8(3, 32, lo=1, hi=128)
    prog, tasks, img = conv1x1(w, channel_params(32))
    x = int8(1, 64, H, W, lo=1, hi=128)
    res = run(prog, tasks, img, inputs={"x": x}, energy_model="value_aware")
    assert res.energy_value_aware["mvm_active_fraction"] == pytest.approx(3 / 64)


@pytest.mark.parametrize(
    ("inputs", "error", "message"),
    [
        ({}, ConfigError, r"inputs must give x \(the program's inputs: x\)"),
        (
            {"x": np.zeros((1, 64, H, W), np.float32)},
            ConfigError,
            r"input x must be an int8 array \(quantized with scale \[0.1\] and zero point \[0\]\), "
            r"not float32",
        ),
        (
            {"x": np.zeros((1, 64, W, H + 1), np.int8)},
            ConfigError,
            r"input x must have shape \[1, 64, 8, 8\], not \[1, 64, 8, 9\]",
        ),
        (
            {"x": np.zeros((1, 64, H, W), np.int8), "z": 1},
            ConfigError,
            r"inputs must be among the program's inputs \(x\), not 'z'",
        ),
    ],
    ids=["missing", "dtype", "shape", "unknown"],
)
def test_bad_inputs_are_refused_before_the_run(inputs, error, message) -> None:
    prog, tasks, img = conv1x1(int8(64, 32), channel_params(32))
    with pytest.raises(error, match=message):
        run(prog, tasks, img, inputs=inputs)


def test_functional_arguments_are_checked() -> None:
    prog, tasks, img = conv1x1(int8(64, 32), channel_params(32))
    with pytest.raises(
        ConfigError, match="energy_model must be one of cycles, value_aware, not 'joules'"
    ):
        run(prog, tasks, img, energy_model="joules")
    with pytest.raises(
        ConfigError, match="energy_model=value_aware must come with functional=True"
    ):
        simulate(prog, tasks, energy_model="value_aware")
    with pytest.raises(ConfigError, match="inputs must come with functional=True"):
        simulate(prog, tasks, inputs={"x": 0})
    with pytest.raises(SimulationError, match="must be given with an in-memory program"):
        simulate(prog, tasks, functional=True)
    timing_only = prog.with_overrides(memory=None)
    with pytest.raises(SimulationError, match=r"^compiled without a complete program: recompile$"):
        simulate(timing_only, tasks, functional=True)


def test_a_compiled_folder_runs_from_its_files(tmp_path) -> None:
    from aipusim.isa.program import save_program
    from aipusim.isa.tasklist import Tasklist, write_tasklist

    w, rec = int8(64, 32), channel_params(32)
    prog, tasks, img = conv1x1(w, rec)
    save_program(prog, tmp_path)
    write_tasklist(tmp_path / "core0.tasklist", Tasklist(0, tasks[0]))
    (tmp_path / "constants.bin").write_bytes(bytes(img))
    x = int8(1, 64, H, W)
    res = simulate(tmp_path, frames=2, functional=True, inputs={"x": x})
    assert np.array_equal(res.outputs["y"], reference(x, w, rec))
    (tmp_path / "constants.bin").write_bytes(bytes(img)[:-8])
    with pytest.raises(
        SimulationError,
        match=r"constants image constants.bin must hold the "
        r"\d+ bytes model.json records, not \d+",
    ):
        simulate(tmp_path, frames=2, functional=True, inputs={"x": x})


def test_layers_the_compiler_could_not_express_are_skipped() -> None:
    w, rec = int8(64, 32), channel_params(32)
    prog, tasks, img = conv1x1(w, rec)
    prog.extra["functional_gaps"] = {"conv": "timed only"}
    res = run(prog, tasks, img, frames=2)
    assert res.functional["tasks_skipped"] == 2
    assert res.functional["functional_gaps"] == {"conv": "timed only"}
    assert not res.outputs["y"].any()  # nobody wrote the output tile
