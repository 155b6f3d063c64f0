"""Cooperative mode: where the cores still meet at a barrier, and where tokens order them.

A cooperative frame's steps depend on steps of other cores: a halo row a neighbour
multicasts, a part of a tensor in L2 another core wrote, a buffer whose bytes another core
still reads (write-after-read), a weight multicast. Each such dependency either becomes a
global token wait (one token per (producing core, unit, consuming core, unit) pair, and the
instance has ``arch.tokens.global_count`` of them) or is ordered by a barrier of every core
between the two steps' layer groups. A dependency of group ``lo`` on group ``hi`` is an
interval: a barrier after any group ``b`` with ``lo <= b < hi`` orders it; one within a
group (``lo >= hi``) must be a token.

`choose_barriers` keeps the pairs whose dependencies would force the most barriers as
tokens, as many as the instance has, and puts the fewest barriers that order every other
pair's dependencies (the intervals' stabbing set, by earliest end). It counts every
cross-core dependency, also those another token implies (`tokens.assign_tokens` drops
them): so no pair outside the chosen ones ever needs a token, whatever the token pass
drops.

>>> spans = {"a": {(0, 1), (2, 3)}, "b": {(0, 2)}, "c": {(1, 1)}}
>>> sorted(choose_barriers(spans, 2))
[1]
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence

from aipusim.compiler.backend.schedule.steps import Step

Pair = Hashable


def stabbing(intervals: Iterable[tuple[int, int]]) -> list[int]:
    """The fewest points ``b`` such that every interval ``(lo, hi)`` has one with
    ``lo <= b < hi`` (intervals with ``lo >= hi`` are left out): greedy by earliest end.

    >>> stabbing([(0, 3), (1, 2), (2, 4), (5, 6)])
    [1, 3, 5]
    """
    points: list[int] = []
    for lo, hi in sorted((iv for iv in intervals if iv[0] < iv[1]), key=lambda iv: iv[1]):
        if not points or points[-1] < lo:
            points.append(hi - 1)
    return points


Ranked = tuple[list[Pair], list[Pair]]


def rank_pairs(spans: Mapping[Pair, set[tuple[int, int]]]) -> Ranked:
    """(the pairs with a dependency inside a group, which are tokens whatever it costs;
    the rest, ranked by the barriers they alone would force, most first, ties by the
    pair's order): what `choose_barriers` keeps as tokens, first to last, whatever the
    budget."""
    forced = [p for p, ivs in spans.items() if any(lo >= hi for lo, hi in ivs)]
    rest = sorted(
        (p for p in spans if p not in forced),
        key=lambda p: (-len(stabbing(spans[p])), str(p)),
    )
    return forced, rest


def choose_barriers(
    spans: Mapping[Pair, set[tuple[int, int]]], budget: int, ranked: Ranked | None = None
) -> frozenset[int]:
    """The groups after which the cores meet at a barrier, given each token pair's
    dependency intervals ``spans`` and ``budget`` global tokens (module docstring): the
    pairs of `rank_pairs` (``ranked``, when the caller tries several budgets) are tokens
    in their order while the budget lasts."""
    forced, rest = ranked if ranked is not None else rank_pairs(spans)
    kept = set(forced) | set(rest[: max(0, budget - len(forced))])
    return frozenset(stabbing(iv for p in spans if p not in kept for iv in spans[p]))


def cross_core_spans(steps: Sequence[Step]) -> dict[Pair, set[tuple[int, int]]]:
    """(producing core, unit, consuming core, unit) -> the (producer's group, consumer's
    group) of every dependency between two cores of one phase that no barrier orders yet.
    INIT has no barrier (its steps share one group), so its dependencies between cores
    (another core's fetch of weights core 0 copied into L2) are always tokens."""
    spans: dict[Pair, set[tuple[int, int]]] = defaultdict(set)
    for step in steps:
        for d in step.deps:
            dep = steps[d]
            if dep.core != step.core and dep.phase is step.phase and dep.epoch == step.epoch:
                spans[(dep.core, dep.unit, step.core, step.unit)].add((dep.group, step.group))
    return dict(spans)


__all__ = ["Ranked", "choose_barriers", "cross_core_spans", "rank_pairs", "stabbing"]
