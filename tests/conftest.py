"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import settings
from hypothesis_budget import profile
from zoo_compiles import SHARED_ENV, ZooCompiles

#: `aipusim.compiler.quant.cache.DIR_ENV` (spelled out: conftest imports no compiler module;
#: tests/compiler/quant/test_cache.py checks that the two agree).
DIR_ENV = "AIPUSIM_CACHE_DIR"

#: The session's quantization cache folder (the user's own cache is never used): set before
#: any fixture compiles, so session-scoped compiles use it too.
_SESSION_CACHE = tempfile.mkdtemp(prefix="aipusim-test-cache-")
#: Set when this process made the workers' shared folder (and so removes it at the end).
_MADE_SHARED = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    os.environ[DIR_ENV] = _SESSION_CACHE
    # The controller (or a run without xdist) makes the folder its workers share zoo builds
    # and compiles in (`zoo_compiles`); the workers inherit it through the environment.
    # (A folder already named in the environment is used and left in place.)
    if not hasattr(config, "workerinput") and SHARED_ENV not in os.environ:
        os.environ[SHARED_ENV] = tempfile.mkdtemp(prefix="aipusim-test-shared-")
        config.stash[_MADE_SHARED] = True
    # `make test` draws a share of each property test's examples, `make test-slow` all.
    settings.load_profile(profile())


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_SESSION_CACHE, ignore_errors=True)
    if config.stash.get(_MADE_SHARED, False):
        shutil.rmtree(os.environ.pop(SHARED_ENV), ignore_errors=True)


@pytest.fixture(autouse=True)
def _private_quantization_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Each test starts with an empty quantization cache of its own (tests stay
    independent: none sees what another one calibrated)."""
    monkeypatch.setenv(DIR_ENV, str(tmp_path_factory.mktemp("quant-cache")))
    yield


@pytest.fixture(scope="session")
def zoo_compiles(tmp_path_factory: pytest.TempPathFactory) -> ZooCompiles:
    """The session's shared zoo builds and compiles (read them, never write into them)."""
    return ZooCompiles(tmp_path_factory.mktemp("zoo-compiles"))


@pytest.fixture
def no_run_plots(monkeypatch: pytest.MonkeyPatch) -> None:
    """`aipusim run` (`aipusim.run.job.run_model`) draws no PNG, for a test that checks none:
    the six plots are most of a small run's time. report.md then names no plot. The plots
    themselves are checked by tests/cli/test_run_cmd.py and tests/cli/test_run_outputs.py."""
    import aipusim.profiler

    monkeypatch.setattr(aipusim.profiler, "plot_all", lambda *_args, **_kwargs: [])
