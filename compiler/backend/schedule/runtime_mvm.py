"""Schedule steps of an MVM layer with run-time weights (`attention`): per head, the second
operand is written from its L1 input tile into a weight set (a frame `WeightLoad`), then the
head's rows of the first operand stream through it.

It takes its weight sets from the build's `weights.WeightStreamer` (least recently used
first), as the constant-weight layers do, and its tasks take part in the
same dependency and token derivation. Loads of the next head go to another weight set while
the current head computes (the array holds ``arch.mvm.weight_sets``); without
``imc_double_buffer_*`` a load also waits for the array to go idle, as for constant weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aipusim.compiler.backend.lower.attention import operand_block
from aipusim.compiler.backend.lower.layer import ConvGeometry
from aipusim.compiler.backend.schedule.inputs import ScheduleInputs
from aipusim.compiler.backend.schedule.steps import StepLog
from aipusim.compiler.backend.schedule.task_fields import Place, mvm_fields
from aipusim.compiler.backend.schedule.weights import WeightStreamer
from aipusim.compiler.backend.tile.regions import RowWindow
from aipusim.isa import params as P
from aipusim.isa.tasks import LutKind, Mvm, Unit, WeightLoad


def emit_runtime_mvm(
    inp: ScheduleInputs,
    log: StepLog,
    wts: WeightStreamer,
    core: int,
    layer: Any,
    heads: tuple[int, int],
    tile_no: int,
    places: RuntimePlaces,
    deps: set[int],
) -> list[int]:
    """WeightLoad + Mvm per head in [heads[0], heads[1]) and weight block; returns the
    compute steps. ``places``: where the tile's operands lie (heads[0] first)."""
    mm = layer.runtime
    imc = inp.mapping_of(layer).whole  # one head's operand
    tiled = inp.tiling_of(layer).tiles > 1
    double = inp.cfg.imc_double_buffer_pipeline if tiled else inp.cfg.imc_double_buffer_sequential
    one = ConvGeometry(mm.k, mm.n, 1, 1, 1, 1, 1, mm.m, 1, mm.m)
    a_step, b_step, o_step = (
        min(s, MAX_CHAN_PITCH) for s in (places.a_pitch, places.b_pitch, places.out_pitch)
    )
    st = wts.weights[core]
    computes: list[int] = []
    for i in range(heads[1] - heads[0]):
        pinned: set[int] = set()
        a = places.a + i * places.a_head
        b = places.b + i * places.b_head
        out = places.out + i * places.out_head
        for blk in imc.blocks:
            s = wts.claim_set(core, pinned)
            pinned.add(s)
            wdeps = set(deps)
            if st.last_user[s] is not None:
                wdeps.add(st.last_user[s])  # the set's previous operand has been used
            if not double and wts.last_mvm.get(core) is not None:
                wdeps.add(wts.last_mvm[core])  # no free set while the array works
            src = operand_block(mm, imc, blk, inp.arch.mvm.rows)
            load = log.add(
                core,
                Unit.WLOAD,
                WeightLoad,
                dict(
                    weight_set=s,
                    src_addr=b + (src.row * mm.n + src.col) * b_step,
                    bytes=blk.weight_bytes,
                    rows_used=blk.rows_used,
                    cols_used=blk.cols_used,
                    src_rows=src.rows,
                    src_pitch=b_step,
                    copies=src.copies,
                    col_sums=1,
                    src_row_pitch=mm.n * b_step,
                    copy_rows=src.copy_rows,
                ),
                layer=layer.name,
                tile=tile_no,
                deps=wdeps,
            )
            st.holds[s] = (layer.name, "runtime", heads[0] + i, blk.row_block, blk.col_block)
            first = blk.col_block * imc.active_cols  # the block's first output column
            fields = mvm_fields(
                one, imc, blk, rows=1, window=RowWindow(0, 1, 0),
                src=Place(a, mm.k * a_step, mm.m * mm.k * a_step),
                dst=Place(out + first * o_step, mm.n * o_step, mm.m * mm.n * o_step),
                array_rows=inp.arch.mvm.rows, fill=places.zero_a,
                psum_addr=places.psum, param_addr=places.params + first * P.CHANNEL.itemsize,
                lut_addr=places.lut, lut=places.lut_kind, weight_set=s,
            )  # fmt: skip
            fields.update(in_chan_pitch=a_step, out_chan_pitch=o_step, offset_fill=1)
            sid = log.add(
                core,
                Unit.MVM,
                Mvm,
                fields,
                layer=layer.name,
                tile=tile_no,
                deps=deps | {load},
            )
            st.last_user[s] = sid
            wts.last_mvm[core] = sid
            computes.append(sid)
    return computes


#: The widest channel pitch an `Mvm` holds (its 8-bit fields); more heads stay timed only.
MAX_CHAN_PITCH = 255


@dataclass(frozen=True)
class RuntimePlaces:
    """L1 addresses of a run-time MVM tile: its first head's A, B and output, the bytes
    from one head to the next of each (0: B shared by every head), the bytes between a
    head's neighbouring elements of each (the heads in the tile where they are interleaved,
    1 byte where each head's matrix is contiguous), the partial sums, the requantize
    records and table (``lut_kind``); ``zero_a``: A's zero point."""

    a: int
    b: int
    out: int
    a_head: int
    b_head: int
    out_head: int
    a_pitch: int
    b_pitch: int
    out_pitch: int
    psum: int
    params: int
    lut: int
    lut_kind: LutKind
    zero_a: int


__all__ = ["MAX_CHAN_PITCH", "RuntimePlaces", "emit_runtime_mvm"]
