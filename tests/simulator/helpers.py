"""Small builders for hand-written programs in the simulator tests."""

from __future__ import annotations

from aipusim.isa.program import Instance, MulticoreMode, Program
from aipusim.isa.tasks import (
    DmaCopy,
    Mvm,
    Pool,
    Task,
    TokenRef,
    TokenScope,
    Unit,
)


def program(
    cores: int = 1,
    mode: MulticoreMode = MulticoreMode.COOPERATIVE,
    *,
    input_bytes: int = 0,
    output_bytes: int = 0,
    resources: float = 1.0,
    **knobs: object,
) -> Program:
    inst = Instance(
        tuple(range(cores)),
        tuple(f"core{c}.tasklist" for c in range(cores)),
        input_bytes,
        output_bytes,
    )
    return Program(
        model="hand",
        multicore_mode=mode,
        aipu_cores_used=cores,
        resources_used=resources,
        instance=inst,
        **knobs,  # type: ignore[arg-type]
    )


def tok(index: int, count: int = 1, scope: TokenScope = TokenScope.LOCAL) -> TokenRef:
    return TokenRef(scope, index, count)


def gtok(index: int, count: int = 1) -> TokenRef:
    return TokenRef(TokenScope.GLOBAL, index, count)


def mvm(vectors: int, cols: int = 512, **kw: object) -> Task:
    return Mvm(
        unit=Unit.MVM,
        weight_set=kw.pop("weight_set", 0),  # type: ignore[arg-type]
        in_addr=0,
        out_addr=0,
        vectors=vectors,
        rows_used=512,
        cols_used=cols,
        **kw,  # type: ignore[arg-type]
    )


def dma(unit: Unit, nbytes: int, src: Pool = Pool.DDR, dst: Pool = Pool.L1, **kw: object) -> Task:
    return DmaCopy(
        unit=unit, src_pool=src, src_addr=0, dst_pool=dst, dst_addr=0, bytes=nbytes, **kw
    )  # type: ignore[arg-type]
