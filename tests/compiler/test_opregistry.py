"""The op registry: it covers every op the AIPU runs, and compiler/README.md shows it."""

from __future__ import annotations

from aipusim.compiler.backend.lower.units import ALIAS_OPS
from aipusim.compiler.ir import AIPU_OPS, MVM_OPS, Op
from aipusim.compiler.opregistry import KIND_SCHEMES, README, REGISTRY, main, readme_with_table


def test_every_aipu_op_is_registered_with_its_lowering_unit() -> None:
    assert {s.op for s in REGISTRY.values()} == AIPU_OPS | {Op.EINSUM}
    for s in REGISTRY.values():
        assert set(s.kinds) <= set(KIND_SCHEMES), s.op
        if s.op in MVM_OPS:
            assert s.unit == "MVM"
        if s.op in ALIAS_OPS:
            assert s.unit == "none (a view)"


def test_the_readme_table_is_current() -> None:
    text = README.read_text(encoding="utf-8")
    assert readme_with_table(text) == text, (
        "compiler/README.md is stale: run python -m aipusim.compiler.opregistry --write"
    )
    assert main([]) == 0
