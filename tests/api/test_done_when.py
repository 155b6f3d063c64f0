"""The example of README's "Python API" section (the issue's done-when), run as a doctest,
with more checks on what it left behind."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[2] / "README.md"


def _python_api_examples() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Python API\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```pycon\n(.*?)```", section, flags=re.S)
    assert blocks, "README's Python API section has no pycon example"
    return "\n".join(blocks)


def test_readme_python_api_example_runs() -> None:
    test = doctest.DocTestParser().get_doctest(
        _python_api_examples(), {}, "README.md#python-api", str(README), 0
    )
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    result = runner.run(test, clear_globs=False)
    assert result.failed == 0, f"{result.failed} README example(s) failed"
    y, r, layers = test.globs["y"], test.globs["r"], test.globs["layers"]
    # two identical images give identical logits
    assert np.array_equal(y[0], y[1])
    assert r.fps > 0 and r.latency_us_p50 > 0
    assert {"/conv1/Conv", "/fc/Gemm"} <= set(layers["layer"])
    assert (layers.loc[layers["layer"] == "/conv1/Conv", "samples"] > 0).all()
