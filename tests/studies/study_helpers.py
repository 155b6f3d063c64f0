"""Readers of a study's README for the tests (pytest puts this folder on ``sys.path``)."""

from __future__ import annotations

import re
from pathlib import Path

from aipusim.studies import StudyResult

_DECIMAL = re.compile(r"\d+\.\d+")


def readme_of(result: StudyResult) -> str:
    return (Path(result.output_dir) / "README.md").read_text()


def table_cells(readme: str) -> set[str]:
    """Every cell text of every Markdown table in ``readme``."""
    cells: set[str] = set()
    for line in readme.splitlines():
        if line.startswith("|") and not line.startswith("|:"):
            cells.update(c.strip() for c in line.strip("|").split("|"))
    return cells


def numbers_in(text: str) -> list[str]:
    """The decimal numbers a statement quotes, as written."""
    return _DECIMAL.findall(text)


def assert_quoted_numbers_in_tables(result: StudyResult) -> None:
    """Every decimal number of every conclusion is a cell of one of the README's tables."""
    readme = readme_of(result)
    cells = table_cells(readme)
    quoted = [(c, n) for c in result.conclusions for n in numbers_in(c)]
    assert quoted, "the conclusions quote no numbers"
    missing = [(c, n) for c, n in quoted if n not in cells]
    assert not missing, missing
    for line in result.conclusions:
        assert line in readme
