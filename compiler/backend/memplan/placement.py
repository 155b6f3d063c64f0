"""Where the frame's tensors went and why: the placement part of the compile report.

Per layer (`layer_placement`): the bytes of the tensors it writes, by pool; the ones left
below L1 (spills) and the tensors it reads back from L2 or DDR (refills), with the reason.
For the whole model (`placement_summary`): the activation buffers per pool and one line
for the compile log and ``aipusim compile``.

The reasons are read off the finished memory plan (`memplan.MemPlan`): a buffer the host
transfers or another core reads may only live in L2/DDR; with ``enable_buffer_promotion``
off a buffer stays in its home pool; otherwise it stayed below L1 because L1 had no room
while it was live (the fewest free bytes at one of its steps are named; when they are
enough, what lacked was one free range that long).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from aipusim.compiler.backend.common.target import Knobs
from aipusim.compiler.backend.lower.layer import LayerPlan, LayerUnit
from aipusim.compiler.backend.memplan.buffers import Buffer, BufKind, MemPlan
from aipusim.isa.tasks import Pool

#: Buffers that hold a frame's tensors (the placement report covers these).
FRAME_KINDS = frozenset({BufKind.INPUT, BufKind.OUTPUT, BufKind.ACTIVATION})


class Spill(StrEnum):
    """Why a frame tensor lies in L2 or DDR rather than in its core's L1."""

    HOST_IO = "the host transfers it over PCIe, which reaches L2 and DDR only"
    SHARED = "another core reads it, which reaches L2 and DDR only"
    PROMOTION_OFF = "enable_buffer_promotion is off: it stays in its home pool"
    L1_FULL = "L1 has no room while it is live"


def l1_free_bytes(plan: MemPlan, buf: Buffer) -> int:
    """The fewest bytes of ``buf``'s core's L1 free at one step of ``buf``'s liveness."""
    st = plan.pools.get((Pool.L1, buf.core))
    if st is None:
        return 0
    live = [b for b in st.placed if b.start <= buf.end and buf.start <= b.end and b is not buf]
    return min(
        st.capacity - sum(b.size_bytes for b in live if b.start <= step <= b.end)
        for step in range(buf.start, buf.end + 1)
    )


def spill_cause(plan: MemPlan, buf: Buffer, knobs: Knobs) -> tuple[Spill, str]:
    """Why frame buffer ``buf`` (not in L1) lies where it does, and the detail."""
    if Pool.L1 not in buf.allowed:
        return (Spill.HOST_IO if buf.kind is not BufKind.ACTIVATION else Spill.SHARED), ""
    if not knobs.enable_buffer_promotion:
        return Spill.PROMOTION_OFF, ""
    free = l1_free_bytes(plan, buf)
    steps = f"steps {buf.start}..{buf.end}"
    if free < buf.size_bytes:
        return Spill.L1_FULL, f"{free} bytes free at its fullest step ({steps})"
    return Spill.L1_FULL, f"no free range of its bytes through {steps}"


def spill_reason(plan: MemPlan, buf: Buffer, knobs: Knobs) -> str:
    """`spill_cause` as one sentence."""
    cause, detail = spill_cause(plan, buf, knobs)
    return f"{cause}: {detail}" if detail else str(cause)


def _copies(plan: MemPlan, tensors: Iterable[str]) -> list[tuple[str, Buffer]]:
    """(tensor, buffer) of every core's copy of ``tensors``, in order, each buffer once."""
    wanted = list(dict.fromkeys(tensors))
    out, seen = [], set()
    for tensor in wanted:
        for (_, name), bname in sorted(plan.tensor_buffer.items()):
            if name == tensor and bname not in seen:
                seen.add(bname)
                out.append((tensor, plan.buffers[bname]))
    return out


def layer_placement(plan: MemPlan, layer: LayerPlan, knobs: Knobs) -> dict[str, Any]:
    """The placement of the tensors layer ``layer`` writes (bytes per pool, spills with
    their reason) and reads back from L2/DDR (refills), every core's copy."""
    written: dict[str, int] = {p.value: 0 for p in (Pool.L1, Pool.L2, Pool.DDR)}
    spills, refills = [], []
    for tensor, buf in _copies(plan, layer.outputs):
        if buf.layer != layer.name or buf.kind not in FRAME_KINDS or buf.pool is None:
            continue  # an alias of another layer's tensor (a Reshape), or fused away
        written[buf.pool.value] += buf.tensor_bytes
        if buf.pool is not Pool.L1:
            spills.append(_entry(tensor, buf) | {"reason": spill_reason(plan, buf, knobs)})
    if layer.unit is not LayerUnit.ALIAS:
        for tensor, buf in _copies(plan, layer.inputs):
            if buf.kind in FRAME_KINDS and buf.pool is not None and buf.pool is not Pool.L1:
                refills.append(_entry(tensor, buf) | {"reason": spill_reason(plan, buf, knobs)})
    return {"written_bytes": written, "spills": spills, "refills": refills}


def _entry(tensor: str, buf: Buffer) -> dict[str, Any]:
    assert buf.pool is not None
    return {"tensor": tensor, "core": buf.core, "pool": buf.pool.value, "bytes": buf.tensor_bytes}


def placement_summary(plan: MemPlan, knobs: Knobs) -> dict[str, Any]:
    """Activation buffers (every core's copy) per pool, the spills by reason, and a line.

    The line reads, e.g., ``placement: activation buffers 220 in L1 (45,266,944 bytes), 0
    in L2, 0 in DDR``, with ``; spilled: N (reason)`` when some stayed below L1.
    """
    acts = [b for b in plan.buffers.values() if b.kind is BufKind.ACTIVATION]
    pools: dict[str, dict[str, int]] = {}
    for pool in (Pool.L1, Pool.L2, Pool.DDR):
        here = [b for b in acts if b.pool is pool]
        pools[pool.value] = {"buffers": len(here), "bytes": sum(b.size_bytes for b in here)}
    reasons: dict[str, int] = {}
    for b in acts:
        if b.pool is not Pool.L1:
            why = str(spill_cause(plan, b, knobs)[0])
            reasons[why] = reasons.get(why, 0) + 1
    parts = [
        f"{pools[p]['buffers']} in {p.upper()}"
        + (f" ({pools[p]['bytes']:,} bytes)" if pools[p]["bytes"] else "")
        for p in pools
    ]
    line = f"placement: activation buffers {', '.join(parts)}"
    if reasons:
        line += "; spilled: " + ", ".join(f"{n} ({why})" for why, n in sorted(reasons.items()))
    return {"activations": pools, "spill_reasons": reasons, "summary": line}


__all__ = [
    "FRAME_KINDS",
    "Spill",
    "l1_free_bytes",
    "layer_placement",
    "placement_summary",
    "spill_cause",
    "spill_reason",
]
