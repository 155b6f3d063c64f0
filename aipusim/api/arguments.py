"""Checks of the Python API's arguments: a wrong type or value is an `InvalidArgument`
(an `AipuSimError` and a `ValueError`) naming the argument and what is valid.

>>> path_argument("out/m", "output_dir")
PosixPath('out/m')
>>> path_argument(5, "output_dir")
Traceback (most recent call last):
...
aipusim.base.errors.InvalidArgument: output_dir must be a path (str or os.PathLike), not int 5
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from aipusim.base.errors import InvalidArgument


def path_argument(value: Any, name: str) -> Path:
    """``value`` as a `Path` (``~`` expanded), if it is a str or an os.PathLike."""
    if isinstance(value, str | os.PathLike):
        return Path(value).expanduser()
    raise InvalidArgument(
        f"{name} must be a path (str or os.PathLike), not {type(value).__name__} {value!r:.60}"
    )


__all__ = ["path_argument"]
