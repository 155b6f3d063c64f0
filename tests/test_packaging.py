"""Every source folder ships: a sub-folder with Python code must be a listed package."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = {
    "aipusim": "aipusim",
    "base": "aipusim.base",
    "arch": "aipusim.arch",
    "isa": "aipusim.isa",
    "compiler": "aipusim.compiler",
    "simulator": "aipusim.simulator",
    "profiler": "aipusim.profiler",
}


def test_every_code_folder_is_a_listed_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for folder, package in TOP.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((package, *rel)))
    assert found == listed


def test_package_dirs_map_the_top_level_folders() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {package: folder for folder, package in TOP.items()}
