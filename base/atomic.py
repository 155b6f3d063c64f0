"""Replace an output folder in one step, so a reader never sees it half written.

Every command that writes a folder (compile, run, quantized model, save) builds it in a
temporary folder beside the target and then calls `swap_into_place`.

>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> (root / "new").mkdir(); (root / "new" / "f").write_text("2")
1
>>> (root / "out").mkdir(); (root / "out" / "f").write_text("1")
1
>>> swap_into_place(root / "new", root / "out")
>>> (root / "out" / "f").read_text(), (root / "new").exists()
('2', False)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def swap_into_place(tmp: Path, out: Path) -> None:
    """Rename ``tmp`` to ``out``; an existing ``out`` is moved aside first, then deleted.

    If the final rename fails, the old ``out`` is put back before the error propagates.
    """
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        os.rename(out, old / out.name)
    try:
        os.rename(tmp, out)
    except OSError:
        if old is not None:
            os.rename(old / out.name, out)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
