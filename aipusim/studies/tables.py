"""How studies and reports show numbers: one format per kind of figure (`fmt`), Markdown
tables whose cells are that text (`md_table`), and PNG figures (`pyplot`, `save_figure`).

A conclusion quotes a table's cell, so both go through `fmt`.

>>> fmt(1234.5678, "fps"), fmt(None, "fps")
('1234.6', 'n/a')
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from aipusim.base.fileio import output_path

#: Format of each kind of figure, shared by tables and conclusions.
FORMATS: dict[str, str] = {
    "fps": ".1f",
    "latency_ms": ".3f",
    "energy_mj": ".4f",
    "power_w": ".3f",
    "fps_per_w": ".2f",
    "ratio": ".2f",
    "share_pct": ".1f",
    "us": ".1f",
    "limit": ".3f",
    "db": ".1f",
    "bytes": ",.0f",
    "ratio3": ".3f",
}


def fmt(value: float, kind: str) -> str:
    """``value`` as the text tables and conclusions show for a figure of ``kind``."""
    if value is None or pd.isna(value):
        return "n/a"
    return format(float(value), FORMATS[kind])


def md_table(df: pd.DataFrame, kinds: Mapping[str, str] | None = None) -> str:
    """A Markdown table; columns named in ``kinds`` are formatted with `fmt` first."""
    shown = df.copy()
    for column, kind in (kinds or {}).items():
        if column in shown.columns:
            shown[column] = [fmt(v, kind) for v in shown[column]]
    # No number parsing: the cells keep exactly the text the conclusions quote.
    return shown.to_markdown(index=False, disable_numparse=True)


def save_figure(fig: Any, path: Path) -> Path:
    """Save a matplotlib figure as PNG and close it."""
    # lazy: loads matplotlib, not otherwise loaded here
    import matplotlib.pyplot as plt

    try:
        with output_path(path) as tmp:
            fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
    finally:
        plt.close(fig)
    return path


def pyplot() -> Any:
    """matplotlib.pyplot on the file-only backend (no display needed)."""
    # lazy: loads matplotlib, not otherwise loaded here
    import matplotlib

    matplotlib.use("Agg")
    # lazy: loads matplotlib, not otherwise loaded here
    import matplotlib.pyplot as plt

    return plt


__all__ = ["FORMATS", "fmt", "md_table", "pyplot", "save_figure"]
