"""The hazard shadow kept per block where a block's bytes agree: against a plain per-byte
array under random writes and reads (runs across block edges, inside one block, whole
blocks, more distinct writers than the kernel reports)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from aipusim.simulator.functional.footprint import Access, merge
from aipusim.simulator.functional.hazards import BLOCK_SHIFT, Shadow

SIZE = 1 << (BLOCK_SHIFT + 3)  # eight blocks

run = st.tuples(st.integers(0, SIZE - 1), st.integers(1, SIZE)).map(
    lambda se: (se[0], min(SIZE, se[0] + se[1]))
)
step = st.tuples(st.booleans(), st.lists(run, min_size=1, max_size=80))


def access(runs: list[tuple[int, int]], write: bool) -> Access:
    s, e = merge(np.array([r[0] for r in runs]), np.array([r[1] for r in runs]))
    return Access(0, s, e, write)


def shadow() -> Shadow:
    return Shadow(SimpleNamespace(spaces=SimpleNamespace(count=1), data=[np.zeros(SIZE)]))


def expected(model: np.ndarray, acc: Access) -> list[tuple[int, int]]:
    """(node, first address) of every node over the runs, in address order."""
    seen: dict[int, int] = {}
    for s, e in zip(acc.starts.tolist(), acc.ends.tolist(), strict=True):
        for a in range(s, e):
            if model[a] >= 0:
                seen.setdefault(int(model[a]), a)
    return sorted(seen.items(), key=lambda kv: kv[1])


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(step, min_size=1, max_size=30))
def test_the_shadow_is_a_per_byte_array(steps: list[tuple[bool, list[tuple[int, int]]]]) -> None:
    sh, model = shadow(), np.full(SIZE, -1, np.int64)
    for node, (write, runs) in enumerate(steps):
        acc = access(runs, write)
        assert sorted(sh.distinct(acc), key=lambda kv: kv[1]) == expected(model, acc)
        if write:
            sh.fill(acc, node)
            for s, e in zip(acc.starts.tolist(), acc.ends.tolist(), strict=True):
                model[s:e] = node
        assert sh.values(0, 0, SIZE).tolist() == model.tolist()


def test_a_write_inside_one_block_keeps_the_rest_of_it() -> None:
    sh = shadow()
    sh.fill(access([(0, SIZE)], True), 3)
    sh.fill(access([(5, 7)], True), 8)
    assert sh.values(0, 3, 9).tolist() == [3, 3, 8, 8, 3, 3]
    assert sh.distinct(access([(0, SIZE)], False)) == [(3, 0), (8, 5)]
    sh.fill(access([(0, 1 << BLOCK_SHIFT)], True), 9)  # the whole block again: one value
    assert sh.distinct(access([(0, SIZE)], False)) == [(9, 0), (3, 1 << BLOCK_SHIFT)]


def test_more_writers_than_the_kernel_reports_fall_back_to_numpy() -> None:
    sh = shadow()
    for node in range(100):
        sh.fill(access([(node, node + 1)], True), node)
    found = sh.distinct(access([(0, SIZE)], False))
    assert sorted(found) == [(n, n) for n in range(100)]
