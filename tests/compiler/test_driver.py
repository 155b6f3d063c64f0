"""compile_model: artifacts written atomically, failure reports with status and stage."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from aipusim.base.errors import (
    ConfigError,
    OnnxImportError,
    ResourceLimitError,
    UnsupportedOperatorError,
)
from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.driver import LOG_NAME, REPORT_NAME, compile_model
from aipusim.compiler.ir import verify
from aipusim.compiler.pipeline import FRONT
from aipusim.compiler.request import CompileRequest

FLOAT_FRONT = tuple(p for p in FRONT if p.name != "quantize")


def request(
    model: Path, out: Path, *, shape=None, layout=None, stop=FLOAT_FRONT[-1].name, **config
) -> CompileRequest:
    """A compile of the float front end only (these tests run FLOAT_FRONT): it stops after
    the front end's last pass, as asked, with status STOPPED."""
    return CompileRequest(
        model_path=model,
        output_dir=out,
        config=CompilerConfig(**config),
        input_shape=shape,
        input_data_layout=layout,
        cli_args={"input": str(model), "output": str(out)},
        stop_after=stop,
    )


def save(model: onnx.ModelProto, folder: Path, name: str = "model.onnx") -> Path:
    path = folder / name
    onnx.save(model, path)
    return path


def leftovers(folder: Path) -> list[str]:
    """Temporary folders the driver may have left beside the output."""
    return [p.name for p in folder.iterdir() if p.name.startswith(".")]


def report(out: Path) -> dict:
    return json.loads((out / REPORT_NAME).read_text())


def test_front_half_artifacts(onnx_models, tmp_path: Path) -> None:
    model = save(onnx_models.detector(nms=True), tmp_path)
    out = tmp_path / "out"
    result = compile_model(
        request(model, out, graph_cleaner_dump_core_onnx="core.onnx", trace_tvm_passes=True),
        passes=FLOAT_FRONT,
        dump_ir={"import", "validate_operators"},
        after_pass=lambda name, graph: verify(graph),
    )
    assert result.status == "STOPPED" and result.output_dir == out
    assert report(out)["stage"] == FLOAT_FRONT[-1].name
    files = set(result.files)
    assert {
        "cli_args.json",
        "conf.json",
        "input_model/fp32_model.onnx",
        "postprocess.onnx",
        "core.onnx",
        "ir/00_import.txt",
        "ir/16_validate_operators.txt",  # (no quantize in this list)
        "pass_dependency_graph.json",
        REPORT_NAME,
        LOG_NAME,
    } <= files
    assert files == {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    rep = report(out)
    assert rep["status"] == "STOPPED" and rep["stage"] == "validate_operators"
    assert rep["passes"][0]["name"] == "import"
    assert rep["host_graphs"]["postprocess"]["ops"]["NonMaxSuppression"] == 1
    assert json.loads((out / "cli_args.json").read_text())["input"] == str(model)
    assert json.loads((out / "conf.json").read_text())["run_graph_cleaner"] is True
    onnx.checker.check_model(onnx.load(out / "input_model" / "fp32_model.onnx"))
    trace = json.loads((out / "pass_dependency_graph.json").read_text())
    assert {n["name"] for n in trace["nodes"]} >= {"compile", "clean", "graph_cleaner"}
    assert "graph_cleaner" in (out / LOG_NAME).read_text()
    assert leftovers(tmp_path) == []


def test_quantize_only_writes_the_quantized_model(onnx_models, tmp_path: Path) -> None:
    model = save(onnx_models.classifier(), tmp_path)
    out = tmp_path / "q"
    result = compile_model(request(model, out, compiler_mode="quantize_only"))
    ran = [r.name for r in result.records if r.ran]
    assert ran[-1] == "quantize" and "rewrite_dense_to_conv2d" not in ran
    assert (out / "quantized_model" / "quantized_model_manifest.json").is_file()
    assert "accuracy" in report(out)


def test_full_pipeline_runs(onnx_models, tmp_path: Path) -> None:
    model = save(onnx_models.classifier(), tmp_path)
    result = compile_model(request(model, tmp_path / "full", stop=None))
    assert result.status == "SUCCEEDED"
    assert [r.name for r in result.records if r.ran][-1] == "emit"
    assert "compiled_model/model.json" in result.files


def _tiny(opset: int, src: str = "x") -> onnx.ModelProto:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Relu", [src], ["y"])], "tiny", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _opset6() -> onnx.ModelProto:
    return _tiny(6)


def _unchecked() -> onnx.ModelProto:
    return _tiny(17, src="nowhere")


@pytest.mark.parametrize(
    ("make", "error", "status", "match"),
    [
        (
            lambda d, m: d / "missing.onnx",
            OnnxImportError,
            "ONNX_GRAPH_CLEANER_ERROR",
            "not a file",
        ),
        (
            lambda d, m: (d / "junk.onnx").write_bytes(b"\x08\xff garbage") and d / "junk.onnx",
            OnnxImportError,
            "ONNX_GRAPH_CLEANER_ERROR",
            "is not an ONNX model",
        ),
        (
            lambda d, m: save(_opset6(), d),
            OnnxImportError,
            "ONNX_GRAPH_CLEANER_ERROR",
            "must be >= 7, not 6",
        ),
        (
            lambda d, m: save(_unchecked(), d),
            OnnxImportError,
            "ONNX_GRAPH_CLEANER_ERROR",
            "fails the ONNX checker",
        ),
        (
            lambda d, m: save(m.constant_weights(dynamic=True), d),
            OnnxImportError,
            "ONNX_GRAPH_CLEANER_ERROR",
            r"input `x` dim 0 \(N\) `batch` is dynamic",
        ),
    ],
)
def test_bad_input_leaves_only_report_and_log(
    onnx_models, tmp_path: Path, make, error, status, match
) -> None:
    model = make(tmp_path, onnx_models)
    out = tmp_path / "out"
    with pytest.raises(error, match=match):
        compile_model(request(model, out))
    assert sorted(p.name for p in out.iterdir()) == [LOG_NAME, REPORT_NAME]
    rep = report(out)
    assert rep["status"] == status and rep["stage"] == "import"
    assert "\n" not in rep["message"] and rep["message"]
    assert leftovers(tmp_path) == []


def test_unsupported_operators_fail_in_validate(onnx_models, tmp_path: Path) -> None:
    model = save(onnx_models.detector(nms=True), tmp_path)
    out = tmp_path / "out"
    passes = tuple(p for p in FLOAT_FRONT if p.name != "graph_cleaner")
    with pytest.raises(UnsupportedOperatorError, match="NonMaxSuppression"):
        compile_model(request(model, out, run_graph_cleaner=False), passes=passes)
    rep = report(out)
    assert rep["status"] == "LOWER_FRONTEND_ERROR" and rep["stage"] == "check_operators"
    assert "NonMaxSuppression" in rep["message"]
    assert [p["name"] for p in rep["passes"]][-1] == "decompose_prelu"


def test_all_unsupported_operators_named_before_quantization(tmp_path: Path) -> None:
    from graph_helpers import model, node, w

    m = model(
        [
            node("Conv", ["x", "w"], "c"),
            node("Elu", ["c"], "elu"),
            node("Celu", ["elu"], "celu"),
            node("Conv", ["celu", "w"], "y"),
        ],
        {"w": w(4, 4, 1, 1)},
    )
    out = tmp_path / "out"
    with pytest.raises(UnsupportedOperatorError, match="2 operators") as err:
        compile_model(request(save(m, tmp_path), out))
    assert "`elu` (Elu" in str(err.value) and "`celu` (Celu" in str(err.value)
    assert report(out)["stage"] == "check_operators"


def test_a_bug_in_a_pass_is_an_internal_error_naming_the_pass(onnx_models, tmp_path) -> None:
    from aipusim.base.errors import CompilerInternalError
    from aipusim.compiler.pipeline import Pass, Stage

    def broken(graph, ctx):
        raise RuntimeError("bug")

    model = save(onnx_models.classifier(), tmp_path)
    out = tmp_path / "out"
    broken_list = (Pass("broken", broken, Stage.SIMPLIFY),)
    with pytest.raises(CompilerInternalError, match="internal error in pass `broken`") as err:
        compile_model(request(model, out, stop=None), passes=broken_list)
    assert err.value.exit_code == 1 and isinstance(err.value.__cause__, RuntimeError)
    rep = report(out)
    assert rep["status"] == "INTERNAL_ERROR" and rep["stage"] == "broken"
    assert rep["message"].startswith("internal error in pass `broken`: RuntimeError: bug")
    assert "Traceback" in (out / LOG_NAME).read_text()
    assert sorted(p.name for p in out.iterdir()) == [LOG_NAME, REPORT_NAME]


def test_output_dir_rules(onnx_models, tmp_path: Path) -> None:
    model = save(onnx_models.conv_bn_relu(), tmp_path)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="must be empty or an earlier compile output"):
        compile_model(request(model, busy), passes=FLOAT_FRONT)
    assert (busy / "notes.txt").read_text() == "mine"
    compile_model(request(model, busy, remove_output_dir=True), passes=FLOAT_FRONT)
    assert not (busy / "notes.txt").exists() and (busy / REPORT_NAME).is_file()
    # an earlier output is replaced as a whole
    (busy / "stale.txt").write_text("old")
    compile_model(request(model, busy), passes=FLOAT_FRONT)
    assert not (busy / "stale.txt").exists()
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(ConfigError, match="must be a folder"):
        compile_model(request(model, afile), passes=FLOAT_FRONT)
    assert leftovers(tmp_path) == []


def test_dump_paths_may_not_escape(onnx_models, tmp_path: Path) -> None:
    model = save(onnx_models.classifier(), tmp_path)
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="must be a file name inside the output dir"):
        compile_model(
            request(model, out, graph_cleaner_dump_core_onnx="../core.onnx"), passes=FLOAT_FRONT
        )
    assert not (tmp_path / "core.onnx").exists()
    assert report(out)["stage"] == "write_artifacts"


def test_nhwc_model_with_dynamic_dims_compiles(onnx_models, tmp_path: Path) -> None:
    model = save(onnx_models.nhwc_preprocess(dynamic=True), tmp_path)
    out = tmp_path / "out"
    result = compile_model(
        request(model, out, shape=(1, 32, 32, 3), layout="NHWC"), passes=FLOAT_FRONT
    )
    assert result.graph.shape(result.graph.inputs[0]) == (1, 3, 32, 32)
    assert (out / "preprocess.onnx").is_file()


def test_cli_compile_prints_one_line_errors(onnx_models, tmp_path: Path, capsys) -> None:
    from aipusim.cli.main import main

    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not onnx")
    code = main(["compile", "-i", str(junk), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "is not an ONNX model" in err and "Traceback" not in err
    assert report(tmp_path / "out")["status"] == "ONNX_GRAPH_CLEANER_ERROR"


@pytest.mark.parametrize("randomize", [True, False])
def test_error_artifact(onnx_models, tmp_path: Path, randomize: bool) -> None:
    import zipfile

    import numpy as np
    from onnx import numpy_helper

    from aipusim.compiler.driver import ERROR_ARTIFACT

    model = save(onnx_models.detector(nms=True), tmp_path)
    out = tmp_path / "out"
    with pytest.raises(UnsupportedOperatorError):
        compile_model(
            request(
                model,
                out,
                run_graph_cleaner=False,
                save_error_artifact=True,
                randomize_onnx_model=randomize,
            ),
            passes=tuple(p for p in FLOAT_FRONT if p.name != "graph_cleaner"),
        )
    assert sorted(p.name for p in out.iterdir()) == [LOG_NAME, REPORT_NAME, ERROR_ARTIFACT]
    assert report(out)["error_artifact"] == ERROR_ARTIFACT
    with zipfile.ZipFile(out / ERROR_ARTIFACT) as zf:
        names = set(zf.namelist())
        assert {REPORT_NAME, LOG_NAME, "conf.json", "last_graph.txt", "last_graph.onnx"} <= names
        assert "NonMaxSuppression" in zf.read("last_graph.txt").decode()
        dumped = onnx.load_from_string(zf.read("last_graph.onnx"))
    onnx.checker.check_model(dumped)
    original = {t.name: numpy_helper.to_array(t) for t in onnx.load(model).graph.initializer}
    conv_w = next(n for n in dumped.graph.node if n.op_type == "Conv").input[1]
    weights = {t.name: numpy_helper.to_array(t) for t in dumped.graph.initializer}
    assert np.array_equal(weights[conv_w], original[conv_w]) is not randomize


def test_failed_compile_over_a_good_folder_keeps_it_and_reports_beside_it(
    onnx_models, tmp_path: Path, capsys
) -> None:
    """A failed recompile must not cost the last good compile: it stays whole and
    untouched, and the failure's report and log go to ``out.failed/`` beside it; the next
    successful compile into ``out`` removes that stale report."""
    from aipusim.cli.main import main

    good = save(onnx_models.classifier(), tmp_path, "good.onnx")
    bad = save(_unknown_domain_model(), tmp_path, "bad.onnx")
    out = tmp_path / "out"
    compile_model(request(good, out, stop=None))  # the whole compile
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(UnsupportedOperatorError, match=r"unknown domain `com\.acme`") as info:
        compile_model(request(bad, out))
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    failed = tmp_path / "out.failed"
    assert sorted(p.name for p in failed.iterdir()) == [LOG_NAME, REPORT_NAME]
    assert report(failed)["status"] == "LOWER_FRONTEND_ERROR"
    assert leftovers(tmp_path) == []
    assert info.value.__notes__ == [
        f"the earlier compile in {out} is kept; this failure's report is in {failed}"
    ]
    capsys.readouterr()
    assert main(["simulate", str(out), "--frames", "1"]) == 0  # the kept compile runs
    assert main(["compile", "-i", str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"this failure's report is in {failed}" in err
    compile_model(request(good, out, stop=None))
    assert not failed.exists()


def test_failed_compile_over_a_failed_folder_replaces_it(onnx_models, tmp_path: Path) -> None:
    bad = save(_unknown_domain_model(), tmp_path, "bad.onnx")
    out = tmp_path / "out"
    for _ in range(2):
        with pytest.raises(UnsupportedOperatorError):
            compile_model(request(bad, out))
        assert sorted(p.name for p in out.iterdir()) == [LOG_NAME, REPORT_NAME]
    assert not (tmp_path / "out.failed").exists() and leftovers(tmp_path) == []


def _unknown_domain_model() -> onnx.ModelProto:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])
    node = helper.make_node("Frobnicate", ["x"], ["y"], domain="com.acme")
    graph = helper.make_graph([node], "custom", [x], [y])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.acme", 1)]
    return helper.make_model(graph, opset_imports=opsets)


def test_ctrl_c_is_reported_as_interrupted(onnx_models, tmp_path: Path) -> None:
    model = save(onnx_models.classifier(), tmp_path)
    out = tmp_path / "out"

    def interrupt(name: str, graph) -> None:
        if name == "import":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        compile_model(request(model, out), after_pass=interrupt)
    rep = report(out)
    assert rep["status"] == "INTERRUPTED" and rep["stage"] == "import"
    assert rep["message"] == "interrupted (Ctrl-C) in import"


def test_temporary_folders_of_killed_compiles_are_removed_by_the_next(
    onnx_models, tmp_path: Path
) -> None:
    model = save(onnx_models.conv_bn_relu(), tmp_path)
    out = tmp_path / "out"
    dead = 2**22 + 1  # above the kernel's pid_max default: no such process
    (tmp_path / f".out.tmp-{dead}-0123abcd").mkdir()
    (tmp_path / f".out.old-{dead}-0123abcd").mkdir()
    (tmp_path / ".other.tmp-1-0123abcd").mkdir()  # another target's: not ours to remove
    compile_model(request(model, out), passes=FLOAT_FRONT)
    assert leftovers(tmp_path) == [".other.tmp-1-0123abcd"]
    # the folder gets the mode mkdir would give, not the private one of a temporary folder
    assert out.stat().st_mode & 0o777 == 0o777 & ~_umask()


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_compile_too_big_for_the_machine_is_refused_after_the_import(tmp_path: Path) -> None:
    from onnx import TensorProto, helper, numpy_helper

    side = 65536  # one 256-channel float map of this side is 4.4 TB
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, side, side])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 256, side, side])
    w = numpy_helper.from_array(np.zeros((256, 3, 3, 3), np.float32), "w")
    conv = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    graph = helper.make_graph([conv], "huge", [x], [y], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    out = tmp_path / "out"
    with pytest.raises(
        ResourceLimitError, match=r"^compiling huge would need about [\d.]+ TB"
    ) as err:
        compile_model(request(save(model, tmp_path), out))
    assert "the largest `y` 1x256x65536x65536 = 4.4 TB" in str(err.value)
    assert str(err.value).endswith("compile a smaller input (--input-shape) or on a bigger machine")
    assert report(out)["stage"] == "import"
    # a command that compiles for the user (aipusim llm) names its own flags instead
    asked = dataclasses.replace(request(save(model, tmp_path), out), memory_remedy="use --prompt")
    with pytest.raises(ResourceLimitError, match=r"is available: use --prompt$"):
        compile_model(asked)


def test_the_compile_memory_estimate_counts_activations_and_constants() -> None:
    from aipusim.compiler.ir import Graph, Node, Op, Tensor
    from aipusim.compiler.memory_estimate import check_compile_memory, graph_bytes

    g = Graph(
        "g",
        (Node("r", Op.RELU, ("x",), ("y",)),),
        {"x": Tensor("x", (1, 1000)), "y": Tensor("y", (1, 1000))},
        {},
        ("x",),
        ("y",),
    )
    assert graph_bytes(g) == (8000, 0, 0, "`x` 1x1000 = 4 kB")
    check_compile_memory(g, available=10**9)
    with pytest.raises(ResourceLimitError, match="is available: compile a smaller input"):
        check_compile_memory(g, available=10**6)
    with pytest.raises(ResourceLimitError, match=r"is available: use --prompt$"):
        check_compile_memory(g, available=10**6, remedy="use --prompt")


def test_the_estimate_counts_mapped_weights_and_their_transposed_views(tmp_path: Path) -> None:
    """A weight mapped from its file costs `PER_MAPPED_BYTE` per byte, and so does a
    Transpose of it (folded into a view of it: not an activation)."""
    from aipusim.base.mapped import mapped_array
    from aipusim.compiler.ir import Graph, Node, Op, Tensor
    from aipusim.compiler.memory_estimate import (
        PER_MAPPED_BYTE,
        compile_memory_bytes,
        graph_bytes,
    )

    (tmp_path / "w.bin").write_bytes(np.ones((8, 16), np.float32).tobytes())
    w = mapped_array(tmp_path / "w.bin", 0, np.dtype(np.float32), (8, 16))
    shapes = {"x": (1, 16), "e": (8, 16), "t": (16, 8), "y": (1, 8)}
    g = Graph(
        "g",
        (
            Node("tr", Op.TRANSPOSE, ("e",), ("t",), {"perm": (1, 0)}),
            Node("mm", Op.MATMUL, ("x", "t"), ("y",)),
        ),
        {n: Tensor(n, s) for n, s in shapes.items()},
        {"e": w},
        ("x",),
        ("y",),
    )
    acts, consts, mapped, _ = graph_bytes(g)
    assert (acts, consts, mapped) == (4 * (16 + 8), 0, 2 * w.nbytes)
    extra = compile_memory_bytes(0, 0, 1000) - compile_memory_bytes(0, 0, 0)
    assert abs(extra - 1000 * PER_MAPPED_BYTE) <= 1
