"""Every source folder ships: a sub-folder with Python code must be a listed package."""

from __future__ import annotations

import tomllib

from import_graph import FOLDERS, ROOT

# The top-level folders and the import names they are installed as (one table).
TOP = FOLDERS


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
