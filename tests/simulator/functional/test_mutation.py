"""A compiled multicore program with one token wait removed by hand (``isa disasm`` ->
edit -> ``isa asm``) never runs silently: functional execution raises `HazardError` or
the outputs differ from the int8 reference (`FunctionalMismatch`)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from aipusim import zoo
from aipusim.api.functional_check import attach_check, chip_inputs
from aipusim.base.errors import HazardError
from aipusim.cli.main import main
from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.driver import compile_model
from aipusim.compiler.request import CompileRequest
from aipusim.simulator import simulate

WAITS = re.compile(r" waits=(\S+)")
MODES = ("pipeline", "cooperative")


def _compile(root: Path, mode: str) -> Path:
    onnx.save(zoo.build("tiny_cnn", input_size=32), root / "tiny.onnx")
    config = CompilerConfig(aipu_cores_used=4, multicore_mode=mode, resources_used=1.0)
    compile_model(
        CompileRequest(model_path=root / "tiny.onnx", output_dir=root / mode, config=config)
    )
    return root / mode / "compiled_model"


@pytest.fixture(scope="module")
def programs(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[Path, dict[int, list[str]]]]:
    """Each mode's compiled folder and the text form of its tasklists."""
    out = {}
    for mode in MODES:
        folder = _compile(tmp_path_factory.mktemp(mode), mode)
        texts = {}
        for core in sorted(folder.glob("core*.tasklist")):
            text = core.with_suffix(".txt")
            assert main(["isa", "disasm", str(core), "-o", str(text)]) == 0
            texts[int(core.stem[4:])] = text.read_text().splitlines()
        out[mode] = (folder, texts)
    return out


def every_wait(texts: dict[int, list[str]]) -> list[tuple[int, int, str]]:
    """(core, line, token) of every token wait in the text form."""
    found = []
    for core, lines in texts.items():
        for n, line in enumerate(lines):
            m = WAITS.search(line)
            if m:
                found += [(core, n, token) for token in m.group(1).split(",")]
    return found


def without_wait(line: str, token: str) -> str:
    waits = WAITS.search(line).group(1).split(",")
    rest = [t for t in waits if t != token]
    return WAITS.sub(f" waits={','.join(rest)}" if rest else "", line, count=1)


def test_the_unedited_programs_are_bit_exact(programs) -> None:
    for folder, texts in programs.values():
        assert len(every_wait(texts)) > 20
        inputs, how = chip_inputs(folder)
        result = simulate(folder, frames=2, functional=True, inputs=inputs)
        assert attach_check(result, folder, inputs, how).bit_exact


@settings(
    max_examples=examples(12),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_a_removed_wait_is_found(programs, tmp_path_factory, data) -> None:
    mode = data.draw(st.sampled_from(MODES), label="mode")
    folder, texts = programs[mode]
    core, line, token = data.draw(st.sampled_from(every_wait(texts)), label="removed wait")
    edited = tmp_path_factory.mktemp("edit") / "compiled_model"
    shutil.copytree(folder, edited)
    lines = list(texts[core])
    lines[line] = without_wait(lines[line], token)
    text = edited / f"core{core}.txt"
    text.write_text("\n".join(lines) + "\n")
    # asm into the compiled folder records the new CRC, so the edited program loads
    assert main(["isa", "asm", str(text), "-o", str(edited / f"core{core}.tasklist")]) == 0
    inputs, how = chip_inputs(edited)
    try:
        result = simulate(edited, frames=2, functional=True, inputs=inputs)
    except HazardError:
        return
    # no hazard: then the outputs must show the missing order
    assert not attach_check(result, edited, inputs, how).bit_exact
