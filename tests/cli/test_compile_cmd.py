"""``aipusim compile``: flag checks, config precedence, --generate-config, --cli-args.

The compiler driver is replaced by a recorder so these tests see exactly the
`CompileRequest` the command builds (and that bad input never reaches the driver).
"""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from aipusim.cli.main import main
from aipusim.compiler.config import (
    PROPERTIES,
    CompilerConfig,
    CompilerMode,
    MulticoreMode,
    load_config,
)
from aipusim.compiler.request import (
    CalibrationMode,
    ColorFormat,
    CompileRequest,
    ImreaderBackend,
    InputDataLayout,
)


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[CompileRequest]:
    """Record compile requests instead of compiling; run in a scratch folder with m.onnx."""
    calls: list[CompileRequest] = []
    fake = types.ModuleType("aipusim.compiler.driver")

    def compile_model(request: CompileRequest, **_hooks: object) -> types.SimpleNamespace:
        calls.append(request)
        return types.SimpleNamespace(status="SUCCEEDED")

    fake.compile_model = compile_model  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "aipusim.compiler.driver", fake)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.onnx").write_bytes(b"not parsed by these tests")
    return calls


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["compile", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("aipusim: error: ")
    return lines[0].removeprefix("aipusim: error: ")


def test_generate_config_writes_every_property_at_its_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "--generate-config", str(tmp_path / "new" / "dir"))
    assert code == 0
    path = tmp_path / "new" / "dir" / "default_conf.json"
    assert out.strip() == f"wrote {path}"
    data = json.loads(path.read_text())
    assert len(data) == len(PROPERTIES)
    assert data == CompilerConfig().to_dict()
    assert load_config(path) == CompilerConfig()


def test_generate_config_into_a_file_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "f").write_text("")
    code, _, err = run(capsys, "--generate-config", str(tmp_path / "f"))
    assert code == 2
    assert one_line_error(err).startswith("--generate-config must be a folder")


@pytest.mark.parametrize(
    ("conf_name", "text", "message"),
    [
        (
            "bad.toml",
            "aipu_cores_used = 5\n",
            r"^bad.toml:1: aipu_cores_used must be an integer 1-4, not 5$",
        ),
        (
            "bad.toml",
            "tiling_depth = 2\naipu_core_used = 2\n",
            r"^bad.toml:2: unknown compiler config property `aipu_core_used`; did you mean "
            r"`aipu_cores_used`\?$",
        ),
        ("bad.json", '{"aipu_cores_used": 5}', r"^bad.json:1: aipu_cores_used must be an integer"),
        ("bad.toml", "x = [\n", r"^bad.toml:\d+: malformed TOML: "),
        ("bad.json", "{\n\n  oops\n}", r"^bad.json:3: malformed JSON: "),
        ("bad.yaml", "a: 1\n", r"^config file bad.yaml must end in .json or .toml, not .yaml$"),
        ("nope.toml", None, r"^config file nope.toml does not exist"),
    ],
)
def test_bad_conf_is_one_line_naming_the_property_and_never_compiles(
    driver: list[CompileRequest],
    capsys: pytest.CaptureFixture[str],
    conf_name: str,
    text: str | None,
    message: str,
) -> None:
    if text is not None:
        Path(conf_name).write_text(text)
    code, _, err = run(capsys, "-i", "m.onnx", "--conf", conf_name, "-o", "out")
    assert code == 2
    assert __import__("re").search(message, one_line_error(err))
    assert driver == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "-i/--input is required"),
        (
            ["-i", "missing.onnx", "-o", "out"],
            "-i/--input must be an existing file, not 'missing.onnx'",
        ),
        (["-i", "m.txt", "-o", "out"], "-i/--input must be a .onnx or .json file, not 'm.txt'"),
        (["-i", "m.onnx"], "-o/--output is required"),
        (["-i", "m.onnx", "-o", "m.onnx"], "-o/--output must be a folder, not the file 'm.onnx'"),
        (["--set", "tiling_depth=0"], "--set: tiling_depth must be an integer >= 1, not 0"),
        (["--set", "tiling_depth"], "--set must be given as key=value"),
        (["--set", "tilling_depth=2"], "did you mean `tiling_depth`"),
        (["--aipu-cores", "5"], "--aipu-cores: aipu_cores_used must be an integer 1-4, not 5"),
        (["--aipu-cores", "two"], "aipu_cores_used must be an integer 1-4, not 'two'"),
        (
            ["--aipu-cores", "4", "--set", "resources_used=0.5"],
            "--set: resources_used must be at least 0.25 per core",
        ),
        (["--color-format", "CMYK"], "--color-format must be one of RGB, BGR, GRAY, not 'CMYK'"),
        (["--calibration", "rand"], "--calibration must be one of auto, images, random, not 'ra"),
        (["--image-mean", "1,2"], "--image-mean must be 1 or 3 numbers separated by commas"),
        (["--image-std", "x"], "--image-std must be 1 or 3 numbers separated by commas, not 'x'"),
        (["--imreader-backend", "cv2"], "--imreader-backend must be one of PIL, OPENCV"),
        (["--input-data-layout", "NC"], "--input-data-layout must be one of NCHW, NHWC"),
        (["--input-shape", "1,3,0,4"], "--input-shape must be 1-6 positive integers"),
        (["--input-shape", "a,b"], "--input-shape must be 1-6 positive integers"),
        (["--imageset", "no_dir"], "--imageset must be an existing folder, not 'no_dir'"),
        (["--transform", "none.py"], "--transform must be an existing file"),
        (["--transform", "m.onnx"], "--transform must be a .py file"),
        (["--arch", "none.toml"], "arch file must be an existing TOML file"),
        (["--cli-args", "none.json"], "--cli-args must be an existing file"),
    ],
)
def test_bad_flags_are_one_line_errors(
    driver: list[CompileRequest],
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    Path("m.txt").write_text("")
    base = [] if not args or args[0] in ("-i",) else ["-i", "m.onnx", "-o", "out"]
    code, _, err = run(capsys, *base, *args)
    assert code == 2
    assert message in one_line_error(err)
    assert driver == []


def test_config_that_does_not_fit_the_arch(
    driver: list[CompileRequest], capsys: pytest.CaptureFixture[str]
) -> None:
    Path("small.toml").write_text(
        Path(__import__("aipusim.arch", fromlist=["x"]).DEFAULT_ARCH_PATH)
        .read_text()
        .replace("cores = 4", "cores = 2", 1)
    )
    code, _, err = run(
        capsys, "-i", "m.onnx", "-o", "out", "--arch", "small.toml", "--aipu-cores", "4"
    )
    assert code == 2
    assert one_line_error(err) == "aipu_cores_used must be at most the 2 cores of metis, not 4"


def test_a_good_command_builds_the_request(
    driver: list[CompileRequest], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    Path("images").mkdir()
    Path("pre.py").write_text("def get_preprocess_transform(image):\n    return image\n")
    code, out, _ = run(
        capsys,
        "-i", "m.onnx", "-o", "out", "--aipu-cores", "4", "--set", "multicore_mode=batch",
        "--input-shape", "1,224,224,3", "--imageset", "images", "--transform", "pre.py",
        "--input-data-layout", "nhwc", "--color-format", "BGR", "--imreader-backend", "OPENCV",
        "--quantize-only",
    )  # fmt: skip
    lines = out.strip().splitlines()
    assert code == 0 and lines[-1] == "compiled m.onnx -> out"
    assert lines[0].startswith("config: starts from the defaults; changes from the defaults: ")
    (request,) = driver
    assert request.model_path == Path("m.onnx") and request.output_dir == Path("out")
    assert request.config.aipu_cores_used == 4
    assert request.config.multicore_mode is MulticoreMode.BATCH
    assert request.config.compiler_mode is CompilerMode.QUANTIZE_ONLY
    assert request.config.output_dir == "out"
    assert request.input_shape == (1, 224, 224, 3)
    assert request.imageset == Path("images") and request.transform == Path("pre.py")
    assert request.input_data_layout is InputDataLayout.NHWC
    assert request.color_format is ColorFormat.BGR
    assert request.imreader_backend is ImreaderBackend.OPENCV
    assert request.arch_path is None
    json.dumps(request.cli_args)  # the driver writes it as cli_args.json


def test_defaults_and_json_output(
    driver: list[CompileRequest], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "-i", "m.onnx", "-o", "out", "--json")
    assert code == 0
    assert json.loads(out) == {
        "input": "m.onnx",
        "output_dir": "out",
        "status": "SUCCEEDED",
        "config": {"base": "the defaults", "changes": {}},
    }
    (request,) = driver
    assert request.config == CompilerConfig(output_dir="out")
    assert request.color_format is ColorFormat.RGB
    assert request.imreader_backend is ImreaderBackend.PIL
    assert request.input_shape is None and request.input_data_layout is None
    assert request.calibration is CalibrationMode.AUTO and request.image_mean is None


def test_calibration_flags_reach_the_request_and_cli_args(
    driver: list[CompileRequest], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = run(
        capsys, "-i", "m.onnx", "-o", "out", "--calibration", "images",
        "--image-mean", "0.485,0.456,0.406", "--image-std", "0.25",
    )  # fmt: skip
    assert code == 0
    (request,) = driver
    assert request.calibration is CalibrationMode.IMAGES
    assert request.image_mean == (0.485, 0.456, 0.406) and request.image_std == (0.25,)
    assert request.cli_args["calibration"] == "images"
    assert request.cli_args["image_mean"] == "0.485,0.456,0.406"


def test_output_dir_may_come_from_the_config(
    driver: list[CompileRequest], capsys: pytest.CaptureFixture[str]
) -> None:
    Path("c.toml").write_text('output_dir = "from_conf"\n')
    assert run(capsys, "-i", "m.onnx", "--conf", "c.toml")[0] == 0
    assert driver[0].output_dir == Path("from_conf")
    assert run(capsys, "-i", "m.onnx", "--conf", "c.toml", "-o", "flag")[0] == 0
    assert driver[1].output_dir == Path("flag") and driver[1].config.output_dir == "flag"


def test_precedence_flags_over_conf_over_cli_args_over_defaults(
    driver: list[CompileRequest], capsys: pytest.CaptureFixture[str]
) -> None:
    Path("cli_args.json").write_text(
        json.dumps(
            {
                "input": "m.onnx",
                "output": "old_out",
                "aipu_cores": 2,
                "set": ["tiling_depth=3", "use_sysdma=true"],
                "color_format": "GRAY",
                "input_shape": "1,3,32,32",
                "imageset": None,
            }
        )
    )
    Path("c.toml").write_text("tiling_depth = 5\nresources_used = 1.0\n")
    code, _, _ = run(capsys, "--cli-args", "cli_args.json", "--conf", "c.toml", "-o", "new_out")
    assert code == 0
    request = driver[0]
    assert request.model_path == Path("m.onnx")  # cli-args
    assert request.output_dir == Path("new_out")  # explicit flag over cli-args
    assert request.config.aipu_cores_used == 2  # cli-args over defaults
    assert request.config.use_sysdma is True  # cli-args --set
    assert request.config.tiling_depth == 5  # --conf over cli-args
    assert request.color_format is ColorFormat.GRAY  # cli-args over the flag default
    assert request.input_shape == (1, 3, 32, 32)

    code, _, _ = run(
        capsys, "--cli-args", "cli_args.json", "--conf", "c.toml", "--set", "tiling_depth=6",
        "--aipu-cores", "3", "--color-format", "RGB",
    )  # fmt: skip
    assert code == 0
    request = driver[1]
    assert request.config.tiling_depth == 6  # --set over --conf
    assert request.config.aipu_cores_used == 3  # --aipu-cores over cli-args
    assert request.color_format is ColorFormat.RGB  # explicit, even when equal to default


def test_cli_args_of_a_request_reproduce_it(
    driver: list[CompileRequest], capsys: pytest.CaptureFixture[str]
) -> None:
    Path("c.toml").write_text("tiling_depth = 4\n")
    first = ["-i", "m.onnx", "-o", "out", "--conf", "c.toml", "--set", "frequency=4e8",
             "--aipu-cores", "2", "--input-shape", "1,3,8,8", "--color-format", "BGR"]  # fmt: skip
    assert run(capsys, *first)[0] == 0
    Path("saved.json").write_text(json.dumps(driver[0].cli_args))
    assert run(capsys, "--cli-args", "saved.json")[0] == 0
    again = driver[1]
    assert again.config == driver[0].config
    assert again.input_shape == driver[0].input_shape
    assert again.color_format == driver[0].color_format
    assert again.cli_args == driver[0].cli_args


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"aipu_core": 2}', "unknown cli argument `aipu_core`; did you mean `aipu_cores`?"),
        ('{"aipu_cores": true}', "aipu_cores must be int or null, not True"),
        ('{"set": [1]}', "set must be a list of 'key=value' strings"),
        ("[1]", "cli args must be a JSON object, not list"),
        ('{"color_format": "CMYK"}', "--color-format must be one of RGB, BGR, GRAY"),
        ('{"aipu_cores": 7}', "--cli-args: aipu_cores_used must be an integer 1-4, not 7"),
        ("{\n", "cli_args.json:2: malformed JSON"),
    ],
)
def test_bad_cli_args_file(
    driver: list[CompileRequest],
    capsys: pytest.CaptureFixture[str],
    content: str,
    message: str,
) -> None:
    Path("cli_args.json").write_text(content)
    code, _, err = run(capsys, "-i", "m.onnx", "-o", "out", "--cli-args", "cli_args.json")
    assert code == 2
    assert message in one_line_error(err)
    assert driver == []


def test_help_lists_every_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", "--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("-i, --input", "-o, --output", "--conf", "--generate-config", "--quantize-only",
                 "--input-shape", "--imageset", "--transform", "--input-data-layout",
                 "--color-format", "--imreader-backend", "--cli-args", "--aipu-cores", "--set",
                 "--arch", "--json"):  # fmt: skip
        assert flag in out
    assert "It is RUN" in out


def test_a_compile_loads_no_analysis_library_simulator_or_profiler(tmp_path: Path) -> None:
    # Their imports cost seconds (pandas alone 1.7 s); a compile needs none of them.
    import onnx

    from aipusim import zoo

    model = tmp_path / "tiny.onnx"
    onnx.save(zoo.build("tiny_cnn"), model)
    code = (
        "import sys; from aipusim.cli.main import main; "
        f"status = main(['compile', '-i', {str(model)!r}, '-o', {str(tmp_path / 'out')!r}]); "
        "heavy = ('pandas', 'matplotlib', 'numba', 'scipy', 'pyarrow', 'simpy', 'yaml'); "
        "print(status, sorted(m for m in sys.modules if m.split('.')[0] in heavy "
        "or m.startswith(('aipusim.simulator', 'aipusim.profiler', 'aipusim.studies'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "0 []"
    assert (tmp_path / "out" / "compiled_model" / "model.json").is_file()


def test_a_zoo_name_compiles_as_help_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["compile", "-i", "tiny_cnn", "-o", str(out)]) == 0
    assert f"\ncompiled tiny_cnn -> {out}\n" in capsys.readouterr().out
    assert (out / "compiled_model" / "model.json").is_file()
    assert json.loads((out / "cli_args.json").read_text())["input"] == "tiny_cnn"
    assert (out / "input_model" / "fp32_model.onnx").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert main(["compile", "-i", "lenet", "-o", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "must be an existing file or a zoo model (" in err
    assert "tiny_cnn" in err and "not 'lenet'" in err
