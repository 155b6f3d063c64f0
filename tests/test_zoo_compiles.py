"""The shared folder of the xdist workers (`zoo_compiles.once`): an entry is made once, by
whichever process asks first, and a half-made one is made again."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from zoo_compiles import once


def _make_slowly(folder: Path) -> None:
    import os
    import time

    (folder / f"made-by-{os.getpid()}").touch()
    time.sleep(0.2)  # long enough for the other process to be waiting on the lock


def _ask(folder: str) -> None:
    once(Path(folder), _make_slowly)


def test_two_processes_asking_at_once_make_the_entry_once(tmp_path: Path) -> None:
    entry = tmp_path / "entry"
    context = multiprocessing.get_context("fork")  # no re-import: quick
    procs = [context.Process(target=_ask, args=(str(entry),)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert len(list(entry.glob("made-by-*"))) == 1


def test_a_half_made_entry_is_made_again(tmp_path: Path) -> None:
    entry = tmp_path / "entry"

    def fail(folder: Path) -> None:
        (folder / "partial").touch()
        raise RuntimeError("the compile failed")

    with pytest.raises(RuntimeError, match="the compile failed"):
        once(entry, fail)
    calls = []
    assert once(entry, lambda folder: calls.append(folder)) == entry
    assert once(entry, lambda folder: calls.append(folder)) == entry
    assert calls == [entry]
    assert not (entry / "partial").exists()
