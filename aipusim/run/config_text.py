"""A config as the outputs show it: canonical value text and the changes from the defaults.

Its own module, importing nothing of aipusim's, so that reports, sweeps and the CLI can print
a config without pulling in the run (`aipusim.api.sources` resolves models and starts configs).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

#: Separator of the members of one value of a list-valued property (a sweep's values).
LIST_JOIN = "+"


def value_text(value: Any) -> str:
    """The canonical text of a config value (a sweep's string columns and ids, the changes
    every output shows).

    >>> value_text(True), value_text(0.5), value_text(None), value_text(("B", "PB"))
    ('true', '0.5', 'null', 'B+PB')
    """
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, tuple | list):
        return LIST_JOIN.join(value_text(v) for v in value)
    return str(value)


#: Properties a changes line leaves out: where the output goes is no part of the config story.
_NOT_SHOWN = ("output_dir",)


def config_changes(config: Any) -> dict[str, str]:
    """``{property: value text}`` of ``config``'s properties that differ from the defaults
    (what every output shows of its effective base config).

    >>> from aipusim.api.sources import config_for
    >>> config_changes(config_for("resnet50"))["multicore_mode"]
    'batch'
    """
    return {k: value_text(v) for k, v in config.changed().items() if k not in _NOT_SHOWN}


def changes_text(changes: Mapping[str, str]) -> str:
    """`config_changes` as one line: ``k=v, k=v`` or ``none (the defaults)``.

    >>> changes_text({}), changes_text({"aipu_cores_used": "4"})
    ('none (the defaults)', 'aipu_cores_used=4')
    """
    return ", ".join(f"{k}={v}" for k, v in changes.items()) or "none (the defaults)"


__all__ = ["LIST_JOIN", "changes_text", "config_changes", "value_text"]
