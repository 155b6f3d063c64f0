"""The result folder of a sweep: a Parquet dataset of one row per point, resumable.

Layout of ``DIR``::

    sweep.json            the sweep's context (base config, arch file digest)
    part-0000.parquet     one file per flushed batch of finished points
    part-0001.parquet     ...

A part is written to a temporary name and then linked to its final name, so a reader never
sees half a file and an interrupted write leaves only a ``.tmp`` file (ignored). Resuming
reads the ``point_id`` column of every part and skips those points; since ids are unique per
point and done points are never submitted again, no row is written twice. `read` drops
duplicate ids anyway (keeping the first), so even two sweeps racing into one folder give one
row per point.

Columns: ``point_id``, ``model``, ``input_size``, ``frames``, one string column per swept
key (the value's canonical text; arch keys prefixed ``arch.``), a typed ``<key>__value``
column where all values of the key share one type, then `METRIC_COLUMNS`.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from aipusim.base.errors import ConfigError
from aipusim.isa.metrics import PEAK_WINDOWS

#: Suffix of the typed twin of a swept key's string column.
TYPED_SUFFIX = "__value"
#: The columns that identify a point (before the swept keys).
ID_COLUMNS: dict[str, pa.DataType] = {
    "point_id": pa.string(),
    "model": pa.string(),
    "input_size": pa.int64(),
    "frames": pa.int64(),
}
#: The columns of the outcome (after the swept keys).
METRIC_COLUMNS: dict[str, pa.DataType] = {
    "status": pa.string(),
    "error": pa.string(),
    "fps": pa.float64(),
    "device_fps": pa.float64(),
    "warmup_frames": pa.int64(),
    "latency_us_unloaded": pa.float64(),
    "latency_us_p50": pa.float64(),
    "latency_us_p99": pa.float64(),
    "cold_start_us": pa.float64(),
    "energy_mj_per_frame": pa.float64(),
    "energy_mj_init": pa.float64(),
    "avg_power_w": pa.float64(),
    **{f"peak_power_w_{window}": pa.float64() for window in PEAK_WINDOWS},
    "fps_per_w": pa.float64(),
    "total_cycles": pa.int64(),
    "compile_s": pa.float64(),
    "simulate_s": pa.float64(),
}
#: Wall-time columns: they differ between runs of the same point.
WALL_TIME_COLUMNS = ("compile_s", "simulate_s")
STATUS_OK = "ok"
STATUS_FAILED = "failed"

_ARROW_TYPES = {
    "bool": pa.bool_(),
    "int": pa.int64(),
    "float": pa.float64(),
    "string": pa.string(),
}
_CONTEXT_FILE = "sweep.json"
#: Version of the result columns; 2: the steady-state metrics of `aipusim.isa.metrics`
#: (a folder of format 1 holds figures with other definitions and is not resumed).
STORE_FORMAT = 2
_PART_GLOB = "part-*.parquet"


def swept_columns(columns: Iterable[str]) -> list[str]:
    """The string columns of the swept keys among ``columns`` (in their order).

    >>> swept_columns(["point_id", "model", "mvm_utilization_limit",
    ...                "mvm_utilization_limit__value", "status", "fps"])
    ['mvm_utilization_limit']
    """
    fixed = set(ID_COLUMNS) | set(METRIC_COLUMNS)
    return [c for c in columns if c not in fixed and not c.endswith(TYPED_SUFFIX)]


def result_schema(key_columns: Iterable[str], typed: Mapping[str, str]) -> pa.Schema:
    """The Arrow schema of a part: ids, swept keys (string + typed twins), metrics."""
    fields = [pa.field(n, t) for n, t in ID_COLUMNS.items()]
    for column in key_columns:
        fields.append(pa.field(column, pa.string()))
        if column in typed:
            fields.append(pa.field(column + TYPED_SUFFIX, _ARROW_TYPES[typed[column]]))
    fields += [pa.field(n, t) for n, t in METRIC_COLUMNS.items()]
    return pa.schema(fields)


class ResultStore:
    """The Parquet dataset of one sweep folder.

    >>> import tempfile
    >>> store = ResultStore(tempfile.mkdtemp())
    >>> store.done_ids()
    set()
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def parts(self) -> list[Path]:
        """The finished part files, in name order."""
        if not self.directory.is_dir():
            return []
        return sorted(self.directory.glob(_PART_GLOB))

    def open(self, context: Mapping[str, Any]) -> None:
        """Create the folder, or check that it holds a sweep of the same ``context``.

        Points of different base configs or arch files would be indistinguishable in one
        table, so a folder keeps one context.
        """
        if self.directory.exists() and not self.directory.is_dir():
            raise ConfigError(f"-o must be a folder, not the file {str(self.directory)!r}")
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / _CONTEXT_FILE
        wanted = json.loads(json.dumps(dict(context), sort_keys=True))
        if path.is_file():
            stored = json.loads(path.read_text())
            if stored.get("format") != STORE_FORMAT:
                raise ConfigError(
                    f"-o {str(self.directory)!r} must hold a sweep of result format "
                    f"{STORE_FORMAT} (steady-state metrics), not {stored.get('format')!r}; "
                    "use another folder"
                )
            if stored.get("context") != wanted:
                raise ConfigError(
                    f"-o {str(self.directory)!r} must hold a sweep with the same --conf/--set/"
                    f"--arch, not a different one ({_difference(stored.get('context'), wanted)}); "
                    f"use another folder"
                )
            return
        tmp = path.with_suffix(f".{uuid.uuid4().hex[:8]}.tmp")
        tmp.write_text(json.dumps({"format": STORE_FORMAT, "context": wanted}, indent=2) + "\n")
        os.replace(tmp, path)

    def done_ids(self) -> set[str]:
        """The ids of every point with a stored row."""
        ids: set[str] = set()
        for part in self.parts():
            table = pq.read_table(part, columns=["point_id"])
            ids.update(table.column("point_id").to_pylist())
        return ids

    def write_part(self, rows: list[dict[str, Any]], schema: pa.Schema) -> Path:
        """Write ``rows`` as the next ``part-NNNN.parquet``, atomically; returns its path."""
        assert rows, "write_part needs at least one row"
        table = pa.Table.from_pylist(rows, schema=schema)
        tmp = self.directory / f".part-{uuid.uuid4().hex}.parquet.tmp"
        pq.write_table(table, tmp)
        number = len(self.parts())
        try:
            while True:
                final = self.directory / f"part-{number:04d}.parquet"
                try:
                    # link() refuses an existing name, so two writers never share a number.
                    os.link(tmp, final)
                    return final
                except FileExistsError:
                    number += 1
        finally:
            tmp.unlink()

    def read(self) -> pd.DataFrame:
        """Every stored row as one DataFrame (one row per point id, in write order)."""
        parts = self.parts()
        if not parts:
            raise ConfigError(
                f"sweep folder must hold part-*.parquet results, not none in "
                f"{str(self.directory)!r}"
            )
        frames = [pq.read_table(p).to_pandas() for p in parts]
        table = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        return table.drop_duplicates("point_id", keep="first").reset_index(drop=True)


def _difference(stored: Any, wanted: Mapping[str, Any]) -> str:
    if not isinstance(stored, dict):
        return "its sweep.json has no context"
    keys = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k))
    return "differs in " + ", ".join(keys)


__all__ = [
    "ID_COLUMNS",
    "METRIC_COLUMNS",
    "STATUS_FAILED",
    "STATUS_OK",
    "TYPED_SUFFIX",
    "WALL_TIME_COLUMNS",
    "ResultStore",
    "result_schema",
    "swept_columns",
]
