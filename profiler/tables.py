"""Writers for reduction tables: Markdown, CSV, Parquet (chosen by file suffix).

>>> import pandas as pd
>>> print(to_markdown(pd.DataFrame({"layer": ["c1"], "mean_us": [1.23456]})))
| layer   |   mean_us |
|:--------|----------:|
| c1      |     1.235 |
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tabulate import tabulate

from aipusim.base.errors import ConfigError
from aipusim.base.fileio import output_path, write_text

if TYPE_CHECKING:
    import pandas as pd
# pandas is imported where a frame is written: `to_markdown` of plain columns serves the
# lean ``aipusim profile`` route (`aipusim.profiler.lean`), which never loads it.

TABLE_SUFFIXES = (".md", ".csv", ".parquet")


def to_markdown(df: pd.DataFrame | Mapping[str, list], float_format: str = ".3f") -> str:
    """A GitHub-flavoured Markdown table of a frame or of columns (name -> list of plain
    values); floats with ``float_format``, integers as such."""
    # Column-wise lists keep integer columns integral (a DataFrame goes row by row through
    # tabulate, which turns a row's ints into floats when the row also holds a float).
    if isinstance(df, Mapping):
        columns = {str(c): list(v) for c, v in df.items()}
    else:
        columns = {str(c): df[c].tolist() for c in df.columns}
    return tabulate(columns, headers="keys", tablefmt="pipe", floatfmt=float_format)


def to_records(df: pd.DataFrame) -> list[dict[str, object]]:
    """Plain-Python records (for JSON): NaN becomes None, numpy scalars become Python."""
    clean = df.astype(object).where(df.notna(), None)
    return [
        {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
        for row in clean.to_dict(orient="records")
    ]


def write_table(df: pd.DataFrame, path: str | Path, kind: str | None = None) -> Path:
    """Write ``df`` as Markdown, CSV or Parquet: ``kind`` (``.md``, ``.csv``, ``.parquet``)
    or else the file's suffix. The file is written whole or not at all; a device such as
    ``/dev/stdout`` is written in place."""
    p = Path(path)
    suffix = kind or p.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise ConfigError(
            f"table file {str(p)!r} must end in one of {', '.join(TABLE_SUFFIXES)}, "
            f"not {suffix or 'no suffix'!r}"
        )
    if suffix == ".md":
        write_text(p, to_markdown(df) + "\n")
    elif suffix == ".csv":
        with output_path(p) as tmp:
            df.to_csv(tmp, index=False)
    else:
        import pandas as pd

        out = df.copy()
        # Categoricals and object columns become plain strings so any reader opens them.
        for col in out.columns:
            if isinstance(out[col].dtype, pd.CategoricalDtype) or out[col].dtype == object:
                out[col] = out[col].astype("string")
        with output_path(p) as tmp:
            out.to_parquet(tmp, index=False)
    return p
