"""Fuzzing the CLI's readers: random bytes and mutated files (tasklists, traces, configs,
arch files, model cards) and random argument lists. Whatever goes in, a command ends in
exit status 0 or 2, and on 2 with exactly one line on stderr, never a traceback.

Each case runs ``main`` in this process (a few milliseconds once the modules are loaded);
an exception escaping ``main`` fails the test with the input that caused it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from aipusim.arch import DEFAULT_ARCH_PATH
from aipusim.cli.main import main

SETTINGS = settings(
    max_examples=examples(40),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TRACE_HEADER = "# aipusim-trace 1 freq_hz=800000000 cores=4 model=m levels=B,PB,PE,K,M,T"


def run_cli(argv: list[str], cwd: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    home = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        os.chdir(home)
    return code, out.getvalue(), err.getvalue()


def assert_clean(argv: list[str], cwd: Path) -> None:
    code, _, err = run_cli(argv, cwd)
    assert code in (0, 2), (argv, code, err)
    assert "Traceback" not in err, (argv, err)
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("aipusim: error: "), (argv, err)


@pytest.fixture(scope="module")
def work() -> Path:
    """A scratch folder with one good example of every input the fuzzing mutates."""
    with tempfile.TemporaryDirectory(prefix="aipusim-fuzz-") as tmp:
        root = Path(tmp)
        assert run_cli(["zoo", "export", "tiny_cnn", "-o", "t.onnx"], root)[0] == 0
        assert run_cli(["compile", "-i", "t.onnx", "-o", "c"], root)[0] == 0
        args = ["simulate", "c", "--frames", "2", "--trace", "t.trace", "--levels", "B,PB,K,M"]
        assert run_cli(args, root)[0] == 0
        yield root


def _mutate(data: bytes, seed: int, edits: int) -> bytes:
    """``data`` with ``edits`` bytes overwritten, deleted or inserted at random places."""
    rng = random.Random(seed)
    buf = bytearray(data)
    for _ in range(edits):
        if not buf:
            buf.append(rng.randrange(256))
            continue
        i = rng.randrange(len(buf))
        op = rng.randrange(3)
        if op == 0:
            buf[i] = rng.randrange(256)
        elif op == 1:
            del buf[i]
        else:
            buf.insert(i, rng.randrange(256))
    return bytes(buf)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), edits=st.integers(1, 40), raw=st.binary(max_size=300))
def test_tasklists(work: Path, seed: int, edits: int, raw: bytes) -> None:
    good = (work / "c" / "compiled_model" / "core0.tasklist").read_bytes()
    (work / "fz.tasklist").write_bytes(_mutate(good, seed, edits))
    (work / "raw.tasklist").write_bytes(raw)
    for name in ("fz.tasklist", "raw.tasklist"):
        for argv in (["isa", "info", name], ["isa", "disasm", name], ["isa", "check", name]):
            assert_clean(argv, work)


@st.composite
def trace_lines(draw: st.DrawFn) -> str:
    tags = ["[B]", "[PB]", "[PE]", "[K]", "[M]", "[T]", "[X]", "B", "[K", ""]
    keys = ["frame", "inst", "start", "end", "t", "core", "layer", "op", "unit", "task",
            "tile", "macs", "src", "dst", "bytes", "token", "scope", "x"]  # fmt: skip
    values = st.one_of(
        st.integers(-(2**70), 2**70).map(str),
        st.sampled_from(["mvm", "dma0", "ddr", "l1", "conv", "", "-1", "nan", "1e9", "é"]),
        st.text(max_size=6),
    )
    fields = st.lists(st.tuples(st.sampled_from(keys), values), max_size=12)
    lines = []
    for _ in range(draw(st.integers(0, 12))):
        pairs = draw(fields)
        tag = draw(st.sampled_from(tags))
        lines.append(" ".join([tag, *(f"{k}={v}" for k, v in pairs)]))
    return "\n".join(lines)


@settings(SETTINGS, max_examples=examples(20))  # 8 profile runs an example
@given(
    header=st.one_of(st.just(TRACE_HEADER), st.text(max_size=80)),
    body=trace_lines(),
    seed=st.integers(0, 2**32 - 1),
)
def test_traces(work: Path, header: str, body: str, seed: int) -> None:
    (work / "fz.trace").write_text(f"{header}\n{body}\n", encoding="utf-8")
    good = (work / "t.trace").read_bytes()
    (work / "mut.trace").write_bytes(_mutate(good, seed, 30))
    for name in ("fz.trace", "mut.trace"):
        for extra in ([], ["--strict"], ["--by", "core"], ["--by", "frame", "--json"]):
            assert_clean(["profile", name, *extra], work)


def _json_values() -> st.SearchStrategy[object]:
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=8)
    )
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=6)


CONFIG_KEYS = [
    "aipu_cores_used", "multicore_mode", "resources_used", "frequency", "mvm_utilization_limit",
    "quantization_scheme", "profiling_levels", "double_buffer", "tiling_depth", "bogus",
]  # fmt: skip


@SETTINGS
@given(
    data=st.dictionaries(st.sampled_from(CONFIG_KEYS), _json_values(), max_size=5),
    raw=st.text(max_size=200),
)
def test_configs(work: Path, data: dict[str, object], raw: str) -> None:
    (work / "fz.json").write_text(json.dumps(data), encoding="utf-8")
    (work / "raw.json").write_text(raw, encoding="utf-8")
    (work / "raw.toml").write_text(raw, encoding="utf-8")
    for name in ("fz.json", "raw.json", "raw.toml"):
        assert_clean(["config", "validate", name], work)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), value=_json_values())
def test_arch_files(work: Path, seed: int, value: object) -> None:
    lines = DEFAULT_ARCH_PATH.read_text().splitlines()
    rng = random.Random(seed)
    keyed = [i for i, line in enumerate(lines) if " = " in line and not line.startswith("#")]
    i = rng.choice(keyed)
    key = lines[i].split(" = ", 1)[0]
    literal = json.dumps(value) if not isinstance(value, float) else repr(value)
    lines[i] = f"{key} = {literal}"
    (work / "fz.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    mutated = _mutate(DEFAULT_ARCH_PATH.read_bytes(), seed, 8)
    (work / "mut.toml").write_bytes(mutated)
    for name in ("fz.toml", "mut.toml"):
        assert_clean(["arch", "validate", name], work)
        assert_clean(["arch", "show", "--arch", name, "--json"], work)


@SETTINGS
@given(
    name=st.text(min_size=1, max_size=8),
    inline=st.dictionaries(st.sampled_from(CONFIG_KEYS), _json_values(), max_size=3),
    raw=st.text(max_size=200),
)
def test_model_cards(work: Path, name: str, inline: dict[str, object], raw: str) -> None:
    card = {
        "models": {
            name: {
                "class": "AxONNXModel",
                "weight_path": "t.onnx",
                "extra_kwargs": {"compilation_config": inline},
            }
        }
    }
    (work / "fz.yaml").write_text(json.dumps(card), encoding="utf-8")  # JSON is YAML
    (work / "raw.yaml").write_text(raw, encoding="utf-8")
    for file in ("fz.yaml", "raw.yaml"):
        assert_clean(["config", "validate", file], work)
        assert_clean(["config", "convert", file, "--stdout"], work)


#: Commands and words of argument lists; no valid model name, so nothing compiles for long.
COMMANDS = [
    ["compile"], ["simulate"], ["run"], ["profile"], ["isa", "info"], ["isa", "check"],
    ["isa", "disasm"], ["isa", "asm"], ["arch", "show"], ["arch", "validate"], ["config", "show"],
    ["config", "validate"], ["zoo", "export"], ["sweep"], ["sweep-report"], ["nonsense"],
]  # fmt: skip
WORDS = [
    "-i", "-o", "--frames", "--set", "--conf", "--arch", "--levels", "--json", "--by",
    "--strict", "--input-shape", "--input-size", "--param", "--workers", "-v", "--help",
    "t.trace", "c", "fz.json", "nope", "0", "-1", "1e30", "nan", "x=1",
    "frequency=1e14", "aipu_cores_used=9", "K,Z", "core", "1,3,x", "", "'", "--",
]  # fmt: skip


@SETTINGS
@given(
    command=st.sampled_from(COMMANDS),
    words=st.lists(st.one_of(st.sampled_from(WORDS), st.text(max_size=6)), max_size=6),
)
def test_argument_lists(work: Path, command: list[str], words: list[str]) -> None:
    # outputs go to a folder of their own, so an accepted command cannot clobber the inputs
    argv = [*command, *words]
    if "-o" in argv or "--output" in argv:
        argv = [w if w not in ("c", "t.trace") else f"out/{w}" for w in argv]
    (work / "out").mkdir(exist_ok=True)
    assert_clean(argv, work)
