"""``aipusim config list|show|convert|validate``."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from aipusim.cli.main import main
from aipusim.compiler.config import PROPERTIES, load_config
from aipusim.compiler.modelcard import builtin_configs

CARD = """\
models:
  det-a:
    class: AxONNXModel
    weight_path: a.onnx
    extra_kwargs:
      compiler_config_file: yolov8n.toml
      compilation_config:
        aipu_cores: 4
        resources_used: 1.0
        multicore_mode: batch
  cls-b:
    class: AxONNXModel
    extra_kwargs:
      compiler_config_file: resnet18.toml
"""


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["config", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_list_shows_every_builtin(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "list")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == [
        f"{n}.toml" for n in builtin_configs()
    ]
    assert "resnet50.toml" in out and "cores=4" in out
    code, out, _ = run(capsys, "list", "--json")
    rows = json.loads(out)
    assert {r["name"] for r in rows} == set(builtin_configs())
    assert all(r["summary"].endswith(".") for r in rows)


def test_show_builtin_file_card_and_defaults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "show", "resnet50")
    assert code == 0
    assert tomllib.loads(out) == load_config(builtin_configs()["resnet50"]).to_dict(
        only_changed=True
    )
    code, out, _ = run(capsys, "show")
    assert (code, out) == (0, "")
    code, out, _ = run(capsys, "show", "--all", "--json", "--set", "tiling_depth=2")
    data = json.loads(out)
    assert len(data) == len(PROPERTIES) and data["tiling_depth"] == 2
    card = tmp_path / "card.yaml"
    card.write_text(CARD)
    code, out, _ = run(capsys, "show", str(card), "--model", "det-a")
    shown = tomllib.loads(out)
    assert shown["aipu_cores_used"] == 4 and shown["tiling_depth"] == 6  # inline + yolov8n.toml
    conf = tmp_path / "c.json"
    conf.write_text('{"tiling_depth": 3}')
    assert tomllib.loads(run(capsys, "show", str(conf))[1]) == {"tiling_depth": 3}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["show", "resnet5"], "no built-in compiler config `resnet5`; did you mean `resnet50`?"),
        (["show", "x.toml"], "SOURCE must be an existing file, not 'x.toml'"),
        (["show", "--set", "aipu_cores_used=5"], "--set: aipu_cores_used must be an integer 1-4"),
        (["convert", "--from-yaml", "none.yaml"], "--from-yaml must be an existing file"),
        (["validate", "none.toml"], "PATH must be an existing file, not 'none.toml'"),
    ],
)
def test_bad_input_is_one_line(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _, err = run(capsys, *args)
    assert code == 2
    assert err.count("\n") == 1 and message in err


def test_convert_writes_the_inline_config_as_toml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    card = tmp_path / "card.yaml"
    card.write_text(CARD)
    code, out, _ = run(capsys, "convert", "--from-yaml", str(card))
    assert code == 0
    target = tmp_path / "det-a.toml"
    assert out.strip() == f"wrote {target} (model det-a)"
    assert not (tmp_path / "cls-b.toml").exists()  # no inline config to convert
    assert tomllib.loads(target.read_text()) == {
        "aipu_cores_used": 4,
        "resources_used": 1.0,
        "multicore_mode": "batch",
    }
    assert target.read_text().startswith("# Converted from card.yaml, model det-a")
    code, _, err = run(capsys, "convert", "--from-yaml", str(card))
    assert code == 2 and "exists; pass --force to overwrite it" in err
    out_dir = tmp_path / "converted"
    code, out, _ = run(capsys, "convert", "--from-yaml", str(card), "-o", str(out_dir), "--json")
    assert json.loads(out) == [{"model": "det-a", "path": str(out_dir / "det-a.toml")}]
    code, out, _ = run(capsys, "convert", "--from-yaml", str(card), "--stdout")
    assert tomllib.loads(out)["multicore_mode"] == "batch"
    code, _, err = run(capsys, "convert", "--from-yaml", str(card), "--model", "cls-b")
    assert code == 2 and "model `cls-b` has an inline compilation_config to convert" in err


def test_converted_toml_in_place_of_the_inline_block_gives_the_same_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aipusim.compiler.modelcard import load_model_card

    card = tmp_path / "card.yaml"
    card.write_text(
        "models:\n  m:\n    extra_kwargs:\n      compilation_config:\n"
        "        tiling_depth: 6\n        ptq_scheme: per_tensor_min_max\n"
    )
    assert run(capsys, "convert", "--from-yaml", str(card))[0] == 0
    replaced = tmp_path / "replaced.yaml"
    replaced.write_text("models:\n  m:\n    extra_kwargs:\n      compiler_config_file: m.toml\n")
    assert load_model_card(replaced).model().config == load_model_card(card).model().config


def test_validate_files_and_cards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.toml"
    good.write_text("aipu_cores_used = 2\n")
    card = tmp_path / "card.yaml"
    card.write_text(CARD)
    code, out, _ = run(capsys, "validate", str(good), str(card))
    assert code == 0
    assert out.splitlines() == [
        f"{good}: valid, 1 non-default values",
        f"{card} (model det-a): valid, 5 non-default values",
        f"{card} (model cls-b): valid, 2 non-default values",
    ]
    bad = tmp_path / "bad.toml"
    bad.write_text("aipu_cores_used = 5\n")
    code, _, err = run(capsys, "validate", str(good), str(bad))
    assert code == 2 and err.strip().endswith(
        "bad.toml:1: aipu_cores_used must be an integer 1-4, not 5"
    )


def test_validate_against_a_smaller_arch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aipusim.arch import DEFAULT_ARCH_PATH

    small = tmp_path / "small.toml"
    small.write_text(DEFAULT_ARCH_PATH.read_text().replace("cores = 4", "cores = 2", 1))
    code, _, err = run(capsys, "validate", str(builtin_configs()["resnet50"]), "--arch", str(small))
    assert code == 2
    assert "resnet50.toml: aipu_cores_used must be at most the 2 cores of metis, not 4" in err
