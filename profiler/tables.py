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

from aipusim.base.errors import ConfigError

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
        quick = pipe_table(columns) if float_format == ".3f" else None
        if quick is not None:
            return quick
    else:
        columns = {str(c): df[c].tolist() for c in df.columns}
    # lazy: tabulate (with the importlib.metadata it loads) is about 0.1 s of a process
    from tabulate import tabulate

    return tabulate(columns, headers="keys", tablefmt="pipe", floatfmt=float_format)


def _plain_text(value: str) -> bool:
    """A string tabulate would print as it is and left-align: printable ASCII without
    spaces that does not read as a number (tabulate right-aligns those)."""
    if not value or not value.isascii() or not value.isprintable() or " " in value:
        return False
    try:
        float(value.replace(",", ""))
    except ValueError:
        return True
    return False


def pipe_table(columns: Mapping[str, list]) -> str | None:
    """What ``tabulate(columns, headers="keys", tablefmt="pipe", floatfmt=".3f")`` prints,
    for the columns the layer table has: all ints, all floats, or strings (ints among
    them); None for anything else (no rows, empty or number-like strings, other types),
    which tabulate then prints. Spelled out because importing tabulate is a tenth of the
    lean ``aipusim profile``'s fixed cost.

    >>> print(pipe_table({"layer": ["c1", "fc"], "n": [3, 12], "us": [1.5, float("nan")]}))
    | layer   |   n |      us |
    |:--------|----:|--------:|
    | c1      |   3 |   1.500 |
    | fc      |  12 | nan     |
    """
    rows = {len(v) for v in columns.values()}
    if len(rows) != 1 or not rows.pop():
        return None
    cells: list[list[str]] = []
    right: list[bool] = []
    for name, values in columns.items():
        kinds = {type(v) for v in values}
        if kinds == {int}:
            text = [str(v) for v in values]
        elif kinds == {float}:
            text = [format(v, ".3f") for v in values]
            # tabulate's decimal alignment: the points line up, "nan" ends where they are
            after = [len(t) - t.index(".") - 1 if "." in t else -1 for t in text]
            most = max(after)
            text = [t + " " * (most - a) for t, a in zip(text, after, strict=True)]
        elif kinds <= {str, int} and all(_plain_text(v) for v in values if isinstance(v, str)):
            text = [str(v) for v in values]
        else:
            return None
        if not _plain_text(name):
            return None
        width = max(len(name) + 2, *(len(t) for t in text))
        numeric = kinds in ({int}, {float})
        pad = str.rjust if numeric else str.ljust
        cells.append([pad(name, width), *(pad(t, width) for t in text)])
        right.append(numeric)
    lines = ["| " + " | ".join(row) + " |" for row in zip(*cells, strict=True)]
    rule = [
        "-" * (len(col[0]) + 1) + ":" if r else ":" + "-" * (len(col[0]) + 1)
        for col, r in zip(cells, right, strict=True)
    ]
    lines.insert(1, "|" + "|".join(rule) + "|")
    return "\n".join(lines)


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
    # lazy: base.fileio (hashlib, secrets, shutil) is not needed to print a table
    from aipusim.base.fileio import output_path, write_text

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
