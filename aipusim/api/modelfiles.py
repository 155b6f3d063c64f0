"""The files of a compiled model folder: ``aipusim_model.json`` (signature, options and,
with ``crc_check``, the CRC32 of every other file), its verification, and the compiler's
per-layer report as a table.

>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> _ = (root / "a.bin").write_bytes(b"abc")
>>> write_meta(root, {"format": API_FORMAT, "version": API_VERSION, "crc_check": True})
>>> _ = (root / "a.bin").write_bytes(b"abd")
>>> read_meta(root)
Traceback (most recent call last):
...
aipusim.base.errors.TasklistError: a.bin must have CRC32 0x352441c2 as ... not 0xab40d461: ...
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from aipusim.base.errors import ConfigError, TasklistError
from aipusim.compiler.backend.emit.files import REPORT_FILE, crc32, verify_crcs

#: The API's own file in a compiled model folder.
API_FILE = "aipusim_model.json"
API_FORMAT = "aipusim-compiled-model"
API_VERSION = 1
COMPILED_DIR = "compiled_model"


def listed_files(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != API_FILE
    )


def write_meta(root: Path, meta: dict[str, Any]) -> None:
    data = dict(meta)
    data.pop("crc32", None)
    if data.get("crc_check"):
        data["crc32"] = {rel: crc32((root / rel).read_bytes()) for rel in listed_files(root)}
    (root / API_FILE).write_text(json.dumps(data, indent=2) + "\n")


def read_meta(root: Path) -> dict[str, Any]:
    """``aipusim_model.json`` of ``root``, after checking every file's CRC32 when it was
    written with ``crc_check``: a changed, missing or added file is refused by name."""
    meta_path = root / API_FILE
    if not meta_path.is_file():
        raise ConfigError(
            f"model folder must hold {API_FILE} (written by CompiledModel.save), "
            f"not be without it: {root}"
        )
    try:
        meta = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TasklistError(f"{meta_path} must be JSON, not corrupted ({exc})") from None
    if meta.get("format") != API_FORMAT or meta.get("version") != API_VERSION:
        raise ConfigError(
            f"{meta_path} must be format {API_FORMAT} version {API_VERSION}, "
            f"not {meta.get('format')!r} version {meta.get('version')!r}"
        )
    if not meta.get("crc_check"):
        return meta
    recorded = meta.get("crc32", {})
    for rel, expected in sorted(recorded.items()):
        file = root / rel
        if not file.is_file():
            raise TasklistError(f"{rel} must exist in {root} ({API_FILE} lists its CRC)")
        actual = crc32(file.read_bytes())
        if actual != expected:
            raise TasklistError(
                f"{rel} must have CRC32 {expected:#010x} as recorded in {API_FILE}, "
                f"not {actual:#010x}: the file changed after it was saved"
            )
    extra = sorted(set(listed_files(root)) - set(recorded))
    if extra:
        raise TasklistError(f"{extra[0]} is not listed in {API_FILE}: added after saving")
    if (root / COMPILED_DIR).is_dir():
        verify_crcs(root / COMPILED_DIR)
    return meta


def report_table(compiled_dir: Path) -> pd.DataFrame:
    """``report.json``'s layers as a DataFrame (nested fields flattened with ``_``)."""
    data = json.loads((Path(compiled_dir) / REPORT_FILE).read_text())
    layers = data["layers"]
    for layer in layers:
        layer["fused"] = ",".join(layer.get("fused", []))
    table = pd.json_normalize(layers, sep="_") if layers else pd.DataFrame()
    if len(table):
        table = table.rename(columns={"name": "layer"})
        table["estimated_us"] = table["estimated_cycles"] * 1e6 / float(data["frequency_hz"])
        table = table.fillna(0)
    return table


__all__ = [
    "API_FILE",
    "API_FORMAT",
    "API_VERSION",
    "COMPILED_DIR",
    "listed_files",
    "read_meta",
    "report_table",
    "write_meta",
]
