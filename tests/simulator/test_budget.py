"""The memory estimate of a run, checked before it starts (`aipusim.simulator.budget`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aipusim.base.errors import ResourceLimitError
from aipusim.isa.tasks import Mvm, Phase, Unit
from aipusim.simulator.budget import (
    BASE_BYTES,
    BYTES_PER_TASK,
    BYTES_PER_TRACED_TASK,
    check_frames_bound,
    check_run_memory,
    run_memory_bytes,
)


def _tasks(init: int, frame: int) -> list[Mvm]:
    def mvm(phase: Phase) -> Mvm:
        return Mvm(
            unit=Unit.MVM, weight_set=0, in_addr=0, out_addr=0, vectors=1, rows_used=1,
            cols_used=1, phase=phase,
        )  # fmt: skip

    return [mvm(Phase.INIT)] * init + [mvm(Phase.FRAME)] * frame


def test_the_estimate_counts_every_executed_task() -> None:
    assert run_memory_bytes(10, traced=False) == BASE_BYTES + 10 * BYTES_PER_TASK
    assert run_memory_bytes(10, traced=True) == (
        BASE_BYTES + 10 * (BYTES_PER_TASK + BYTES_PER_TRACED_TASK)
    )


def test_a_run_over_the_memory_is_refused_with_what_would_fit() -> None:
    lists = {0: _tasks(init=5, frame=20), 1: _tasks(init=5, frame=20)}
    # 2 replicas x (10 init + 40 frame tasks per start): 80 + 2 x 40 x starts tasks
    room = run_memory_bytes(2 * (10 + 40 * 100), traced=False)
    check_run_memory(lists, frames=400, frames_per_start=4, replicas=2, traced=False,
                     available=room)  # fmt: skip
    with pytest.raises(ResourceLimitError) as err:
        check_run_memory(lists, frames=404, frames_per_start=4, replicas=2, traced=False,
                         available=room)  # fmt: skip
    message = str(err.value)
    assert message.startswith("frames=404 would need about ")
    assert "2 replica(s) x 101 start(s) x 40 task(s) per start" in message
    assert message.endswith("enough for at most 400 frames")


def test_huge_frame_counts_are_refused_before_any_work() -> None:
    with pytest.raises(ResourceLimitError, match=r"^--frames=10{30} would need more than"):
        check_frames_bound(10**30, flag="--frames")
    check_frames_bound(8)


def test_the_cli_refuses_a_frame_count_that_cannot_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import aipusim
    from aipusim.cli.main import main

    model = aipusim.compile("tiny_cnn", output_dir=tmp_path / "m")
    for command in (
        ["simulate", str(model.output_dir), "--frames", str(10**30)],
        ["run", "tiny_cnn", "-o", str(tmp_path / "r"), "--frames", str(10**30)],
        ["isa", "check", str(model.output_dir / "compiled_model"), "--frames", str(10**9)],
    ):
        assert main(command) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and ("--frames" in err or "frames=" in err), err
    assert not (tmp_path / "r").exists()
