"""Child of `test_os_errors`: runs each case (a CLI command line, or an API call) in this
process and prints one JSON object per case: exit status, stdout, stderr, exception.

Usage: ``python oserror_child.py CASES.json`` in the scratch folder. Each case is
``{"cli": [...argv], "cwd": "sub", "fsize": bytes}`` or ``{"api": "save" | "chrome",
"path": ..., "fsize": bytes}``; ``fsize`` limits the size of any file written
(RLIMIT_FSIZE: a stand-in for a full disk that works on any file system).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import sys
from pathlib import Path
from typing import Any

from aipusim.cli.main import main


def _limit(fsize: int | None) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize if fsize else hard, hard))


def _cli(case: dict[str, Any]) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    home = Path.cwd()
    os.chdir(case.get("cwd", "."))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(case["cli"])
    finally:
        os.chdir(home)
    return {"code": code, "out": out.getvalue(), "err": err.getvalue()}


def _api(case: dict[str, Any], cache: dict[str, Any]) -> dict[str, Any]:
    import aipusim

    if "model" not in cache:
        cache["model"] = aipusim.compile("tiny_cnn")
        cache["result"] = cache["model"].simulate(frames=2)
    try:
        if case["api"] == "save":
            cache["model"].save(case["path"])
        else:
            cache["result"].to_chrome_trace(case["path"])
    except Exception as exc:  # the test checks the type
        kinds = [t.__name__ for t in type(exc).__mro__]
        return {"error": str(exc), "types": kinds}
    return {"error": None, "types": []}


def run(cases_file: str) -> None:
    cache: dict[str, Any] = {}
    for case in json.loads(Path(cases_file).read_text()):
        _limit(case.get("fsize"))
        try:
            result = _api(case, cache) if "api" in case else _cli(case)
        finally:
            _limit(None)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    run(sys.argv[1])
