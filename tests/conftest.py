"""Fixtures shared by every test folder."""

from __future__ import annotations

import pytest
from zoo_compiles import ZooCompiles


@pytest.fixture(scope="session")
def zoo_compiles(tmp_path_factory: pytest.TempPathFactory) -> ZooCompiles:
    """The session's shared zoo builds and compiles (read them, never write into them)."""
    return ZooCompiles(tmp_path_factory.mktemp("zoo-compiles"))
