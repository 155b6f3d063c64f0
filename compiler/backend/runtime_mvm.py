"""Schedule steps of an MVM layer with run-time weights (`attention`): per head, the second
operand is written from its L1 input tile into a weight set (a frame `WeightLoad`), then the
head's rows of the first operand stream through it.

A mixin of `schedule.ScheduleBuilder`: it shares the builder's weight-set state (`weights`,
least recently used first) with the constant-weight layers, and its tasks take part in the
same dependency and token derivation. Loads of the next head go to another weight set while
the current head computes (the array holds ``arch.mvm.weight_sets``); without
``imc_double_buffer_*`` a load also waits for the array to go idle, as for constant weights.
"""

from __future__ import annotations

import math
from typing import Any

from aipusim.isa.tasks import Mvm, PostOp, Unit, WeightLoad


class RuntimeMvmMixin:
    """`emit_runtime_mvm` and the weight-set claim it shares with constant weights."""

    weights: dict[int, Any]
    last_mvm: dict[int, int | None]
    cfg: Any
    arch: Any
    tiling_of: Any
    mapping_of: Any

    def claim_set(self, core: int, pinned: set[int]) -> int:
        """The least recently used weight set of ``core`` that the current tile does not
        still need (any, if all are pinned), marked as just used."""
        st = self.weights[core]
        s = next((x for x in st.lru if x not in pinned), st.lru[0])
        st.lru.remove(s)
        st.lru.append(s)
        return s

    def emit_runtime_mvm(
        self,
        core: int,
        layer: Any,
        heads: tuple[int, int],
        tile_no: int,
        in_addrs: list[int],
        out_addr: int,
        psum_addr: int | None,
        deps: set[int],
    ) -> list[int]:
        """WeightLoad + Mvm per head in [heads[0], heads[1]) and weight block; returns the
        compute steps. ``in_addrs``/``out_addr`` are the tile's L1 addresses (heads[0] at
        offset 0); the operands are head-major, so head h is at h * its size."""
        mm = layer.runtime
        imc = self.mapping_of(layer).whole  # one head's operand
        a_addr, b_addr = in_addrs
        # per-head strides; an operand broadcast over the heads (one matrix) has stride 0
        b_bytes = _stride(layer.in_bytes[1], mm.heads, mm.k * mm.n)
        a_bytes = _stride(layer.in_bytes[0], mm.heads, mm.m * mm.k)
        o_bytes = layer.out_bytes[0] // max(1, mm.heads)
        tiled = self.tiling_of(layer).tiles > 1
        double = (
            self.cfg.imc_double_buffer_pipeline if tiled else self.cfg.imc_double_buffer_sequential
        )
        vectors = max(1, math.ceil(mm.m / imc.icr))
        st = self.weights[core]
        computes: list[int] = []
        for i in range(heads[1] - heads[0]):
            pinned: set[int] = set()
            offset = 0
            for blk in imc.blocks:
                s = self.claim_set(core, pinned)
                pinned.add(s)
                wdeps = set(deps)
                if st.last_user[s] is not None:
                    wdeps.add(st.last_user[s])  # the set's previous operand has been used
                if not double and self.last_mvm.get(core) is not None:
                    wdeps.add(self.last_mvm[core])  # no free set while the array works
                load = self.add(  # type: ignore[attr-defined]
                    core,
                    Unit.WLOAD,
                    WeightLoad,
                    dict(
                        weight_set=s,
                        src_addr=b_addr + i * b_bytes + offset,
                        bytes=blk.weight_bytes,
                        rows_used=blk.rows_used,
                        cols_used=blk.cols_used,
                    ),
                    layer=layer.name,
                    tile=tile_no,
                    deps=wdeps,
                )
                st.holds[s] = (layer.name, "runtime", heads[0] + i, blk.row_block, blk.col_block)
                last_row = blk.row_block == imc.row_blocks - 1
                post = PostOp.REQUANT_LUT if layer.lut.value != "none" else PostOp.REQUANT
                target = out_addr + i * o_bytes if last_row or psum_addr is None else psum_addr
                sid = self.add(  # type: ignore[attr-defined]
                    core,
                    Unit.MVM,
                    Mvm,
                    dict(
                        weight_set=s,
                        in_addr=a_addr + i * a_bytes,
                        out_addr=target,
                        vectors=vectors,
                        rows_used=blk.rows_used,
                        cols_used=blk.cols_used,
                        icr=imc.icr,
                        accumulate=int(blk.row_block > 0),
                        post=post if last_row else PostOp.NONE,
                        lut=layer.lut,
                    ),
                    layer=layer.name,
                    tile=tile_no,
                    deps=deps | {load},
                )
                st.last_user[s] = sid
                self.last_mvm[core] = sid
                computes.append(sid)
                offset += blk.weight_bytes
        return computes


def _stride(total_bytes: int, heads: int, per_head_elements: int) -> int:
    """Bytes from one head's operand to the next: 0 when one matrix serves every head."""
    return total_bytes // heads if total_bytes >= heads * per_head_elements else 0


__all__ = ["RuntimeMvmMixin"]
