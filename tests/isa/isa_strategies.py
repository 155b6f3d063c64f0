"""Hypothesis strategies for tasks, built from the field metadata of every kind.

Nothing here names a kind or a field: a kind added to `aipusim.isa.tasks.KINDS` is covered
by every property test automatically.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from aipusim.isa.encoding import COMMON_FIELDS, kind_field_layouts
from aipusim.isa.tasklist import Tasklist
from aipusim.isa.tasks import KINDS, MAX_TOKEN_REFS, Phase, Task, TokenRef, TokenScope, Unit

_COMMON = {f.name: f for f in COMMON_FIELDS}
_LAYERS = st.one_of(
    st.sampled_from(["", "conv1", "/backbone/stage2/Conv_3", "layer with spaces", 'q"uote#']),
    st.text(max_size=12),
)


def _uint(name: str) -> st.SearchStrategy[int]:
    return st.integers(0, _COMMON[name].max_value)


def token_refs() -> st.SearchStrategy[tuple[TokenRef, ...]]:
    ref = st.builds(
        TokenRef,
        st.sampled_from(list(TokenScope)),
        _uint("waits[0].index"),
        _uint("waits[0].count"),
    )
    return st.lists(ref, max_size=MAX_TOKEN_REFS).map(tuple)


def _field_value(layout: Any) -> st.SearchStrategy[Any]:
    if layout.enum is not None:
        return st.sampled_from(list(layout.enum))
    # Bias towards the edges of the range, where width bugs live.
    top = layout.max_value
    return st.one_of(st.sampled_from([0, 1, top]), st.integers(0, top))


@st.composite
def tasks_of(draw: st.DrawFn, kind: type[Task], layers: st.SearchStrategy[str] = _LAYERS) -> Task:
    """A random valid task of ``kind``."""
    values: dict[str, Any] = {
        "unit": draw(st.sampled_from([u for u in Unit if u in kind.UNITS])),
        "layer": draw(layers),
        "tile": draw(_uint("tile")),
        "frame_slot": draw(_uint("frame_slot")),
        "phase": draw(st.sampled_from(list(Phase))),
        "waits": draw(token_refs()),
        "signals": draw(token_refs()),
    }
    for name, layout in kind_field_layouts(kind).items():
        values[name] = draw(_field_value(layout))
    return kind(**values)


def any_task(layers: st.SearchStrategy[str] = _LAYERS) -> st.SearchStrategy[Task]:
    """A random valid task of any kind."""
    return st.sampled_from(sorted(KINDS.values(), key=lambda k: k.OPCODE)).flatmap(
        lambda kind: tasks_of(kind, layers)
    )


def tasklists(max_tasks: int = 12) -> st.SearchStrategy[Tasklist]:
    # Few distinct layer names, so string-table reuse is exercised.
    layers = st.sampled_from(["a", "b", "layer c", ""])
    return st.builds(
        Tasklist,
        st.integers(0, 0xFFFF),
        st.lists(any_task(layers), max_size=max_tasks).map(tuple),
    )
