"""The quantization cache: its key, its store (atomic, checksummed, LRU) and compiles
through it (``cached`` / ``computed``, the same artifacts either way, ``--no-cache``)."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from compile_fingerprint import file_hashes

import aipusim.zoo as zoo
from aipusim.cli.main import main
from aipusim.compiler.config import CompilerConfig
from aipusim.compiler.importer import import_model
from aipusim.compiler.quant import calibrate_and_quantize, random_calibration
from aipusim.compiler.quant.artifacts import CORE_FILES
from aipusim.compiler.quant.cache import (
    CACHED,
    COMPUTED,
    DIR_ENV,
    SIZE_ENV,
    QuantizationCache,
    cache_key,
    key_properties,
    quantize_cached,
)
from aipusim.isa.float18 import FloatFormat

LOGGER = "aipusim.compiler.quant.cache"


def small_cnn(seed: int = 0):
    """The zoo's tiny CNN as an IR graph, its weights drawn with ``seed``."""
    return import_model(zoo.build("tiny_cnn", input_size=16, seed=seed))


def _data(graph, seed: int = 0):
    return random_calibration({n: graph.shape(n) for n in graph.inputs}, samples=4, seed=seed)


def _files(fill: bytes, size: int) -> dict[str, bytes]:
    """Stand-in `CORE_FILES` of ``size`` bytes in all (the store does not parse them)."""
    part = size // len(CORE_FILES)
    return {name: fill * part for name in CORE_FILES}


def test_the_test_suite_points_the_cache_at_a_folder_of_its_own(tmp_path_factory) -> None:
    # (tests/conftest.py spells the variable's name out; this checks it is the right one)
    assert Path(os.environ[DIR_ENV]).parent == tmp_path_factory.getbasetemp()
    assert QuantizationCache().root == Path(os.environ[DIR_ENV])


def test_the_key_properties_are_the_quantization_options() -> None:
    props = key_properties()
    assert {"quantization_scheme", "quantize_dw_channel_wise", "remove_io_quantization"} <= set(
        props
    )
    assert {"histogram_range_method", "histogram_percentile"} <= set(props)
    assert not {"multicore_mode", "aipu_cores_used", "mvm_utilization_limit"} & set(props)


def test_the_key_follows_what_quantization_depends_on_and_nothing_else() -> None:
    graph = small_cnn()
    data = _data(graph)
    base = cache_key(graph, data, CompilerConfig())
    assert base is not None and len(base) == 64
    assert cache_key(small_cnn(), _data(graph), CompilerConfig()) == base
    # back-end and hardware options: the same key
    same = CompilerConfig(aipu_cores_used=4, multicore_mode="cooperative")
    same.mvm_utilization_limit = 0.5
    assert cache_key(graph, data, same) == base
    # the options, the data, the weights, the DPU float: other keys
    others = {
        cache_key(graph, data, CompilerConfig(quantization_scheme="per_tensor_min_max")),
        cache_key(graph, data, CompilerConfig(quantize_dw_channel_wise=True)),
        cache_key(graph, data, CompilerConfig(remove_io_quantization=True)),
        cache_key(graph, _data(graph, seed=1), CompilerConfig()),
        cache_key(small_cnn(seed=1), data, CompilerConfig()),
        cache_key(graph, data, CompilerConfig(), FloatFormat(8, 7)),
    }
    assert base not in others and len(others) == 6


def test_new_quantization_rules_are_a_new_key(monkeypatch: pytest.MonkeyPatch) -> None:
    # a development tree keeps its version while the rules change: entries of the old
    # rules (a decoder's past on its own grid) must not be reused
    import aipusim.compiler.quant.cache as cache_module

    graph = small_cnn()
    base = cache_key(graph, _data(graph), CompilerConfig())
    monkeypatch.setattr(cache_module, "RULES_VERSION", cache_module.RULES_VERSION + 1)
    assert cache_key(graph, _data(graph), CompilerConfig()) != base


def test_an_entry_reads_back_and_a_missing_one_is_none(tmp_path: Path) -> None:
    cache = QuantizationCache(tmp_path)
    files = _files(b"x", 3000)
    assert cache.get("a" * 64) is None
    assert cache.put("a" * 64, files)
    assert cache.get("a" * 64) == files
    info = cache.info()
    assert info.entries == 1 and info.size_bytes > 3000 and info.folder == tmp_path / "quantization"
    assert cache.clear() == 1 and cache.info().entries == 0


def test_a_corrupt_entry_is_removed_with_a_warning(tmp_path: Path, caplog) -> None:
    cache = QuantizationCache(tmp_path)
    cache.put("b" * 64, _files(b"y", 3000))
    path = cache.path("b" * 64)
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, LOGGER):
        assert cache.get("b" * 64) is None
    assert "is corrupt (its checksum does not match its contents)" in caplog.text
    assert not path.exists()
    path.write_bytes(b"half an entry")
    assert cache.get("b" * 64) is None and not path.exists()


def test_an_entry_read_before_is_not_checked_again_unless_its_file_changed(
    tmp_path: Path, monkeypatch
) -> None:
    import aipusim.compiler.quant.cache as cache_module

    cache = QuantizationCache(tmp_path)
    files = _files(b"z", 3000)
    cache.put("c" * 64, files)
    unpacked = []
    real_unpack = cache_module._unpack
    monkeypatch.setattr(
        cache_module, "_unpack", lambda data: unpacked.append(1) or real_unpack(data)
    )
    assert cache.get("c" * 64) == files and unpacked == []  # kept in memory since the put
    path = cache.path("c" * 64)
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    assert cache.get("c" * 64) is None and unpacked == [1]  # changed bytes: checked, corrupt


def test_the_least_recently_used_entries_go_first(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(SIZE_ENV, "1")  # one megabyte: two entries of 400 kB fit, not three
    cache = QuantizationCache(tmp_path)
    keys = [c * 64 for c in "123"]
    cache.put(keys[0], _files(b"1", 400_000))
    cache.put(keys[1], _files(b"2", 400_000))
    # the first entry is older on disk, but read since: the second is the least recent
    os.utime(cache.path(keys[0]), (1, 1))
    os.utime(cache.path(keys[1]), (2, 2))
    assert cache.get(keys[0]) is not None
    cache.put(keys[2], _files(b"3", 400_000))
    assert [cache.get(k) is not None for k in keys] == [True, False, True]
    assert cache.info().size_bytes <= cache.limit_bytes
    # an entry over the limit by itself is not stored
    assert not cache.put("4" * 64, _files(b"4", 2_000_000))


def test_a_bad_size_limit_is_one_line(monkeypatch, capsys) -> None:
    monkeypatch.setenv(SIZE_ENV, "lots")
    assert main(["cache", "info"]) == 2
    assert "AIPUSIM_CACHE_SIZE_MB must be a whole number of megabytes >= 1, not 'lots'" in (
        capsys.readouterr().err
    )


def _hammer(root: str, worker: int, rounds: int) -> list[str]:
    """Write this worker's version of one entry and read the entry, ``rounds`` times; the
    problems seen (a read that is neither absent nor some worker's complete version)."""
    cache = QuantizationCache(root)
    key = "c" * 64
    valid = {bytes([w]) * 200_000 for w in range(4)}
    problems = []
    for _ in range(rounds):
        cache.put(key, _files(bytes([worker]), 600_000))
        got = cache.get(key)
        if got is None or {got[name] for name in CORE_FILES} - valid or len(set(got.values())) != 1:
            problems.append(repr(None if got is None else {k: v[:4] for k, v in got.items()}))
    return problems


def test_concurrent_writers_and_readers_never_see_half_an_entry(tmp_path: Path) -> None:
    # (written in place instead of renamed, entries are read torn: corrupt, then None)
    with multiprocessing.get_context("fork").Pool(4) as pool:
        results = pool.starmap(_hammer, [(str(tmp_path), w, 25) for w in range(4)])
    assert results == [[], [], [], []]
    names = os.listdir(tmp_path / "quantization")
    assert names == ["c" * 64 + ".qcache"]  # no temporary file left behind


def test_an_unusable_cache_folder_warns_once_and_the_compile_goes_on(
    tmp_path: Path, monkeypatch, caplog
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(DIR_ENV, str(blocker))
    graph, config, data = small_cnn(), CompilerConfig(), _data(small_cnn())

    def compute():
        return calibrate_and_quantize(graph, config, data)

    with caplog.at_level(logging.WARNING, LOGGER):
        first = quantize_cached(graph, config, data, compute)
        second = quantize_cached(graph, config, data, compute)
    assert first.source == second.source == COMPUTED
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "compiling without it" in warnings[0].getMessage()


# ------------------------------------------------------------------ compiles


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("model") / "tiny.onnx"
    onnx.save(zoo.build("tiny_cnn"), p)
    return p


def _compile(model: Path, out: Path, *flags: str) -> str:
    assert main(["compile", "-i", str(model), "-o", str(out), *flags]) == 0
    return json.loads((out / "compilation_report.json").read_text())["quantization"]


def _prints(out: Path) -> dict[str, dict[str, str]]:
    return {sub: file_hashes(out / sub) for sub in ("compiled_model", "quantized_model")}


def test_a_warm_compile_reuses_the_quantization_and_writes_the_same_model(
    model_path: Path, tmp_path: Path, caplog
) -> None:
    assert _compile(model_path, tmp_path / "cold") == COMPUTED
    with caplog.at_level(logging.INFO, "aipusim"):  # what -v shows
        assert _compile(model_path, tmp_path / "warm") == CACHED
    assert "quantization: cached" in caplog.text
    assert "quantization: cached" in (tmp_path / "warm" / "compilation_log.txt").read_text()
    assert _compile(model_path, tmp_path / "off", "--no-cache") == COMPUTED
    cold = _prints(tmp_path / "cold")
    assert _prints(tmp_path / "warm") == cold == _prints(tmp_path / "off")
    for name in CORE_FILES:  # byte for byte, the npz's time stamps included
        q = Path("quantized_model") / name
        assert (tmp_path / "warm" / q).read_bytes() == (tmp_path / "cold" / q).read_bytes()
    # back-end options share the entry; a quantization option does not
    four = ("--aipu-cores", "4", "--set", "multicore_mode=cooperative")
    assert _compile(model_path, tmp_path / "coop", *four) == CACHED
    scheme = ("--set", "quantization_scheme=per_tensor_min_max")
    assert _compile(model_path, tmp_path / "minmax", *scheme) == COMPUTED
    assert QuantizationCache().info().entries == 2


def test_a_corrupt_entry_is_computed_again(model_path: Path, tmp_path: Path, caplog) -> None:
    assert _compile(model_path, tmp_path / "a") == COMPUTED
    (entry,) = QuantizationCache().folder.iterdir()
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0x01
    entry.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, LOGGER):
        assert _compile(model_path, tmp_path / "b") == COMPUTED
    assert "is corrupt" in caplog.text
    assert _compile(model_path, tmp_path / "c") == CACHED
    assert _prints(tmp_path / "a") == _prints(tmp_path / "c")


def test_cache_info_and_clear(model_path: Path, tmp_path: Path, capsys) -> None:
    _compile(model_path, tmp_path / "a")
    capsys.readouterr()
    assert main(["cache", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["entries"] == 1 and info["size_bytes"] > 0
    assert info["folder"] == str(Path(os.environ[DIR_ENV]) / "quantization")
    assert main(["cache", "clear"]) == 0
    assert "removed 1 entries" in capsys.readouterr().out
    assert QuantizationCache().info().entries == 0


def test_cache_clear_also_removes_the_zoo_models_sweeps_keep(capsys) -> None:
    from aipusim.sweep.evaluate import zoo_model_file

    kept = zoo_model_file("tiny_cnn", 16)
    assert kept.is_file()
    assert main(["cache", "info", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["zoo_models"] == 1
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out.strip().endswith("and 1 zoo model files")
    assert not kept.exists()


def test_a_sweep_worker_without_the_cache_leaves_no_model_file(tmp_path: Path) -> None:
    import tempfile

    from aipusim.sweep.evaluate import _Worker
    from aipusim.sweep.space import build_space

    point = build_space(["tiny_cnn"], input_size=16, quantization_cache=False).points[0]
    before = set(Path(tempfile.gettempdir()).glob("aipusim-zoo-*"))
    assert _Worker().model(point).graph.input[0].name == "input"
    assert set(Path(tempfile.gettempdir()).glob("aipusim-zoo-*")) == before


def test_the_api_and_sweep_points_pass_the_switch_on(tmp_path: Path) -> None:
    import aipusim
    from aipusim.sweep.space import build_space

    aipusim.compile("tiny_cnn", output_dir=tmp_path / "m", cache=False)
    assert QuantizationCache().info().entries == 0
    aipusim.compile("tiny_cnn", output_dir=tmp_path / "n")
    assert QuantizationCache().info().entries == 1
    on, off = (build_space(["tiny_cnn"], quantization_cache=c).points[0] for c in (True, False))
    assert on.quantization_cache and not off.quantization_cache
    assert on.point_id == off.point_id  # the cache never changes a result


def test_calibration_images_are_part_of_the_key(tmp_path: Path) -> None:
    from PIL import Image

    from aipusim.compiler.quant import calibration_for
    from aipusim.compiler.request import CompileRequest

    graph = small_cnn()
    shape = graph.shape(graph.inputs[0])
    folder = tmp_path / "images"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(3):
        pixels = rng.integers(0, 255, (shape[2], shape[3], 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"{i}.png")
    script = tmp_path / "t.py"
    script.write_text(
        "import numpy as np\n"
        "def get_preprocess_transform(image):\n"
        "    return np.asarray(image, np.float32).transpose(2, 0, 1) / 255\n"
    )

    def key() -> str | None:
        request = CompileRequest(
            Path("m.onnx"), tmp_path / "o", CompilerConfig(), imageset=folder, transform=script
        )
        return cache_key(graph, calibration_for(graph, request), CompilerConfig())

    first = key()
    assert key() == first
    Image.fromarray(np.zeros((shape[2], shape[3], 3), np.uint8)).save(folder / "0.png")
    assert key() != first
