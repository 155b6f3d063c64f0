"""Runtime knobs and multicore modes change the timing the way the hardware model says."""

from __future__ import annotations

import pytest
from helpers import dma, gtok, mvm, program, tok

from aipusim.arch import load_arch
from aipusim.base.errors import ConfigError, SimulationError
from aipusim.isa.program import MulticoreMode
from aipusim.isa.tasks import DpuKind, DpuOp, Pool, Unit
from aipusim.simulator import simulate

ARCH = load_arch()


def compute_layer(n: int = 8, vectors: int = 2000) -> list:
    """Double-buffered tiles: DMA in from DDR, MVM, with buffer-free tokens back."""
    out = []
    for i in range(n):
        buf = i % 2
        waits = (tok(2 + buf),) if i >= 2 else ()
        out.append(dma(Unit.DMA0, 8192, waits=waits, signals=(tok(buf),)))
        out.append(mvm(vectors, waits=(tok(buf),), signals=(tok(2 + buf),)))
    return out


def ddr_layer(n: int = 8) -> list:
    return [dma(Unit.DMA0 if i % 2 else Unit.DMA1, 262144) for i in range(n)]


def test_double_buffer_overlaps_input_with_compute() -> None:
    kw = {"input_bytes": 600_000, "output_bytes": 1000}
    on = simulate(program(1, double_buffer=True, **kw), {0: compute_layer()}, arch=ARCH)
    off = simulate(program(1, double_buffer=False, **kw), {0: compute_layer()}, arch=ARCH)
    assert on.fps > 1.3 * off.fps
    assert on.device_latency_cycles.tolist() == off.device_latency_cycles.tolist()


def test_multithread_shares_one_host_dispatcher() -> None:
    tl = {0: [mvm(200)]}  # short compute: the host's per-transfer setup dominates
    proc = program(1, MulticoreMode.MULTIPROCESS, resources=0.25, input_bytes=1000)
    thread = program(1, MulticoreMode.MULTITHREAD, resources=0.25, input_bytes=1000)
    assert proc.replicas == thread.replicas == 4
    r_proc = simulate(proc, tl, arch=ARCH, frames=8)
    r_thread = simulate(thread, tl, arch=ARCH, frames=8)
    assert r_proc.frames == r_thread.frames == 32
    assert r_proc.active_cores == 4
    assert r_thread.fps < r_proc.fps


def test_batch1_modes_on_4_cores_run_a_frame_per_core_per_start() -> None:
    """The compiler runs multiprocess/multithread on 4 cores as a batch: each start is 4
    frames, one per core, as in batch mode (counted as 1 frame, 8 frames took 8 starts)."""
    tl = {c: [mvm(2000)] for c in range(4)}
    kw = {"input_bytes": 1000, "output_bytes": 100}
    batch = simulate(program(4, MulticoreMode.BATCH, **kw), tl, arch=ARCH, frames=8)
    for mode in (MulticoreMode.MULTIPROCESS, MulticoreMode.MULTITHREAD):
        p = program(4, mode, **kw)
        assert p.frames_per_start == 4
        r = simulate(p, tl, arch=ARCH, frames=8)
        assert r.frames == 8
        assert r.total_cycles == batch.total_cycles


def test_half_frequency_doubles_compute_time_but_not_ddr_time() -> None:
    compute = {0: [mvm(5000)]}
    fast = simulate(program(1), compute, arch=ARCH, frames=2)
    slow = simulate(program(1, frequency_hz=400_000_000), compute, arch=ARCH, frames=2)
    assert slow.device_latency_cycles.tolist() == fast.device_latency_cycles.tolist()
    us_fast = fast.device_latency_cycles[0] / 800e6
    us_slow = slow.device_latency_cycles[0] / 400e6
    assert us_slow == pytest.approx(2 * us_fast)
    ddr = {0: ddr_layer()}
    ddr_fast = simulate(program(1), ddr, arch=ARCH, frames=2)
    ddr_slow = simulate(program(1, frequency_hz=400_000_000), ddr, arch=ARCH, frames=2)
    # DDR keeps its GB/s: at half the clock a DDR-bound start takes about half the cycles.
    ratio = ddr_slow.device_latency_cycles[0] / ddr_fast.device_latency_cycles[0]
    assert 0.45 < ratio < 0.6
    assert slow.voltage_v < fast.voltage_v


def test_mvm_utilization_limit_lowers_peak_power_and_never_raises_fps() -> None:
    tl = {0: compute_layer(n=16, vectors=4000)}
    full = simulate(program(1), tl, arch=ARCH, frames=4)
    half = simulate(program(1, mvm_utilization_limit=0.5), tl, arch=ARCH, frames=4)
    assert half.peak_power_w["10us"] < full.peak_power_w["10us"]
    assert half.fps <= full.fps
    assert half.energy_mj_per_frame["mvm"] == pytest.approx(full.energy_mj_per_frame["mvm"])


def test_polling_instead_of_hardware_tokens_costs_cycles() -> None:
    tl = {0: compute_layer(n=16, vectors=300)}
    hw = simulate(program(1), tl, arch=ARCH, frames=2)
    poll = simulate(program(1, use_hw_tokens=False), tl, arch=ARCH, frames=2)
    assert poll.total_cycles > hw.total_cycles
    assert poll.busy_cycles["core0.control"] > hw.busy_cycles["core0.control"]
    assert poll.event_counts["polls"] > 0 == hw.event_counts["polls"]


def test_batch_on_four_cores_out_throughputs_one_core() -> None:
    one = simulate(program(1), {0: compute_layer()}, arch=ARCH, frames=8)
    batch = simulate(
        program(4, MulticoreMode.BATCH),
        {c: compute_layer() for c in range(4)},
        arch=ARCH,
        frames=8,
    )
    assert batch.frames == 8 and len(batch.device_latency_cycles) == 2
    assert batch.device_fps > 2 * one.device_fps


def test_pipeline_stages_overlap_frames() -> None:
    stage = [mvm(3000)]
    single = simulate(program(1), {0: [*stage, mvm(3000)]}, arch=ARCH, frames=8)
    pipe = simulate(
        program(2, MulticoreMode.PIPELINE),
        {0: [mvm(3000, signals=(gtok(0),))], 1: [mvm(3000, waits=(gtok(0),))]},
        arch=ARCH,
        frames=8,
    )
    assert pipe.device_fps > 1.5 * single.device_fps


def test_cooperative_split_beats_one_core_on_latency() -> None:
    whole = simulate(program(1), {0: [mvm(8000)]}, arch=ARCH, frames=2)
    split = simulate(program(2), {0: [mvm(4000)], 1: [mvm(4000)]}, arch=ARCH, frames=2)
    assert split.latency_us_p50 < whole.latency_us_p50


def test_trace_lines_cost_control_cycles() -> None:
    tl = {0: compute_layer(n=32, vectors=50)}
    quiet = simulate(program(1), tl, arch=ARCH, frames=2)
    loud = simulate(program(1), tl, arch=ARCH, frames=2, levels="B,PB,PE,K,M,T")
    assert loud.event_counts["trace_lines"] > 0
    assert loud.busy_cycles["core0.control"] > quiet.busy_cycles["core0.control"]
    assert loud.total_cycles > quiet.total_cycles


def test_large_tasklist_needs_streaming() -> None:
    n = ARCH.l2.tasklist_reserved_bytes_per_core // 96 + 10
    tl = {0: [DpuOp(unit=Unit.DPU, kind=DpuKind.ADD, in_addr0=0, out_addr=0, elements=64)] * n}
    with pytest.raises(SimulationError, match="stream_tasklist"):
        simulate(program(1, stream_tasklist=False), tl, arch=ARCH, frames=1)
    res = simulate(program(1, stream_tasklist=True), tl, arch=ARCH, frames=2)
    assert res.event_counts["tasks"] == 2 * n


def test_sysdma_is_shared_between_cores() -> None:
    one = simulate(program(1), {0: [dma(Unit.SYSDMA, 65536, dst=Pool.L2)]}, arch=ARCH, frames=1)
    two = simulate(
        program(2),
        {c: [dma(Unit.SYSDMA, 65536, src=Pool.L2, dst=Pool.L2)] for c in range(2)},
        arch=ARCH,
        frames=1,
    )
    assert two.device_latency_cycles[0] > 1.8 * (65536 / ARCH.sysdma.bw_bytes_per_cycle)
    assert one.device_latency_cycles[0] > 0


def test_overrides_are_checked() -> None:
    with pytest.raises(
        ConfigError,
        match=r"^simulate override must be one of double_buffer, frames, frequency, "
        r"profiling_levels, replicas, voltage, not 'frequncy'$",
    ):
        simulate(program(1), {0: [mvm(1)]}, arch=ARCH, overrides={"frequncy": 1})
    with pytest.raises(ConfigError, match="double_buffer must be true or false"):
        simulate(program(1), {0: [mvm(1)]}, arch=ARCH, overrides={"double_buffer": "maybe"})
    res = simulate(program(1), {0: [mvm(100)]}, arch=ARCH, overrides={"frequency": "400000000"})
    assert res.frequency_hz == 400_000_000
    with pytest.raises(ConfigError, match=r"^frequency must be an integer 20000000-800000000"):
        simulate(program(1), {0: [mvm(1)]}, arch=ARCH, overrides={"frequency": 10**6})
    for bad in ("inf", "nan", float("inf")):
        with pytest.raises(ConfigError, match=r"^frequency must be an integer, not"):
            simulate(program(1), {0: [mvm(1)]}, arch=ARCH, overrides={"frequency": bad})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "multicore_mode",
            "batch",
            "multicore_mode is fixed at compile time (cooperative); recompile with "
            "--set multicore_mode=batch",
        ),
        (
            "mvm_utilization_limit",
            0.5,
            "mvm_utilization_limit is fixed at compile time (1.0); recompile with "
            "--set mvm_utilization_limit=0.5",
        ),
        (
            "aipu_cores_used",
            1,
            "aipu_cores_used is fixed at compile time (2); recompile with --set aipu_cores_used=1",
        ),
        (
            "use_hw_tokens",
            "false",
            "use_hw_tokens is fixed at compile time (true); recompile with "
            "--set use_hw_tokens=false",
        ),
        (
            "replicas",
            4,
            "replicas is fixed at compile time (1: a cooperative instance on 2 core(s)); "
            "recompile with --set multicore_mode=multiprocess for copies of a 1-core model",
        ),
    ],
)
def test_compile_time_decisions_are_refused(key: str, value: object, message: str) -> None:
    # A cooperative 2-core tasklist must not be run as if it were something else.
    prog = program(2)
    with pytest.raises(ConfigError) as err:
        simulate(prog, {0: [mvm(1)], 1: [mvm(1)]}, arch=ARCH, overrides={key: value})
    assert str(err.value) == message


def test_double_buffer_can_be_turned_on_only_with_two_buffers() -> None:
    kw = {"input_bytes": 4096, "output_bytes": 64}
    single = program(1, double_buffer=False, **kw)
    with pytest.raises(ConfigError) as err:
        simulate(single, {0: compute_layer(2)}, arch=ARCH, overrides={"double_buffer": True})
    assert str(err.value) == (
        "double_buffer=true needs two I/O buffers per frame, but the program was compiled "
        "with one (double_buffer=false); recompile with --set double_buffer=true"
    )
    on = simulate(program(1, **kw), {0: compute_layer(2)}, arch=ARCH, frames=4)
    off = simulate(
        program(1, **kw), {0: compute_layer(2)}, arch=ARCH, frames=4,
        overrides={"double_buffer": "false"},
    )  # fmt: skip
    assert off.total_cycles > on.total_cycles


def test_replicas_of_a_batch1_model_up_to_what_fits() -> None:
    prog = program(1, MulticoreMode.MULTIPROCESS, resources=0.25, input_bytes=1000)
    two = simulate(prog, {0: compute_layer(2)}, arch=ARCH, frames=2, overrides={"replicas": 2})
    assert (two.replicas, two.frames, two.active_cores) == (2, 4, 2)
    with pytest.raises(ConfigError) as err:
        simulate(prog, {0: compute_layer(2)}, arch=ARCH, overrides={"replicas": 5})
    assert str(err.value) == (
        "replicas must be 1-4 (the copies that aipu_cores_used=1 and resources_used=0.25 fit "
        "on the chip), not 5"
    )


def test_voltage_is_a_runtime_setting_within_the_operating_points() -> None:
    slow = {"frequency": 400_000_000}
    low = simulate(program(1), {0: [mvm(2000)]}, arch=ARCH, overrides=slow)
    high = simulate(program(1), {0: [mvm(2000)]}, arch=ARCH, overrides={**slow, "voltage": 0.8})
    # 400 MHz: the lowest point reaching it is 0.68 V; the table goes up to 0.85 V
    assert (low.voltage_v, high.voltage_v) == (0.68, 0.8)
    assert low.total_cycles == high.total_cycles
    # Dynamic energy goes with V^2: the MVM's energy per frame by (0.8 / 0.68)^2.
    ratio = high.energy_mj_per_frame["mvm"] / low.energy_mj_per_frame["mvm"]
    assert ratio == pytest.approx((0.8 / 0.68) ** 2)
    with pytest.raises(ConfigError) as err:
        simulate(program(1), {0: [mvm(1)]}, arch=ARCH, overrides={**slow, "voltage": 0.65})
    assert str(err.value) == (
        "voltage must be 0.68-0.85 V at 400 MHz (the operating points of metis), not 0.65"
    )


def test_frames_is_a_runtime_setting_too() -> None:
    res = simulate(program(1), {0: [mvm(10)]}, arch=ARCH, overrides={"frames": "3"})
    assert res.frames == 3
    with pytest.raises(ConfigError, match=r"^frames must be an integer, not 'many'$"):
        simulate(program(1), {0: [mvm(10)]}, arch=ARCH, overrides={"frames": "many"})
