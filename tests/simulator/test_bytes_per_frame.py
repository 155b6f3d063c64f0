"""Bytes per frame over DDR, L2 and PCIe: the simulator's count and the compiler's estimate.

`SimResult.bytes_per_frame` is what the shared links carried for the steady frames, per
frame; over a whole run the same accounting gives the links' own byte counters. The compile
report's ``bytes_per_frame`` adds up what the cost model says one frame's tasks and host
transfers move. On the same program they agree exactly; by design they differ only in
what the report cannot know or leaves out:

- INIT (constants and resident weights brought on chip, the tasklist's first fetch) happens
  once per instance: neither figure counts it, the simulator's because only the steady
  frames count, the report's because it adds up FRAME tasks only;
- a tasklist too big for its L2 window streams from DDR every frame: the simulator counts
  those records (DDR and the L2 port), the report does not (it is no task's traffic);
- shared links change when a transfer runs, never how many bytes it moves, so
  ``contention`` does not change either figure.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from zoo_compiles import ZooCompiles

from aipusim.arch import load_arch
from aipusim.cli.main import main
from aipusim.isa.encoding import RECORD_BYTES
from aipusim.isa.program import load_program_tables
from aipusim.simulator import simulate
from aipusim.simulator.engine import Simulation
from aipusim.simulator.result import _gather_log, link_bytes

#: (multicore_mode, aipu_cores_used) per case, all of the chip's resources.
MODES = {"1core": ("multiprocess", 1), "batch4": ("batch", 4), "pipeline4": ("pipeline", 4)}


@pytest.fixture(scope="module")
def compiled(zoo_compiles: ZooCompiles) -> dict[str, Path]:
    """ResNet-18 at 32x32 in each case (the session's shared compiles)."""
    return {
        case: zoo_compiles.compiled("resnet18", 32, mode=mode, cores=cores, resources=1.0)
        for case, (mode, cores) in MODES.items()
    }


def _reported(folder: Path) -> dict[str, float]:
    return json.loads((folder / "report.json").read_text())["bytes_per_frame"]


def test_report_and_simulation_agree_on_one_core(compiled: dict[str, Path]) -> None:
    folder = compiled["1core"]
    result = simulate(folder, frames=4, contention=False)
    assert set(result.bytes_per_frame) == {"ddr", "l2", "pcie"}
    assert result.bytes_per_frame == _reported(folder)
    assert result.bytes_per_frame["pcie"] == 32 * 32 * 3 + 1000  # one int8 input and output
    assert simulate(folder, frames=4).bytes_per_frame == result.bytes_per_frame


@pytest.mark.parametrize("mode", ["batch4", "pipeline4"])
def test_report_and_simulation_agree_on_four_cores(compiled: dict[str, Path], mode: str) -> None:
    """Batch counts per frame (four frames a start), pipeline over overlapping frames."""
    folder = compiled[mode]
    assert simulate(folder, frames=8).bytes_per_frame == _reported(folder)


@pytest.mark.parametrize("mode", list(MODES))
def test_over_the_whole_run_they_are_the_link_counters(
    compiled: dict[str, Path], mode: str
) -> None:
    program, tasklists = load_program_tables(compiled[mode])
    sim = Simulation(program, tasklists, load_arch(), frames=3)
    sim.run()
    rid, _, phase, _, _ = _gather_log(sim)
    counted = link_bytes(sim, sim.rid_op[rid], phase, -1)
    assert counted == {name: nbytes for name, (_, nbytes) in sim.link_totals().items()}


def test_a_streamed_tasklist_is_the_only_difference(compiled: dict[str, Path]) -> None:
    """With an L2 tasklist window too small for the tasklist, the simulator fetches each
    frame's records from DDR: exactly that much more over DDR and the L2 port."""
    folder = compiled["1core"]
    arch = load_arch()
    small = dataclasses.replace(arch.l2, tasklist_reserved_bytes_per_core=64 * RECORD_BYTES)
    result = simulate(folder, frames=4, arch=dataclasses.replace(arch, l2=small))
    _, tasklists = load_program_tables(folder)
    frame_records = sum(1 for t in tasklists[0].to_tasks() if t.phase.value == "frame")
    reported = _reported(folder)
    streamed = frame_records * RECORD_BYTES
    assert result.bytes_per_frame["ddr"] == reported["ddr"] + streamed
    assert result.bytes_per_frame["l2"] == reported["l2"] + streamed
    assert result.bytes_per_frame["pcie"] == reported["pcie"]


def test_simulate_prints_and_returns_bytes_per_frame(
    compiled: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = str(compiled["1core"])
    assert main(["simulate", folder, "--frames", "3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["bytes_per_frame"] == _reported(Path(folder))
    assert main(["simulate", folder, "--frames", "3"]) == 0
    assert "bytes per frame ddr / l2 / pcie" in capsys.readouterr().out
