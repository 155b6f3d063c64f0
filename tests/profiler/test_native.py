"""The profiler's compiled kernels (`profiler/_native.c`, the project's one C module) against
their numpy twins: the scan (`aipusim.profiler.scan.numpy_classify_lines`) finds the same
lines, kinds and values on canonical, damaged and random lines; the exclusive time
(`aipusim.profiler.exclusive`) is the same on random and synthetic tasks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from aipusim.isa.trace_schema import COLUMNS, LEVELS, Tag, format_line
from aipusim.profiler import critical, exclusive, scan
from aipusim.profiler.native import NATIVE
from aipusim.profiler.synth import write_synthetic_trace


def _strings(column: object) -> list[str]:
    if isinstance(column, scan.Encoded):
        off, chars = column.offsets, column.chars.tobytes()
        names = [chars[off[i] : off[i + 1]].decode() for i in range(len(off) - 1)]
        # distinct values in order of first appearance, as Arrow's dictionary_encode
        assert names == list(dict.fromkeys(names[c] for c in column.codes.tolist()))
        return [names[c] for c in column.codes.tolist()]
    off, chars = column[0], column[1].tobytes()
    return [chars[off[i] : off[i + 1]].decode() for i in range(len(off) - 1)]


def _rows(column: object) -> int:
    return len(column) if isinstance(column, np.ndarray) else len(column[0]) - 1


def _same(text: bytes) -> None:
    compiled = scan.classify_lines(text)
    reference = scan.numpy_classify_lines(np.frombuffer(text, dtype=np.uint8))
    assert compiled.ends.tolist() == reference.ends.tolist()
    assert compiled.kinds.tolist() == reference.kinds.tolist()
    # the numpy scan may list a tag whose lines all proved not canonical, with no rows
    listed = {tag for tag, cols in reference.columns.items() if _rows(cols[0])}
    assert compiled.columns.keys() == listed
    for tag in listed:
        cols = reference.columns[tag]
        for (name, _), mine, theirs in zip(COLUMNS[tag], compiled.columns[tag], cols, strict=True):
            if isinstance(theirs, np.ndarray):
                assert mine.tolist() == theirs.tolist(), (tag, name)
            else:
                assert _strings(mine) == _strings(theirs), (tag, name)


def test_the_compiled_scanner_is_built() -> None:
    # optional in setup.py (an install without a C compiler still works, on the numpy scan),
    # so a missing build would only show as a slower profiler: say so here
    assert NATIVE is not None, "profiler/_native.c is not built: pip install -e . again"


def test_synthetic_trace(tmp_path) -> None:
    path = tmp_path / "s.trace"
    write_synthetic_trace(path, frames=6, cores=2)
    _same(path.read_bytes().split(b"\n", 1)[1])


ROW = {
    "frame": 3,
    "inst": 0,
    "start": 5,
    "end": 9,
    "t": 7,
    "core": 1,
    "layer": "conv1",
    "op": "Conv",
    "macs": 12,
    "unit": "mvm",
    "task": 4,
    "tile": 0,
    "src": "ddr",
    "dst": "l1",
    "bytes": 64,
    "token": 2,
    "scope": "local",
}

DAMAGED = [
    b"[K]  core=1 unit=mvm frame=3 layer=conv1 task=4 tile=0 start=5 end=9 macs=12\n",
    b"[K]  core=1 unit=mvm frame=3 layer=conv1 task=4 tile=0 start=5 end=9\n",  # a field short
    b"[K]  core=1 unit=mvm frame=3 layer=conv1 task=4 tile=0 start=5 end=9 macs=12 x=1\n",
    b"[K] core=1 unit=mvm frame=3 layer=conv1 task=4 tile=0 start=5 end=9 macs=12\n",
    b"[K]  unit=mvm core=1 frame=3 layer=conv1 task=4 tile=0 start=5 end=9 macs=12\n",
    b"[K]  core=-0 unit= frame=-3 layer=a task=004 tile=0 start=5 end=9 macs=0\n",
    b"[K]  core=1 unit=mvm frame=3 layer=c task=4 tile=0 start=5 end=9 macs=1234567890123456789\n",
    b"[K]  core=1 unit=mvm frame=3 layer=c task=4 tile=0 start=5 end=9 macs=-123456789012345678\n",
    b"[K]  core=1 unit=mvm frame=3 layer=c=1 task=4 tile=0 start=5 end=9 macs=12\n",
    b"[K]  core=1 unit=mvm frame=3 layer=\xc3\xa9 task=4 tile=0 start=5 end=9 macs=12\n",
    b"[K]  core=1 unit=mvm frame=3 layer=conv1 task=4 tile=0 start=5 end=9 macs=12\r\n",
    b"[K]  core=1 unit=mvm frame=3 layer=conv1 task=4 tile=0 start=5 end=9 macs=-\n",
    b"[K]  core=1 unit=mvm frame=3 layer=conv1 task=4 tile=0 start=5 end=9 macs=\n",
    b"[K]  core=1  unit=mvm frame=3 layer=conv1 task=4 tile=0 start=5 end=9 macs=12\n",
    b"[K]  cor=1 unit=mvm frame=3 layer=conv1 task=4 tile=0 start=5 end=9 macs=12\n",
    b"[PB] t=1 core=0 frame=0 layer=x op=Conv\n",  # the optional macs left out
    b"[PB] t=1 core=0 frame=0 layer=x op=Conv macs=-1\n",
    b"[B]  frame=0 inst=0 start=0\n",
    b"[B]\n",
    b"[K\n",
    b"\n",
    b"# comment\n",
    b"[Z]  a=1\n",
    b"garbage\n",
    b"[T]  \n",
    b"[M]  core=0 unit=dma0 frame=0 layer=l\x7f task=1 src=ddr dst=l1 bytes=1 start=0 end=1\n",
]


def test_hand_made_lines() -> None:
    _same(b"".join(DAMAGED))
    for line in DAMAGED:
        _same(line)
    _same(b"")
    _same(b"[B]  frame=0 inst=0 start=0 end=1")  # no newline: not a line


_TEXT = st.text(alphabet=st.sampled_from("ab=- 09[]K\x7f\té"), min_size=0, max_size=6)


@st.composite
def _lines(draw: st.DrawFn) -> bytes:
    out = []
    for _ in range(draw(st.integers(1, 12))):
        tag = draw(st.sampled_from(LEVELS))
        values = dict(ROW)
        for name, _ in COLUMNS[tag]:
            if draw(st.integers(0, 4)) == 0:
                values[name] = draw(st.one_of(st.integers(-(10**19), 10**19), _TEXT))
        line = format_line(tag, values).encode()
        if draw(st.integers(0, 5)) == 0:  # cut or spliced anywhere
            at = draw(st.integers(0, len(line)))
            line = line[:at] + draw(st.binary(max_size=3)) + line[at:]
        out.append(line + b"\n")
    return b"".join(out)


@settings(max_examples=examples(300), deadline=None)
@given(_lines())
def test_random_lines(text: bytes) -> None:
    _same(text)


def test_kinds_of_a_tag() -> None:
    line = format_line(Tag.K, ROW).encode() + b"\n"
    s = scan.classify_lines(line + b"[K]  x\n")
    assert s.kinds.tolist() == [LEVELS.index(Tag.K), scan.NONCANONICAL + LEVELS.index(Tag.K)]


@pytest.mark.parametrize("tag", LEVELS)
def test_every_tag(tag: Tag) -> None:
    _same((format_line(tag, ROW) + "\n").encode() * 3)


def _exclusive_both(*arrays: np.ndarray) -> None:
    compiled = exclusive.exclusive_cycles(*arrays)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(exclusive, "NATIVE", None)
        reference = exclusive.exclusive_cycles(*arrays)
    assert compiled.dtype == reference.dtype == np.float64
    assert compiled.tolist() == reference.tolist()


@settings(max_examples=examples(300), deadline=None)
@given(st.data())
def test_exclusive_random_tasks(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 40))

    def ints(lo: int, hi: int) -> np.ndarray:
        return np.array(data.draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n)))

    start = ints(-5, 60)
    end = start + ints(0, 25)  # tasks of one queue may overlap: the later start wins
    _exclusive_both(ints(0, 2), ints(0, 3), ints(-1, 6), start, end)


def test_exclusive_synthetic_trace(tmp_path) -> None:
    from aipusim.profiler import lean

    path = tmp_path / "s.trace"
    write_synthetic_trace(path, frames=12, cores=4)
    t = lean._tasks(lean.read_trace(path))
    priority = (t.frame + 1) * (int(t.task.max()) + 1) + t.task
    _exclusive_both(t.core, t.unit.codes, priority, t.start, t.end)
    # far-apart times and priorities: the numpy twin's other branches
    _exclusive_both(t.core, t.unit.codes, priority << 40, t.start << 40, t.end << 40)


@settings(max_examples=examples(300), deadline=None)
@given(st.data())
def test_match_random_keys(data: st.DataObject) -> None:
    def ints(k: int, lo: int, hi: int) -> np.ndarray:
        drawn = data.draw(st.lists(st.integers(lo, hi), min_size=k, max_size=k))
        return np.array(drawn, dtype=np.int64)

    n = data.draw(st.integers(1, 40))  # predecessors asks only when there are tasks
    m = data.draw(st.integers(0, 40))
    args = (ints(n, -3, 8), ints(n, 0, 3), ints(m, -4, 9))
    compiled = critical._match(*args)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(critical, "NATIVE", None)
        reference = critical._match(*args)
    assert compiled.tolist() == reference.tolist()


def test_predecessors_synthetic_trace(tmp_path) -> None:
    from aipusim.profiler import lean

    path = tmp_path / "s.trace"
    write_synthetic_trace(path, frames=12, cores=4)
    t = lean._tasks(lean.read_trace(path))
    for latency in (0, 3, 40):
        args = (t.core, t.unit.codes, t.start, t.end, t.core // 2, latency)
        compiled = critical.predecessors(*args)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(critical, "NATIVE", None)
            reference = critical.predecessors(*args)
        assert compiled.tolist() == reference.tolist()
        assert (compiled >= 0).any()
