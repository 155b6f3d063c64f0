"""Text form: round trips to identical bytes, hand-written input, line-numbered errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis_budget import examples
from isa_strategies import tasklists

from aipusim.base.errors import TasklistError
from aipusim.isa.tasklist import Tasklist, encode_tasklist
from aipusim.isa.tasks import (
    Barrier,
    DmaCopy,
    DpuKind,
    DpuOp,
    LutKind,
    Mvm,
    Phase,
    Pool,
    PostOp,
    TokenRef,
    TokenScope,
    Unit,
)
from aipusim.isa.text import assemble, disassemble, format_task, format_tokens, parse_tokens

HAND_WRITTEN = """\
# a hand-written tasklist: fetch, multiply, add, sync
tasklist core=2

dma0 DmaCopy layer=conv1 phase=init src_pool=ddr src_addr=0x1000 dst_pool=l1 \
dst_addr=0x30_0000_0000 bytes=9408 signals=L0   # weights in
mvm Mvm layer=conv1 tile=1 waits=L0 weight_set=0 in_addr=0 out_addr=4096 vectors=3136 \
rows_used=147 cols_used=64 post=requant_lut lut=relu signals=L1x2
2 dpu DpuOp layer="res add #1" kind=add in_addr0=0x100 in_addr1=0x200 out_addr=0x300 \
elements=802816 operands=2 waits=L1x2,G3
ctrl Barrier layer=sync barrier_id=7 core_mask=0b0101 signals=G3
"""


def _hand_written() -> str:
    # The backslash-newlines above only keep this file narrow: one task per line.
    return HAND_WRITTEN.replace("\\\n", "")


def test_hand_written_text_assembles() -> None:
    tl = assemble(_hand_written())
    assert tl.core_id == 2
    dma, mvm, dpu, barrier = tl.tasks
    assert dma == DmaCopy(
        unit=Unit.DMA0,
        layer="conv1",
        phase=Phase.INIT,
        src_pool=Pool.DDR,
        src_addr=0x1000,
        dst_pool=Pool.L1,
        dst_addr=0x3000000000,
        bytes=9408,
        signals=(TokenRef(TokenScope.LOCAL, 0),),
    )
    assert mvm == Mvm(
        unit=Unit.MVM,
        layer="conv1",
        tile=1,
        waits=(TokenRef(TokenScope.LOCAL, 0),),
        signals=(TokenRef(TokenScope.LOCAL, 1, 2),),
        weight_set=0,
        in_addr=0,
        out_addr=4096,
        vectors=3136,
        rows_used=147,
        cols_used=64,
        post=PostOp.REQUANT_LUT,
        lut=LutKind.RELU,
    )
    assert isinstance(dpu, DpuOp) and dpu.layer == "res add #1" and dpu.kind is DpuKind.ADD
    assert dpu.waits == (TokenRef(TokenScope.LOCAL, 1, 2), TokenRef(TokenScope.GLOBAL, 3))
    assert barrier == Barrier(
        unit=Unit.CTRL,
        layer="sync",
        barrier_id=7,
        core_mask=5,
        signals=(TokenRef(TokenScope.GLOBAL, 3),),
    )


def test_hand_written_roundtrip_is_byte_identical() -> None:
    tl = assemble(_hand_written())
    text = disassemble(tl)
    assert encode_tasklist(assemble(text)) == encode_tasklist(tl)
    assert disassemble(assemble(text)) == text


@given(tasklists())
@settings(max_examples=examples(80), deadline=None)
def test_roundtrip_random_tasklists(tl: Tasklist) -> None:
    text = disassemble(tl)
    back = assemble(text)
    assert back == tl
    assert encode_tasklist(back) == encode_tasklist(tl)


def test_format_task_is_readable() -> None:
    mvm = assemble(_hand_written()).tasks[1]
    line = format_task(mvm, 17)
    assert line.startswith("17 mvm    Mvm          layer=conv1 tile=1 frame_slot=0 phase=frame")
    assert "waits=L0 signals=L1x2" in line and "in_addr=0x0 out_addr=0x1000" in line
    assert format_tokens([TokenRef(TokenScope.GLOBAL, 0, 3)]) == "G0x3"
    assert parse_tokens("-", 1, "waits") == ()


def test_empty_tasklist_and_comments_only() -> None:
    assert assemble("# nothing\ntasklist core=0  # header\n\n") == Tasklist(0, [])
    assert assemble(disassemble(Tasklist(5, []))) == Tasklist(5, [])


def _error(body: str, lineno: int, match: str) -> None:
    text = "tasklist core=0\n" + body
    with pytest.raises(TasklistError, match=rf"^line {lineno}: {match}"):
        assemble(text)


@pytest.mark.parametrize(
    ("body", "lineno", "match"),
    [
        ("mvm Mvx\n", 2, r"task kind must be one of DmaCopy, .*, not 'Mvx'"),
        ("dpu Mvm\n", 2, r"unit of Mvm must be one of mvm, not dpu"),
        ("gpu Mvm\n", 2, r"unit must be one of mvm, wload, .*, not 'gpu'"),
        ("ctrl Barrier barrier_id=1\n", 2, r"Barrier needs field `core_mask`"),
        ("ctrl Barrier\n", 2, r"Barrier needs fields `barrier_id`, `core_mask`"),
        ("ctrl Barrier barrier_id=1 core_mask=1 colour=red\n", 2, r"Barrier has no field `colour`"),
        ("ctrl Barrier barrier_id=1 barrier_id=2 core_mask=1\n", 2, r"field `barrier_id` must be"),
        ("ctrl Barrier barrier_id=1 core_mask=256\n", 2, r"Barrier field `core_mask` must be an "),
        ("ctrl Barrier barrier_id=x core_mask=1\n", 2, r"Barrier field `barrier_id` must be an "),
        ("ctrl Barrier barrier_id=-1 core_mask=1\n", 2, r"Barrier field `barrier_id` must be an "),
        ("ctrl Barrier barrier_id=1 core_mask=1 tile=5000000000\n", 2, r".*`tile` must be an "),
        ("ctrl Barrier barrier_id=1 core_mask=1 phase=once\n", 2, r".*`phase` must be one of "),
        ("ctrl Barrier barrier_id=1 core_mask=1 waits=Q1\n", 2, r".*`waits` token must look"),
        ("ctrl Barrier barrier_id=1 core_mask=1 waits=L1,L2,L3,L4,L5\n", 2, r".*at most 4"),
        ("ctrl Barrier barrier_id=1 core_mask=1 waits=L70000\n", 2, r".*token index must be"),
        ("ctrl Barrier barrier_id=1 core_mask=1 signals=L1x0x\n", 2, r".*`signals` token must"),
        ('ctrl Barrier barrier_id=1 core_mask=1 layer="a\\q"\n', 2, r".*must be a JSON string"),
        ("\n\n1 ctrl Barrier barrier_id=1 core_mask=1\n", 4, r"task index must be 0"),
        ("ctrl Barrier barrier_id=1 core_mask=1 junk\n", 2, r"after the kind only field=value"),
        ("ctrl Barrier barrier_id=1 core_mask=1\nctrl\n", 3, r"a task line must be"),
        ('ctrl Barrier barrier_id=1 core_mask=1 layer=a"b\n', 2, r"column 39 must start"),
        ("tasklist core=1\n", 2, r"the `tasklist` line must appear once"),
    ],
)
def test_errors_name_the_line(body: str, lineno: int, match: str) -> None:
    _error(body, lineno, match)


def test_header_errors() -> None:
    with pytest.raises(TasklistError, match=r"^line 1: text must contain a `tasklist core=N`"):
        assemble("# empty\n")
    with pytest.raises(
        TasklistError, match=r"^line 2: the `tasklist core=N` line must come before"
    ):
        assemble("\nctrl Barrier barrier_id=1 core_mask=1\ntasklist core=0\n")
    with pytest.raises(TasklistError, match=r"^line 1: header must be `tasklist core=N`"):
        assemble("tasklist cores=1\n")
    with pytest.raises(TasklistError, match=r"^line 1: core must be an integer 0-65535, not 70000"):
        assemble("tasklist core=70000\n")


@pytest.mark.parametrize(
    ("post", "lut"), [(PostOp.REQUANT_ADD_LUT, "relu"), (PostOp.REQUANT_LUT_ADD, "silu")]
)
def test_residual_add_fields_roundtrip_byte_identical(post: PostOp, lut: str) -> None:
    line = (
        "mvm Mvm layer=res weight_set=1 in_addr=0x40 out_addr=0x800 vectors=49 rows_used=64 "
        f"cols_used=32 post={post.value} lut={lut} param_addr=0x1000 add_addr=0x2000 "
        "add_param_addr=0x1300 add_pitch=32 add_row_pitch=224\n"
    )
    tl = assemble("tasklist core=0\n" + line)
    (mvm,) = tl.tasks
    assert isinstance(mvm, Mvm) and mvm.post is post and mvm.lut is LutKind(lut)
    assert (mvm.add_addr, mvm.add_param_addr, mvm.add_pitch, mvm.add_row_pitch) == (
        0x2000,
        0x1300,
        32,
        224,
    )
    text = disassemble(tl)
    assert "add_addr=0x2000" in text and "add_row_pitch=224" in text
    assert encode_tasklist(assemble(text)) == encode_tasklist(tl)
    assert disassemble(assemble(text)) == text


def test_a_table_after_an_element_wise_op_roundtrips_byte_identical() -> None:
    line = (
        "dpu DpuOp layer=chain kind=mul in_addr0=0x0 in_addr1=0x400 out_addr=0x800 "
        "elements=1024 operands=2 lut=sigmoid param_addr=0x1000 lut_addr=0x1020\n"
    )
    tl = assemble("tasklist core=0\n" + line)
    (op,) = tl.tasks
    assert isinstance(op, DpuOp) and (op.kind, op.lut, op.lut_addr) == (
        DpuKind.MUL,
        LutKind.SIGMOID,
        0x1020,
    )
    text = disassemble(tl)
    assert "lut=sigmoid" in text and "lut_addr=0x1020" in text
    assert encode_tasklist(assemble(text)) == encode_tasklist(tl)
    assert disassemble(assemble(text)) == text
