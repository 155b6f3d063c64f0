"""YAML model cards: precedence (inline > TOML > defaults) and config-file path resolution."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from aipusim.base.errors import ConfigError
from aipusim.compiler.config import CompilerConfig, MulticoreMode, QuantizationScheme, load_config
from aipusim.compiler.modelcard import (
    BUILTIN_CONFIG_DIR,
    builtin_config_path,
    builtin_configs,
    load_model_card,
    resolve_config_file,
)

ZOO = [
    "deit_tiny",
    "efficientnet_b0",
    "mobilenetv2",
    "resnet18",
    "resnet50",
    "tiny_cnn",
    "vit_b16",
    "yolov5s",
    "yolov8n",
]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def card(tmp_path: Path, extra_kwargs: str, name: str = "card.yaml") -> Path:
    return write(
        tmp_path / name,
        "models:\n"
        "  my-model:\n"
        "    class: AxONNXModel\n"
        "    weight_path: weights/m.onnx\n"
        "    extra_kwargs:\n" + extra_kwargs,
    )


def test_builtin_configs_cover_the_zoo_and_are_valid() -> None:
    assert list(builtin_configs()) == ZOO
    for name, path in builtin_configs().items():
        config = load_config(path)
        assert config.model_name == name
        assert path.read_text().startswith("# "), f"{name}.toml explains its choices"
    assert builtin_config_path("resnet50.toml") == BUILTIN_CONFIG_DIR / "resnet50.toml"
    with pytest.raises(ConfigError, match="no built-in compiler config `resnet34`; did you mean"):
        builtin_config_path("resnet34")


def test_precedence_inline_over_toml_over_defaults(tmp_path: Path) -> None:
    write(
        tmp_path / "base.toml",
        'quantization_scheme = "per_tensor_min_max"\ntiling_depth = 6\n'
        "aipu_cores_used = 1\nresources_used = 0.25\n",
    )
    path = card(
        tmp_path,
        "      compiler_config_file: base.toml\n"
        "      compilation_config:\n"
        "        quantization_scheme: per_tensor_histogram\n"
        "        aipu_cores_used: 4\n"
        "        resources_used: 1.0\n",
    )
    entry = load_model_card(path).model()
    config = entry.config
    assert config.quantization_scheme is QuantizationScheme.PER_TENSOR_HISTOGRAM  # inline
    assert config.aipu_cores_used == 4 and config.resources_used == 1.0  # inline
    assert config.tiling_depth == 6  # TOML
    assert config.frequency == 800_000_000  # default
    assert entry.config_file == tmp_path / "base.toml"
    assert entry.weight_path == tmp_path / "weights" / "m.onnx"
    assert entry.class_name == "AxONNXModel"


def test_inline_only_and_nothing(tmp_path: Path) -> None:
    inline = load_model_card(card(tmp_path, "      compilation_config:\n        aipu_cores: 2\n"))
    assert inline.model("my-model").config == CompilerConfig(aipu_cores_used=2)
    bare = write(tmp_path / "bare.yaml", "models:\n  m:\n    class: X\n")
    assert load_model_card(bare).model().config == CompilerConfig()


def test_bare_file_name_prefers_the_cards_folder_then_the_builtin(tmp_path: Path) -> None:
    path = card(tmp_path, "      compiler_config_file: yolov8n.toml\n")
    builtin = load_model_card(path).model()
    assert builtin.config_file == BUILTIN_CONFIG_DIR / "yolov8n.toml"
    assert builtin.config.tiling_depth == 6
    write(tmp_path / "yolov8n.toml", "tiling_depth = 3\n")
    local = load_model_card(path).model()
    assert local.config_file == tmp_path / "yolov8n.toml"
    assert local.config.tiling_depth == 3


def test_relative_paths_are_from_the_card_and_absolute_as_is(tmp_path: Path) -> None:
    write(tmp_path / "cfg" / "a.toml", "tiling_depth = 2\n")
    nested = card(tmp_path / "cards", "      compiler_config_file: ../cfg/a.toml\n")
    assert load_model_card(nested).model().config.tiling_depth == 2
    absolute = write(tmp_path / "elsewhere" / "b.toml", "tiling_depth = 4\n")
    path = card(tmp_path / "cards", f"      compiler_config_file: {absolute}\n", "abs.yaml")
    assert load_model_card(path).model().config_file == absolute
    # A relative path with a folder is never looked up among the built-in configs.
    with pytest.raises(ConfigError, match=r"compiler_config_file `sub/resnet50.toml` does not"):
        resolve_config_file("sub/resnet50.toml", tmp_path)


def test_missing_config_file_says_where_it_looked(tmp_path: Path) -> None:
    path = card(tmp_path, "      compiler_config_file: nope.toml\n")
    with pytest.raises(
        ConfigError,
        match=r"`nope.toml` does not exist \(looked at .*/nope.toml, .*/configs/nope.toml\)",
    ):
        load_model_card(path)


def test_bad_inline_value_names_file_line_model_and_property(tmp_path: Path) -> None:
    text = "      compilation_config:\n        multicore_mode: batch\n        aipu_cores_used: 5\n"
    path = card(tmp_path, text)
    with pytest.raises(
        ConfigError, match=r"card.yaml:8: model my-model: aipu_cores_used must be an integer 1-4"
    ):
        load_model_card(path)


def test_bad_value_in_the_toml_names_the_toml(tmp_path: Path) -> None:
    write(tmp_path / "base.toml", "\nmulticore_mode = 'batched'\n")
    path = card(tmp_path, "      compiler_config_file: base.toml\n")
    with pytest.raises(ConfigError, match=r"base.toml:2: multicore_mode must be one of .*batch"):
        load_model_card(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("models:\n  m: [1\n", r"bad.yaml:\d+: malformed YAML: "),
        ("- a\n- b\n", r"bad.yaml: a model card must have a `models:` table"),
        ("models:\n  m: 3\n", r"bad.yaml: models.m must be a table, not int"),
        (
            "models:\n  m:\n    extra_kwargs:\n      compilation_config: [1]\n",
            r"models.m.extra_kwargs.compilation_config must be a table of property: value",
        ),
        ("models:\n  m:\n    weight_path: 3\n", r"models.m.weight_path must be a path string"),
        ("!!python/object:os.system\nx: 1\n", r"bad.yaml:1: malformed YAML: "),
    ],
)
def test_malformed_cards(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_model_card(write(tmp_path / "bad.yaml", text))


def test_choosing_a_model(tmp_path: Path) -> None:
    path = write(tmp_path / "two.yaml", "models:\n  a: {}\n  b: {}\n")
    loaded = load_model_card(path)
    with pytest.raises(ConfigError, match=r"the card has 2 models \(a, b\); choose one"):
        loaded.model()
    with pytest.raises(ConfigError, match=r"no model `c`; models: a, b"):
        loaded.model("c")
    assert loaded.model("b").name == "b"


def test_inline_as_toml_writes_only_the_inline_values(tmp_path: Path) -> None:
    write(tmp_path / "base.toml", "tiling_depth = 6\n")
    path = card(
        tmp_path,
        "      compiler_config_file: base.toml\n"
        "      compilation_config:\n"
        "        aipu_cores: 4\n"
        "        multicore_mode: batch\n"
        "        profiling_levels: [B, K]\n"
        "        force_h_tiling: null\n",
    )
    text = load_model_card(path).model().inline_as_toml(header="from card.yaml")
    assert text.startswith("# from card.yaml\n")
    assert tomllib.loads(text) == {
        "aipu_cores_used": 4,
        "multicore_mode": "batch",
        "profiling_levels": ["B", "K"],
    }


def test_multicore_mode_from_a_builtin() -> None:
    config = load_config(builtin_config_path("resnet50"))
    assert config.multicore_mode is MulticoreMode.BATCH and config.aipu_cores_used == 4
