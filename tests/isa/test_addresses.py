"""Addresses against the pools: `aipusim.isa.addresses`, `isa check` and `simulate`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aipusim.arch import load_arch
from aipusim.isa.addresses import find_violations, usable_bytes
from aipusim.isa.table import TaskTable
from aipusim.isa.tasks import DmaCopy, DpuKind, DpuOp, HostTransfer, Mvm, Pool, Unit, WeightLoad

ARCH = load_arch()
L1, L1_RESERVED = usable_bytes(ARCH)["l1"]
L2, _ = usable_bytes(ARCH)["l2"]
DDR, _ = usable_bytes(ARCH)["ddr"]


def dma(src: Pool, src_addr: int, dst: Pool, dst_addr: int, nbytes: int, **kw) -> DmaCopy:
    return DmaCopy(
        unit=Unit.DMA0, layer="c", src_pool=src, src_addr=src_addr, dst_pool=dst,
        dst_addr=dst_addr, bytes=nbytes, **kw,
    )  # fmt: skip


def found(*tasks) -> list[tuple[int, str, str]]:
    return [(v.index, v.field, v.pool) for v in find_violations(TaskTable.from_tasks(tasks), ARCH)]


def test_usable_parts_follow_the_arch() -> None:
    assert (ARCH.l1.size_bytes - ARCH.l1.reserved_bytes, 524288) == (L1, L1_RESERVED)
    assert ARCH.l2_budget_bytes == L2
    assert ARCH.ddr.size_bytes - ARCH.ddr.reserved_bytes == DDR


def test_accesses_inside_their_pools_pass() -> None:
    assert (
        found(
            dma(Pool.DDR, DDR - 64, Pool.L1, L1 - 64, 64),
            dma(Pool.L2, 0, Pool.L1, 0, L1),
            WeightLoad(
                unit=Unit.WLOAD,
                weight_set=0,
                src_addr=L1 - 4096,
                bytes=4096,
                rows_used=1,
                cols_used=1,
            ),
            HostTransfer(unit=Unit.CTRL, direction="h2d", pool=Pool.L2, addr=L2 - 16, bytes=16),
            dma(Pool.HOST, 2**60, Pool.L2, 0, 16),  # host memory is not checked
        )
        == []
    )


def test_accesses_into_reserved_regions_are_named() -> None:
    tasks = [
        dma(Pool.DDR, 0, Pool.L1, L1 - 32, 64),  # its last 32 bytes are reserved
        dma(Pool.L2, L2, Pool.L1, 0, 16),  # the first byte of the tasklist windows
        dma(Pool.DDR, DDR, Pool.L2, 0, 16),  # the compiler's DDR reservation
        Mvm(
            unit=Unit.MVM, weight_set=0, in_addr=L1, out_addr=0, vectors=1, rows_used=1, cols_used=1
        ),
        DpuOp(
            unit=Unit.DPU,
            kind=DpuKind.ADD,
            in_addr0=0,
            in_addr1=L1 + 5,
            out_addr=0,
            elements=8,
            operands=2,
        ),
        DpuOp(
            unit=Unit.DPU,
            kind=DpuKind.LUT,
            in_addr0=0,
            in_addr1=L1 + 5,
            out_addr=0,
            elements=8,
            operands=1,
        ),  # one operand: in_addr1 is not read
        dma(Pool.DDR, 0, Pool.L1, 2**64 - 8, 64),  # wraps around: out of range, not small
        dma(Pool.DDR, 0, Pool.L1, 0, 64, rows=4, dst_stride=L1),  # strided past the end
    ]
    assert found(*tasks) == [
        (0, "dst_addr", "l1"),
        (1, "src_addr", "l2"),
        (2, "src_addr", "ddr"),
        (3, "in_addr", "l1"),
        (4, "in_addr1", "l1"),
        (6, "dst_addr", "l1"),
        (7, "dst_addr", "l1"),
    ]


def test_isa_check_and_simulate_refuse_them_naming_the_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import aipusim
    from aipusim.cli.main import main

    model = aipusim.compile("tiny_cnn", output_dir=tmp_path / "m")
    core0 = model.output_dir / "compiled_model" / "core0.tasklist"
    assert main(["isa", "check", str(core0.parent)]) == 0
    assert main(["isa", "disasm", str(core0), "-o", str(tmp_path / "c0.txt")]) == 0
    text = (tmp_path / "c0.txt").read_text()
    first_mvm = next(line for line in text.splitlines() if " Mvm " in line)
    index = first_mvm.split()[0]
    bad = re.sub(r" in_addr=0x[0-9a-f]+", f" in_addr={L1 + 4096:#x}", first_mvm, count=1)
    (tmp_path / "c0.txt").write_text(text.replace(first_mvm, bad))
    capsys.readouterr()
    assert main(["isa", "asm", str(tmp_path / "c0.txt"), "-o", str(core0)]) == 0
    capsys.readouterr()
    assert main(["isa", "check", str(core0.parent)]) == 2
    out, err = capsys.readouterr()
    assert "error: [address] core 0 task " + index in out
    assert err.count("\n") == 1 and f"task {index} (mvm Mvm" in err and "in_addr" in err
    # simulate refuses the same folder (after its CRC check, which the edit trips first)
    model_json = core0.parent / "model.json"
    model_json.write_text(model_json.read_text().replace('"crc_check": true', '"crc_check": false'))
    assert main(["simulate", str(core0.parent), "--frames", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"core 0 task {index} (mvm Mvm" in err
    assert "reserved" in err
