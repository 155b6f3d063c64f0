"""Parameter blocks: the float kinds' blocks read back as the kernels' parameters."""

from __future__ import annotations

import numpy as np
import pytest

from aipusim.isa import fp_kernels as FK
from aipusim.isa import params as P
from aipusim.isa.float18 import FloatFormat

FMT = FloatFormat(8, 9)


def _memory(block: np.ndarray, at: int) -> np.ndarray:
    mem = np.zeros(at + len(block) + 16, np.uint8)
    mem[at : at + len(block)] = block
    return mem


def test_layernorm_block_round_trips_and_runs_the_kernel() -> None:
    gamma = np.linspace(0.5, 1.5, 48)
    params = FK.layer_norm_params(FMT, 48, s_in=0.05, eps=1e-5, gamma=gamma, beta=gamma / 3,
                                  s_out=0.02)  # fmt: skip
    scalar = P.scalar_record(za=3, zo=-2)
    block = P.float_block("layernorm", FMT, scalar, params)
    assert len(block) == P.SCALAR.itemsize + 4 * (1 + 2 * 48)
    rec, back = P.read_float_block(_memory(block, 100), 100, "layernorm", FMT, n=48)
    assert int(rec["za"]) == 3 and int(rec["zo"]) == -2
    q = np.random.default_rng(2).integers(-128, 128, (5, 48)).astype(np.int8)
    want = FK.layer_norm_int(q, 3, params, -2, FMT)
    assert np.array_equal(FK.layer_norm_int(q, 3, back, -2, FMT), want)


def test_pow_block_holds_both_tables() -> None:
    params = FK.pow_params(FMT, 0.1, 4, 0.05, 0.2)
    block = P.float_block("pow", FMT, P.scalar_record(za=4), params)
    _, back = P.read_float_block(_memory(block, 0), 0, "pow", FMT)
    for name in ("log2", "exp2"):
        assert np.array_equal(back[name], params[name])
    assert back["b_scale"] == params["b_scale"] and back["out_scale"] == params["out_scale"]


def test_unknown_float_kind_is_named() -> None:
    with pytest.raises(KeyError, match="float kind must be one of layernorm, div, pow, not 'add'"):
        P.float_block("add", FMT, P.scalar_record(), {})
