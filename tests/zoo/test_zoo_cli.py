"""``aipusim zoo list`` and ``aipusim zoo export``."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from zoo_compiles import zoo_model

from aipusim import zoo
from aipusim.cli.main import main


def test_list_json_has_a_record_per_model(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # every model but ViT-B/16, whose 87 M weights take seconds to draw (its figures are
    # checked by the slow tests of tests/zoo/test_models.py)
    names = [n for n in zoo.names() if n != "vit_b16"]
    monkeypatch.setattr(zoo, "names", lambda: names)
    # The session's shared full-size builds (test_models.py checks the same ones): the same
    # bytes `zoo.build(name)` gives, built once per session, not once more here.
    monkeypatch.setattr(zoo, "build", lambda name: zoo_model(name))
    assert main(["zoo", "list", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in records] == names
    for record in records:
        assert {"name", "input_shape", "params", "gmacs", "gmacs_published"} <= set(record)
    by_name = {r["name"]: r for r in records}
    assert by_name["yolov8n"]["input_shape"] == [1, 3, 640, 640]
    assert by_name["resnet50"]["gmacs_published"] == 4.09
    assert abs(by_name["resnet50"]["gmacs"] - 4.09) < 0.05
    assert by_name["tiny_cnn"]["gmacs_published"] is None
    assert by_name["mobilenetv2"]["params"] == 3_504_872
    assert by_name["deit_tiny"]["params"] == 5_717_416


def test_list_prints_a_table(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two models keep this fast; the JSON test above builds them all.
    monkeypatch.setattr(zoo, "names", lambda: ["tiny_cnn", "yolov5s"])
    assert main(["zoo", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "published GMACs" in lines[0]
    assert len(lines) == 2 + 2
    yolo = next(line for line in lines if "yolov5s" in line)
    assert "1x3x640x640" in yolo and "8.25" in yolo and "7.24" in yolo
    tiny = next(line for line in lines if "tiny_cnn" in line)
    assert tiny.rstrip(" |").endswith("-")


def test_export_writes_a_loadable_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "y8.onnx"
    assert main(["zoo", "export", "yolov8n", "-o", str(out), "--input-size", "64x96"]) == 0
    assert "wrote" in capsys.readouterr().out
    model = onnx.load(out)
    onnx.checker.check_model(model, full_check=True)
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [1, 3, 64, 96]
    assert [p.name for p in tmp_path.iterdir()] == ["y8.onnx"]


def test_export_json_and_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.onnx"
    assert main(["zoo", "export", "tiny_cnn", "-o", str(out), "--seed", "7", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["seed"] == 7 and record["input_shape"] == [1, 3, 32, 32]
    assert out.read_bytes() == zoo.build("tiny_cnn", seed=7).SerializeToString()


def test_unknown_name_exits_2_lists_names_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.onnx"
    assert main(["zoo", "export", "vgg16", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "resnet50" in err and "yolov8n" in err and "'vgg16'" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--input-size", "big"], "--input-size must be N or HxW"),
        (["--input-size", "100"], "multiples of 32, not 100"),
        (["--batch", "0"], "batch must be an integer >= 1, not 0"),
    ],
)
def test_bad_export_options_exit_2_without_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], match: str
) -> None:
    out = tmp_path / "x.onnx"
    assert main(["zoo", "export", "yolov8n", "-o", str(out), *args]) == 2
    assert match in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_missing_output_folder_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "no" / "x.onnx"
    assert main(["zoo", "export", "tiny_cnn", "-o", str(out)]) == 2
    assert "no' does not exist" in capsys.readouterr().err


def test_an_input_too_big_for_memory_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.onnx"
    assert main(["zoo", "export", "tiny_cnn", "--input-size", "99999999", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("aipusim: error: out of memory (")
    assert not out.exists()


def test_decoder_writes_two_graphs_sharing_one_weights_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import numpy as np
    import onnx
    import onnxruntime as ort

    from aipusim.zoo import build_decoder

    out = tmp_path / "td"
    assert main(["zoo", "decoder", "tiny_decoder", "--prompt", "6", "--past", "9", "-o",
                 str(out), "--json"]) == 0  # fmt: skip
    record = json.loads(capsys.readouterr().out)
    assert sorted(p.name for p in out.iterdir()) == ["decode.onnx", "prefill.onnx", "weights.bin"]
    # the weights once: the shared file is about one graph's worth, not two
    weights = (out / "weights.bin").stat().st_size
    assert 4 * record["params"] < weights < 4 * record["params"] + 3 * 2**20  # (+ RoPE tables)
    ids = np.arange(6)[None] * 7
    loaded = ort.InferenceSession(str(out / "prefill.onnx"), providers=["CPUExecutionProvider"])
    built = ort.InferenceSession(
        build_decoder("tiny_decoder", tokens=6).SerializeToString(),
        providers=["CPUExecutionProvider"],
    )
    feed = {"input_ids": ids, "position_ids": np.arange(6)[None]}
    np.testing.assert_array_equal(loaded.run(["logits"], feed)[0], built.run(["logits"], feed)[0])
    decode = onnx.load(str(out / "decode.onnx"))
    assert [i.name for i in decode.graph.input][2:4] == [
        "past_key_values.0.key",
        "past_key_values.0.value",
    ]
    assert decode.graph.input[2].type.tensor_type.shape.dim[2].dim_value == 9


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["llama_7b"], "decoder must be one of llama_1b, tiny_decoder, not 'llama_7b'"),
        (["tiny_decoder", "--prompt", "0"], "--prompt must be an integer >= 1, not 0"),
        (["tiny_decoder", "--positions", "64"],
         "--positions must be at least the longest context, max(--prompt, --past + 1) = 129, "
         "not 64"),
    ],
)  # fmt: skip
def test_decoder_bad_arguments_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["zoo", "decoder", *args, "-o", str(tmp_path / "d")]) == 2
    assert capsys.readouterr().err.strip() == f"aipusim: error: {message}"
    assert list(tmp_path.iterdir()) == []
