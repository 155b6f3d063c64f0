"""LEIP ``legacy_artifacts``: the ``legacy/`` folder of a compile output folder.

Three files: ``deploy_lib.tar`` (the tasklists), ``deploy_graph.json`` (program and I/O
manifest), ``deploy_param.npz`` (the quantized model's arrays: int8 weights, int32 biases,
requantization parameters). Example: ``write_legacy_artifacts(Path("out"))`` after
``aipusim compile ... -o out``.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from aipusim.compiler.backend.emit.files import MANIFEST_FILE
from aipusim.isa.program import PROGRAM_FILE

LEGACY_DIR = "legacy"


def write_legacy_artifacts(root: Path) -> list[Path]:
    """``legacy/deploy_lib.tar``, ``deploy_graph.json``, ``deploy_param.npz`` from a
    compile output folder; returns the three paths."""
    compiled = root / "compiled_model"
    folder = root / LEGACY_DIR
    folder.mkdir(exist_ok=True)
    lib = folder / "deploy_lib.tar"
    with tarfile.open(lib, "w") as tar:
        for path in sorted(compiled.glob("*.tasklist")):
            data = path.read_bytes()
            info = tarfile.TarInfo(path.name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    graph = folder / "deploy_graph.json"
    graph.write_text(
        json.dumps(
            {
                "program": json.loads((compiled / PROGRAM_FILE).read_text()),
                "io": json.loads((compiled / MANIFEST_FILE).read_text()),
            },
            indent=2,
        )
        + "\n"
    )
    params = folder / "deploy_param.npz"
    params.write_bytes((root / "quantized_model" / "quantized_model.npz").read_bytes())
    return [lib, graph, params]


__all__ = ["LEGACY_DIR", "write_legacy_artifacts"]
