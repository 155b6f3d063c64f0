"""The package version, in one place (``pyproject.toml`` reads the same string)."""

from __future__ import annotations

__version__ = "0.1.0"
