"""The result folder of a sweep: a Parquet dataset of one row per point, resumable.

Layout of ``DIR``::

    _sweep.json           the sweep's context (base config, arch file digest)
    part-0000.parquet     one file per flushed batch of finished points
    part-0001.parquet     ...

A part is written to a temporary name and then linked to its final name, so a reader never
sees half a file and an interrupted write leaves only a ``.tmp`` file (ignored, and removed
by the next run once its writer is gone). A part or ``_sweep.json`` that cannot be read
(truncated by a full disk, edited by hand) is a `SweepStoreError` naming the file, with the
way out: ``--resume`` sets the unreadable parts aside (``*.bad``) so that their points run
again and rewrites a broken ``_sweep.json``, or another folder starts afresh. Resuming
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
import shutil
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from aipusim.base.atomic import clean_stale, process_alive
from aipusim.base.errors import ConfigError
from aipusim.isa.metrics import PEAK_WINDOWS, UNIT_POWER_PARTS

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
    # the run's average power by kind and, as JSON, by unit (`SimResult.unit_power_w`)
    **{f"power_w_{part}": pa.float64() for part in UNIT_POWER_PARTS},
    "unit_power_w": pa.string(),
    "compile_s": pa.float64(),
    "simulate_s": pa.float64(),
    # a point run on data (``--check``); null otherwise
    "bit_exact": pa.bool_(),
    "mismatches": pa.int64(),
    "check": pa.string(),
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
#: (The leading "_" makes Parquet readers skip it: ``pd.read_parquet(DIR)`` reads the parts.)
_CONTEXT_FILE = "_sweep.json"
#: Its name in folders written before: renamed on the next open.
_OLD_CONTEXT_FILE = "sweep.json"
#: Version of the result columns; 2: the steady-state metrics of `aipusim.isa.metrics`
#: (a folder of format 1 holds figures with other definitions and is not resumed); 3: the
#: functional check's columns (``bit_exact``, ``mismatches``, ``check``).
STORE_FORMAT = 3
_PART_GLOB = "part-*.parquet"
#: Suffix a part that cannot be read gets when ``--resume`` sets it aside.
BAD_SUFFIX = ".bad"
#: Per-worker scratch folders of the local pool (removed when their worker is gone).
SCRATCH_DIR = ".scratch"
_HINT = (
    "re-run the sweep with --resume to set unreadable parts aside (their points run "
    "again), or start afresh with another -o folder"
)


class SweepStoreError(ConfigError):
    """A file of a sweep folder cannot be read; the message names it and the way out."""


def _pid_of(name: str) -> int | None:
    """The writer's process id in a temporary name ``.part-<pid>-<hex>...``."""
    parts = name.split("-")
    return int(parts[1]) if len(parts) > 2 and parts[1].isdigit() else None


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
        #: Unreadable parts `done_ids` renamed ``*.bad`` (with ``resume``).
        self.set_aside: list[Path] = []

    def parts(self) -> list[Path]:
        """The finished part files, in name order."""
        if not self.directory.is_dir():
            return []
        return sorted(self.directory.glob(_PART_GLOB))

    def open(self, context: Mapping[str, Any], *, resume: bool = False) -> None:
        """Create the folder, or check that it holds a sweep of the same ``context``;
        remove what killed runs left (temporary parts, worker scratch). With ``resume``, a
        broken ``_sweep.json`` is rewritten.

        Points of different base configs or arch files would be indistinguishable in one
        table, so a folder keeps one context.
        """
        if self.directory.exists() and not self.directory.is_dir():
            raise ConfigError(f"-o must be a folder, not the file {str(self.directory)!r}")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.clean_stale()
        path = self.directory / _CONTEXT_FILE
        old = self.directory / _OLD_CONTEXT_FILE
        if old.is_file() and not path.exists():
            os.replace(old, path)
        wanted = json.loads(json.dumps(dict(context), sort_keys=True))
        stored = self._read_context(path, resume)
        if stored is not None:
            if stored.get("format") != STORE_FORMAT:
                raise ConfigError(
                    f"-o {str(self.directory)!r} must hold a sweep of result format "
                    f"{STORE_FORMAT} (steady-state metrics, check columns), not "
                    f"{stored.get('format')!r}; use another folder"
                )
            if stored.get("context") != wanted:
                raise ConfigError(
                    f"-o {str(self.directory)!r} must hold a sweep with the same --conf/--set/"
                    f"--arch, not a different one ({_difference(stored.get('context'), wanted)}); "
                    f"use another folder"
                )
        else:
            tmp = self.directory / f".sweep-{os.getpid()}-{uuid.uuid4().hex[:8]}.json.tmp"
            body = json.dumps({"format": STORE_FORMAT, "context": wanted}, indent=2) + "\n"
            tmp.write_text(body)
            os.replace(tmp, path)

    def _read_context(self, path: Path, resume: bool) -> dict[str, Any] | None:
        """The stored ``_sweep.json`` (None: there is none, or ``resume`` rewrites it)."""
        if not path.is_file():
            return None
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(stored, dict):
                raise ValueError(f"a JSON {type(stored).__name__}, not an object")
        except (ValueError, UnicodeDecodeError) as exc:
            if resume:
                return None
            raise SweepStoreError(
                f"sweep folder {str(self.directory)!r}: {_CONTEXT_FILE} cannot be read "
                f"({' '.join(str(exc).split())[:120]}); {_HINT}"
            ) from None
        return stored

    def context(self) -> dict[str, Any]:
        """The context the sweep was run with (``_sweep.json``; empty if there is none)."""
        stored = self._read_context(self.directory / _CONTEXT_FILE, resume=False)
        return dict((stored or {}).get("context") or {})

    def clean_stale(self) -> None:
        """Remove the temporary parts and worker scratch folders of writers that are gone."""
        for tmp in self.directory.glob(".*.tmp"):
            pid = _pid_of(tmp.name)
            if pid is not None and not process_alive(pid):
                tmp.unlink(missing_ok=True)
        scratch = self.directory / SCRATCH_DIR
        if scratch.is_dir():
            for folder in scratch.iterdir():
                clean_stale(folder)  # temporary copies inside a worker's scratch
                pid = _pid_of(folder.name)
                if pid is not None and not process_alive(pid):
                    shutil.rmtree(folder, ignore_errors=True)

    def done_ids(self, resume: bool = False) -> set[str]:
        """The ids of every point with a stored row. An unreadable part is a
        `SweepStoreError`, or with ``resume`` is renamed ``*.bad`` (its points are not
        done; `set_aside` lists it)."""
        ids: set[str] = set()
        for part in self.parts():
            try:
                table = self._read(part, columns=["point_id"])
            except SweepStoreError:
                if not resume:
                    raise
                bad = part.with_name(part.name + BAD_SUFFIX)
                os.replace(part, bad)
                self.set_aside.append(bad)
                continue
            ids.update(table.column("point_id").to_pylist())
        return ids

    def _read(self, part: Path, columns: list[str] | None = None) -> pa.Table:
        try:
            return pq.read_table(part, columns=columns)
        except (OSError, pa.ArrowException) as exc:
            raise SweepStoreError(
                f"sweep folder {str(self.directory)!r}: {part.name} cannot be read "
                f"(truncated or not Parquet: {' '.join(str(exc).split())[:120]}); {_HINT}"
            ) from None

    def write_part(self, rows: list[dict[str, Any]], schema: pa.Schema) -> Path:
        """Write ``rows`` as the next ``part-NNNN.parquet``, atomically; returns its path."""
        assert rows, "write_part needs at least one row"
        table = pa.Table.from_pylist(rows, schema=schema)
        tmp = self.directory / f".part-{os.getpid()}-{uuid.uuid4().hex}.parquet.tmp"
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
        frames = [self._read(p).to_pandas() for p in parts]
        table = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        return table.drop_duplicates("point_id", keep="first").reset_index(drop=True)


def _difference(stored: Any, wanted: Mapping[str, Any]) -> str:
    if not isinstance(stored, dict):
        return "its _sweep.json has no context"
    keys = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k))
    return "differs in " + ", ".join(keys)


__all__ = [
    "BAD_SUFFIX",
    "ID_COLUMNS",
    "METRIC_COLUMNS",
    "SCRATCH_DIR",
    "STATUS_FAILED",
    "STATUS_OK",
    "TYPED_SUFFIX",
    "WALL_TIME_COLUMNS",
    "ResultStore",
    "SweepStoreError",
    "result_schema",
    "swept_columns",
]
