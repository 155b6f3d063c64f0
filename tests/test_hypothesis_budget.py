"""`make test` draws a share of each property test's examples; `make test-slow` all of them."""

from __future__ import annotations

import pytest
from hypothesis_budget import FAST_MIN, PROFILE_ENV, examples, profile


def test_full_profile_draws_every_example(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROFILE_ENV, raising=False)
    assert profile() == "full" and examples(300) == 300
    monkeypatch.setenv(PROFILE_ENV, "full")
    assert examples(7) == 7


def test_fast_profile_draws_a_share_but_never_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROFILE_ENV, "fast")
    assert FAST_MIN <= examples(300) < 300
    assert examples(12) == FAST_MIN and examples(2) == 2


def test_an_unknown_profile_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROFILE_ENV, "quick")
    with pytest.raises(ValueError, match="PROFILE must be one of full, fast, not 'quick'"):
        profile()
