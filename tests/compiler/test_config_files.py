"""CompilerConfig files: JSON/TOML round trips, malformed files, bad values with locations."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from aipusim.arch import load_arch
from aipusim.base.errors import ConfigError
from aipusim.compiler.config import (
    PROPERTIES,
    CompilerConfig,
    check_against_arch,
    dumps_toml,
    load_config,
    save_config,
)

CHANGED = CompilerConfig(
    aipu_cores_used=4,
    multicore_mode="cooperative",
    profiling_levels=["B", "K"],
    force_oc_tiling=2,
    mvm_utilization_limit=0.5,
    output_dir="out",
)


@pytest.mark.parametrize("suffix", [".json", ".toml"])
@pytest.mark.parametrize("only_changed", [False, True])
def test_round_trip(tmp_path: Path, suffix: str, only_changed: bool) -> None:
    path = tmp_path / f"c{suffix}"
    save_config(CHANGED, path, only_changed=only_changed)
    assert load_config(path) == CHANGED


def test_full_json_has_every_property_and_nulls(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    save_config(CompilerConfig(), path)
    data = json.loads(path.read_text())
    assert len(data) == len(PROPERTIES)
    assert data["output_dir"] is None and data["profiling_levels"] == []


def test_toml_leaves_out_nulls_and_writes_a_header() -> None:
    text = dumps_toml(CompilerConfig(), only_changed=False, header="made by a test\n\nline 3")
    assert text.startswith("# made by a test\n#\n# line 3\n")
    data = tomllib.loads(text)
    assert len(data) == len(PROPERTIES) - sum(
        v is None for v in CompilerConfig().to_dict().values()
    )
    assert "output_dir" not in data


def test_load_on_top_of_a_base(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("tiling_depth = 6\n")
    config = load_config(path, base=CompilerConfig(aipu_cores_used=2))
    assert (config.tiling_depth, config.aipu_cores_used) == (6, 2)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("bad.toml", "aipu_cores_used = 1\nfrequency = = 3\n", r"bad.toml:2: malformed TOML: "),
        ("bad.json", '{\n  "aipu_cores_used": 1,\n}\n', r"bad.json:3: malformed JSON: "),
        ("bad.json", "[1, 2]", r"bad.json: a compiler config must be a table .* not list"),
        (
            "bad.toml",
            "# comment\nmodel_name = 'x'\naipu_cores_used = 5\n",
            r"bad.toml:3: aipu_cores_used must be an integer 1-4, not 5$",
        ),
        (
            "bad.json",
            '{\n  "multicore_mode": "batch",\n  "aipu_core_used": 2\n}',
            r"bad.json:3: unknown compiler config property `aipu_core_used`; did you mean "
            r"`aipu_cores_used`\?",
        ),
        (
            "bad.toml",
            "aipu_cores_used = 4\nresources_used = 0.25\n",
            r"bad.toml: resources_used must be at least 0.25 per core",
        ),
        ("bad.toml", "[compiler]\ntiling_depth = 2\n", r"bad.toml:1: unknown compiler config"),
        ("bad.yaml", "a: 1\n", r"config file .*bad.yaml must end in .json or .toml, not .yaml"),
    ],
)
def test_bad_files_name_file_line_and_problem(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config file .*nope.toml does not exist"):
        load_config(tmp_path / "nope.toml")
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match=r"bin.toml: cannot read config file"):
        load_config(binary)
    with pytest.raises(ConfigError, match=r"must end in .json or .toml, not .txt"):
        save_config(CompilerConfig(), tmp_path / "c.txt")


def test_config_against_the_arch() -> None:
    arch = load_arch()
    check_against_arch(CompilerConfig(aipu_cores_used=4), arch)
    check_against_arch(CompilerConfig(frequency=20_000_000), arch)
    with pytest.raises(ConfigError, match=r"ddr_size_max must be at most the 4294967296 bytes"):
        check_against_arch(CompilerConfig(ddr_size_max=2**33), arch)
    two_cores = load_arch(overrides={"chip.cores": 2})
    with pytest.raises(
        ConfigError, match=r"aipu_cores_used must be at most the 2 cores of metis, not 4"
    ):
        check_against_arch(CompilerConfig(aipu_cores_used=4), two_cores)
