"""Code and docs cite documents in the repository: every ``docs/architecture.md §N`` names a
section that exists, and nothing cites the design file outside the repository or the old
numbered design notes (their content is in docs/architecture.md, the package READMEs and
docs/decisions.md)."""

from __future__ import annotations

import re
from pathlib import Path

from import_graph import FOLDERS, ROOT

ARCHITECTURE = ROOT / "docs" / "architecture.md"
#: ``docs/architecture.md §5``, ``[docs/architecture.md](...) §6, §8.2``, ``architecture.md §3.4``
CITATION = re.compile(r"architecture\.md(?:\]\([^)]*\))?((?:,? ?§\d+(?:\.\d+)?(?:[-/]§?\d+)?)+)")
SECTION = re.compile(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", re.MULTILINE)
STALE = re.compile(r"DESIGN\.md|design-notes\.md|design notes? \d", re.IGNORECASE)


def _sources() -> list[Path]:
    folders = [ROOT / f for f in (*FOLDERS, "tests", "docs", "reports")]
    files = [p for d in folders for p in d.rglob("*") if p.suffix in (".py", ".md", ".toml")]
    return sorted({*files, ROOT / "pyproject.toml"} - {Path(__file__)})


def test_every_cited_architecture_section_exists() -> None:
    sections = set(SECTION.findall(ARCHITECTURE.read_text(encoding="utf-8")))
    missing = []
    for path in _sources():
        for match in CITATION.finditer(path.read_text(encoding="utf-8")):
            for number in re.findall(r"\d+(?:\.\d+)?", match.group(1)):
                if number not in sections:
                    missing.append(f"{path.relative_to(ROOT)}: §{number}")
    assert missing == [], f"sections of docs/architecture.md that do not exist: {missing}"


def test_nothing_cites_documents_outside_the_repository() -> None:
    stale = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in _sources()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if STALE.search(line)
    ]
    assert stale == [], f"cite docs/architecture.md or docs/decisions.md instead: {stale}"
