"""How many examples a hypothesis property test draws: all of them, or a share for `make test`.

`make test` sets `HYPOTHESIS_PROFILE=fast`: each property test then draws `FAST_SHARE` of its
full count (at least `FAST_MIN`), so the fast suite stays within its time budget and every
property still runs on fresh random examples (it can still fail). Without the variable (plain
`pytest`, a single file) and in `make test-slow` (`HYPOTHESIS_PROFILE=full`) every test draws
its full count.

Example:
    >>> from hypothesis import settings
    >>> @settings(max_examples=examples(300), deadline=None)
    ... def check(x: int) -> None: ...
"""

from __future__ import annotations

import math
import os

from hypothesis import settings

#: The environment variable naming the profile (hypothesis' own name for it).
PROFILE_ENV = "HYPOTHESIS_PROFILE"
#: The profiles: "full" (every example, the default) and "fast" (a share of them).
PROFILES = ("full", "fast")
#: The share of a test's full example count that the fast profile draws.
FAST_SHARE = 0.2
#: The fewest examples a property test draws in the fast profile.
FAST_MIN = 5

# A test with no count of its own draws hypothesis' default (100) in full, a share when fast.
settings.register_profile("full", settings())
settings.register_profile("fast", settings(max_examples=max(FAST_MIN, round(100 * FAST_SHARE))))


def profile() -> str:
    """The profile this run uses, from `HYPOTHESIS_PROFILE` ("full" when unset)."""
    name = os.environ.get(PROFILE_ENV, "full")
    if name not in PROFILES:
        raise ValueError(f"{PROFILE_ENV} must be one of {', '.join(PROFILES)}, not {name!r}")
    return name


def examples(full: int) -> int:
    """How many examples a test whose full count is `full` draws in this run's profile."""
    if profile() == "full":
        return full
    return min(full, max(FAST_MIN, math.ceil(full * FAST_SHARE)))
